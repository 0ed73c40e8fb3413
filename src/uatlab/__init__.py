"""uatlab: what softmax attention can express, made executable.

Subpackages are the stages a user thinks in: :mod:`uatlab.models` (paper A's Transformer),
:mod:`uatlab.theory` (Boltzmann operator, separatedness, contextual margins),
:mod:`uatlab.constructions` (theorems as weight builders), :mod:`uatlab.verify` (certificates),
:mod:`uatlab.data`, :mod:`uatlab.training`, :mod:`uatlab.experiments`, :mod:`uatlab.report`,
:mod:`uatlab.claims` and the CLI (:mod:`uatlab.cli`).
"""

__version__ = "0.1.0"
