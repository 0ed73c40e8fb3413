"""uatlab.constructions."""
