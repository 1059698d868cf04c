import json, sys
j = json.load(open(sys.argv[1]))
for r in j["runs"]:
    c = r["cache"]
    print("  round_blobs", r["miss_path"].get("round_blobs"))
    for ph in ("measured_prefill", "measured_decode"):
        x = c[ph]
        s = x.get("miss_transfer_seconds")
        print("  ", ph, x.get("misses"), "misses,", round(x["miss_transfer_bytes"] / s * 1e-9, 2) if s else None, "GB/s")
