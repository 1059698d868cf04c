#!/usr/bin/env python3
"""Checks scripts/bench_llamacpp.py without llama.cpp: tiny random-weight checkpoints made by hz-mkmodel are
written as GGUF (--gguf-only), then read back here by a reader written from the GGUF layout
(ggml/include/gguf.h: header, key-value pairs, tensor infos, aligned data) and compared with the
checkpoint: every key the loader needs, every tensor's name, dims, type and offset, and every value (FP16
and FP32 to their rounding, Q4_0 to half a step of its block). Then the llama-bench step runs against
stand-in programs: one that prints llama-bench's JSON rows (the report must carry its rates) and one
that fails (the report must record the failure and the exit status must be 1).

    check_gguf.py --src ROOT --mkmodel HZ_MKMODEL --work DIR
"""
import argparse
import importlib.util
import json
import os
import stat
import struct
import subprocess
import sys

import numpy as np

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


class Reader:
    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.o = 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.b[self.o:self.o + n].decode()
        self.o += n
        return s

    def value(self, t):
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in scalar:
            return self.take(scalar[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"unknown gguf type {t}")


def read_gguf(path):
    r = Reader(path)
    magic = r.b[:4]
    r.o = 4
    version, n_t, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("I"))
    tensors = []
    for _ in range(n_t):
        name = r.string()
        nd = r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        tensors.append((name, dims, r.take("I"), r.take("Q")))
    align = kv.get("general.alignment", 32)
    data = -(-r.o // align) * align
    return magic, version, kv, tensors, data, r.b


def bf16(raw):
    return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def checkpoint(d):
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        b = f.read()
    n = struct.unpack_from("<Q", b)[0]
    hdr = json.loads(b[8:8 + n])
    out = {}
    for k, t in hdr.items():
        if k != "__metadata__":
            s, e = t["data_offsets"]
            out[k] = bf16(b[8 + n + s:8 + n + e]).reshape(t["shape"])
    return out


def dequant_q4_0(raw, n):
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    q = blocks[:, 2:]
    vals = np.concatenate([(q & 15), (q >> 4)], axis=1).astype(np.float32) - 8.0
    return (vals * d).reshape(-1)[:n], np.repeat(d[:, 0], 32)


def hf_name(gname, arch):
    """The checkpoint tensor(s) behind a GGUF tensor, by the naming both sides document."""
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if gname in fixed:
        return fixed[gname]
    _, layer, rest = gname.split(".", 2)
    p = f"model.layers.{layer}."
    m = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
         "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
         "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
         "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
         "attn_v.bias": "self_attn.v_proj.bias", "attn_q_norm.weight": "self_attn.q_norm.weight",
         "attn_k_norm.weight": "self_attn.k_norm.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
         "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
         "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
         "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
         "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight"}
    if rest in m:
        return p + m[rest]
    proj = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}
    return ("experts", p, proj[rest])


def check_file(path, ckpt_dir, variant):
    cfg = json.load(open(os.path.join(ckpt_dir, "config.json")))
    ck = checkpoint(ckpt_dir)
    magic, version, kv, tensors, data, b = read_gguf(path)
    w = os.path.basename(path)
    check(magic == b"GGUF" and version == 3, f"{w}: magic {magic!r} version {version}")
    arch = {"olmoe": "olmoe", "qwen2_moe": "qwen2moe"}[cfg["model_type"]]
    check(kv.get("general.architecture") == arch, f"{w}: architecture {kv.get('general.architecture')}")
    want = {"block_count": cfg["num_hidden_layers"], "embedding_length": cfg["hidden_size"],
            "attention.head_count": cfg["num_attention_heads"], "attention.head_count_kv": cfg["num_key_value_heads"],
            "expert_count": cfg["num_experts"], "expert_used_count": cfg["num_experts_per_tok"],
            "vocab_size": cfg["vocab_size"], "context_length": cfg["max_position_embeddings"]}
    if arch == "qwen2moe":
        want["expert_feed_forward_length"] = cfg["moe_intermediate_size"]
        want["expert_shared_feed_forward_length"] = cfg["shared_expert_intermediate_size"]
    for k, v in want.items():
        check(kv.get(f"{arch}.{k}") == v, f"{w}: {arch}.{k} = {kv.get(f'{arch}.{k}')}, expected {v}")
    check(abs(kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 0) - cfg["rms_norm_eps"]) < 1e-9, f"{w}: eps")
    check(kv.get("tokenizer.ggml.model") == "none", f"{w}: tokenizer model {kv.get('tokenizer.ggml.model')}")
    per_layer = 12 if arch == "olmoe" else 17
    check(len(tensors) == 3 + per_layer * cfg["num_hidden_layers"], f"{w}: {len(tensors)} tensors")
    end = 0
    for name, dims, gtype, off in tensors:
        src = hf_name(name, arch)
        x = (np.stack([ck[f"{src[1]}mlp.experts.{e}.{src[2]}.weight"] for e in range(cfg["num_experts"])])
             if isinstance(src, tuple) else ck[src])
        if "gate_inp_shexp" in name:  # [1, hidden] in the checkpoint, a vector of hidden for llama.cpp
            x = x.reshape(-1)
        check(list(reversed(dims)) == list(x.shape), f"{w}: {name} dims {dims} for {x.shape}")
        check(off % 32 == 0 and off >= end, f"{w}: {name} offset {off}")
        n = x.size
        size = n * 4 if gtype == 0 else n * 2 if gtype == 1 else n // 32 * 18
        raw = b[data + off:data + off + size]
        check(len(raw) == size, f"{w}: {name} runs past the end of the file")
        end = off + size
        q4 = variant == "q4_0" and x.ndim == 2 and name != "token_embd.weight" and "gate_inp" not in name
        if "_exps." in name or q4:
            check(gtype == 2, f"{w}: {name} is type {gtype}, expected Q4_0")
            got, d = dequant_q4_0(raw, n)
            err = np.abs(got - x.reshape(-1))
            check(np.all(err <= 0.502 * d + 2e-3 * np.abs(x.reshape(-1)) + 1e-30), f"{w}: {name} Q4_0 error {err.max()}")
        elif x.ndim == 1:
            check(gtype == 0, f"{w}: {name} is type {gtype}, expected F32")
            check(np.array_equal(np.frombuffer(raw, np.float32), x.reshape(-1)), f"{w}: {name} F32 values")
        else:
            check(gtype == 1, f"{w}: {name} is type {gtype}, expected F16")
            got = np.frombuffer(raw, np.float16).astype(np.float32)
            check(np.allclose(got, x.reshape(-1), rtol=1e-3, atol=1e-7), f"{w}: {name} F16 values")
    check(len(b) >= data + end, f"{w}: file shorter than its tensors")


