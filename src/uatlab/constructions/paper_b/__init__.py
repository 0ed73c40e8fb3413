"""Constructions of Hu et al. 2025 (paper B), one module per theorem or lemma."""
