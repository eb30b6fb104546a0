"""A kernel author's package: one top-k."""
