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
# # Theorems 1 and 2 by hand
#
# Paper A (Kajitsuka & Sato, ICLR 2024) contrasts two attention layers. **Theorem 1**: one *hardmax* layer is
# never a contextual mapping. **Theorem 2**: one *softmax* head with rank-1 weights is one. Both are small
# enough to check by hand.

# %%
import numpy as np
import torch

import uatlab
from uatlab.constructions.paper_a.thm1_hardmax_counterexample import hardmax_counterexample_inputs
from uatlab.models.attention import MultiHeadSelfAttention
from uatlab.theory.boltzmann import boltz, lemma1_bound, lemma1_required_gap

torch.manual_seed(0)

# %% [markdown]
# ## Theorem 1: two sequences that no hardmax layer tells apart
#
# Tokens on one ray, X1 = e·[1, 2, 5, 6] and X2 = e·[1, 3, 4, 6]: same min, max and mean. Every hardmax head
# picks the max, the min or the mean of the ray coordinates, whatever the query, so the shared first token
# gets the same output in both sequences, for *any* weights.

# %%
X = hardmax_counterexample_inputs(d=3, n=4).to(torch.float64)  # (2, 4, 3)
print("ray coordinates:", X.norm(dim=-1).numpy().round(3))
for heads in (1, 4):
    hard = MultiHeadSelfAttention(3, n_heads=heads, head_dim=2, rank=None, attention="hardmax", dtype=torch.float64)
    soft = MultiHeadSelfAttention(3, n_heads=heads, head_dim=2, rank=None, attention="softmax", dtype=torch.float64)
    soft.load_state_dict(hard.state_dict())  # the very same weights
    with torch.no_grad():
        dh = (hard(X)[0, 0] - hard(X)[1, 0]).norm().item()
        ds = (soft(X)[0, 0] - soft(X)[1, 0]).norm().item()
    print(f"{heads} head(s): shared token moves apart by {dh:.1e} under hardmax, {ds:.3e} under softmax")

# %% [markdown]
# ## Lemma 1: the Boltzmann operator separates
#
# Softmax attention of a query over keys with scalar scores a computes boltz(a) = aᵀ softmax(a). Lemma 1: if
# the largest entries of two score vectors differ by at least 2 log n + 3, boltz separates them by at least
# (log n)² e^{−2r}. We check one pair.

# %%
n, r = 4, 6.0
gap = lemma1_required_gap(n)
a = np.array([r, r - gap, 0.5, -1.0])
b = np.array([r, r - gap - 0.7, 0.5, -1.0])
print(f"required gap 2 log n + 3 = {gap:.3f}")
print(f"|boltz(a) − boltz(b)| = {abs(boltz(a) - boltz(b)):.3e} ≥ bound {lemma1_bound(n, r):.3e}")

# %% [markdown]
# ## Theorem 2: the rank-1 head, literally
#
# `build_theorem2_layer` takes a vocabulary of token vectors and builds W_Q = c wᵀ, W_K = W_V = wᵀ and
# W_O = ε/(4 r_max) w with the paper's constant c. The constant is astronomically large, so the separation δ
# underflows float64; the claim `A.thm2.literal-exact` certifies it in ball arithmetic instead. Here we only
# look at the weights and at the ranks.

# %%
vocab = np.array([[1.0, 0.0], [0.0, 1.5], [-1.2, 0.4], [0.9, -1.1]])
layer = uatlab.build_theorem2_layer(vocab, n=3, eps=0.5, r_min=0.9, r_max=2.0)
print(layer)
attn = layer.model.blocks[0].attn if hasattr(layer.model, "blocks") else layer.model
print("ranks of W_Q, W_K, W_V, W_O:", attn.check_ranks())
print({k: v for k, v in layer.guarantee.items()})
