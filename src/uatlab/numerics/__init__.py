"""Numerical base layer: arbitrary-precision balls (python-flint) and floating-point error bounds."""
