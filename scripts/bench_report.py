#!/usr/bin/env python3
"""The performance contract's dated tables (DESIGN.md section 6, doc/bench.md "The roofline").

    bench_report.py manifest ART.hzq OUT.json
        the roofline inputs of an artifact (config, blob bytes, every non-routed tensor's bytes), read
        from its header and manifest; scripts/bench writes one per model next to the reports, because
        the artifact itself stays on the GPU machine.
    bench_report.py report DIR [DIR ...] [--doc doc/benchmarks.md] [--out SECTION.md] [--json FIG.json]
        reads every JSON file in the folders (hz-bench reports, hz-ceilings, the peer, the llama.cpp
        peer of scripts/bench_llamacpp.py, the artifact summaries, scripts/bench's env.json, told apart by their "tool" key), computes the roofline
        and the ratios, and writes one dated markdown section: to --out, and into --doc under the
        heading "## Performance contract (scripts/bench)", replacing the section of the same inputs if
        it is there (running it twice changes nothing), else as the newest section. --json writes the
        computed figures (the test reads them). --id NAME names the section instead of the inputs' hash:
        reuse it to replace a section made earlier from part of the folders.

Pairing: a report's ceilings are those of its own folder (the same scripts/bench call, hence the same
GPU and run); a folder without one borrows another folder's and the section says so. The peers are
matched by model shape. A figure that cannot be computed is printed as UNKNOWN, never guessed.
Standard library only.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import struct
import sys

HEADING = "## Performance contract (scripts/bench)"
RUNS_ANCHOR = "<!-- bench-report:runs (newest first; scripts/bench_report.py inserts and replaces) -->"
INTRO = """Sweeps of DESIGN.md section 6 on the GPU machine, each section written by
`scripts/bench_report.py` from the files one `scripts/bench` run left in its output folders: the hz-bench
reports, the ceilings measured by `hz-ceilings` in the same call, the transformers peer
(`scripts/bench_peer.py`), the llama.cpp peer where one ran (`scripts/bench_llamacpp.py`) and the artifact
summaries. Definitions: [bench.md](bench.md) ("The roofline").
Every rate is given with its ratio to a ceiling or to the peer measured in the same run."""
UNKNOWN = "UNKNOWN"


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------------------------------------------
# manifest: the roofline inputs of one artifact
# ---------------------------------------------------------------------------------------------------

def artifact_summary(path):
    """Header and manifest of a .hzq (doc/format.md), reduced to what the roofline needs."""
    with open(path, "rb") as f:
        head = f.read(88)
        if len(head) < 88 or head[:8] != b"HZQPACK1":
            raise ValueError(f"{path}: not a Horizon artifact")
        man_off, man_bytes = struct.unpack_from("<QQ", head, 32)
        id_hi, id_lo = struct.unpack_from("<QQ", head, 56)
        f.seek(man_off)
        manifest = json.loads(f.read(man_bytes))
    ex = manifest["experts"]
    return {
        "tool": "hz-artifact-summary",
        "schema": 1,
        "artifact": os.path.basename(path),
        "identity": "%016x%016x" % (id_hi, id_lo),
        "architecture": manifest["architecture"],
        "config": manifest["config"],
        "precision": manifest.get("precision"),
        "layers": ex["layers"],
        "experts_per_layer": ex["experts_per_layer"],
        "blob_bytes": ex["layout"]["blob_bytes"],
        "tensors": [{"name": t["name"], "shape": t["shape"], "bytes": t["bytes"]} for t in manifest["tensors"]],
    }


# ---------------------------------------------------------------------------------------------------
# The roofline (doc/bench.md)
# ---------------------------------------------------------------------------------------------------

def tensor_class(name):
    if name == "model.embed_tokens.weight":
        return "embed"
    if name == "lm_head.weight":
        return "lm_head"
    if ".self_attn." in name:
        return "attention"
    if ".mlp.shared_expert" in name:
        return "shared_expert"
    if name.endswith(".mlp.gate.weight"):
        return "router"
    if name.endswith("norm.weight"):
        return "norms"
    return "other"


def model_bytes(summary):
    """Bytes read from HBM per forward token, by kind, from the artifact's own sizes (FP16 non-routed,
    INT4 blobs of blob_bytes), and the FP16 KV bytes per attended position."""
    cfg = summary["config"]
    layers = cfg["num_hidden_layers"]
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    top_k = cfg["num_experts_per_tok"]
    by = {"attention": 0, "router": 0, "norms": 0, "shared_expert": 0, "other": 0}
    embed = lm_head = 0
    for t in summary["tensors"]:
        c = tensor_class(t["name"])
        if c == "embed":
            embed = t["bytes"]
        elif c == "lm_head":
            lm_head = t["bytes"]
        else:
            by[c] += t["bytes"]
    vocab = cfg["vocab_size"]
    if not lm_head and cfg.get("tie_word_embeddings"):
        lm_head = embed  # the tied matrix is read whole by the head
    return {
        "layers": layers,
        "top_k": top_k,
        "blob_bytes": summary["blob_bytes"],
        "routed": layers * top_k * summary["blob_bytes"],
        "body": sum(by.values()),  # every non-routed tensor but the embedding and the head
        "body_by_kind": by,
        "embed_row": embed // vocab if vocab else 0,
        "lm_head": lm_head,
        "kv_per_position": layers * 2 * kv_heads * head_dim * 2,
    }


def decode_token_bytes(mb, mean_ctx):
    """One decode step: every routed blob it uses, every non-routed weight, one embedding row, the
    head, and the KV cache over mean_ctx attended positions."""
    return mb["routed"] + mb["body"] + mb["embed_row"] + mb["lm_head"] + mb["kv_per_position"] * mean_ctx


def pick_h2d(ceil, blob_bytes):
    """The pinned H2D ceiling at the model's expert size: the hz-ceilings entry of exactly that size,
    else UNKNOWN (a different size would be a different ceiling)."""
    if not ceil:
        return None, UNKNOWN
    for e in ceil.get("h2d_pinned", []):
        if e.get("bytes") == blob_bytes and is_num(e.get("gbps")):
            return e["gbps"], e.get("label", str(blob_bytes))
    return None, f"no pinned H2D figure at {blob_bytes} B"


def staged_round_seconds(ceil, blob_bytes, piecewise):
    """{blobs: seconds} of hz-ceilings' pipelined rounds at this blob size: the one-blob round in the
    transport's form (two parts when piecewise, the default, else whole), and the 2-, 4- and 8-blob rounds
    (each blob sent whole as soon as it is in). None when a point is missing."""
    pts = {}
    for e in (ceil or {}).get("staged_pipelined", []):
        n = e.get("blobs", 1)
        if e.get("bytes") != n * blob_bytes or not is_num(e.get("gbps")) or e["gbps"] <= 0:
            continue
        if n == 1:
            if e.get("waves") != (2 if piecewise else 1):
                continue
        elif n not in (2, 4, 8) or e.get("waves") != 1:
            continue
        pts[n] = n * blob_bytes / (e["gbps"] * 1e9)
    return pts if len(pts) == 4 else None


def staged_bound_gbps(ceil, blob_bytes, piecewise, rounds):
    """The best rate the threaded transport could reach on this window's rounds ([[blobs, rounds], ...]),
    each round at the time hz-ceilings measured for a staged round of its size on the same host: linear in
    the number of blobs between the measured 1, 2, 4 and 8, and past 8 the 8-blob round plus the 4 -> 8
    time per extra blob. None without the rounds or the ceilings."""
    pts = staged_round_seconds(ceil, blob_bytes, piecewise)
    if not pts or not isinstance(rounds, list) or not rounds:
        return None
    knots = sorted(pts)

    def t(n):
        if n in pts:
            return pts[n]
        if n > knots[-1]:
            return pts[8] + (n - 8) * (pts[8] - pts[4]) / 4
        lo = max(k for k in knots if k < n)
        hi = min(k for k in knots if k > n)
        return pts[lo] + (pts[hi] - pts[lo]) * (n - lo) / (hi - lo)

    secs = sum(r * t(n) for n, r in rounds)
    return sum(n * r for n, r in rounds) * blob_bytes / secs * 1e-9 if secs > 0 else None


def run_figures(rep, run, mb, ceil, peer, llama=None):
    """Every figure of one residency, with its ratios. Keys whose inputs are missing hold None."""
    p = rep["protocol"]
    det = run["requests_detail"]
    plens = [d["prompt_tokens"] for d in det]
    n_tok = p["tokens"]
    lab, m = run["label"], run["cache"]["measured"]
    f = {"model": lab["model_shape"]["architecture"], "executor": lab["executor"], "residency": lab["residency"],
         "resident": lab["resident"], "experts": lab["experts"],
         "transport": lab["transport"] + ("+prefetch" if lab.get("prefetch") == "next_layer" else "")
                      + (", random ids" if p.get("decode_input") == "random" else ""),
         "blocks": p["blocks"], "prompts": p["prompts"], "tokens": n_tok, "quick": p.get("quick", False),
         "invariant_checker": lab.get("invariant_checker"), "device": lab["device"],
         "pooled_decode_tok_s": run["pooled_decode_tok_s"], "overall_output_tok_s": run["overall_output_tok_s"],
         "ttft_mean_s": run["ttft_mean_s"], "hit_rate": m["hit_rate"], "h2d_bytes": m["h2d_bytes"],
         "misses": m["misses"],
         # null with N = 1 (no decode step, nothing to spread)
         "block_spread": (run["block_spread"]["pooled_decode_tok_s"] or {}).get("relative_spread"),
         "response_mean_s": run["response_mean_s"],
         "vram_peak_bytes": run["vram"]["peak_bytes"], "rss_peak_bytes": run.get("rss", {}).get("peak_bytes", UNKNOWN)}
    # cuda sessions name the routed experts' kernels (hz_session_stats_json's expert_kernels)
    ss = run.get("session_stats")
    f["expert_kernels"] = ss.get("expert_kernels") if isinstance(ss, dict) else None
    # and, at partial residency, how each layer's routing reached the host (routing_readback)
    rr = ss.get("routing_readback") if isinstance(ss, dict) else None
    f["routing_readback"] = rr if rr in ("router store", "copy") else None
    # and where its experts were queued: ahead of the routing, behind a gate (experts_queued)
    eq = ss.get("experts_queued") if isinstance(ss, dict) else None
    f["experts_ahead"] = True if eq == "ahead of the routing" else None
    # and, behind those gates, the share that passed on the device's own table of rows (gate_hits)
    gh, gg = (ss.get("gate_hits"), ss.get("experts_gated")) if isinstance(ss, dict) else (None, None)
    f["gate_hit_fraction"] = gh / gg if isinstance(gh, int) and isinstance(gg, int) and gg > 0 else None
    # and whether its partial-residency steps ran as captured graphs (decode_path)
    dp = ss.get("decode_path") if isinstance(ss, dict) else None
    f["partial_graph"] = True if dp == "graph (partial residency)" else None
    # Decode roofline at the protocol's mean decode context: the step running position p attends p + 1
    # positions; a request's decode steps run positions P .. P+N-2, so their mean is P + N/2.
    mean_ctx = sum(plens) / len(plens) + n_tok / 2 if plens else 0
    f["mean_decode_context"] = mean_ctx
    f["decode_bytes_per_token"] = decode_token_bytes(mb, mean_ctx)
    read_bw = ceil["hbm"]["read"]["gbps"] if ceil else None
    copy_bw = ceil["hbm"]["d2d_copy"]["gbps_read_plus_write"] if ceil else None
    f["hbm_read_gbps"], f["hbm_copy_rw_gbps"] = read_bw, copy_bw
    f["decode_ceiling_tok_s"] = read_bw * 1e9 / f["decode_bytes_per_token"] if read_bw else None
    f["decode_ceiling_copy_tok_s"] = copy_bw * 1e9 / f["decode_bytes_per_token"] if copy_bw else None
    pooled = run["pooled_decode_tok_s"]
    f["decode_fraction"] = pooled / f["decode_ceiling_tok_s"] if pooled and f["decode_ceiling_tok_s"] else None

    # Partial residency, decode phase (hz-bench splits the cache counters at the end of each prefill):
    # the decode steps' HBM bytes over the read ceiling plus the H2D bytes moved during decode over the
    # pinned H2D ceiling at expert size, added (a miss is served before its layer runs).
    dec_phase, pre_phase = run["cache"].get("measured_decode"), run["cache"].get("measured_prefill")
    dec_tokens = run["decode_tokens"]
    h2d_bw, h2d_label = pick_h2d(ceil, mb["blob_bytes"])
    f["h2d_ceiling_gbps"], f["h2d_ceiling_label"] = h2d_bw, h2d_label
    f["decode_h2d_bytes"] = dec_phase["h2d_bytes"] if dec_phase else None
    f["prefill_h2d_bytes"] = pre_phase["h2d_bytes"] if pre_phase else None
    f["miss_bytes_per_token"] = f["decode_h2d_bytes"] / dec_tokens if dec_phase and dec_tokens else None
    f["prefill_miss_bytes_per_token"] = (f["prefill_h2d_bytes"] / sum(plens)) if pre_phase and plens else None
    f["decode_hit_rate"] = dec_phase["hit_rate"] if dec_phase else None
    f["bound_hbm_s"] = dec_tokens * f["decode_bytes_per_token"] / (read_bw * 1e9) if read_bw else None
    f["bound_h2d_s"] = (f["decode_h2d_bytes"] / (h2d_bw * 1e9)) if h2d_bw and dec_phase else None
    f["bound_s"] = f["bound_decode_tok_s"] = f["bound_fraction"] = f["miss_bound_decode_tok_s"] = None
    if f["bound_hbm_s"] is not None and f["bound_h2d_s"] is not None:
        f["bound_s"] = f["bound_hbm_s"] + f["bound_h2d_s"]
        f["bound_decode_tok_s"] = dec_tokens / f["bound_s"]
        f["bound_fraction"] = pooled / f["bound_decode_tok_s"] if pooled else None
        f["miss_bound_decode_tok_s"] = dec_tokens / f["bound_h2d_s"] if f["bound_h2d_s"] > 0 else None

    # The miss path: the library's own miss-transfer counters against the same H2D ceiling.
    mp = run.get("miss_path", {})
    f["miss_path_gbps"] = mp.get("gbps", UNKNOWN) if mp else UNKNOWN
    f["miss_path_fraction"] = (f["miss_path_gbps"] / h2d_bw) if is_num(f["miss_path_gbps"]) and h2d_bw else None
    # The staged bound: only for the threaded transport, whose rounds hz-ceilings' pipelined rounds model.
    f["staged_bound_gbps"] = f["staged_bound_fraction"] = None
    if lab["transport"] in ("threaded", "threaded-whole"):
        pw = run["cache"].get("stats_end", {}).get("staging_piecewise") is True
        f["staged_bound_gbps"] = staged_bound_gbps(ceil, mb["blob_bytes"], pw, mp.get("round_blobs") if mp else None)
        if f["staged_bound_gbps"] and is_num(f["miss_path_gbps"]):
            f["staged_bound_fraction"] = f["miss_path_gbps"] / f["staged_bound_gbps"]
    # The same split by phase (hz-bench from 2026-11-30 on): prefill rounds move several blobs, a decode
    # step's usually one.
    for ph, key in (("prefill", "measured_prefill"), ("decode", "measured_decode")):
        c = run["cache"].get(key) or {}
        b, t = c.get("miss_transfer_bytes"), c.get("miss_transfer_seconds")
        f[f"miss_path_{ph}_gbps"] = (b / t * 1e-9 if t > 0 else None) if is_num(b) and is_num(t) else UNKNOWN
    pf = run.get("prefetch", {})
    f["prefetch_hits"] = pf.get("hits", UNKNOWN)
    f["prefetch_wasted_bytes"] = pf.get("wasted_bytes", UNKNOWN)
    sg = run.get("staging", {})
    f["staging_gbps"] = sg.get("gbps", UNKNOWN)

    # The peer: transformers' pooled decode on the same shape, default experts and the fastest variant.
    f["peer_default_tok_s"] = f["peer_best_tok_s"] = None
    f["peer_best_variant"] = None
    if peer:
        ok = [v for v in peer["variants"] if v.get("status") == "ok" and is_num(v.get("pooled_decode_tok_s"))]
        for v in ok:
            if v["experts_implementation"] == "default":
                f["peer_default_tok_s"] = v["pooled_decode_tok_s"]
        if ok:
            best = max(ok, key=lambda v: v["pooled_decode_tok_s"])
            f["peer_best_tok_s"], f["peer_best_variant"] = best["pooled_decode_tok_s"], best["experts_implementation"]
    f["x_peer_default"] = pooled / f["peer_default_tok_s"] if pooled and f["peer_default_tok_s"] else None
    f["x_peer_best"] = pooled / f["peer_best_tok_s"] if pooled and f["peer_best_tok_s"] else None
    # The llama.cpp peer: llama-bench's decode (tg) rate per GGUF variant of the same checkpoint, with
    # all experts on the GPU at full residency and, at a partial one, with the experts of the layers that
    # scripts/bench_llamacpp.py chose for this residency on the host (none measured: no ratio).
    ncmoe = llamacpp_cpu_layers(llama, f["resident"], f["experts"])
    f["llamacpp_n_cpu_moe"] = ncmoe
    for v in ("experts-q4_0", "q4_0"):
        key = "llamacpp_" + v.replace("-", "_")
        tg = None
        for e in (llama or {}).get("variants", []):
            if e.get("variant") != v or e.get("status") != "ok" or ncmoe is None:
                continue
            if ncmoe == 0 and is_num(e.get("tg_tok_s")):
                tg = e["tg_tok_s"]
            for o in e.get("offload", []) if ncmoe else []:
                if o.get("n_cpu_moe") == ncmoe and is_num(o.get("tg_tok_s")):
                    tg = o["tg_tok_s"]
        f[key + "_tok_s"] = tg
        f["x_" + key] = pooled / tg if pooled and tg else None
    return f


def llamacpp_cpu_layers(llama, resident, experts):
    """The -ncmoe the llama.cpp peer ran for hz-bench's residency: 0 at full residency; at a partial one
    the value its report lists for that residency (None when it lists none)."""
    if not llama or not is_num(resident) or not is_num(experts):
        return None
    if resident >= experts:
        return 0
    for o in llama.get("protocol", {}).get("offload", []):
        if o.get("residency") == resident and is_num(o.get("n_cpu_moe")):
            return o["n_cpu_moe"]
    return None


# ---------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------

def load_dirs(dirs):
    """{tool: [(dir, path, obj)]} over every *.json in the folders; files of other tools are ignored."""
    found = {}
    for d in dirs:
        if not os.path.isdir(d):
            raise SystemExit(f"bench_report: {d} is not a folder")
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            try:
                with open(path) as fh:
                    obj = json.load(fh)
            except (OSError, ValueError) as e:
                print(f"bench_report: skipping {path}: {e}", file=sys.stderr)
                continue
            if isinstance(obj, dict) and isinstance(obj.get("tool"), str):
                found.setdefault(obj["tool"], []).append((os.path.abspath(d), path, obj))
    return found


def shape_key(arch, layers, experts, hidden, vocab):
    return (str(arch).replace("qwen2moe", "qwen2_moe"), int(layers), int(experts), int(hidden), int(vocab))


def report_shape_key(rep):
    s = rep["model"]["shape"]
    return shape_key(s["architecture"], s["layers"], s["experts"], s["hidden"], s["vocab"])


def peer_shape_key(peer):
    s = peer["model"]["shape"]
    return shape_key(s["architecture"], s["layers"], s["experts"], s["hidden"], s["vocab"])


def ceilings_for(d, ceilings):
    """The newest ceilings of folder d, else the newest of any folder (borrowed = True)."""
    own = [c for c in ceilings if c[0] == d]
    pool = own or ceilings
    if not pool:
        return None, False
    return max(pool, key=lambda c: c[2].get("date_utc", ""))[2], not own


def input_id(found):
    """A name for this set of inputs: the same files give the same id (so a rerun replaces its section),
    different runs different ids."""
    h = hashlib.sha256()
    for tool in sorted(found):
        for _, _, obj in sorted(found[tool], key=lambda x: json.dumps(x[2], sort_keys=True)):
            key = [tool, obj.get("date_utc"), obj.get("host")]
            if tool == "hz-bench":
                key += [obj["model"]["identity"], [r["label"]["residency"] for r in obj["runs"]],
                        [r.get("generated_tokens_fnv1a64") for r in obj["runs"]]]
            if tool == "hz-artifact-summary":
                key += [obj.get("identity")]
            h.update(json.dumps(key, sort_keys=True).encode())
    return h.hexdigest()[:12]


# ---------------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------------

def fmt(v, spec="{:,.1f}", scale=1.0):
    if v is None:
        return UNKNOWN
    if isinstance(v, str):
        return v
    return spec.format(v / scale)


def pct(v):
    return fmt(v, "{:.1f}%", 0.01)


def ratio(v):
    return fmt(v, "{:.2f}x")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def ceilings_lines(ceil, borrowed):
    if not ceil:
        return ["Ceilings: UNKNOWN (no hz-ceilings report among the inputs; run the `ceilings` step)."]
    hb = ceil["hbm"]
    out = [f"Ceilings (`hz-ceilings`, {ceil['date_utc']}, {ceil['device']['name']} {ceil['device'].get('uuid', '')}, "
           f"host {ceil.get('host', UNKNOWN)}; medians of {ceil['settings']['repeats']} after "
           f"{ceil['settings']['warmup']} warm-ups"
           + ("; **borrowed from another call of the same run**" if borrowed else "") + "):", ""]
    rows = [["HBM read (reduction kernel)", fmt(hb["read"]["bytes"], "{:,.0f}"), fmt(hb["read"]["gbps"]),
             "the roofline's divisor: decode reads weights"],
            ["HBM D2D copy, read + write", fmt(hb["d2d_copy"]["bytes"], "{:,.0f}"),
             fmt(hb["d2d_copy"]["gbps_read_plus_write"]), "2 x bytes / time, as DEVICE.md quotes it"]]
    for e in ceil.get("h2d_pinned", []):
        single = e.get("single", {}).get("gbps")
        burst = e.get("burst", {}).get("gbps")
        rows.append([f"pinned H2D, {e['label']}", fmt(e["bytes"], "{:,.0f}"), fmt(e["gbps"]),
                     f"single copy {fmt(single)}, burst of {e.get('burst', {}).get('copies', '-')} {fmt(burst)}"])
    pg = ceil.get("h2d_pageable")
    if pg:
        rows.append(["pageable H2D", fmt(pg["bytes"], "{:,.0f}"), fmt(pg["gbps"]), "cudaMemcpy from malloc'ed memory"])
    for e in ceil.get("host_memcpy_pageable_to_pinned", []):
        rows.append([f"host memcpy pageable -> pinned, {e['threads']} threads", fmt(e["bytes"], "{:,.0f}"),
                     fmt(e["gbps"]), ""])
    for e in ceil.get("staged_round", []):  # hz-ceilings from 2026-11-30 on
        rows.append([f"staged round, {e['label']}, {e['threads']} threads, {e['stores']}", fmt(e["bytes"], "{:,.0f}"),
                     fmt(e["gbps"]), f"copy {fmt(e['copy']['gbps'])}, then H2D {fmt(e['h2d']['gbps'])}: "
                                     "a one-blob miss round's bound"])
    for e in ceil.get("staged_pipelined", []):  # hz-ceilings from 2026-11-30 on
        blobs = e.get("blobs", 1)  # absent before the multi-blob rounds: one blob
        if blobs == 1:
            rows.append([f"pipelined round, {e['label']}, {e['threads']} threads, {e['waves']} waves",
                         fmt(e["bytes"], "{:,.0f}"), fmt(e["gbps"]),
                         "each part's H2D as soon as it is in: a one-blob round's bound with piecewise H2D"])
        else:
            rows.append([f"pipelined round, {blobs} x {e['label']}, {e['threads']} threads, {e['waves']} waves each",
                         fmt(e["bytes"], "{:,.0f}"), fmt(e["gbps"]),
                         f"each blob's H2D while the next is copied: the bound of a round of {blobs} blobs"])
    return out + table(["ceiling", "bytes", "GB/s", "note"], rows)


def llamacpp_lines(llama, arch):
    """The llama.cpp peer's lines; none where no scripts/bench_llamacpp.py report matched the shape."""
    if not llama:
        return []
    pr, lc = llama["protocol"], llama.get("llama_cpp", {})
    build = f"build {lc.get('build_number', '?')} ({lc.get('build_commit', '?')})"
    fa = lc.get("flash_attn", UNKNOWN)
    fa = {-1: "auto (-1: on where the build has the kernels)", 0: "off", 1: "on"}.get(fa, fa) if is_num(fa) else fa
    out = [f"Peer ({arch}): llama.cpp llama-bench, {build}, backends {lc.get('backends', UNKNOWN)}, flash attention "
           f"{fa}, {lc.get('gpu_info', UNKNOWN)}, {llama['date_utc']}: the same checkpoint "
           f"written as GGUF by scripts/bench_llamacpp.py; decode = llama-bench's tg{pr['tokens']} after "
           f"{pr['depth']} positions (mean context {pr['mean_context']:.0f}), batch 1, random token ids, "
           f"{pr['reps']} repetitions; prompt = pp{pr['prompt']} at the same depth. experts-q4_0: the bytes "
           "Horizon moves (non-routed FP16, routed experts Q4_0, 4.5 bits per weight); q4_0: every matrix but "
           "the embedding in Q4_0 (fewer bytes per token than Horizon moves).", ""]
    experts = llama.get("model", {}).get("shape", {}).get("experts")
    offload = [o for o in pr.get("offload", []) if is_num(experts) and 0 < o.get("residency", 0) < experts]
    if offload:
        out[-2] += (" Partial residency: llama.cpp keeps the routed experts of the first N layers in host memory "
                    "and computes them on the CPU (-ncmoe N, "
                    f"{lc.get('n_threads', UNKNOWN)} threads); N = floor(layers x (experts - resident) / experts), "
                    "so its GPU holds at least the share of the expert bytes that Horizon's cache holds: " +
                    ", ".join(f"c{o['residency']} -> N = {o['n_cpu_moe']}" for o in offload) +
                    " (N = 0: every expert on the GPU, the all-on-GPU rate).")
    rows = []
    for v in llama["variants"]:
        if v.get("status") != "ok":
            rows.append([v["variant"], "", v.get("status", UNKNOWN), "", "", ""])
            continue
        for o in v.get("offload") or [{"n_cpu_moe": 0, **{k: v.get(k) for k in ("tg_tok_s", "tg_stddev_tok_s", "pp_tok_s")}}]:
            rows.append([v["variant"], str(o.get("n_cpu_moe", 0)), fmt(v.get("gguf_bytes"), "{:.2f}", 1e9),
                         fmt(o.get("tg_tok_s")), fmt(o.get("tg_stddev_tok_s")), fmt(o.get("pp_tok_s"), "{:,.0f}")])
        if str(v.get("offload_status", "ok")) != "ok":
            rows.append([v["variant"], "the runs with experts on the host", v["offload_status"], "", "", ""])
    return out + table(["GGUF", "expert layers on the host (-ncmoe)", "file GB", "decode t/s", "stddev",
                        f"prompt (pp{pr['prompt']}) t/s"], rows)


