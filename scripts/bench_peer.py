#!/usr/bin/env python3
"""The peer of the performance contract: Hugging Face transformers generating on the same random-weight
shape as hz-bench, on the same GPU, in the same run (DESIGN.md section 6, doc/bench.md "The peer").

    bench_peer.py --checkpoint DIR --out PEER.json [--prompts 3] [--tokens 128] [--warmup 32]
                  [--variants default,batched_mm,grouped_mm,eager] [--artifact-identity HEX]

DIR is the BF16 checkpoint hz-mkmodel wrote (config.json + safetensors), the one hz-pack converted.
The model is loaded once in bfloat16 on cuda with attn_implementation="eager"; each experts
implementation in --variants is then timed ("default" = what from_pretrained picks with no
experts_implementation argument; the others are set with set_experts_implementation, or by loading
again when this transformers version cannot switch in place). Per variant: one warm-up generate (the
hz-bench warm-up prompt, --warmup new tokens), then the first --prompts prompts of hz-bench's prompt rule
(the same token ids), batch 1, greedy, --tokens new tokens each with EOS suppressed (min_new_tokens =
max_new_tokens and EOS in suppress_tokens: when EOS would win, the best other token is taken, as in
hz-bench). A streamer stamps the time of every token as generate hands it out, so the figures follow
hz-bench's definitions: TTFT = first token - start, pooled decode = sum(N - 1) / sum(last token - first
token), overall output = sum(N) / sum(last token - start).

Exit status 0 when at least one variant ran; 1 otherwise (each failure is recorded in the report).
"""
import argparse
import datetime
import gc
import json
import os
import socket
import sys
import time

PROMPT_SEED = 0x486F72697A6F6E31  # "Horizon1", tools/hz-bench.c
TOKEN_CLOCK = None  # the streamer class, made once transformers is imported
MASK64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def prompt_length(k):
    """hz-bench's rule: 16 + (j * 112) // 11, j = (5 k) mod 12."""
    return 16 + (((5 * k) % 12) * 112) // 11


def prompt_tokens(seed, length, vocab, eos):
    """hz-bench's rule: splitmix64 from seed, token = (x >> 32) mod vocab, redrawn while it is EOS."""
    out, s = [], seed & MASK64
    while len(out) < length:
        s, x = splitmix64(s)
        t = (x >> 32) % vocab
        if t != eos:
            out.append(t)
    return out


def read_config(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    eos = cfg.get("eos_token_id")
    eos_list = eos if isinstance(eos, list) else ([eos] if eos is not None else [])
    arch = cfg["model_type"]
    width = cfg.get("moe_intermediate_size") if arch == "qwen2_moe" else cfg.get("intermediate_size")
    shape = {"architecture": arch, "layers": cfg["num_hidden_layers"],
             "experts": cfg.get("num_experts", cfg.get("num_local_experts")), "top_k": cfg["num_experts_per_tok"],
             "hidden": cfg["hidden_size"], "expert_width": width,
             "shared_expert_width": cfg.get("shared_expert_intermediate_size", 0), "vocab": cfg["vocab_size"]}
    return cfg, eos_list, shape


def token_clock_class(transformers):
    """A generate() streamer that records when each batch of ids is handed out: first the prompt, then
    one entry per generated token (generate moves each token to the host before it calls put). It derives
    from transformers' BaseStreamer where that exists, in case generate checks the type."""
    try:
        from transformers.generation.streamers import BaseStreamer as base
    except ImportError:
        base = object

    class TokenClock(base):
        def __init__(self):
            self.stamps = []

        def put(self, value):
            self.stamps.append(time.perf_counter())

        def end(self):
            pass

    return TokenClock


def load(transformers, torch, ckpt, variant, device):
    kwargs = {"attn_implementation": "eager"}
    if variant != "default":
        kwargs["experts_implementation"] = variant
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16, **kwargs)
    except TypeError:  # transformers before 4.56 spells it torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=torch.bfloat16, **kwargs)
    return model.to(device).eval()


