"""uatlab.verify."""