def stand_in(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--mkmodel", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    script = os.path.join(a.src, "scripts", "bench_llamacpp.py")
    for arch, mk in (("olmoe", "olmoe"), ("qwen2_moe", "qwen2moe")):
        ck = os.path.join(a.work, arch)
        subprocess.run([a.mkmodel, "--arch", mk, "--preset", "tiny", "--seed", "3", ck], check=True,
                       stdout=subprocess.DEVNULL)
        out = os.path.join(a.work, f"{arch}.json")
        p = subprocess.run([sys.executable, script, "--checkpoint", ck, "--work", os.path.join(a.work, "g"),
                            "--out", out, "--gguf-only"], capture_output=True, text=True)
        check(p.returncode == 0, f"{arch}: --gguf-only exited {p.returncode}: {p.stderr[-500:]}")
        if p.returncode:
            continue
        for v in ("experts-q4_0", "q4_0"):
            check_file(os.path.join(a.work, "g", f"{arch}-{v}.gguf"), ck, v)

    # The llama-bench step against stand-ins (rows in llama-bench's -o json form).
    ok, bad = os.path.join(a.work, "llama-ok"), os.path.join(a.work, "llama-bad")
    rows = [{"build_commit": "abc", "build_number": 7, "backends": "CUDA", "gpu_info": "TEST", "flash_attn": 1,
             "n_prompt": 512, "n_gen": 0, "avg_ts": 5000.5, "stddev_ts": 12.0},
            {"build_commit": "abc", "build_number": 7, "backends": "CUDA", "gpu_info": "TEST", "flash_attn": 1,
             "n_prompt": 0, "n_gen": 128, "avg_ts": 321.25, "stddev_ts": 1.5}]
    stand_in(ok, f"echo '{json.dumps(rows)}'\n")
    stand_in(bad, "echo 'ggml_cuda_init: no device' >&2\nexit 3\n")
    ck = os.path.join(a.work, "olmoe")
    for exe, want_rc in ((ok, 0), (bad, 1)):
        out = os.path.join(a.work, os.path.basename(exe) + ".json")
        p = subprocess.run([sys.executable, script, "--checkpoint", ck, "--work", os.path.join(a.work, "g"),
                            "--out", out, "--llama-bench", exe, "--variants", "experts-q4_0"],
                           capture_output=True, text=True)
        check(p.returncode == want_rc, f"{os.path.basename(exe)}: exit {p.returncode}, expected {want_rc}")
        rep = json.load(open(out))
        v = rep["variants"][0]
        check(rep["tool"] == "hz-bench-llamacpp" and rep["model"]["shape"]["architecture"] == "olmoe",
              f"{out}: tool or shape")
        if want_rc == 0:
            check(v["status"] == "ok" and v["tg_tok_s"] == 321.25 and v["pp_tok_s"] == 5000.5
                  and rep["llama_cpp"]["build_number"] == 7, f"{out}: rates not carried: {v}")
            check(v["command"][1:3] == ["-m", os.path.join(a.work, "g", "olmoe-experts-q4_0.gguf")],
                  f"{out}: command {v['command']}")
        else:
            check(v["status"].startswith("failed") and "exited with 3" in v["status"] and "tg_tok_s" not in v,
                  f"{out}: the failure is not recorded: {v}")
    # Partial residency. The mapping on the real shapes first: N = floor(layers x (E - R) / E) expert layers
    # on the host, 0 at full residency and for R = 0 (every expert, to hz-bench).
    spec = importlib.util.spec_from_file_location("bench_llamacpp", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for (layers, experts, r), n in {(16, 64, 30): 8, (16, 64, 50): 3, (16, 64, 60): 1, (16, 64, 61): 0,
                                    (16, 64, 64): 0, (16, 64, 0): 0, (24, 60, 20): 16, (24, 60, 30): 12,
                                    (24, 60, 39): 8, (24, 60, 60): 0}.items():
        got = mod.cpu_moe_layers(layers, experts, r)
        check(got == n, f"cpu_moe_layers({layers}, {experts}, {r}) = {got}, expected {n}")
    # Then the calls, against stand-ins that answer their arguments: the tiny model (8 experts) at
    # --residencies 0,4,6,8 runs every expert on the GPU in one call (no -ncmoe) and -ncmoe K in a second
    # (K = floor(layers x 4 / 8); 0 and 6 and 8 map to 0). A build without -ncmoe (it refuses the flag and
    # prints rows without n_cpu_moe) keeps the all-on-GPU rates and records the failed second call.
    layers = json.load(open(os.path.join(ck, "config.json")))["num_hidden_layers"]
    k = layers * 4 // 8
    k6 = layers * 2 // 8
    check(k > 0 and k6 == 0, f"the tiny model's {layers} layers do not separate the cases")
    args_file = os.path.join(a.work, "ncmoe-args.txt")
    answer = f"""import json, sys
argv = sys.argv[1:]
open({args_file!r}, "a").write(" ".join(argv) + "\\n")
rows = {json.dumps(rows)}
if "-ncmoe" in argv:
    if OLD:
        sys.stderr.write("error: invalid parameter for argument: -ncmoe\\n")
        sys.exit(1)
    ns = [int(x) for x in argv[argv.index("-ncmoe") + 1].split(",")]
else:
    ns = [0]
out = []
for n in ns:
    for r in rows:
        r = dict(r, avg_ts=r["avg_ts"] / (1 + n))
        if not OLD:
            r["n_cpu_moe"] = n
        out.append(r)
print(json.dumps(out))
"""
    for name, old, want_rc in (("llama-ncmoe", False, 0), ("llama-old", True, 1)):
        exe = os.path.join(a.work, name)
        with open(exe, "w") as f:
            f.write(f"#!{sys.executable}\nOLD = {old}\n" + answer)
        os.chmod(exe, os.stat(exe).st_mode | stat.S_IXUSR)
        if os.path.exists(args_file):
            os.remove(args_file)
        out = os.path.join(a.work, name + "-partial.json")
        p = subprocess.run([sys.executable, script, "--checkpoint", ck, "--work", os.path.join(a.work, "g"),
                            "--out", out, "--llama-bench", exe, "--variants", "experts-q4_0",
                            "--residencies", "0,4,6,8"], capture_output=True, text=True)
        check(p.returncode == want_rc, f"{name} --residencies: exit {p.returncode}, expected {want_rc}: {p.stderr[-300:]}")
        rep = json.load(open(out))
        v = rep["variants"][0]
        check(rep["protocol"]["offload"] == [{"residency": 0, "n_cpu_moe": 0}, {"residency": 4, "n_cpu_moe": k},
                                             {"residency": 6, "n_cpu_moe": 0}, {"residency": 8, "n_cpu_moe": 0}]
              and rep["protocol"]["n_cpu_moe"] == [0, k], f"{out}: offload plan {rep['protocol']}")
        calls = open(args_file).read().splitlines()
        check(len(calls) == 2 and "-ncmoe" not in calls[0].split() and calls[1].split()[-3:-2] == [str(k)]
              and calls[1].split()[-4] == "-ncmoe", f"{name}: llama-bench calls {calls}")
        check(v["status"] == "ok" and v["tg_tok_s"] == 321.25 and v["pp_tok_s"] == 5000.5,
              f"{out}: the all-on-GPU rates {v}")
        if not old:
            check(v["offload_status"] == "ok"
                  and [(o["n_cpu_moe"], o["tg_tok_s"], o["pp_tok_s"]) for o in v["offload"]]
                  == [(0, 321.25, 5000.5), (k, 321.25 / (1 + k), 5000.5 / (1 + k))], f"{out}: offload rates {v}")
        else:
            check(v["offload_status"].startswith("failed") and "exited with 1" in v["offload_status"]
                  and [o["n_cpu_moe"] for o in v["offload"]] == [0], f"{out}: the failed partial call {v}")
    # Unknown variants are refused before anything is written.
    p = subprocess.run([sys.executable, script, "--checkpoint", ck, "--work", a.work, "--out", "x.json",
                        "--gguf-only", "--variants", "q8"], capture_output=True, text=True)
    check(p.returncode == 2 and "unknown" in p.stderr, f"--variants q8: exit {p.returncode}")
    if errors:
        for e in errors:
            print("check_gguf: FAIL:", e, file=sys.stderr)
        return 1
    print("check_gguf: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
