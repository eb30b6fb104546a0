"""The exact reference: Fraction, int and sympy only; no floating point anywhere in this package."""
