"""uatlab.experiments."""
