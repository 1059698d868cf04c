import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("no json:", e); sys.exit(0)
for r in j["runs"]:
    m = r["miss_path"]; s = r["staging"]; c = r["cache"]
    md = c.get("measured_decode", {}); mp = c.get("measured_prefill", {})
    frac = m.get("fraction_of_h2d_ceiling")
    print("decode %.1f tok/s ttft %.1f ms | miss %s GB/s (%s of %s) | staging %s GB/s | misses prefill %s decode %s | tokens %s"
          % (r["pooled_decode_tok_s"], r["ttft_mean_s"] * 1e3, m.get("gbps") and round(m["gbps"], 2),
             frac and "%.1f%%" % (frac * 100), m.get("h2d_ceiling_gbps") and round(m["h2d_ceiling_gbps"], 1),
             s.get("gbps") and round(s["gbps"], 2), mp.get("misses"), md.get("misses"), r["generated_tokens_fnv1a64"]))
    blobs = s.get("blobs")
    if isinstance(blobs, (int, float)) and blobs > 0 and isinstance(s.get("fill_span_seconds"), (int, float)):
        print("  per blob (%d): hand-out -> first piece %.1f us, copy %.1f us, last piece -> H2D enqueued %.1f us"
              % (blobs, s["fill_wait_seconds"] / blobs * 1e6, s["fill_span_seconds"] / blobs * 1e6,
                 s["fill_lag_seconds"] / blobs * 1e6))
