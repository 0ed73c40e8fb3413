"""uatlab.training."""