def experts_impl(model):
    return getattr(model.config, "_experts_implementation", None) or getattr(model.config, "experts_implementation",
                                                                              None)


def sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def generate_timed(torch, model, ids, n_new, eos_list, pad, device):
    """One request: returns (ttft_s, response_s, decode_s, tokens generated)."""
    clock = TOKEN_CLOCK()
    inp = torch.tensor([ids], device=device)
    kwargs = dict(max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False, num_beams=1,
                  attention_mask=torch.ones_like(inp), pad_token_id=pad, streamer=clock, use_cache=True)
    if eos_list:
        kwargs["suppress_tokens"] = list(eos_list)
    sync(torch, device)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(inp, **kwargs)
    sync(torch, device)
    n = out.shape[1] - len(ids)
    got = out[0, len(ids):].tolist()
    if n != n_new or any(t in eos_list for t in got):
        raise RuntimeError(f"generate returned {n} tokens (wanted {n_new}) or an EOS despite suppression")
    st = clock.stamps
    if len(st) != n_new + 1:
        raise RuntimeError(f"the streamer saw {len(st)} puts, expected prompt + {n_new} tokens")
    return st[1] - t0, st[-1] - t0, st[-1] - st[1], n


def run_variant(torch, model, prompts, warm, args, eos_list, pad):
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(args.device)
    generate_timed(torch, model, warm, args.warmup, eos_list, pad, args.device)
    reqs = []
    for k, ids in enumerate(prompts):
        ttft, resp, dec, n = generate_timed(torch, model, ids, args.tokens, eos_list, pad, args.device)
        reqs.append({"prompt": k, "prompt_tokens": len(ids), "tokens": n, "ttft_s": ttft, "response_s": resp,
                     "decode_s": dec})
        print(f"  prompt {k} ({len(ids)} tokens): TTFT {ttft * 1e3:.1f} ms, {n} tokens in {resp:.2f} s", flush=True)
    sum_n = sum(r["tokens"] for r in reqs)
    sum_dec = sum(r["decode_s"] for r in reqs)
    sum_resp = sum(r["response_s"] for r in reqs)
    return {"status": "ok", "experts_implementation_effective": experts_impl(model),
            "pooled_decode_tok_s": (sum_n - len(reqs)) / sum_dec if sum_dec > 0 else None,
            "overall_output_tok_s": sum_n / sum_resp, "ttft_mean_s": sum(r["ttft_s"] for r in reqs) / len(reqs),
            "response_mean_s": sum_resp / len(reqs),
            "peak_memory_bytes": torch.cuda.max_memory_allocated(args.device) if cuda else "UNSUPPORTED",
            "requests": reqs}


def device_info(torch, device):
    if not device.startswith("cuda"):
        return {"name": device, "uuid": "UNSUPPORTED"}
    i = torch.device(device).index or 0
    return {"name": torch.cuda.get_device_name(i),
            "uuid": str(getattr(torch.cuda.get_device_properties(i), "uuid", "UNKNOWN"))}


