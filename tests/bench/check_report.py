#!/usr/bin/env python3
"""Checks an hz-bench JSON report: required keys, that the counts add up, that the rates follow from
the per-request times by the documented definitions, and the cache observations (full residency: no
miss after the initial fill; partial: misses, and zero expert D2H). Standard library only."""
import argparse
import json
import math
import sys

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def need(obj, path, keys):
    for k in keys:
        check(k in obj, f"{path} lacks '{k}'")


def close(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_miss_path(run, w, full, ceiling):
    """The optional counters: each a number or the word UNKNOWN (never an invented value), and the rates
    following from their deltas by doc/bench.md's definitions."""
    need(run, w, ["miss_path", "prefetch", "staging"])
    mp, m = run["miss_path"], run["cache"]["measured"]
    need(mp, w + ".miss_path", ["bytes", "seconds", "gbps", "h2d_ceiling_gbps", "fraction_of_h2d_ceiling", "definition"])
    for k in ("bytes", "seconds", "gbps", "fraction_of_h2d_ceiling"):
        check(is_num(mp[k]) or mp[k] in ("UNKNOWN", None), f"{w}: miss_path.{k} is {mp[k]!r}")
    if ceiling is None:
        check(mp["h2d_ceiling_gbps"] == "UNKNOWN", w + ": no --h2d-ceiling given, yet a ceiling is reported")
    else:
        check(mp["h2d_ceiling_gbps"] == ceiling, w + ": miss_path.h2d_ceiling_gbps differs from --h2d-ceiling")
    if is_num(mp["bytes"]) and is_num(mp["seconds"]):
        if full:
            check(mp["bytes"] == 0 and mp["gbps"] is None, w + ": full residency has miss-path bytes or a rate")
        else:
            check(0 < mp["bytes"] <= m["h2d_bytes"], w + ": miss-path bytes not in (0, measured H2D bytes]")
            check(mp["seconds"] > 0 and close(mp["gbps"], mp["bytes"] / mp["seconds"] * 1e-9, 1e-9),
                  w + ": miss-path GB/s != bytes / seconds")
            if ceiling is not None:
                check(close(mp["fraction_of_h2d_ceiling"], mp["gbps"] / ceiling, 1e-9), w + ": fraction of the ceiling")
    else:
        check(mp["gbps"] == "UNKNOWN" and mp["fraction_of_h2d_ceiling"] == "UNKNOWN",
              w + ": a miss-path rate without both counters")
    rb = mp.get("round_blobs")
    check(rb == "UNKNOWN" or isinstance(rb, list), f"{w}: miss_path.round_blobs is {rb!r}")
    if isinstance(rb, list):
        ok = all(isinstance(p, list) and len(p) == 2 and all(is_num(v) and v > 0 and v == int(v) for v in p)
                 for p in rb)
        check(ok and [p[0] for p in rb] == sorted({p[0] for p in rb}),
              w + ": round_blobs is not [[blobs, rounds], ...] with positive counts, sizes ascending")
        row = run["cache"]["stats_end"].get("row_bytes")
        if ok and is_num(mp["bytes"]) and is_num(row):
            # every byte of the miss path belongs to one of these rounds
            check(sum(k * r for k, r in rb) * row == mp["bytes"], w + ": round_blobs do not add up to miss-path bytes")
    for k in ("hits", "wasted_bytes", "bytes", "gated"):
        v = run["prefetch"].get(k)
        check(is_num(v) or v == "UNKNOWN", f"{w}: prefetch.{k} is {v!r}")
    pf = run["prefetch"]
    if run["label"].get("prefetch") == "off" and all(is_num(pf.get(k)) for k in ("bytes", "gated")):
        check(pf["bytes"] == 0 and pf["gated"] == 0, w + ": prefetch off, yet prefetch bytes or declined predictions")
    sg = run["staging"]
    if is_num(sg.get("bytes")) and is_num(sg.get("seconds")) and run["label"]["transport"] == "serial":
        # serial staging copies every missed blob once, so its bytes are the window's H2D bytes
        check(sg["bytes"] == m["h2d_bytes"], w + ": serial staging bytes != measured H2D bytes")
        if sg["seconds"] > 0:
            check(close(sg["gbps"], sg["bytes"] / sg["seconds"] * 1e-9, 1e-9), w + ": staging GB/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--prompts", type=int, required=True)
    ap.add_argument("--blocks", type=int, required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--resident", required=True, help="comma-separated residencies, as passed to hz-bench")
    ap.add_argument("--transport", default="auto", help="the --transport given to hz-bench (its default: auto)")
    ap.add_argument("--prefetch", action="store_true", help="hz-bench ran with --prefetch")
    ap.add_argument("--feed", default="greedy", choices=["greedy", "random"], help="the --feed given to hz-bench")
    ap.add_argument("--h2d-ceiling", type=float, default=None, help="the --h2d-ceiling given to hz-bench, if any")
    a = ap.parse_args()
    with open(a.report) as f:
        r = json.load(f)

    need(r, "report", ["tool", "schema", "date_utc", "library_version", "model", "device", "protocol",
                       "rss_process_peak_bytes", "runs"])
    need(r["model"], "model", ["path", "identity", "shape"])
    need(r["model"]["shape"], "model.shape", ["architecture", "layers", "experts", "top_k", "hidden",
                                              "expert_width", "shared_expert_width", "vocab"])
    need(r["device"], "device", ["name", "backend"])
    p = r["protocol"]
    need(p, "protocol", ["prompts", "blocks", "tokens", "warmup_tokens", "concurrency", "sampling",
                         "eos_suppressed", "initial_placement", "eviction", "transport", "prompt_rule",
                         "prompt_lengths", "definitions"])
    check((p["prompts"], p["blocks"], p["tokens"], p["warmup_tokens"]) == (a.prompts, a.blocks, a.tokens, a.warmup),
          f"protocol sizes {p['prompts']},{p['blocks']},{p['tokens']},{p['warmup_tokens']} differ from the request")
    check(p["concurrency"] == 1 and p["sampling"] == "greedy", "protocol is not greedy, concurrency 1")
    # greedy decode inputs suppress EOS (it would be fed back); random ones are never fed back
    check(p.get("decode_input", "greedy") == a.feed and p["eos_suppressed"] is (a.feed == "greedy"),
          f"protocol decode_input {p.get('decode_input')}, eos_suppressed {p['eos_suppressed']} for --feed {a.feed}")
    if a.feed == "random":
        check("random token id" in p.get("decode_input_rule", ""), "--feed random without its rule in the protocol")
    # The documented prompt rule: lengths 16 + (j * 112) // 11, j = (5 k) mod 12.
    want_lens = [16 + (((5 * k) % 12) * 112) // 11 for k in range(a.prompts)]
    check(p["prompt_lengths"] == want_lens, f"prompt lengths {p['prompt_lengths']} != rule {want_lens}")
    check(isinstance(r["rss_process_peak_bytes"], (int, float)) and r["rss_process_peak_bytes"] > 0,
          "process RSS peak is not a positive number on Linux")

    experts = r["model"]["shape"]["experts"]
    residencies = [int(x) or experts for x in a.resident.split(",")]
    runs = r["runs"]
    check(len(runs) == len(residencies), f"{len(runs)} runs for {len(residencies)} residencies")
    digests = set()
    n_req = a.prompts * a.blocks
    for run, res in zip(runs, residencies):
        w = f"run c{res}"
        need(run, w, ["label", "requests", "tokens_generated", "decode_tokens", "decode_seconds", "response_seconds",
                      "pooled_decode_tok_s", "overall_output_tok_s", "ttft_mean_s", "response_mean_s", "blocks",
                      "block_spread", "cache", "vram", "rss", "generated_tokens_fnv1a64", "requests_detail"])
        lab = run["label"]
        need(lab, w + ".label", ["model_shape", "executor", "resident", "experts", "residency", "transport",
                                 "device", "eviction", "initial_placement"])
        check(lab["model_shape"] == r["model"]["shape"], w + ": label shape differs from the model's")
        check(lab["resident"] == res and lab["residency"] == f"c{res}/{experts}", w + ": wrong residency label")
        # auto: the label names the transport the cache chose (registered where experts miss)
        want_t = a.transport if a.transport != "auto" else "registered" if res < experts else "threaded"
        check(lab["transport"] == want_t and lab["eviction"] == "lru",
              f"{w}: transport/eviction label {lab['transport']}/{lab['eviction']} (want {want_t}/lru)")
        if a.transport == "auto":
            check(p["transport"] == "auto", f"{w}: protocol transport {p['transport']} (want the request, auto)")
        check(lab.get("prefetch") == ("next_layer" if a.prefetch else "off"), w + ": prefetch label")
        check(lab["device"] == r["device"]["name"], w + ": device label")
        check(lab["executor"] not in ("", "UNKNOWN"), w + ": no executor name")

        # Counts add up.
        check(run["requests"] == n_req, f"{w}: {run['requests']} requests, want {n_req}")
        check(run["tokens_generated"] == n_req * a.tokens,
              f"{w}: tokens generated {run['tokens_generated']} != prompts x blocks x tokens {n_req * a.tokens}")
        check(run["decode_tokens"] == n_req * (a.tokens - 1), w + ": decode tokens != sum(N - 1)")
        det = run["requests_detail"]
        check(len(det) == n_req, w + ": per-request records")
        check(all(d["tokens"] == a.tokens for d in det), w + ": a request generated the wrong number of tokens")
        check([d["prompt_tokens"] for d in det] == want_lens * a.blocks, w + ": prompt order is not the fixed one")
        check(all(0 < d["ttft_s"] <= d["response_s"] for d in det), w + ": TTFT must be > 0 and <= response")
        check(all(d["stats_read_s"] >= 0 for d in det), w + ": negative stats read time")
        check(close(run["stats_read_seconds_excluded"], sum(d["stats_read_s"] for d in det), 1e-6),
              w + ": excluded stats-read seconds")
        check(len(run["blocks"]) == a.blocks, w + ": per-block entries")
        check(sum(b["tokens_generated"] for b in run["blocks"]) == run["tokens_generated"], w + ": block tokens")

        # The rates follow from the per-request times by the definitions.
        resp = sum(d["response_s"] for d in det)
        dec = sum(d["response_s"] - d["ttft_s"] for d in det)
        check(close(run["response_seconds"], resp, 1e-6), w + ": response seconds")
        check(close(run["decode_seconds"], dec, 1e-6), w + ": decode seconds")
        check(close(run["overall_output_tok_s"], n_req * a.tokens / resp, 1e-6), w + ": overall output rate")
        if a.tokens > 1:
            check(close(run["pooled_decode_tok_s"], n_req * (a.tokens - 1) / dec, 1e-6), w + ": pooled decode rate")
        else:
            check(run["pooled_decode_tok_s"] is None, w + ": pooled decode must be null with N = 1")
        check(close(run["ttft_mean_s"], sum(d["ttft_s"] for d in det) / n_req, 1e-6), w + ": TTFT mean")
        check(close(run["response_mean_s"], resp / n_req, 1e-6), w + ": response mean")
        if a.tokens == 1:  # no decode step: no decode time, and nothing to spread
            check(run["decode_seconds"] == 0, w + ": decode seconds must be 0 with N = 1")
            check(run["block_spread"]["pooled_decode_tok_s"] is None, w + ": pooled spread must be null with N = 1")
            check(all(b["pooled_decode_tok_s"] is None for b in run["blocks"]), w + ": block rates null with N = 1")
        for key in ("pooled_decode_tok_s", "overall_output_tok_s") if a.tokens > 1 else ("overall_output_tok_s",):
            sp = run["block_spread"][key]
            need(sp, f"{w}.block_spread.{key}", ["min", "max", "relative_spread"])
            vals = [b[key] for b in run["blocks"]]
            if None not in vals:
                check(close(sp["min"], min(vals)) and close(sp["max"], max(vals)), f"{w}: {key} spread min/max")
                mean = sum(vals) / len(vals)
                check(close(sp["relative_spread"], (max(vals) - min(vals)) / mean if mean else 0, 1e-6),
                      f"{w}: {key} relative spread")

        # Cache observations.
        c = run["cache"]
        need(c, w + ".cache", ["measured", "measured_prefill", "measured_decode", "warmup", "initial_fill_bytes",
                               "misses_since_creation", "expert_d2h_bytes_since_creation", "stats_end"])
        m = c["measured"]
        # The phases split the window: each counter's prefill and decode parts add up to its delta.
        for k in ("hits", "misses", "h2d_bytes", "h2d_copies", "expert_d2h_bytes", "evictions", "publications",
                  "acquires"):
            check(c["measured_prefill"][k] + c["measured_decode"][k] == m[k], f"{w}: prefill + decode {k} != measured")
            check(c["measured_prefill"][k] >= 0 and c["measured_decode"][k] >= 0, f"{w}: negative phase {k}")
        # The miss path's counters split the same way (seconds are sums of doubles: up to rounding).
        check(c["measured_prefill"]["miss_transfer_bytes"] + c["measured_decode"]["miss_transfer_bytes"]
              == m["miss_transfer_bytes"], w + ": prefill + decode miss_transfer_bytes != measured")
        check(close(c["measured_prefill"]["miss_transfer_seconds"] + c["measured_decode"]["miss_transfer_seconds"],
                    m["miss_transfer_seconds"], 1e-9), w + ": prefill + decode miss_transfer_seconds != measured")
        if is_num(run["miss_path"]["bytes"]):
            check(m["miss_transfer_bytes"] == run["miss_path"]["bytes"], w + ": measured miss_transfer_bytes != miss path")
        need(m, w + ".cache.measured", ["hits", "misses", "h2d_bytes", "h2d_copies", "expert_d2h_bytes",
                                        "evictions", "publications", "acquires", "hit_rate"])
        check(m["hits"] + m["misses"] > 0, w + ": no expert acquired in the measured window")
        check(close(m["hit_rate"], m["hits"] / (m["hits"] + m["misses"])), w + ": hit rate")
        check(c["expert_d2h_bytes_since_creation"] == 0 and m["expert_d2h_bytes"] == 0, w + ": expert D2H is not 0")
        check(c["stats_end"].get("state") == "OK", w + ": cache not OK at the end")
        row = c["stats_end"]["row_bytes"]
        if res == experts:
            check(c["misses_since_creation"] == 0, f"{w}: full residency missed {c['misses_since_creation']} times")
            check(m["h2d_bytes"] == 0 and m["hit_rate"] == 1, w + ": full residency moved expert bytes")
            check(c["measured_decode"]["hit_rate"] == 1, w + ": full residency missed while decoding")
            check(c["initial_fill_bytes"] == row * experts * r["model"]["shape"]["layers"],
                  w + ": initial fill is not every expert of every layer")
        else:
            check(m["misses"] > 0, f"{w}: partial residency had no misses")
            if a.prefetch:
                # Prefetched experts are H2D copies too (a load may straddle the window's edges, so only
                # whole rows beyond the misses' are checked); a used one replaces a miss and evicts as
                # that miss would have.
                pf = run["prefetch"]
                extra = m["h2d_bytes"] - m["misses"] * row
                check(extra >= 0 and extra % row == 0, w + ": H2D bytes are not misses x row bytes + whole rows")
                check(m["evictions"] == m["misses"] + pf["hits"], w + ": evictions != misses + prefetch hits")
            else:
                check(m["h2d_bytes"] == m["misses"] * row, w + ": H2D bytes != misses x row bytes")
                check(m["evictions"] == m["misses"], w + ": every miss at a full cache evicts one expert")

        v = run["vram"]
        need(v, w + ".vram", ["peak_bytes", "scope", "method"])
        pk = v["peak_bytes"]
        if r["device"]["backend"] == "cpu":
            check(pk == "UNSUPPORTED", w + ": cpu VRAM peak must be UNSUPPORTED, not a number")
        else:
            check(pk in ("UNSUPPORTED", "UNKNOWN") or (isinstance(pk, (int, float)) and pk > 0), w + ": VRAM peak")
        check(isinstance(run["rss"]["peak_bytes"], (int, float)) and run["rss"]["peak_bytes"] > 0, w + ": RSS peak")
        check_miss_path(run, w, res == experts, a.h2d_ceiling)
        digests.add(run["generated_tokens_fnv1a64"])
    # Residency decides where experts live, never what is computed: the tokens must not change.
    check(len(digests) == 1, f"generated tokens differ between residencies: {sorted(digests)}")

    if errors:
        for e in errors:
            print("check_report: FAIL:", e, file=sys.stderr)
        return 1
    print(f"check_report: OK ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
