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
# # Train versus compile, on the same data
#
# Paper A (Kajitsuka & Sato, ICLR 2024) proves that one block with one rank-1 head *can* memorize; its
# Section 5 trains such a model. Here both happen on one small random data set: the compiled model is
# certified at once, the trained one gets there (or not) by gradient descent, and the same certificate
# then says which of its tokens are proven correct.

# %%
import tempfile
import time
from pathlib import Path

import torch

import uatlab
from uatlab.data import ceiling_report
from uatlab.data.synthetic import synthetic_dataset

torch.set_num_threads(1)
data = synthetic_dataset(N=60, n=6, V=25, C=3, seed=0)  # 360 tokens with random labels
print(ceiling_report(data))

# %% [markdown]
# ## Compile

# %%
t0 = time.process_time()
built = uatlab.compile_memorizer(data)
print(f"compiled in {time.process_time() - t0:.2f} CPU s: {built}")
print(
    "non-embedding parameters:",
    built.facts["params_non_embedding"],
    "| paper A's count:",
    built.facts["paper_a_param_count"],
)

# %% [markdown]
# ## Train the same architecture (one block, one rank-1 head)

# %%
cfg = uatlab.TrainConfig(
    layers=1,
    rank=1,
    heads=1,
    head_dim=1,
    dim=32,
    ff_mult=4,
    lr=1e-2,
    batch_size=8,
    warmup_steps=10,
    embed_std=0.1,
    epochs=60,
    seed=0,
)
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.process_time()
    run = uatlab.train(data, cfg, tmp, progress=False, with_f1=False, stop_at_ceiling=True)
    trained = uatlab.load(Path(tmp) / "model.safetensors")
print(f"trained {run.epochs} epochs in {time.process_time() - t0:.1f} CPU s, status {run.status!r}")
print("train accuracy per 10 epochs:", [round(h["train_accuracy"], 3) for h in run.history[::10]])
print("parameters (non-embedding):", run.parameters["non_embedding"])

# %% [markdown]
# ## The same certificate for both

# %%
for name, model in (("compiled", built.model), ("trained", trained)):
    cert = uatlab.certify(model, data)
    print(
        f"{name:>9}: {cert.certified_tokens} of {cert.ceiling_tokens} winnable tokens certified "
        f"in {cert.dtype}, smallest certified margin {cert.min_certified_margin}"
    )

# %% [markdown]
# The compiled model is certified at the ceiling by construction, with a margin just under 1/2 (ordinal labels: 1/2
# in exact arithmetic, less the float64 error bounds). The trained model may
# be correct on the same tokens with much smaller margins, and its certificate can prove fewer of them.
