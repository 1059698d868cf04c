"""Open, generate, stats and describe through the Pythonic layer."""
from __future__ import annotations

import json
import subprocess

import pytest

import horizon


def test_versions():
    assert horizon.library_version() == "0.1.0"
    assert horizon.__version__ == horizon.library_version()


def test_open_layers(artifact):
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d, \
            horizon.Cache(b, d, capacity=4) as c, horizon.Model(b, d, c) as m, m.session() as s:
        assert len(b.identity) == 32
        assert d.name == "cpu"
        assert m.info.experts == 8 and m.info.top_k == 2 and m.info.layers == 2
        assert s.position == 0
        assert b.describe()["identity"] == b.identity


@pytest.mark.parametrize("transport", ["serial", "threaded", "registered"])
def test_cache_transports(artifact, transport):
    """Every transport serves misses with the same tokens; the stats name it."""
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d, \
            horizon.Cache(b, d, capacity=2, transport=transport, staging_threads=2) as c, \
            horizon.Model(b, d, c) as m, m.session() as s:
        tokens = list(s.generate([1, 2, 3], max_tokens=6))
        stats = c.stats()
        assert stats["transport"] == transport
        assert stats["expert_d2h_bytes"] == 0
        if transport == "registered":
            assert stats["staging_high_water"] == 0 and stats["staging_copy_bytes"] == 0
        else:
            assert stats["staging_copy_bytes"] == stats["h2d_bytes"]
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d, \
            horizon.Cache(b, d, capacity=2) as c, horizon.Model(b, d, c) as m, m.session() as s:
        assert list(s.generate([1, 2, 3], max_tokens=6)) == tokens
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d:
        with pytest.raises(ValueError):
            horizon.Cache(b, d, transport="bogus")


def test_transport_auto(artifact):
    """load() asks for the auto transport: registered where experts miss, threaded at full residency;
    the stats name both the choice and the request; the tokens are those of the serial transport."""
    with horizon.load(artifact, device="cpu", capacity=2) as m, m.session() as s:
        tokens = list(s.generate([1, 2, 3], max_tokens=6))
        stats = m.cache.stats()
        assert stats["transport"] == "registered" and stats["transport_requested"] == "auto"
    with horizon.load(artifact, device="cpu") as m:
        stats = m.cache.stats()
        assert stats["transport"] == "threaded" and stats["transport_requested"] == "auto"
    with horizon.load(artifact, device="cpu", capacity=2, transport="serial") as m, m.session() as s:
        assert m.cache.stats()["transport_requested"] == "serial"
        assert list(s.generate([1, 2, 3], max_tokens=6)) == tokens
    with pytest.raises(ValueError):
        horizon.load(artifact, device="cpu", transport="fast")


@pytest.mark.parametrize("transport", ["serial", "registered"])
def test_cache_prefetch(artifact, transport):
    """Speculative next-layer prefetch: the same tokens as without it, its counters in the stats."""
    tokens = {}
    for prefetch in ("off", "next_layer"):
        with horizon.Backing(artifact) as b, horizon.Device("cpu") as d, \
                horizon.Cache(b, d, capacity=2, transport=transport, prefetch=prefetch) as c, \
                horizon.Model(b, d, c) as m, m.session() as s:
            tokens[prefetch] = list(s.generate([1, 2, 3], max_tokens=8))
            c.prefetch_wait()  # settled: nothing queued or loading, every finished load counted
            stats = c.stats()
            assert stats["prefetch_pending"] == 0
            wasted_rows = stats["prefetch_wasted_bytes"] // stats["row_bytes"]
            assert stats["prefetch_experts"] == stats["prefetch_hits"] + wasted_rows + stats["prefetch_ready"]
            assert stats["prefetch"] == prefetch
            if prefetch == "off":
                assert stats["prefetch_requests"] == 0
            else:
                assert stats["prefetch_requests"] > 0
                assert stats["prefetch_failures"] == 0
            assert stats["miss_transfer_bytes"] >= 0 and stats["expert_d2h_bytes"] == 0
    assert tokens["off"] == tokens["next_layer"]
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d:
        with pytest.raises(ValueError):
            horizon.Cache(b, d, prefetch="bogus")
        with pytest.raises(horizon.UnsupportedError):
            horizon.Cache(b, d, prefetch=5)


