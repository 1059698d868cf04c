#!/usr/bin/env python3
"""Full-size check of the GPU path against Hugging Face transformers (run on the GPU machine).

    fullsize_check.py --hf DIR --hzq ART --logits BIN.bin [--steps 32] [--bound B]

DIR is the BF16 checkpoint hz-mkmodel wrote, ART the artifact hz-pack made of it, BIN.bin what
tests/golden/hz_logits wrote for the same prompt. transformers loads DIR in float32 (eager attention and
experts), then every weight is replaced by the exact value Horizon computes with, read from the artifact:
non-routed tensors are its FP16 values, routed experts are dequantized from its INT4 blobs (code - 8) *
scale. (hz-pack --export-dequantized writes the same values, but at full size that file is 27 GB for
OLMoE and 53 GB for Qwen, more than the GPU machine's disk holds beside the checkpoint.) Then the prompt
and Horizon's greedy tokens run through the reference with teacher forcing, and the script compares, per
step, max|h - r| / max|r| of the logits and the greedy picks. Exit status 0 when every step is within the
bound and the picks agree, allowing one near tie (the reference's own margin between the two tokens
within twice the step's largest logit difference).
"""
import argparse
import json
import struct
import sys
import time

import numpy as np
import torch
import transformers
from safetensors import safe_open


def read_artifact(path):
    with open(path, "rb") as f:
        head = f.read(88)
        if head[:8] != b"HZQPACK1":
            sys.exit("not a Horizon artifact: %s" % path)
        man_off, man_bytes = struct.unpack_from("<QQ", head, 32)
        f.seek(man_off)
        manifest = json.loads(f.read(man_bytes))
    return manifest, np.memmap(path, dtype=np.uint8, mode="r")


