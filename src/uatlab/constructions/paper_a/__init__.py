"""Constructions of Kajitsuka & Sato, ICLR 2024 (paper A), one module per theorem."""