def peer_lines(peer, arch):
    if not peer:
        return [f"Peer ({arch}): UNKNOWN (no scripts/bench_peer.py report for this shape among the inputs)."]
    pr = peer["protocol"]
    out = [f"Peer ({arch}): transformers {peer.get('transformers', '?')} / torch {peer.get('torch', '?')}, "
           f"{pr['dtype']}, attention {pr['attn_implementation']}, batch 1, greedy, EOS suppressed, "
           f"{pr['prompts']} prompts of lengths {pr['prompt_lengths']} x {pr['tokens']} tokens after a "
           f"{pr['warmup_tokens']}-token warm-up, same random weights (hz-mkmodel checkpoint), "
           f"{peer['device']['name']}, {peer['date_utc']}:", ""]
    rows = []
    for v in peer["variants"]:
        if v.get("status") != "ok":
            rows.append([v["experts_implementation"], v.get("status", UNKNOWN), "", "", ""])
            continue
        name, eff = v["experts_implementation"], v.get("experts_implementation_effective")
        rows.append([name + (f" ({eff})" if eff and eff != name else ""), fmt(v["pooled_decode_tok_s"]), fmt(v["overall_output_tok_s"]),
                     fmt(v["ttft_mean_s"], "{:,.1f}", 1e-3), fmt(v.get("peak_memory_bytes"), "{:.1f}", 2**30)])
    return out + table(["experts_implementation", "decode t/s", "output t/s", "TTFT ms", "peak GiB"], rows)