def test_generate_is_greedy_and_repeatable(model):
    with model.session() as s:
        first = list(s.generate([1, 2, 3], max_tokens=8))
        assert len(first) == 8 and all(0 <= t < model.info.vocab_size for t in first)
        assert s.position == 3 + 7  # the last generated token is not fed back
        s.reset()
        assert list(s.generate([1, 2, 3], max_tokens=8)) == first


def test_generate_matches_c_reference(model, artifact, build_root):
    """The bindings and examples/decode.c (the reference C integration) produce the same tokens."""
    decode = build_root / "examples" / "decode"
    if not decode.is_file():
        pytest.skip("examples/decode not built")
    out = subprocess.run([str(decode), str(artifact), "--device", "cpu", "--prompt", "5,6,7",
                          "--tokens", "6", "--json"], check=True, capture_output=True, text=True)
    expected = json.loads(out.stdout.strip().splitlines()[-1])["tokens"]
    with model.session() as s:
        assert list(s.generate([5, 6, 7], max_tokens=6)) == expected


def test_generate_edges(model):
    with model.session() as s:
        assert list(s.generate([1], max_tokens=0)) == []
        assert s.position == 0
        assert len(list(s.generate([1], max_tokens=1))) == 1
        assert s.position == 1


def test_prefill_decode_steps(model):
    with model.session(max_context=16) as s:
        nxt = s.prefill([4, 5])
        nxt2 = s.decode(nxt)
        assert s.position == 3 and isinstance(nxt2, int)


def test_sampler(model):
    with model.session() as s:
        s.set_sampler(temperature=0.8, top_k=20, top_p=0.9, seed=42)
        a = list(s.generate([1, 2], max_tokens=6))
        s.reset()
        assert list(s.generate([1, 2], max_tokens=6)) == a  # the seed restarts on reset


def test_stats(model):
    with model.session() as s:
        list(s.generate([1, 2, 3], max_tokens=4))
        st = s.stats()
        assert st["tokens_prefilled"] == 3 and st["tokens_decoded"] == 3 and st["position"] == 6
    cs = model.cache.stats()
    assert cs["state"] == "OK"
    assert cs["hits"] > 0
    assert cs["expert_d2h_bytes"] == 0 and cs["backing_writes"] == 0


def test_partial_residency_misses(artifact):
    with horizon.load(artifact, device="cpu", capacity=2) as m, m.session() as s:
        list(s.generate(range(10), max_tokens=4))
        cs = m.cache.stats()
        assert cs["capacity"] == 2 and cs["misses"] > 0 and cs["publications"] > 1


def test_describe(model):
    d = model.describe()
    assert d["architecture"] == "olmoe"
    assert d["executor"] == "reference"
    assert d["precision"]["routed"]["dtype"] == "int4"
    assert d["config"]["experts"] == model.info.experts
    dev = model.device.describe()
    assert isinstance(dev, dict) and dev


def test_quickstart_example_runs(artifact, build_root):
    """examples/python/quickstart.py, the notebook-style tour, runs top to bottom."""
    import os
    import sys

    from conftest import SOURCE_ROOT
    script = SOURCE_ROOT / "examples" / "python" / "quickstart.py"
    if not script.is_file():
        pytest.skip("source tree not available")
    out = subprocess.run([sys.executable, str(script), str(artifact)], check=True, capture_output=True,
                         text=True, env={**os.environ, "HZ_BUILD_ROOT": str(build_root)})
    assert "expert_d2h_bytes': 0" in out.stdout and "RangeError HZ_ERANGE" in out.stdout
