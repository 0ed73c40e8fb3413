# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A compiled model in TransformerLens: run_with_cache
#
# A compiled memorizer (Kajitsuka & Sato, ICLR 2024, Corollary 1) has no normalisation, no attention scale,
# a ReLU MLP and a fixed positional encoding: exactly what a TransformerLens `HookedTransformer` can hold.
# `uatlab.interop.to_hooked_transformer` exports it (needs the `interop` extra), and every hook of
# TransformerLens then works on it: the attention pattern of a sentence, the MLP units that fire, and the
# label each unit writes through the unembedding.

# %%
import numpy as np
import torch

import uatlab
from uatlab.data import from_lists
from uatlab.interop import from_hooked_transformer, to_hooked_transformer
from uatlab.interop.transformer_lens import encode

sentences = [
    ("Washington visited Paris", "B-PER O B-LOC"),
    ("rain in Washington", "O O B-LOC"),
    ("George Washington spoke", "B-PER I-PER O"),
    ("Hilton hotels in Paris", "B-ORG O O B-LOC"),
]
data = from_lists([s.split() for s, _ in sentences], [y.split() for _, y in sentences])
built = uatlab.compile_memorizer(data)
hooked = to_hooked_transformer(built.model)
print(hooked.cfg.attention_dir, hooked.cfg.normalization_type, hooked.cfg.act_fn, hooked.cfg.d_mlp)

# %% [markdown]
# The logits are uatlab's: the export keeps uatlab's weight layouts, so TransformerLens sums the same
# products in the same order (the difference printed is 0 in float64):

# %%
sentence = ["George", "Washington", "spoke"]
tokens = encode(hooked, [sentence])  # (1, n) ids from the exported vocabulary
with torch.no_grad():
    print("max |logit difference|:", float((hooked(tokens) - built.model(tokens)).abs().max()))

# %% [markdown]
# ## The cache

# %%
logits, cache = hooked.run_with_cache(tokens)
print([name for name in cache.keys()])
pattern = cache["pattern", 0][0, 0]  # (query, key)
print("attention pattern (rows: queries, columns: keys):", sentence)
print(np.round(pattern.numpy(), 3))

# %% [markdown]
# ## The MLP units that fire, and what they change
#
# Direct logit attribution: the residual stream before the MLP (`resid_mid`) read through the unembedding
# gives the label the embedding and attention alone would predict; the MLP's output moves it to the
# memorized label. `post` shows which units fired.

# %%
W_U, b_U = hooked.unembed.W_U, hooked.unembed.b_U
before = cache["resid_mid", 0][0] @ W_U + b_U  # (n, labels): without the MLP
post = cache["post", 0][0]  # (n, d_mlp): ReLU outputs
for k, word in enumerate(sentence):
    fired = torch.nonzero(post[k] > 0).flatten().tolist()
    print(
        f"{word:>10}: without MLP {hooked.label_list[int(before[k].argmax())]:<6} → "
        f"with MLP {hooked.label_list[int(logits[0, k].argmax())]:<6} units fired: {fired or 'none'}"
    )

# %% [markdown]
# ## Back into uatlab, and certified again
#
# `from_hooked_transformer` reads TransformerLens's weights back into a uatlab model (with full-rank
# attention matrices), and the certificate proves it again on the whole data set.

# %%
back = from_hooked_transformer(hooked)
cert = uatlab.certify(back, data)
print(f"certified {cert.certified_tokens} of {cert.ceiling_tokens}, smallest margin {cert.min_certified_margin:.12f}")