def roofline_lines(arch, mb, f0):
    by = mb["body_by_kind"]
    rows = [["routed experts", f"{mb['layers']} layers x top-{mb['top_k']} x {mb['blob_bytes']:,} B (INT4 blob)",
             f"{mb['routed']:,}"]]
    for k in ("attention", "router", "norms", "shared_expert", "other"):
        if by[k]:
            rows.append([f"non-routed {k.replace('_', ' ')}", "FP16, every layer", f"{by[k]:,}"])
    rows.append(["embedding row", "FP16, one row", f"{mb['embed_row']:,}"])
    rows.append(["lm_head", "FP16, whole matrix", f"{mb['lm_head']:,}"])
    kv = mb["kv_per_position"] * f0["mean_decode_context"]
    rows.append(["KV cache", f"FP16, {mb['kv_per_position']:,} B/position x mean context "
                             f"{f0['mean_decode_context']:.1f}", f"{kv:,.0f}"])
    rows.append(["**total per decode token**", "", f"**{f0['decode_bytes_per_token']:,.0f}**"])
    out = [f"Roofline inputs ({arch}, from the artifact's manifest): bytes that must move from HBM per decoded "
           f"token at full residency. Mean context = mean prompt length + N/2 over the measured requests.", ""]
    out += table(["what", "how", "bytes"], rows)
    out += ["", f"Decode ceiling = HBM read {fmt(f0['hbm_read_gbps'])} GB/s / bytes per token = "
                f"**{fmt(f0['decode_ceiling_tok_s'])} tok/s** (with the D2D copy's read + write figure "
                f"{fmt(f0['hbm_copy_rw_gbps'])} GB/s it would be {fmt(f0['decode_ceiling_copy_tok_s'])} tok/s)."]
    return out


