"""Kajitsuka & Sato, ICLR 2025 ("On the Optimal Memorization Capacity of Transformers"): next-token and
sequence-to-sequence memorization.

- `.next_token_memorizer`: the construction (one rank-1 averaging attention layer gives a sequence id,
  a deep integer ReLU network reads the label out of packed words); derivation and bound in its docstring.
- `.layout`: sizes (digits per word, words per bank, tables) and the regime's bit budget.
- `.circuit_stages`, `.relu_circuit`: the integer ReLU gadgets and their exact evaluation.
- `.retrieval`: the three-table retrieval structure that stores the labels.
- `.model`: the torch modules (`NextTokenModel` for the float regimes, `ExactNextTokenModule` for the exact one).
- `.seq2seq_memorizer`, `.seq2seq_model`, `.seq2seq_api`: the sequence-to-sequence memorizer (a label
  per token; token ids from the averaging attention and the position, labels of the ambiguous words'
  tokens in packed words), its torch module and `compile_seq2seq_deep`.
- `.model_file`, `.seq2seq_file`: both memorizers in uatlab's one model file format (safetensors, exact
  integer weights via `.integer_tensors`), read back by `uatlab.load`.
"""
