"""Prior constructions run beside ours: Yun et al. (ICLR 2020)'s deep hardmax memorizer."""
