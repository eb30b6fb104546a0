"""Hypothesis properties every implementation of the contract must satisfy."""
