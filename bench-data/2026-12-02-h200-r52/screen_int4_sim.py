# The lm_head screen's bound (doc/numerics.md) with INT8 (127 levels) and INT4 (7 levels) codes on OLMoE's lm_head shape:
# how many rows a step would sum again. Run here: .venv/bin/python bench-data/2026-12-02-h200-r52/screen_int4_sim.py
import numpy as np
rng=np.random.default_rng(1)
V,n=50304,2048
W=(rng.standard_normal((V,n))*0.02).astype(np.float16).astype(np.float32)
for trial in range(3):
    x=rng.standard_normal(n).astype(np.float16).astype(np.float32)
    z=W@x
    X1=np.abs(x).sum()
    for lv in (127,7):
        m=np.abs(W).max(1)
        s=m/lv
        q=np.rint(W/s[:,None])
        d=np.abs(W-s[:,None]*q).max(1)
        zt=s*(q@x)
        e=X1*d*1.0001
        L=zt-e; U=zt+e
        print(trial,lv,"rows re-summed",(U>=L.max()).sum(), "true err/bound", np.abs(zt-z).max()/e.mean())
