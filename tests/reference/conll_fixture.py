"""A small CoNLL-2003-style file made up for the command-line tests (invented words, the four columns)."""

CONLL = """-DOCSTART- -X- -X- O

Zorbia NNP B-NP B-ORG
praises VBZ B-VP O
Quarkish JJ B-NP B-MISC
call NN I-NP O

Alva NNP B-NP B-PER
Kestrel NNP I-NP I-PER

Quarkish JJ B-NP B-MISC
praises VBZ B-VP O
Zorbia NNP B-NP O
"""
