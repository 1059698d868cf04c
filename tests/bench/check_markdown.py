#!/usr/bin/env python3
"""Checks scripts/bench_report.py on the reports scripts/bench wrote on the cpu backend (report.sh):

- the section scripts/bench wrote without ceilings or peer says UNKNOWN for every ratio;
- with a ceilings report, a peer report and a llama.cpp peer report added (synthetic inputs: the cpu
  machine cannot measure them), every figure of figures.json is recomputed here from the hz-bench reports and from the model
  shape computed independently of the artifact (doc/format.md's inventory, doc/qpack.md's blob layout),
  and the markdown rows carry those numbers;
- inserting into a document keeps what was there, a second run of the same inputs changes nothing, a
  different run is added above the first, and a folder without ceilings borrows another's and says so.
Standard library only.
"""
import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def close(a, b, rel=1e-9):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def align(v, a):
    return (v + a - 1) // a * a


def qpack_bytes(rows, k):
    """codes + scales of one [rows, k] matrix (doc/qpack.md), each part aligned to 256 bytes."""
    kp = align(k, 256)
    return align(rows * kp // 2, 256) + align(rows * (kp // 256) * 2, 256)


def shape_bytes(cfg):
    """Bytes per forward token by the config alone (doc/format.md's inventory; FP16 = 2 bytes)."""
    arch = cfg["model_type"]
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kvh = cfg.get("num_key_value_heads") or heads
    hd = h // heads
    q, kv = heads * hd, kvh * hd
    inter = cfg["moe_intermediate_size"] if arch == "qwen2_moe" else cfg["intermediate_size"]
    experts = cfg.get("num_experts")
    per_layer = (q * h + 2 * kv * h + h * q) + experts * h + 2 * h  # attention, router, two norms
    if arch == "olmoe":
        per_layer += q + kv  # q_norm, k_norm
    else:
        sh = cfg["shared_expert_intermediate_size"]
        per_layer += q + 2 * kv  # q/k/v biases
        per_layer += 3 * sh * h + h  # shared expert and its gate
    blob = 2 * qpack_bytes(inter, h) + qpack_bytes(h, inter)
    return {"blob": blob, "routed": layers * cfg["num_experts_per_tok"] * blob,
            "body": 2 * (layers * per_layer + h), "embed_row": 2 * h, "lm_head": 2 * cfg["vocab_size"] * h,
            "kv_pp": layers * 2 * kv * 2}


def synthetic_ceilings(blob_sizes):
    """A report shaped like hz-ceilings' with round numbers (inputs, not results)."""
    return {"tool": "hz-ceilings", "schema": 1, "date_utc": "2026-01-01T00:00:00Z", "host": "test",
            "device": {"name": "TEST GPU", "uuid": "GPU-test"},
            "settings": {"repeats": 5, "warmup": 1},
            "hbm": {"d2d_copy": {"bytes": 1 << 30, "gbps": 450.0, "gbps_read_plus_write": 900.0},
                    "read": {"bytes": 1 << 30, "gbps": 1000.0}},
            "h2d_pinned": [{"label": f"blob{b}", "bytes": b, "gbps": 10.0 + i,
                            "single": {"gbps": 9.0}, "burst": {"gbps": 10.0 + i, "copies": 8}}
                           for i, b in enumerate(blob_sizes)] + [{"label": "256MiB", "bytes": 1 << 28, "gbps": 55.0}],
            "h2d_pageable": {"bytes": 1 << 28, "gbps": 8.0},
            "host_memcpy_pageable_to_pinned": [{"threads": 1, "bytes": 1 << 29, "gbps": 5.0}],
            "staged_round": [{"label": "blob_test", "bytes": 1 << 20, "threads": 3, "stores": "memcpy",
                              "copy": {"gbps": 30.0}, "h2d": {"gbps": 20.0}, "round": {"gbps": 12.0},
                              "gbps": 12.0}],
            "staged_pipelined": [{"label": "blob_test", "bytes": 1 << 20, "threads": 3, "waves": 4,
                                  "round": {"gbps": 16.5}, "gbps": 16.5},
                                 {"label": "blob_test", "bytes": 8 << 20, "blobs": 8, "threads": 3, "waves": 1,
                                  "round": {"gbps": 24.5}, "gbps": 24.5}]
                                + [{"label": f"blob{b}", "bytes": n * b, "blobs": n, "threads": 3, "waves": w,
                                    "round": {"gbps": g}, "gbps": g}
                                   for b in blob_sizes for n, w, g in PIPELINED]}


# (blobs, waves, GB/s) of the synthetic pipelined rounds at each model's blob size
PIPELINED = [(1, 1, 5.0), (1, 2, 6.0), (1, 4, 6.5), (2, 1, 7.0), (4, 1, 8.0), (8, 1, 9.0)]


def staged_bound(rounds, blob, piecewise):
    """The staged bound recomputed from PIPELINED: each round of n blobs takes n * blob bytes at the rate
    of its size; sizes between the measured ones at times interpolated linearly, past 8 blobs the 8-blob
    time plus (t8 - t4) / 4 per extra blob."""
    secs = {1: blob / ((6.0 if piecewise else 5.0) * 1e9), 2: 2 * blob / 7e9, 4: 4 * blob / 8e9, 8: 8 * blob / 9e9}
    total_s = 0.0
    for n, r in rounds:
        if n in secs:
            t = secs[n]
        elif n == 3:
            t = (secs[2] + secs[4]) / 2
        elif n < 8:
            t = secs[4] + (secs[8] - secs[4]) * (n - 4) / 4
        else:
            t = secs[8] + (n - 8) * (secs[8] - secs[4]) / 4
        total_s += r * t
    return sum(n * r for n, r in rounds) * blob / total_s * 1e-9


def synthetic_peer(shape):
    return {"tool": "hz-bench-peer", "schema": 1, "date_utc": "2026-01-01T00:00:00Z", "host": "test",
            "torch": "test", "transformers": "test", "device": {"name": "TEST GPU"},
            "model": {"shape": shape},
            "protocol": {"prompts": 1, "prompt_lengths": [16], "tokens": 16, "warmup_tokens": 4, "dtype": "bfloat16",
                         "attn_implementation": "eager"},
            "variants": [{"experts_implementation": "default", "status": "ok", "pooled_decode_tok_s": 10.0,
                          "overall_output_tok_s": 9.0, "ttft_mean_s": 0.1},
                         {"experts_implementation": "batched_mm", "status": "ok", "pooled_decode_tok_s": 20.0,
                          "overall_output_tok_s": 18.0, "ttft_mean_s": 0.05},
                         {"experts_implementation": "eager", "status": "failed: test"}]}


def synthetic_llamacpp(shape):
    """A report shaped like scripts/bench_llamacpp.py's: tg 40 and 80 tok/s with every expert on the GPU;
    for residency 4 (only), the experts of LLAMA_NCMOE layers on the host, tg 10 and 20 tok/s."""
    return {"tool": "hz-bench-llamacpp", "schema": 1, "date_utc": "2026-01-01T00:00:00Z", "host": "test",
            "llama_cpp": {"build_commit": "test", "build_number": 1, "backends": "CUDA", "flash_attn": 0,
                          "gpu_info": "TEST GPU", "n_threads": 3},
            "model": {"shape": shape},
            "protocol": {"tokens": 16, "depth": 8, "prompt": 32, "reps": 2, "mean_context": 16.0,
                         "n_cpu_moe": [0, LLAMA_NCMOE], "offload": [{"residency": 4, "n_cpu_moe": LLAMA_NCMOE}]},
            "variants": [{"variant": "experts-q4_0", "status": "ok", "gguf_bytes": 2_000_000_000, "tg_tok_s": 40.0,
                          "tg_stddev_tok_s": 0.5, "pp_tok_s": 900.0,
                          "offload": [{"n_cpu_moe": 0, "tg_tok_s": 40.0, "tg_stddev_tok_s": 0.5, "pp_tok_s": 900.0},
                                      {"n_cpu_moe": LLAMA_NCMOE, "tg_tok_s": 10.0, "tg_stddev_tok_s": 0.125,
                                       "pp_tok_s": 300.0}]},
                         {"variant": "q4_0", "status": "ok", "gguf_bytes": 1_000_000_000, "tg_tok_s": 80.0,
                          "tg_stddev_tok_s": 0.25, "pp_tok_s": 1200.0,
                          "offload": [{"n_cpu_moe": 0, "tg_tok_s": 80.0, "tg_stddev_tok_s": 0.25, "pp_tok_s": 1200.0},
                                      {"n_cpu_moe": LLAMA_NCMOE, "tg_tok_s": 20.0, "tg_stddev_tok_s": 0.25,
                                       "pp_tok_s": 400.0}]}]}


LLAMA_NCMOE = 1  # the synthetic llama.cpp peer's -ncmoe at residency 4


def run_report(src, dirs, doc, out, fig, extra=()):
    cmd = [sys.executable, os.path.join(src, "scripts", "bench_report.py"), "report", *dirs, "--doc", doc,
           "--out", out, "--json", fig, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, f"bench_report.py failed: {p.stderr.strip()}")
    return p.stdout


def load(path):
    with open(path) as f:
        return json.load(f) if path.endswith(".json") else f.read()


def check_figures(figs, reports, summaries, ceil, peer_arch):
    """Every figure recomputed from its hz-bench report (by file name) and the independent shape bytes."""
    by_run = {}
    for name, r in reports.items():
        for run in r["runs"]:
            lab = run["label"]
            xport = lab["transport"] + ("+prefetch" if lab.get("prefetch") == "next_layer" else "")
            by_run[(name, lab["residency"], xport)] = (r, run)
    check(len(figs) == len(by_run), f"{len(figs)} figure sets for {len(by_run)} runs")
    read_bw = ceil["hbm"]["read"]["gbps"]
    for f in figs:
        key = (f["report"], f["residency"], f["transport"])
        check(key in by_run, f"figures for an unknown run {key}")
        if key not in by_run:
            continue
        r, run = by_run[key]
        w = f"{f['model']} {f['residency']} {f['transport']}"
        cfg = summaries[r["model"]["identity"]]["config"]
        sb = shape_bytes(cfg)
        check(summaries[r["model"]["identity"]]["blob_bytes"] == sb["blob"], w + ": artifact blob bytes != qpack layout")
        det = run["requests_detail"]
        plens = [d["prompt_tokens"] for d in det]
        n = r["protocol"]["tokens"]
        mean_ctx = sum(plens) / len(plens) + n / 2
        per_tok = sb["routed"] + sb["body"] + sb["embed_row"]
        want_bytes = per_tok + sb["lm_head"] + sb["kv_pp"] * mean_ctx
        check(close(f["decode_bytes_per_token"], want_bytes), f"{w}: decode bytes/token {f['decode_bytes_per_token']} "
                                                               f"!= {want_bytes}")
        ceiling = read_bw * 1e9 / want_bytes
        check(close(f["decode_ceiling_tok_s"], ceiling), w + ": decode ceiling")
        pooled = run["pooled_decode_tok_s"]
        check(close(f["decode_fraction"], pooled / ceiling), w + ": decode fraction")
        dec = run["decode_tokens"]
        h2d = run["cache"]["measured_decode"]["h2d_bytes"]
        check(close(f["miss_bytes_per_token"], h2d / dec), w + ": miss bytes per decode token")
        check(close(f["prefill_miss_bytes_per_token"], run["cache"]["measured_prefill"]["h2d_bytes"] / sum(plens)),
              w + ": prefill miss bytes per prompt token")
        # The decode steps' HBM bytes, each at its own context (P + i attended positions for step i).
        hbm = sum(per_tok + sb["lm_head"] + sb["kv_pp"] * (p + i) for p in plens for i in range(1, n))
        h2d_bw = next(e["gbps"] for e in ceil["h2d_pinned"] if e["bytes"] == sb["blob"])
        bound = hbm / (read_bw * 1e9) + h2d / (h2d_bw * 1e9)
        check(close(f["bound_s"], bound), f"{w}: bound {f['bound_s']} != {bound}")
        check(close(f["bound_fraction"], pooled * bound / dec), w + ": fraction of the bound")
        if h2d == 0:
            check(close(f["bound_fraction"], f["decode_fraction"]), w + ": without decode misses bound != roofline")
        check(close(f["h2d_ceiling_gbps"], h2d_bw), w + ": the H2D ceiling is not the one at the model's blob size")
        if f["model"] == peer_arch:
            check(close(f["x_peer_default"], pooled / 10.0) and close(f["x_peer_best"], pooled / 20.0)
                  and f["peer_best_variant"] == "batched_mm", w + ": peer ratios")
        mp = run["miss_path"]["gbps"]
        if isinstance(mp, (int, float)):
            check(close(f["miss_path_fraction"], mp / h2d_bw), w + ": miss-path fraction")
        else:
            check(f["miss_path_fraction"] is None, w + ": a miss-path fraction without a miss-path rate")
        if f["model"] == peer_arch and f["resident"] >= f["experts"]:
            check(close(f["x_llamacpp_experts_q4_0"], pooled / 40.0) and close(f["x_llamacpp_q4_0"], pooled / 80.0)
                  and f["llamacpp_n_cpu_moe"] == 0, w + ": llama.cpp ratios")
        elif f["model"] == peer_arch and f["resident"] == 4:  # against the run with experts on the host
            check(close(f["x_llamacpp_experts_q4_0"], pooled / 10.0) and close(f["x_llamacpp_q4_0"], pooled / 20.0)
                  and f["llamacpp_n_cpu_moe"] == LLAMA_NCMOE, w + ": llama.cpp ratios at partial residency")
        elif f["model"] == peer_arch:  # a residency the peer did not run: no ratio, not the full one
            check(f["x_llamacpp_experts_q4_0"] is None and f["x_llamacpp_q4_0"] is None,
                  w + ": a llama.cpp ratio at a residency the peer did not run")
        else:
            check(f["x_peer_default"] is None and f["x_peer_best"] is None, w + ": a peer ratio without a peer")
            check(f["x_llamacpp_experts_q4_0"] is None and f["x_llamacpp_q4_0"] is None,
                  w + ": a llama.cpp ratio without a llama.cpp peer")
        for ph in ("prefill", "decode"):
            c = run["cache"][f"measured_{ph}"]
            want = c["miss_transfer_bytes"] / c["miss_transfer_seconds"] / 1e9 if c["miss_transfer_seconds"] else None
            got = f[f"miss_path_{ph}_gbps"]
            check(got is None if want is None else close(got, want), f"{w}: {ph} miss path {got} != {want}")
        rounds = run["miss_path"].get("round_blobs")
        base = f["transport"].removesuffix("+prefetch")
        if base in ("threaded", "threaded-whole") and isinstance(rounds, list) and rounds:
            pw = run["cache"]["stats_end"]["staging_piecewise"]
            check(pw == (base == "threaded"), w + ": staging_piecewise does not match the transport's name")
            want = staged_bound(rounds, sb["blob"], pw)
            check(close(f["staged_bound_gbps"], want), f"{w}: staged bound {f['staged_bound_gbps']} != {want}")
            if isinstance(mp, (int, float)):
                check(close(f["staged_bound_fraction"], mp / want), w + ": fraction of the staged bound")
        else:
            check(f["staged_bound_gbps"] is None and f["staged_bound_fraction"] is None,
                  w + ": a staged bound without threaded rounds")


def check_rows(md, figs):
    """Each run's row in the rates table carries its decode rate, residency and transport and the %."""
    for f in figs:
        dec = "{:,.1f}".format(f["pooled_decode_tok_s"])
        frac = "{:.1f}%".format(100 * f["decode_fraction"])
        k, rr = f.get("expert_kernels"), f.get("routing_readback")
        notes = ([k] if k and k != f["executor"] else []) + ([f"routing {rr}"] if rr else [])
        notes += ["experts ahead"] if f.get("experts_ahead") else []
        notes += ["hits on the device"] if f.get("gate_hit_fraction") else []
        notes += ["graph"] if f.get("partial_graph") else []
        cell = f["executor"] + (f" ({'; '.join(notes)})" if notes else "")
        row = f"| {cell} | {f['residency']} | {f['transport']} | {f['blocks']} | {dec} | {frac} |"
        check(row in md, f"markdown lacks the row start: {row}")
        # the figures DESIGN section 6 names beside the rates: response time, H2D bytes summed, RSS peak
        key = f"| {cell} | {f['residency']} | {f['transport']} |"
        rates, cache = table_row(md, "| executor | residency | transport | blocks |", key), \
            table_row(md, "| executor | residency | transport | hit |", key)
        check(rates.get("response ms") == "{:,.1f}".format(f["response_mean_s"] * 1e3),
              f"{key} response ms {rates.get('response ms')}, expected {f['response_mean_s'] * 1e3:,.1f}")
        check(cache.get("H2D MB") == "{:,.1f}".format(f["h2d_bytes"] / 1e6),
              f"{key} H2D MB {cache.get('H2D MB')}, expected {f['h2d_bytes'] / 1e6:,.1f}")
        want = "{:.2f}x".format(f["x_llamacpp_experts_q4_0"]) if f["x_llamacpp_experts_q4_0"] else "UNKNOWN"
        check(rates.get("x llama.cpp (experts-q4_0)") == want,
              f"{key} x llama.cpp {rates.get('x llama.cpp (experts-q4_0)')}, expected {want}")
        rss = f["rss_peak_bytes"]
        check(cache.get("RSS GiB") == ("{:.2f}".format(rss / 2**30) if isinstance(rss, (int, float)) else rss),
              f"{key} RSS GiB {cache.get('RSS GiB')}, expected {rss}")
        hit = cache.get("hit")
        check(hit == ("-" if f["hit_rate"] is None else "{:.1f}%".format(100 * f["hit_rate"])), f"{key} hit {hit}")


def table_row(md, header_start, row_start):
    """The cells, by column name, of the first row starting with row_start in the first table whose header
    starts with header_start ({} when absent)."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(header_start):
            continue
        names = [c.strip() for c in line.strip().strip("|").split("|")]
        for r in lines[i + 2:]:
            if not r.startswith("|"):
                break
            if r.startswith(row_start):
                return dict(zip(names, (c.strip() for c in r.strip().strip("|").split("|"))))
        return {}
    return {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="the repository root")
    ap.add_argument("--out", required=True, help="scripts/bench's output folder")
    ap.add_argument("--work", required=True, help="an empty scratch folder")
    a = ap.parse_args()

    # A. scripts/bench's own section: no ceilings, no peer on the cpu backend.
    sec = load(os.path.join(a.out, "benchmarks-section.md"))
    check(sec.startswith("<!-- bench-report:begin id=") and "<!-- bench-report:end id=" in sec, "section markers")
    check("Ceilings: UNKNOWN" in sec and "Peer (olmoe): UNKNOWN" in sec, "missing inputs are not called UNKNOWN")
    for t in ("serial", "threaded", "registered"):
        check(f"| {t} |" in sec, f"the section has no {t} row")

    # B. the same reports with a ceilings and a peer report.
    reports = {os.path.basename(p): load(p) for p in sorted(glob.glob(os.path.join(a.out, "*.json")))}
    named = {n: r for n, r in reports.items() if r.get("tool") == "hz-bench"}
    benches = [r for r in named.values() if r["model"]["shape"]["architecture"] == "olmoe"]
    summaries = {r["identity"]: r for r in reports.values() if r.get("tool") == "hz-artifact-summary"}
    check(len(benches) >= 2 and len(named) > len(benches) and summaries,
          "scripts/bench left no OLMoE and Qwen reports or no summaries")
    if errors:
        print("check_markdown: FAIL:", errors[-1], file=sys.stderr)
        return 1
    d1 = os.path.join(a.work, "run1")
    shutil.copytree(a.out, d1)
    ceil = synthetic_ceilings(sorted({s["blob_bytes"] for s in summaries.values()}))
    with open(os.path.join(d1, "ceilings.json"), "w") as f:
        json.dump(ceil, f)
    shape = dict(benches[0]["model"]["shape"])
    with open(os.path.join(d1, "peer.json"), "w") as f:
        json.dump(synthetic_peer(shape), f)
    with open(os.path.join(d1, "llamacpp.json"), "w") as f:
        json.dump(synthetic_llamacpp(shape), f)
    doc = os.path.join(a.work, "doc.md")
    original = "# Benchmarks\n\n## Something else\n\nkept as it was.\n"
    with open(doc, "w") as f:
        f.write(original)
    sec_path, fig_path = os.path.join(a.work, "sec.md"), os.path.join(a.work, "fig.json")
    run_report(a.src, [d1], doc, sec_path, fig_path)
    text, sec1, figs = load(doc), load(sec_path), load(fig_path)["runs"]
    check(text.startswith(original.rstrip("\n")), "the document's earlier content changed")
    check(text.count("## Performance contract (scripts/bench)") == 1, "the heading is not there exactly once")
    check(sec1 in text, "the section is not in the document")
    check("TEST GPU" in sec1 and "borrowed" not in sec1, "ceilings of the same folder not named as such")
    check("staged round, blob_test, 3 threads, memcpy | 1,048,576 | 12.0 | copy 30.0, then H2D 20.0" in sec1,
          "the staged round's row is missing or wrong")
    check("pipelined round, blob_test, 3 threads, 4 waves | 1,048,576 | 16.5 | each part's H2D" in sec1,
          "the pipelined round's row is missing or wrong")
    check("pipelined round, 8 x blob_test, 3 threads, 1 waves each | 8,388,608 | 24.5 | each blob's H2D while"
          in sec1, "the multi-blob pipelined round's row is missing or wrong")
    check("| experts-q4_0 | 0 | 2.00 | 40.0 | 0.5 | 900 |" in sec1 and "| q4_0 | 0 | 1.00 | 80.0 | 0.2 | 1,200 |" in sec1
          and f"| experts-q4_0 | {LLAMA_NCMOE} | 2.00 | 10.0 | 0.1 | 300 |" in sec1
          and f"| q4_0 | {LLAMA_NCMOE} | 1.00 | 20.0 | 0.2 | 400 |" in sec1
          and f"c4 -> N = {LLAMA_NCMOE}" in sec1 and "(-ncmoe N, 3 threads)" in sec1
          and f"Peer ({shape['architecture']}): llama.cpp llama-bench, build 1 (test)" in sec1,
          "the llama.cpp peer's lines are missing or wrong")
    check_figures(figs, named, summaries, ceil, shape["architecture"])
    check_rows(sec1, [f for f in figs if f["model"] == shape["architecture"]])

    # Idempotent: the same inputs again change nothing.
    out = run_report(a.src, [d1], doc, sec_path, fig_path)
    check(load(doc) == text and "unchanged" in out, "a second run with the same inputs changed the document")

    # C. another run (a report with another date) goes above the first, which stays.
    d2 = os.path.join(a.work, "run2")
    os.makedirs(d2)
    r2 = json.loads(json.dumps(benches[0]))
    r2["date_utc"] = "2027-02-03T04:05:06Z"
    # a cuda session names its expert kernels and, at partial residency, how its routing came back:
    # the row's executor cell carries both (synthetic here)
    ss0 = r2["runs"][0].get("session_stats")
    r2["runs"][0]["session_stats"] = dict(ss0 if isinstance(ss0, dict) else {}, expert_kernels="twopass",
                                          routing_readback="router store",
                                          experts_queued="ahead of the routing", experts_gated=40, gate_hits=30,
                                          decode_path="graph (partial residency)")
    with open(os.path.join(d2, "bench-x.json"), "w") as f:
        json.dump(r2, f)
    for s in summaries.values():
        with open(os.path.join(d2, f"model-{s['identity']}.json"), "w") as f:
            json.dump(s, f)
    run_report(a.src, [d2, d1], doc, os.path.join(a.work, "sec2.md"), os.path.join(a.work, "fig2.json"))
    text2, sec2 = load(doc), load(os.path.join(a.work, "sec2.md"))
    check(sec1 in text2 and sec2 in text2 and text2.index(sec2) < text2.index(sec1),
          "a new run is not inserted above the earlier one, or the earlier one changed")
    check("borrowed from another call" in sec2, "run2 has no ceilings of its own, yet none are called borrowed")
    figs2 = load(os.path.join(a.work, "fig2.json"))["runs"]
    named2 = [f for f in figs2 if f.get("expert_kernels") == "twopass"]
    check(len(named2) == 1, f"{len(named2)} figures name the expert kernels 'twopass', expected the one run")
    check(all(f.get("expert_kernels") is None and f.get("routing_readback") is None and f.get("experts_ahead") is None
              and f.get("gate_hit_fraction") is None and f.get("partial_graph") is None for f in figs2 if f not in named2),
          "expert kernels, a routing readback, experts ahead, hits on the device or a graph named for a cpu session")
    check(named2[0].get("gate_hit_fraction") == 0.75, f"gate hit fraction {named2[0].get('gate_hit_fraction')}, expected 30/40")
    check_rows(sec2, named2)
    check(f"| {r2['runs'][0]['label']['executor']} (twopass; routing router store; experts ahead; hits on the device; graph) |"
          in sec2, "the row does not name the expert kernels, the routing readback, the experts ahead, the hits on the "
                   "device and the graph")
    check(any(f["ceilings_borrowed"] for f in figs2) and any(not f["ceilings_borrowed"] for f in figs2),
          "borrowed flags")
    # And the first run's inputs once more: still in place, nothing else moves.
    run_report(a.src, [d1], doc, sec_path, fig_path)
    check(load(doc) == text2, "re-running the first inputs moved or changed a section")

    # D. --id: a section made from more folders under the same name replaces the earlier one in place.
    run_report(a.src, [d1], doc, sec_path, fig_path, ["--id", "run-x"])
    with_x, sec_x1 = load(doc), load(sec_path)
    check("<!-- bench-report:begin id=run-x -->" in sec_x1 and sec_x1 in with_x, "--id names the section")
    run_report(a.src, [d2, d1], doc, sec_path, fig_path, ["--id", "run-x"])
    replaced, sec_x2 = load(doc), load(sec_path)
    check(sec_x2 != sec_x1 and sec_x2 in replaced and sec_x1 not in replaced
          and replaced.replace(sec_x2, "") == with_x.replace(sec_x1, ""),
          "a section of the same --id was not replaced in place, or other sections changed")

    if errors:
        for e in errors:
            print("check_markdown: FAIL:", e, file=sys.stderr)
        return 1
    print(f"check_markdown: OK ({len(figs)} runs recomputed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