def executor_cell(f):
    """The executor, followed by the expert kernels its session reported where they say more, and at
    partial residency by how the routing came back ("routing router store" or "routing copy"),
    "experts ahead" where they were queued ahead of the routing and "hits on the device" where some of
    their gates passed on the device's table of rows, "graph" where those steps ran as captured graphs."""
    k, rr = f.get("expert_kernels"), f.get("routing_readback")
    notes = ([k] if k and k != f["executor"] else []) + ([f"routing {rr}"] if rr else [])
    notes += ["experts ahead"] if f.get("experts_ahead") else []
    notes += ["hits on the device"] if f.get("gate_hit_fraction") else []
    notes += ["graph"] if f.get("partial_graph") else []
    return f["executor"] + (f" ({'; '.join(notes)})" if notes else "")


def sweep_lines(arch, figs):
    rows, rows2 = [], []
    for f in figs:
        rows.append([executor_cell(f), f["residency"], f["transport"], f["blocks"], fmt(f["pooled_decode_tok_s"]),
                     pct(f["decode_fraction"]), fmt(f["bound_decode_tok_s"]), pct(f["bound_fraction"]),
                     ratio(f["x_peer_default"]),
                     ratio(f["x_peer_best"]) + (f" ({f['peer_best_variant']})" if f["peer_best_variant"] else ""),
                     ratio(f["x_llamacpp_experts_q4_0"]), ratio(f["x_llamacpp_q4_0"]),
                     fmt(f["overall_output_tok_s"]), fmt(f["ttft_mean_s"], "{:,.1f}", 1e-3),
                     fmt(f["response_mean_s"], "{:,.1f}", 1e-3), pct(f["block_spread"])])
        mp = f["miss_path_gbps"]
        meets = UNKNOWN if f["miss_path_fraction"] is None else ("yes" if f["miss_path_fraction"] >= 0.8 else "**no**")
        if mp is None:
            meets = "-"
        rows2.append([executor_cell(f), f["residency"], f["transport"],
                      # null: no acquire in the window (a full-residency cuda model holds its rows)
                      "-" if f["hit_rate"] is None else pct(f["hit_rate"]),
                      "-" if f["decode_hit_rate"] is None else pct(f["decode_hit_rate"]),
                      fmt(f["misses"], "{:,.0f}"), fmt(f["h2d_bytes"], "{:,.1f}", 1e6),
                      fmt(f["miss_bytes_per_token"], "{:,.2f}", 1e6),
                      fmt(f["prefill_miss_bytes_per_token"], "{:,.2f}", 1e6),
                      "-" if f["decode_h2d_bytes"] == 0 else fmt(f["miss_bound_decode_tok_s"]),
                      "-" if mp is None else fmt(mp, "{:,.2f}"),
                      " / ".join("-" if f[f"miss_path_{ph}_gbps"] is None else fmt(f[f"miss_path_{ph}_gbps"], "{:,.2f}")
                                 for ph in ("prefill", "decode")),
                      f"{f['h2d_ceiling_gbps']:,.1f} ({f['h2d_ceiling_label']})" if f["h2d_ceiling_gbps"] else UNKNOWN,
                      "-" if mp is None else pct(f["miss_path_fraction"]), meets,
                      "-" if f["staged_bound_gbps"] is None else fmt(f["staged_bound_gbps"], "{:,.2f}"),
                      "-" if f["staged_bound_fraction"] is None else pct(f["staged_bound_fraction"]),
                      fmt(f["staging_gbps"], "{:,.2f}") if f["staging_gbps"] is not None else "-",
                      f["prefetch_hits"], f["prefetch_wasted_bytes"],
                      fmt(f["vram_peak_bytes"], "{:.2f}", 2**30), fmt(f["rss_peak_bytes"], "{:.2f}", 2**30)])
    out = [f"Rates ({arch}). decode = pooled decode; % roofline = decode / decode ceiling (full-residency bytes); "
           "bound = the decode rate if the decode steps' HBM bytes moved at the read ceiling and the H2D bytes "
           "of the decode phase at the pinned H2D ceiling, one after the other (equal to the roofline at full "
           "residency); % bound = decode / bound; x peer = decode / the peer's pooled decode (default experts, "
           "and the fastest variant); x llama.cpp = decode / llama-bench's decode rate on the GGUF with Horizon's "
           "bytes (experts-q4_0) and on the all-Q4_0 GGUF, at a partial residency with the experts of the layers "
           "named below on the host (UNKNOWN where no llama.cpp peer ran for that residency).", ""]
    out += table(["executor", "residency", "transport", "blocks", "decode t/s", "% roofline", "bound t/s", "% bound",
                  "x peer (default)", "x peer (best)", "x llama.cpp (experts-q4_0)", "x llama.cpp (q4_0)", "output t/s", "TTFT ms", "response ms", "spread"], rows)
    out += ["", f"Cache and miss path ({arch}). hit = all measured acquires, decode hit = the decode phase's "
                "(- where the window made no acquire: a full-residency cuda model holds its rows); H2D MB = the "
                "cache's H2D bytes over all measured requests; "
                "miss MB/token = H2D bytes of the decode phase / decode steps (prefill: / prompt tokens); "
                "miss-bound t/s = the decode rate if only those H2D bytes had to move at the ceiling; miss-path "
                "GB/s = the cache's miss_transfer_bytes / miss_transfer_seconds over all measured requests, its % "
                "of pinned H2D at expert size (target >= 80%), and the same rate for the rounds of the prefill "
                "and of the decode phase; staged bound = the rate of the same rounds "
                "(miss_path.round_blobs) at the times hz-ceilings measured for staged rounds of their sizes "
                "(pipelined rounds of 1, 2, 4, 8 blobs, linear in between): an estimate of the threaded "
                "transport's best case on this host, from ceilings measured minutes apart on a shared host (above "
                "100% when the host ran faster during the run than during hz-ceilings), and the miss path's % of "
                "it; UNKNOWN = not reported by this library build.", ""]
    out += table(["executor", "residency", "transport", "hit", "decode hit", "misses", "H2D MB", "miss MB/token",
                  "prefill miss MB/token", "miss-bound t/s",
                  "miss-path GB/s", "prefill / decode GB/s", "H2D ceiling GB/s", "% of H2D", ">= 80%", "staged bound GB/s",
                  "% of staged bound", "staging GB/s", "prefetch hits",
                  "prefetch wasted B", "VRAM GiB", "RSS GiB"], rows2)
    return out


