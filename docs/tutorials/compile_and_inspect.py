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
# # Compile and inspect a memorizer
#
# Paper A (Kajitsuka & Sato, ICLR 2024, Corollary 1) says one Transformer block with a single rank-1
# softmax head memorizes any finite labelled data set. `uatlab.compile_memorizer` builds that block for a
# concrete data set and certifies it. Here we open it: the embedding layout, the attention value h that
# identifies each token's context, the feed-forward units that fire, and the certified margins.

# %%
import numpy as np
import torch

import uatlab
from uatlab.constructions.paper_a.cor1_memorizer.knots import KnotLayout
from uatlab.data import from_lists

sentences = [
    ("Washington visited Paris", "B-PER O B-LOC"),
    ("Paris Hilton visited Washington", "B-PER I-PER O B-LOC"),
    ("George Washington spoke", "B-PER I-PER O"),
    ("rain in Washington", "O O B-LOC"),
    ("Hilton hotels in Paris", "B-ORG O O B-LOC"),
]
data = from_lists([s.split() for s, _ in sentences], [y.split() for _, y in sentences])
built = uatlab.compile_memorizer(data)
print(built)

# %% [markdown]
# `built` is a `Construction`: the model, the guarantee (certified tokens against the ceiling) and the
# facts (paper, theorem, parameter counts against paper A's count).

# %%
model, enc, cert = built.model, built.model.encoding, built.certificate
print(model.config)
print({k: built.facts[k] for k in ("parameters", "params_non_embedding", "paper_a_param_count", "d_model", "ff_width")})
print("certified:", cert.certified, f"({cert.certified_tokens} of {cert.ceiling_tokens} winnable tokens)")

# %% [markdown]
# ## The embedding layout
#
# The residual stream holds a gate code for the words that need feed-forward units, one key scalar a,
# one query scalar b, the context coordinate h (written by attention), a constant 1 (it replaces every
# bias), and the label code (one ordinal coordinate, or one per label).

# %%
cfg = model.config
label_dims = 1 if cfg.meta.get("labels") == "ordinal" else cfg.num_labels
lay = KnotLayout(k=cfg.meta["code_bits"], label_dims=label_dims, kp=cfg.meta.get("pos_code_bits", 0))
E = model.embed.weight.detach().numpy()  # (V, d)
P = model.pos.detach().numpy()  # (n_max, d)
print(
    f"d = {cfg.d_model}: gate code [0, {lay.k}), key {lay.key}, query {lay.query}, context {lay.ctx}, "
    f"constant {lay.one}, label code {lay.labels}"
)
for word in ["Washington", "Paris", "visited"]:
    row = E[enc.token_to_id[word]]
    print(f"{word:>10}: gate code {row[: lay.k]}, key a = {row[lay.key]:+.6f}, base label code {row[lay.labels]}")
print("query scalar b per position:", P[:4, lay.query])

# %% [markdown]
# ## Attention: the value h identifies the context
#
# The single head averages the key scalars with softmax weights; the result h lands in the context
# coordinate. The same word in two sentences gets two different h.

# %%
attn = model.blocks[0].attn
with torch.no_grad():
    for i in (0, 3):
        ids = torch.as_tensor(enc.encode_tokens(data.subset([i]))[0])[None]  # (1, n)
        x = model.embed_inputs(ids)  # (1, n, d)
        pattern = attn.attention_weights(x)[0, 0]  # (n, n)
        h = attn(x)[0, :, lay.ctx]  # (n,)
        words = data.tokens[i]
        print(" ".join(words))
        print("  attention of the last token over the sentence:", np.round(pattern[-1].numpy(), 3))
        print("  h per token:", {w: f"{float(v):.9f}" for w, v in zip(words, h, strict=True)})

# %% [markdown]
# ## Which feed-forward units fire, and what they change
#
# Each unit reads h, the constant and its word's gate: it fires past a knot in h and corrects the label
# code from the word's base label to the label of this context (paper A's interpolant, one ReLU per
# slope change). Reading the stream through the readout before and after the feed-forward layer shows it.

# %%
ff, readout = model.blocks[0].ff, model.readout
for i in (0, 1, 2):
    with torch.no_grad():
        ids = torch.as_tensor(enc.encode_tokens(data.subset([i]))[0])[None]
        after_attn = attn(model.embed_inputs(ids))  # (1, n, d)
        fired = ff.hidden(after_attn)[0] > 0  # (n, q)
        before, after = readout(after_attn)[0].argmax(-1), readout(ff(after_attn))[0].argmax(-1)
    for k, word in enumerate(data.tokens[i]):
        units = torch.nonzero(fired[k]).flatten().tolist()
        print(
            f"{word:>10}: without FF {enc.id_to_label[int(before[k])]:<6} → with FF "
            f"{enc.id_to_label[int(after[k])]:<6} (label {data.labels[i][k]}), units fired: {units or 'none'}"
        )

# %% [markdown]
# ## Certified margins
#
# In exact arithmetic the readout gives the label a fixed margin over every other label (1/2 with ordinal
# label codes); the certificate proves a lower bound on it for every run in float64. What the rounding
# analysis takes away is tiny.

# %%
margins = np.concatenate(cert.margins)
print(f"{margins.size} tokens, smallest certified margin {margins.min():.12f}, largest {margins.max():.12f}")
exact = float(np.max(margins))
lost = np.log10(np.maximum(exact - margins, 1e-17))
print("log10(largest − margin) at the 0, 50 and 100 % quantiles:", np.round(np.percentile(lost, [0, 50, 100]), 1))
