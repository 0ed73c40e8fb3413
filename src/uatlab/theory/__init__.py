"""uatlab.theory."""