def switch_in_place(model, variant, default_impl):
    """Sets `variant` on the loaded model when this transformers version can; False when it cannot."""
    target = default_impl if variant == "default" else variant
    if model is None or not target or not hasattr(model, "set_experts_implementation"):
        return False
    try:
        model.set_experts_implementation(target)
        return True
    except Exception as e:  # an implementation this version or GPU cannot take: load it instead
        print(f"  set_experts_implementation({target!r}) failed ({e}); loading again", flush=True)
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=32)
    ap.add_argument("--variants", default="default,batched_mm,grouped_mm,eager")
    ap.add_argument("--artifact-identity", default=None, help="identity of the artifact packed from DIR")
    ap.add_argument("--device", default="cuda", help="torch device (cpu only to check this script)")
    a = ap.parse_args()
    if a.prompts < 1 or a.tokens < 2 or a.warmup < 1:
        sys.exit("bench_peer: --prompts >= 1, --tokens >= 2 and --warmup >= 1")
    import torch
    import transformers
    global TOKEN_CLOCK
    TOKEN_CLOCK = token_clock_class(transformers)

    cfg, eos_list, shape = read_config(a.checkpoint)
    vocab = shape["vocab"]
    eos = eos_list[0] if eos_list else -1
    pad = cfg.get("pad_token_id")
    pad = pad if isinstance(pad, int) else (eos if eos >= 0 else 0)
    prompts = [prompt_tokens(PROMPT_SEED + k, prompt_length(k), vocab, eos) for k in range(a.prompts)]
    warm = prompt_tokens(PROMPT_SEED - 1, 16, vocab, eos)
    variants = [v for v in a.variants.split(",") if v]
    if not variants or variants[0] != "default" and "default" in variants:
        variants = ["default"] + [v for v in variants if v != "default"]  # default first: it is restored by name

    report = {"tool": "hz-bench-peer", "schema": 1,
              "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "host": socket.gethostname(), "torch": torch.__version__, "transformers": transformers.__version__,
              "device": device_info(torch, a.device),
              "model": {"checkpoint": os.path.abspath(a.checkpoint), "shape": shape,
                        "artifact_identity": a.artifact_identity or "UNKNOWN"},
              "protocol": {"prompts": a.prompts, "prompt_lengths": [len(p) for p in prompts], "tokens": a.tokens,
                           "warmup_tokens": a.warmup, "warmup_prompt_length": len(warm), "batch": 1,
                           "sampling": "greedy", "eos_suppressed": "min_new_tokens = max_new_tokens, suppress_tokens",
                           "dtype": "bfloat16", "attn_implementation": "eager",
                           "prompt_rule": "hz-bench's (tools/hz-bench.c), first --prompts prompts",
                           "definitions": "ttft = first token - start; pooled_decode_tok_s = sum(N-1)/sum(last - "
                                          "first token); overall_output_tok_s = sum(N)/sum(last token - start)"},
              "variants": []}
    print(f"bench_peer: {shape}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{report['device']['name']}", flush=True)
    t = time.perf_counter()
    model = load(transformers, torch, a.checkpoint, "default", a.device)
    default_impl = experts_impl(model)
    report["load_seconds"] = time.perf_counter() - t
    print(f"bench_peer: loaded in {report['load_seconds']:.1f} s (default experts implementation: {default_impl})",
          flush=True)
    for i, v in enumerate(variants):
        entry = {"experts_implementation": v}
        try:
            how = "from_pretrained"
            if model is not None and i == 0 and v == "default":
                how = "from_pretrained (first load)"
            elif switch_in_place(model, v, default_impl):
                how = "set_experts_implementation"
            else:
                model = None  # the old weights leave the GPU before the new ones arrive
                gc.collect()
                if a.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                model = load(transformers, torch, a.checkpoint, v, a.device)
            entry["switched_by"] = how
            print(f"bench_peer: variant {v} ({how})", flush=True)
            entry.update(run_variant(torch, model, prompts, warm, a, eos_list, pad))
            print(f"bench_peer: {v}: pooled decode {entry['pooled_decode_tok_s']:.2f} tok/s, output "
                  f"{entry['overall_output_tok_s']:.2f} tok/s, TTFT {entry['ttft_mean_s'] * 1e3:.1f} ms", flush=True)
        except Exception as e:  # recorded, and the next variant still runs
            entry["status"] = f"failed: {type(e).__name__}: {str(e)[:300]}"
            print(f"bench_peer: {v}: {entry['status']}", flush=True)
        report["variants"].append(entry)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    ok = [v for v in report["variants"] if v.get("status") == "ok"]
    print(f"bench_peer: {len(ok)} of {len(variants)} variants ran; report {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