def dequant(blob, rows, k, q_off, s_off, dev):
    """INT4 rows -> float32 [rows, k] following lib/format/qpack.h: chunks of 16 bytes = 32 values, byte
    i holds value i (low nibble) and value 16 + i (high nibble); one FP16 scale per 256 values."""
    kp = (k + 255) // 256 * 256
    q = torch.from_numpy(np.array(blob[q_off:q_off + rows * kp // 2])).to(dev)
    q = q.view(rows, kp // 32, 16)
    codes = torch.cat([q & 15, q >> 4], dim=2).view(rows, kp).to(torch.float32) - 8.0
    nb = kp // 256
    s = np.array(blob[s_off:s_off + rows * nb * 2]).view(np.float16).astype(np.float32)
    s = torch.from_numpy(s).to(dev).view(rows, nb, 1)
    return (codes.view(rows, nb, 256) * s).view(rows, kp)[:, :k]


def load_reference(hf_dir, manifest, mm, dev):
    kwargs = dict(attn_implementation="eager", experts_implementation="eager")
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, **kwargs)
    model.to(dev).eval()
    params = dict(model.named_parameters())
    # non-routed: the artifact's FP16 values
    for t in manifest["tensors"]:
        raw = np.array(mm[t["offset"]:t["offset"] + t["bytes"]]).view(np.float16)
        val = torch.from_numpy(raw.astype(np.float32)).view(*t["shape"]).to(dev)
        if t["name"] not in params:
            sys.exit("transformers has no parameter %s" % t["name"])
        with torch.no_grad():
            params[t["name"]].copy_(val)
    # routed: dequantized blobs, into whichever expert layout this transformers version holds
    ex = manifest["experts"]
    L, E, lay = ex["layers"], ex["experts_per_layer"], ex["layout"]
    H, I = lay["hidden"], lay["inter"]
    first = safe_open_first_gate(hf_dir)
    for l in range(L):
        experts = model.model.layers[l].mlp.experts
        for e in range(E):
            b = ex["blobs"][l * E + e]
            blob = mm[b["offset"]:b["offset"] + b["bytes"]]
            g = dequant(blob, I, H, lay["gate_q"], lay["gate_s"], dev)
            u = dequant(blob, I, H, lay["up_q"], lay["up_s"], dev)
            d = dequant(blob, H, I, lay["down_q"], lay["down_s"], dev)
            with torch.no_grad():
                if hasattr(experts, "gate_up_proj"):
                    gu = experts.gate_up_proj
                    if l == 0 and e == 0:
                        check_fused_order(gu, first, I)
                    if gu.shape[1] == 2 * I:   # [E, 2I, H]: gate rows then up rows
                        gu[e, :I].copy_(g)
                        gu[e, I:].copy_(u)
                    else:                      # [E, H, 2I]
                        gu[e, :, :I].copy_(g.t())
                        gu[e, :, I:].copy_(u.t())
                    dp = experts.down_proj
                    dp[e].copy_(d if dp.shape[1] == H else d.t())
                else:
                    experts[e].gate_proj.weight.copy_(g)
                    experts[e].up_proj.weight.copy_(u)
                    experts[e].down_proj.weight.copy_(d)
    return model


def safe_open_first_gate(hf_dir):
    """Layer 0 expert 0 gate_proj from the checkpoint, to confirm the fused layout before writing it."""
    import glob
    import os
    name = "model.layers.0.mlp.experts.0.gate_proj.weight"
    for f in sorted(glob.glob(os.path.join(hf_dir, "*.safetensors"))):
        with safe_open(f, framework="pt") as s:
            if name in s.keys():
                return s.get_tensor(name).to(torch.float32)
    sys.exit("no %s in %s" % (name, hf_dir))


def check_fused_order(gu, gate0, inter):
    got = gu[0, :inter] if gu.shape[1] == 2 * inter else gu[0, :, :inter].t()
    if not torch.equal(got.cpu(), gate0):
        sys.exit("transformers' fused gate_up_proj does not hold gate_proj first: layout unknown")


def run_reference(model, prompt, hz_tokens, dev):
    """Teacher forcing: the reference reads the prompt, then Horizon's own greedy tokens, so every step
    compares the two on the same prefix and one near tie cannot send the sequences apart."""
    seq = list(prompt) + list(hz_tokens[:-1])
    with torch.no_grad():
        out = model(input_ids=torch.tensor([seq], device=dev), use_cache=False)
    first = len(prompt) - 1
    return out.logits[0, first:first + len(hz_tokens)].float().cpu().numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", required=True)
    ap.add_argument("--hzq", required=True)
    ap.add_argument("--logits", required=True)
    ap.add_argument("--prompt", default="1,2,3,4,5,6,7,8,9,10,11,12")
    ap.add_argument("--bound", type=float, default=2e-2)
    args = ap.parse_args()
    dev = "cuda"
    print("torch %s, transformers %s" % (torch.__version__, transformers.__version__))
    with open(args.logits, "rb") as f:
        steps, vocab = struct.unpack("<ii", f.read(8))
        hz_tokens = list(struct.unpack("<%di" % steps, f.read(4 * steps)))
        hz_logits = np.frombuffer(f.read(4 * steps * vocab), dtype=np.float32).reshape(steps, vocab)
    t0 = time.time()
    manifest, mm = read_artifact(args.hzq)
    model = load_reference(args.hf, manifest, mm, dev)
    print("reference loaded in %.1f s (%s, %d parameters)" % (time.time() - t0, type(model).__name__,
                                                               sum(p.numel() for p in model.parameters())))
    prompt = [int(x) for x in args.prompt.split(",")]
    ref_logits = run_reference(model, prompt, hz_tokens, dev)
    worst, agree, near_ties, bad_flips = 0.0, 0, 0, 0
    for i in range(steps):
        r, h = ref_logits[i], hz_logits[i]
        diff = float(np.max(np.abs(h - r)))
        rel = diff / float(np.max(np.abs(r)))
        worst = max(worst, rel)
        ref_tok = int(np.argmax(r))
        note = ""
        if hz_tokens[i] == ref_tok:
            agree += 1
        else:
            # a flip is a near tie when the reference's own margin between the two tokens is within
            # twice the step's largest logit difference: FP16 rounding can decide it either way
            margin = float(r[ref_tok] - r[hz_tokens[i]])
            if margin <= 2.0 * diff:
                near_ties += 1
                note = "  near tie (reference margin %.3e, max |diff| %.3e)" % (margin, diff)
            else:
                bad_flips += 1
                note = "  DIFFERENT (reference margin %.3e, max |diff| %.3e)" % (margin, diff)
        print("step %2d: rel %.3e  horizon %6d  transformers %6d%s" % (i, rel, hz_tokens[i], ref_tok, note))
    print("RESULT arch %s steps %d (teacher forced): greedy tokens agree %d/%d, near ties %d, other "
          "differences %d, worst logits rel error %.3e (bound %.1e)"
          % (manifest["architecture"], steps, agree, steps, near_ties, bad_flips, worst, args.bound))
    ok = bad_flips == 0 and near_ties <= 1 and worst <= args.bound
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
