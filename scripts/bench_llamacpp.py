#!/usr/bin/env python3
"""A second peer of the performance contract: llama.cpp's llama-bench on the same random-weight shape as
hz-bench, on the same GPU, in the same run (doc/bench.md "The llama.cpp peer").

    bench_llamacpp.py --checkpoint DIR --llama-bench PATH --work DIR --out REPORT.json
                      [--variants experts-q4_0,q4_0] [--tokens 128] [--depth 64] [--prompt 512]
                      [--reps 5] [--residencies 30,64] [--artifact-identity HEX] [--gguf-only]

DIR is the BF16 checkpoint hz-mkmodel wrote (config.json + safetensors), the one hz-pack converted. This
script writes it as GGUF files itself (numpy only; llama.cpp's converter needs a tokenizer, which a
random-weight checkpoint does not have, so the GGUF says tokenizer model "none" with the vocabulary's
size), one per variant:
  experts-q4_0  the bytes Horizon moves: attention, router, shared expert, embedding and lm_head in
                FP16, the routed experts in Q4_0 (4.5 bits per weight; Horizon's INT4 rows carry 4.06);
  q4_0          every matrix in Q4_0 except the embedding (FP16): what a llama.cpp user quantizing to
                Q4_0 runs; it moves fewer bytes per token than Horizon.
Norm weights and biases are FP32. Q4_0 blocks are 32 values along a row: an FP16 scale d = max|x| / 7
and 16 bytes of 4-bit codes q (value = (q - 8) d; byte j holds value j in its low nibble and value
j + 16 in its high nibble).

Then `llama-bench -m GGUF -ngl 99 -p PROMPT -n TOKENS -d DEPTH -r REPS -o json` per variant:
llama.cpp's own decode test (tg: one token per llama_decode, batch 1, random token ids, after DEPTH
positions already in the KV cache) and prompt test (pp), with every other setting at llama-bench's
default (flash attention "auto", CUDA graphs on). The tg rate is the peer of hz-bench's pooled decode;
the mean context of the tg test is DEPTH + TOKENS / 2 (hz-bench's is the mean prompt length + 64).

With --residencies (hz-bench's resident experts per layer, R of E), llama.cpp's way of running a model
whose experts do not all fit on the GPU is timed beside Horizon's partial residency: llama-bench's
-ncmoe N keeps the routed experts of the first N layers in host memory and computes them on the CPU,
everything else on the GPU. For each R below E, N = floor(layers x (E - R) / E): the GPU then holds at
least the share of the expert bytes that Horizon's cache holds (R / E), never less, so the comparison
never starves the peer (N = 0, every expert on the GPU, near full residency; R = 0 means every expert to
hz-bench, so N = 0 too). Per variant one llama-bench call runs every expert on the GPU and a second one
every N > 0 (-ncmoe takes a list), so that a failure of the second leaves the first's rates standing.

Exit status 0 when every variant ran, with every -ncmoe asked for; 1 otherwise (each failure is recorded in
the report; the all-on-GPU rates of a variant whose runs with experts on the host failed still stand).
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import socket
import struct
import subprocess
import sys
import time

import numpy as np

GGUF_ALIGN = 32
GGUF_U32, GGUF_F32, GGUF_STRING = 4, 6, 8  # gguf_type values (ggml/include/gguf.h)
GGML_F32, GGML_F16, GGML_Q4_0 = 0, 1, 2    # ggml_type values (ggml/include/ggml.h)
Q4_0_BLOCK, Q4_0_BYTES = 32, 18
VARIANTS = ("experts-q4_0", "q4_0")


# ---- the checkpoint: safetensors read with numpy ------------------------------------------------------

class Checkpoint:
    """The tensors of a safetensors checkpoint (one file or an index), mapped, BF16/F16/F32 to float32."""

    def __init__(self, d):
        self.dir = d
        idx = os.path.join(d, "model.safetensors.index.json")
        files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) \
            else ["model.safetensors"]
        self.where = {}
        for fn in files:
            path = os.path.join(d, fn)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                if n > 100 << 20:
                    raise ValueError(f"{path}: a safetensors header of {n} bytes")
                hdr = json.loads(f.read(n))
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for name, t in hdr.items():
                if name != "__metadata__":
                    self.where[name] = (mm, 8 + n, t)

    def get(self, name):
        if name not in self.where:
            raise KeyError(f"{self.dir}: no tensor '{name}'")
        mm, base, t = self.where[name]
        b, e = t["data_offsets"]
        raw = mm[base + b: base + e]
        shape = tuple(t["shape"])
        if t["dtype"] == "BF16":
            return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
        if t["dtype"] == "F16":
            return raw.view(np.float16).astype(np.float32).reshape(shape)
        if t["dtype"] == "F32":
            return raw.view(np.float32).reshape(shape).copy()
        raise ValueError(f"{self.dir}: tensor '{name}' has dtype {t['dtype']} (BF16, F16 or F32 expected)")


# ---- conversions ---------------------------------------------------------------------------------------

def q4_0(x):
    """float32 [..., K] (K a multiple of 32) -> the Q4_0 blocks as uint8 [..., K / 32 * 18]."""
    lead, k = x.shape[:-1], x.shape[-1]
    if k % Q4_0_BLOCK:
        raise ValueError(f"a row of {k} values is not a whole number of Q4_0 blocks")
    b = x.reshape(-1, Q4_0_BLOCK)
    d = np.abs(b).max(axis=1, keepdims=True) / 7.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    q = (np.clip(np.rint(b * inv), -8, 7) + 8).astype(np.uint8)
    out = np.empty((b.shape[0], Q4_0_BYTES), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.reshape(*lead, k // Q4_0_BLOCK * Q4_0_BYTES)


def encode(x, gtype):
    if gtype == GGML_F32:
        return np.ascontiguousarray(x, dtype=np.float32)
    if gtype == GGML_F16:
        return np.ascontiguousarray(x, dtype=np.float16)
    return q4_0(np.ascontiguousarray(x, dtype=np.float32))


def encode_rows(pool, x, gtype, rows_per_part=4096):
    """encode() over parts of rows on the pool (numpy releases the GIL), the bytes in row order."""
    m = x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)
    parts = [m[i:i + rows_per_part] for i in range(0, m.shape[0], rows_per_part)]
    return b"".join(e.tobytes() for e in pool.map(lambda part: encode(part, gtype), parts))


def nbytes(shape, gtype):
    n = int(np.prod(shape))
    return n * 4 if gtype == GGML_F32 else n * 2 if gtype == GGML_F16 else n // Q4_0_BLOCK * Q4_0_BYTES


# ---- the model as GGUF tensors -------------------------------------------------------------------------

def read_config(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    arch = cfg["model_type"]
    if arch not in ("olmoe", "qwen2_moe"):
        raise ValueError(f"{ckpt}: model_type '{arch}' (olmoe or qwen2_moe)")
    theta = cfg.get("rope_theta")
    if theta is None:
        theta = (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    c = {"arch": arch, "layers": cfg["num_hidden_layers"], "hidden": cfg["hidden_size"],
         "heads": cfg["num_attention_heads"], "kv_heads": cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
         "experts": cfg.get("num_experts", cfg.get("num_local_experts")), "top_k": cfg["num_experts_per_tok"],
         "vocab": cfg["vocab_size"], "eps": cfg["rms_norm_eps"], "theta": float(theta),
         "ctx": cfg.get("max_position_embeddings", 4096)}
    if arch == "olmoe":
        c["expert_width"] = cfg["intermediate_size"]
        c["shared_width"] = 0
    else:
        c["expert_width"] = cfg["moe_intermediate_size"]
        c["shared_width"] = cfg["shared_expert_intermediate_size"]
    return c


def plan(c, variant):
    """[(gguf name, numpy shape, ggml type, how to build the values)], in file order."""
    dense = GGML_Q4_0 if variant == "q4_0" else GGML_F16
    h, kv = c["hidden"], c["hidden"] // c["heads"] * c["kv_heads"]
    out = [("token_embd.weight", (c["vocab"], h), GGML_F16, "model.embed_tokens.weight")]
    for L in range(c["layers"]):
        p, b = f"model.layers.{L}.", f"blk.{L}."
        out += [(b + "attn_norm.weight", (h,), GGML_F32, p + "input_layernorm.weight"),
                (b + "attn_q.weight", (h, h), dense, p + "self_attn.q_proj.weight"),
                (b + "attn_k.weight", (kv, h), dense, p + "self_attn.k_proj.weight"),
                (b + "attn_v.weight", (kv, h), dense, p + "self_attn.v_proj.weight"),
                (b + "attn_output.weight", (h, h), dense, p + "self_attn.o_proj.weight")]
        if c["arch"] == "olmoe":
            out += [(b + "attn_q_norm.weight", (h,), GGML_F32, p + "self_attn.q_norm.weight"),
                    (b + "attn_k_norm.weight", (kv,), GGML_F32, p + "self_attn.k_norm.weight")]
        else:
            out += [(b + "attn_q.bias", (h,), GGML_F32, p + "self_attn.q_proj.bias"),
                    (b + "attn_k.bias", (kv,), GGML_F32, p + "self_attn.k_proj.bias"),
                    (b + "attn_v.bias", (kv,), GGML_F32, p + "self_attn.v_proj.bias")]
        E, w = c["experts"], c["expert_width"]
        out += [(b + "ffn_norm.weight", (h,), GGML_F32, p + "post_attention_layernorm.weight"),
                (b + "ffn_gate_inp.weight", (E, h), GGML_F16, p + "mlp.gate.weight"),
                (b + "ffn_gate_exps.weight", (E, w, h), GGML_Q4_0, ("experts", p, "gate_proj")),
                (b + "ffn_up_exps.weight", (E, w, h), GGML_Q4_0, ("experts", p, "up_proj")),
                (b + "ffn_down_exps.weight", (E, h, w), GGML_Q4_0, ("experts", p, "down_proj"))]
        if c["shared_width"]:
            s = c["shared_width"]
            out += [(b + "ffn_gate_inp_shexp.weight", (h,), GGML_F32, p + "mlp.shared_expert_gate.weight"),
                    (b + "ffn_gate_shexp.weight", (s, h), dense, p + "mlp.shared_expert.gate_proj.weight"),
                    (b + "ffn_up_shexp.weight", (s, h), dense, p + "mlp.shared_expert.up_proj.weight"),
                    (b + "ffn_down_shexp.weight", (h, s), dense, p + "mlp.shared_expert.down_proj.weight")]
    out += [("output_norm.weight", (h,), GGML_F32, "model.norm.weight"),
            ("output.weight", (c["vocab"], h), dense, "lm_head.weight")]
    return out


def values(ck, src, shape, pool):
    if isinstance(src, tuple):
        _, p, proj = src
        x = np.empty(shape, dtype=np.float32)

        def one(e):
            x[e] = ck.get(f"{p}mlp.experts.{e}.{proj}.weight")
        list(pool.map(one, range(shape[0])))
    else:
        x = ck.get(src)
    if x.size != int(np.prod(shape)):
        raise ValueError(f"tensor for {src}: {x.shape}, expected {shape}")
    return x.reshape(shape)


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, gtype, v):
    body = gguf_string(v) if gtype == GGUF_STRING else struct.pack("<I" if gtype == GGUF_U32 else "<f", v)
    return gguf_string(key) + struct.pack("<I", gtype) + body


def gguf_head(c, variant):
    """The header of one variant's file (everything before the tensor data) and its tensor plan."""
    arch = "olmoe" if c["arch"] == "olmoe" else "qwen2moe"
    kvs = [("general.architecture", GGUF_STRING, arch),
           ("general.name", GGUF_STRING, f"horizon random-weight {c['arch']} ({variant})"),
           (f"{arch}.context_length", GGUF_U32, c["ctx"]),
           (f"{arch}.embedding_length", GGUF_U32, c["hidden"]),
           (f"{arch}.block_count", GGUF_U32, c["layers"]),
           (f"{arch}.feed_forward_length", GGUF_U32, c["shared_width"] or c["expert_width"]),
           (f"{arch}.attention.head_count", GGUF_U32, c["heads"]),
           (f"{arch}.attention.head_count_kv", GGUF_U32, c["kv_heads"]),
           (f"{arch}.rope.freq_base", GGUF_F32, c["theta"]),
           (f"{arch}.attention.layer_norm_rms_epsilon", GGUF_F32, c["eps"]),
           (f"{arch}.expert_count", GGUF_U32, c["experts"]),
           (f"{arch}.expert_used_count", GGUF_U32, c["top_k"]),
           (f"{arch}.vocab_size", GGUF_U32, c["vocab"]),
           ("tokenizer.ggml.model", GGUF_STRING, "none")]
    if c["shared_width"]:
        kvs += [(f"{arch}.expert_feed_forward_length", GGUF_U32, c["expert_width"]),
                (f"{arch}.expert_shared_feed_forward_length", GGUF_U32, c["shared_width"])]
    tensors = plan(c, variant)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    head += b"".join(gguf_kv(*kv) for kv in kvs)
    offset = 0
    for name, shape, gtype, _ in tensors:
        head += gguf_string(name) + struct.pack("<I", len(shape))
        head += b"".join(struct.pack("<Q", d) for d in reversed(shape))  # ggml's ne: innermost first
        head += struct.pack("<IQ", gtype, offset)
        offset += -(-nbytes(shape, gtype) // GGUF_ALIGN) * GGUF_ALIGN
    return head + b"\0" * (-len(head) % GGUF_ALIGN), tensors, offset


def write_ggufs(ckpt, c, targets, threads):
    """Writes {variant: path} in one pass over the checkpoint: the variants list the same tensors in the
    same order and differ only in types, so each tensor is read once and each type encoded once. Each
    file is written beside its name and renamed into place when complete. Returns {variant: bytes}."""
    heads = {v: gguf_head(c, v) for v in targets}
    order = [(n, shape, src) for n, shape, _, src in next(iter(heads.values()))[1]]
    ck = Checkpoint(ckpt)
    files, tmps = {}, {v: f"{p}.tmp.{os.getpid()}" for v, p in targets.items()}
    try:
        for v in targets:
            files[v] = open(tmps[v], "wb")
            files[v].write(heads[v][0])
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
            for i, (name, shape, src) in enumerate(order):
                x = values(ck, src, shape, pool)
                done = {}
                for v, f in files.items():
                    gtype = heads[v][1][i][2]
                    if gtype not in done:
                        done[gtype] = encode_rows(pool, x, gtype)
                        if len(done[gtype]) != nbytes(shape, gtype):
                            raise AssertionError(f"{name}: {len(done[gtype])} bytes, planned {nbytes(shape, gtype)}")
                    f.write(done[gtype] + b"\0" * (-len(done[gtype]) % GGUF_ALIGN))
        for v, f in files.items():
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(tmps[v], targets[v])
    finally:
        for v, f in files.items():
            f.close()
            if os.path.exists(tmps[v]):
                os.unlink(tmps[v])
    return {v: heads[v][2] for v in targets}


# ---- llama-bench ---------------------------------------------------------------------------------------

def cpu_moe_layers(layers, experts, resident):
    """llama-bench's -ncmoe for hz-bench's `resident` experts per layer: the expert layers kept on the host,
    rounded down so that the GPU holds at least the resident share of the experts (0 at full residency, and
    for 0, which hz-bench reads as every expert)."""
    return 0 if resident == 0 or resident >= experts else (layers * (experts - resident)) // experts


def rates_by_n(rows, asked):
    """llama-bench's rows as {n_cpu_moe: {tg/pp rates}}; rows without n_cpu_moe (a build that does not
    report it) count as the one value asked for, and are refused when several were."""
    by_n = {}
    for r in rows:
        n = r.get("n_cpu_moe")
        if n is None:
            if len(asked) > 1:
                raise RuntimeError("llama-bench's rows carry no n_cpu_moe: this build may not take -ncmoe")
            n = asked[0]
        kind = "tg" if r.get("n_gen", 0) > 0 else "pp"
        o = by_n.setdefault(n, {"n_cpu_moe": n})
        o[f"{kind}_tok_s"] = r.get("avg_ts")
        o[f"{kind}_stddev_tok_s"] = r.get("stddev_ts")
    missing = [n for n in asked if n not in by_n]
    if missing:
        raise RuntimeError(f"llama-bench printed no rows for -ncmoe {missing}")
    return by_n


def run_llama_bench(exe, gguf, a, ncmoe=(0,)):
    cmd = [exe, "-m", gguf, "-ngl", "99", "-p", str(a.prompt), "-n", str(a.tokens), "-d", str(a.depth),
           "-r", str(a.reps), "-o", "json"]
    if list(ncmoe) != [0]:
        cmd[-2:-2] = ["-ncmoe", ",".join(str(n) for n in ncmoe)]
    print("bench_llamacpp: " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=a.timeout)
    sys.stderr.write(p.stderr[-4000:])
    if p.returncode != 0:
        raise RuntimeError(f"llama-bench exited with {p.returncode}: {p.stderr.strip()[-300:]}")
    rows = json.loads(p.stdout)
    if not isinstance(rows, list) or not rows:
        raise RuntimeError("llama-bench printed no results")
    return cmd, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--llama-bench", default=None, help="llama-bench built with CUDA (not needed with --gguf-only)")
    ap.add_argument("--work", required=True, help="where the GGUF files go (kept; remade when the checkpoint is newer)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--depth", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1),
                    help="threads converting the checkpoint (default: the CPUs, at most 16)")
    ap.add_argument("--residencies", default="",
                    help="hz-bench's resident experts per layer (comma list): those below the expert count are "
                         "also timed with the experts of the first N layers on the host (-ncmoe N)")
    ap.add_argument("--artifact-identity", default=None)
    ap.add_argument("--gguf-only", action="store_true", help="write the GGUF files and stop")
    a = ap.parse_args()
    variants = [v for v in a.variants.split(",") if v]
    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        ap.error(f"--variants: unknown {bad} (known: {', '.join(VARIANTS)})")
    if not a.gguf_only and not (a.llama_bench and os.access(a.llama_bench, os.X_OK)):
        ap.error(f"--llama-bench: '{a.llama_bench}' is not an executable")
    try:
        residencies = [int(r) for r in a.residencies.split(",") if r]
    except ValueError:
        ap.error(f"--residencies: '{a.residencies}' is not a list of integers")
    if any(r < 0 for r in residencies):
        ap.error("--residencies: negative")
    c = read_config(a.checkpoint)
    offload = [{"residency": r, "n_cpu_moe": cpu_moe_layers(c["layers"], c["experts"], r)} for r in residencies]
    ncmoe = sorted({0} | {o["n_cpu_moe"] for o in offload})
    os.makedirs(a.work, exist_ok=True)
    report = {"tool": "hz-bench-llamacpp", "schema": 1,
              "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "host": socket.gethostname(),
              "model": {"checkpoint": os.path.abspath(a.checkpoint), "artifact_identity": a.artifact_identity or "UNKNOWN",
                        "shape": {"architecture": c["arch"], "layers": c["layers"], "experts": c["experts"],
                                  "top_k": c["top_k"], "hidden": c["hidden"], "expert_width": c["expert_width"],
                                  "shared_expert_width": c["shared_width"], "vocab": c["vocab"]}},
              "protocol": {"tokens": a.tokens, "depth": a.depth, "prompt": a.prompt, "reps": a.reps, "batch": 1,
                           "tg": "llama-bench's decode test: one random token id per llama_decode after depth "
                                 "positions in the KV cache; rate = tokens / the test's seconds",
                           "mean_context": a.depth + a.tokens / 2,
                           "n_cpu_moe": ncmoe, "offload": offload},
              "variants": []}
    ck_time = max(os.path.getmtime(os.path.join(a.checkpoint, f)) for f in os.listdir(a.checkpoint))
    paths = {v: os.path.join(a.work, f"{c['arch']}-{v}.gguf") for v in variants}
    stale = {v: p for v, p in paths.items() if not os.path.exists(p) or os.path.getmtime(p) < ck_time}
    gguf_error = None
    if stale:
        t = time.perf_counter()
        try:
            sizes = write_ggufs(a.checkpoint, c, stale, a.threads)
            report["gguf_seconds"] = time.perf_counter() - t
            print(f"bench_llamacpp: {', '.join(stale.values())}: "
                  f"{', '.join(f'{b / 1e9:.2f}' for b in sizes.values())} GB of tensors in "
                  f"{report['gguf_seconds']:.0f} s ({a.threads} threads)", flush=True)
        except Exception as e:  # every variant records it below
            gguf_error = f"writing the GGUF files: {type(e).__name__}: {str(e)[:300]}"
    failed = 0
    for v in variants:
        entry = {"variant": v}
        try:
            gguf = paths[v]
            if gguf_error and v in stale:
                raise RuntimeError(gguf_error)
            entry["gguf"] = gguf
            entry["gguf_bytes"] = os.path.getsize(gguf)
            if not a.gguf_only:
                # every expert on the GPU first, in a call of its own: its rates stand whatever the
                # partial runs below do (a build without -ncmoe, a crash, a timeout)
                entry["command"], entry["results"] = run_llama_bench(a.llama_bench, gguf, a)
                full = rates_by_n(entry["results"], [0])[0]
                for k, val in full.items():
                    if k != "n_cpu_moe":
                        entry[k] = val
                entry["offload"] = [full]
                partial = [n for n in ncmoe if n]
                if partial:
                    try:
                        entry["offload_command"], entry["offload_results"] = run_llama_bench(a.llama_bench, gguf,
                                                                                             a, partial)
                        by_n = rates_by_n(entry["offload_results"], partial)
                        entry["offload"] += [by_n[n] for n in partial]
                        entry["offload_status"] = "ok"
                    except Exception as e:  # recorded; the variant's own rates stand
                        entry["offload_status"] = f"failed: {type(e).__name__}: {str(e)[:300]}"
                        failed += 1
                        print(f"bench_llamacpp: {v}, experts on the host: {entry['offload_status']}", flush=True)
                first = entry["results"][0]
                for k in ("build_commit", "build_number", "gpu_info", "backends", "flash_attn", "n_batch",
                          "n_threads"):
                    if k in first:
                        report.setdefault("llama_cpp", {})[k] = first[k]
                print(f"bench_llamacpp: {v}: tg {entry.get('tg_tok_s')} tok/s, pp {entry.get('pp_tok_s')} tok/s" +
                      "".join(f"; -ncmoe {o['n_cpu_moe']}: tg {o.get('tg_tok_s')}" for o in entry["offload"]
                              if o["n_cpu_moe"]), flush=True)
            entry["status"] = "ok"
        except Exception as e:  # recorded, and the next variant still runs
            entry["status"] = f"failed: {type(e).__name__}: {str(e)[:300]}"
            failed += 1
            print(f"bench_llamacpp: {v}: {entry['status']}", flush=True)
        report["variants"].append(entry)
    tmp = f"{a.out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    print(f"bench_llamacpp: {len(variants) - failed} of {len(variants)} variants ran; report {a.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