def build_section(found, run_id):
    reports = found.get("hz-bench", [])
    if not reports:
        raise SystemExit("bench_report: no hz-bench report (tool \"hz-bench\") among the inputs")
    ceilings = found.get("hz-ceilings", [])
    peers = {peer_shape_key(p[2]): p[2] for p in sorted(found.get("hz-bench-peer", []), key=lambda x: x[2]["date_utc"])}
    llamas = {peer_shape_key(p[2]): p[2]
              for p in sorted(found.get("hz-bench-llamacpp", []), key=lambda x: x[2]["date_utc"])}
    summaries = {s[2]["identity"]: s[2] for s in found.get("hz-artifact-summary", [])}
    envs = found.get("hz-bench-env", [])
    dates = sorted({r[2]["date_utc"][:10] for r in reports})
    devices = sorted({r[2]["device"]["name"] for r in reports})
    lines = [f"<!-- bench-report:begin id={run_id} -->",
             f"### {' to '.join([dates[0], dates[-1]] if len(dates) > 1 else dates)}: hz-bench sweeps on "
             f"{', '.join(devices)}", ""]
    if envs:
        lines.append("Calls (scripts/bench):")
        for _, _, e in sorted(envs, key=lambda x: x[2].get("date_utc", "")):
            lines.append(f"- {e.get('date_utc')} host {e.get('host')}, GPU {e.get('gpu', UNKNOWN)}: "
                         f"`{e.get('command', UNKNOWN)}`")
        lines.append("")
    lines += ["Build: " + ", ".join(sorted({("release (invariant checker off)" if r[2]["runs"] and
                                              r[2]["runs"][0]["label"].get("invariant_checker") is False else
                                              "**not a release build: the invariant checker is on**")
                                             for r in reports})) + f"; library {reports[0][2]['library_version']}.", ""]
    figures = []
    by_model = {}
    for d, path, rep in reports:
        by_model.setdefault(report_shape_key(rep), []).append((d, path, rep))
    used_ceilings = {}  # every hz-ceilings report a figure was divided by, listed once
    for key in sorted(by_model):
        group = by_model[key]
        rep0 = group[0][2]
        arch = rep0["model"]["shape"]["architecture"]
        s = rep0["model"]["shape"]
        shape_text = (f"{arch}: {s['layers']} layers, {s['experts']} experts top-{s['top_k']}, hidden {s['hidden']}, "
                      f"expert width {s['expert_width']}" + (f", shared expert {s['shared_expert_width']}"
                                                             if s.get("shared_expert_width") else "")
                      + f", vocab {s['vocab']}")
        summary = summaries.get(rep0["model"]["identity"])
        peer, llama = peers.get(key), llamas.get(key)
        feeds = sorted({rep["protocol"].get("decode_input", "greedy") for _, _, rep in group})
        feed_text = {("greedy",): "greedy, EOS suppressed",
                     ("random",): "each decode step fed a random token id (hz-bench --feed random, as llama-bench's "
                                  "decode test), the outputs greedy and not fed back",
                     ("greedy", "random"): "greedy with EOS suppressed, or (rows marked \"random ids\") each decode "
                                           "step fed a random token id"}[tuple(feeds)]
        lines += [f"#### {shape_text}", "", f"Artifact identity {rep0['model']['identity']}."
                  f" Protocol: {rep0['protocol']['prompts']} prompts x {rep0['protocol']['blocks']} blocks x "
                  f"{rep0['protocol']['tokens']} tokens, warm-up {rep0['protocol']['warmup_tokens']} tokens, "
                  f"{feed_text}, concurrency 1, canonical placement then LRU"
                  + (" (**--quick: a plumbing check, not a figure**)" if rep0["protocol"].get("quick") else "") + ".", ""]
        model_figs = []
        for d, path, rep in group:
            ceil, borrowed = ceilings_for(d, ceilings)
            if summary is None:
                lines.append(f"{os.path.basename(path)}: roofline UNKNOWN (no artifact summary for identity "
                             f"{rep['model']['identity']})")
                continue
            mb = model_bytes(summary)
            for run in rep["runs"]:
                f = run_figures(rep, run, mb, ceil, peer, llama)
                f["report"] = os.path.basename(path)
                f["ceilings_borrowed"] = borrowed
                model_figs.append((f, mb, ceil, borrowed))
        if not model_figs:
            continue
        f0, mb0 = model_figs[0][0], model_figs[0][1]
        for _, _, ceil, borrowed in model_figs:
            if ceil is not None:
                used_ceilings.setdefault(id(ceil), (ceil, borrowed))
        lines += roofline_lines(arch, mb0, f0) + [""]
        lines += peer_lines(peer, arch) + [""]
        lines += llamacpp_lines(llama, arch) + ([""] if llama else [])
        model_figs.sort(key=lambda x: (x[0]["executor"], -x[0]["resident"], x[0]["transport"], x[0]["report"]))
        lines += sweep_lines(arch, [x[0] for x in model_figs]) + [""]
        figures += [x[0] for x in model_figs]
    if not used_ceilings:
        lines += ceilings_lines(None, False) + [""]
    for ceil, borrowed in used_ceilings.values():
        lines += ceilings_lines(ceil, borrowed) + [""]
    lines.append(f"<!-- bench-report:end id={run_id} -->")
    return "\n".join(lines) + "\n", figures


