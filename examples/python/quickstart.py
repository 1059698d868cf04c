# %% [markdown]
# # Horizon from Python: a notebook-style tour
#
# Run cell by cell (VS Code / Jupytext "percent" cells) or as a script:
#
#     python examples/python/quickstart.py MODEL.hzq
#
# Without an argument it makes a tiny random OLMoE model with the build's tools
# (HZ_BUILD_ROOT, default ./build). Install the package first: `pip install ./bindings/python`
# (after `meson install`, or with HORIZON_PREFIX / PKG_CONFIG_PATH pointing at an install).

# %%
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import horizon

print("libhorizon", horizon.library_version())

if len(sys.argv) > 1:
    model_path = Path(sys.argv[1])
else:
    tools = Path(os.environ.get("HZ_BUILD_ROOT", "build")) / "tools"
    work = Path(tempfile.mkdtemp())
    subprocess.run([tools / "hz-mkmodel", "--arch", "olmoe", "--preset", "tiny", "--seed", "1", work / "src"],
                   check=True, capture_output=True)
    subprocess.run([tools / "hz-pack", work / "src", work / "tiny.hzq"], check=True, capture_output=True)
    model_path = work / "tiny.hzq"

# %% [markdown]
# ## Open the pieces
# A backing (the artifact in memory), a device, a cache holding half the routed experts per layer, and
# the model. `horizon.load(path, capacity=...)` does the same in one call.

# %%
backing = horizon.Backing(model_path)
device = horizon.Device("cpu")
half = backing.describe()["experts"] // 2  # routed experts per layer
cache = horizon.Cache(backing, device, capacity=half)
model = horizon.Model(backing, device, cache)
print(model.info)
print(model.describe()["precision"])

# %% [markdown]
# ## Generate
# `generate` prefills the prompt and yields token ids as they are decoded (greedy by default).

# %%
session = model.session()
prompt = [1, 2, 3]
tokens = list(session.generate(prompt, max_tokens=16))
print("tokens:", tokens)

# %% [markdown]
# ## Logits of the last token, and sampling

# %%
logits = session.logits()  # memoryview of float32, a copy
print(len(logits), "logits; arg-max", max(range(len(logits)), key=logits.__getitem__))
try:
    import numpy as np

    top = np.argsort(session.logits_numpy())[::-1][:5]
    print("top 5 token ids:", top.tolist())
except ImportError:
    pass

session.reset()
session.set_sampler(temperature=0.8, top_p=0.95, seed=1234)
print("sampled:", list(session.generate(prompt, max_tokens=16)))

# %% [markdown]
# ## What the cache did
# Hits and misses, bytes copied host -> device, and the expert bytes copied back (always 0).

# %%
stats = cache.stats()
print({k: stats[k] for k in ("capacity", "hits", "misses", "h2d_bytes", "expert_d2h_bytes", "publications")})
print(session.stats())

# %% [markdown]
# ## Errors carry the library's message

# %%
try:
    session.decode(model.info.vocab_size)  # one past the vocabulary
except horizon.RangeError as e:
    print(type(e).__name__, e.name, "-", e.message)

# %% [markdown]
# ## Closing
# Any order works: a parent closed before its children is freed when the last child closes.

# %%
for obj in (backing, device, cache, model, session):
    obj.close()