def insert_section(doc_text, section, run_id):
    """The doc with `section` in place of the block of the same id, or added as the newest block under
    the heading (created at the end of the document when absent)."""
    block = re.compile(r"<!-- bench-report:begin id=%s -->.*?<!-- bench-report:end id=%s -->\n?"
                       % (re.escape(run_id), re.escape(run_id)), re.S)
    if block.search(doc_text):
        return block.sub(lambda _: section, doc_text, count=1)
    if RUNS_ANCHOR not in doc_text:
        if HEADING in doc_text:
            raise SystemExit(f"bench_report: the document has '{HEADING}' but not its anchor line; restore:\n"
                             f"{RUNS_ANCHOR}")
        doc_text = doc_text.rstrip("\n") + "\n\n" + HEADING + "\n\n" + INTRO + "\n\n" + RUNS_ANCHOR + "\n"
    i = doc_text.index(RUNS_ANCHOR) + len(RUNS_ANCHOR) + 1
    return doc_text[:i] + "\n" + section + doc_text[i:]


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest", help="write an artifact's roofline inputs")
    m.add_argument("artifact")
    m.add_argument("out")
    r = sub.add_parser("report", help="write the dated section")
    r.add_argument("dirs", nargs="+")
    r.add_argument("--doc", help="insert into this markdown file (e.g. doc/benchmarks.md)")
    r.add_argument("--out", help="also write the section alone here")
    r.add_argument("--json", help="write the computed figures here")
    r.add_argument("--id", help="the section's name (letters, digits, '-', '_', '.'); default: a hash of the "
                                "inputs. Give the same --id to replace a section made from fewer folders")
    a = ap.parse_args()
    if a.cmd == "manifest":
        try:
            s = artifact_summary(a.artifact)
        except (OSError, ValueError, KeyError) as e:
            print(f"bench_report: {e}", file=sys.stderr)
            return 1
        write_atomic(a.out, json.dumps(s, indent=1) + "\n")
        return 0
    found = load_dirs(a.dirs)
    if a.id is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", a.id):
        print(f"bench_report: --id '{a.id}' must be 1..64 of letters, digits, '.', '_', '-'", file=sys.stderr)
        return 1
    run_id = a.id or input_id(found)
    section, figures = build_section(found, run_id)
    if a.out:
        write_atomic(a.out, section)
    if a.json:
        write_atomic(a.json, json.dumps({"id": run_id, "runs": figures}, indent=1) + "\n")
    if a.doc:
        with open(a.doc) as fh:
            old = fh.read()
        new = insert_section(old, section, run_id)
        if new != old:
            write_atomic(a.doc, new)
        print(f"bench_report: {a.doc}: section {run_id} {'unchanged' if new == old else 'written'}")
    if not (a.out or a.doc or a.json):
        sys.stdout.write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
