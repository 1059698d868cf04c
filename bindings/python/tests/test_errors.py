"""Failures raise the exception mapped from the status code, carrying the library's message."""
from __future__ import annotations

import pytest

import horizon
from horizon.raw import lib


def corrupt(src, dst, offset, value=None):
    data = bytearray(src.read_bytes())
    data[offset] = (data[offset] ^ 0xFF) if value is None else value
    dst.write_bytes(bytes(data))
    return dst


def test_bad_path(tmp_path):
    path = tmp_path / "no-such-model.hzq"
    with pytest.raises(horizon.InputOutputError) as e:
        horizon.Backing(path)
    err = e.value
    assert err.status == lib.HZ_EIO == -3 and err.name == "HZ_EIO"
    assert str(path) in err.message  # the library names the file
    assert err.message in str(err) and "HZ_EIO" in str(err)
    assert isinstance(err, horizon.HorizonError) and isinstance(err, OSError)


def test_corrupt_blob_is_identity_error(artifact, tmp_path):
    size = artifact.stat().st_size
    bad = corrupt(artifact, tmp_path / "blob.hzq", size - 5000)  # inside the last data blob
    with pytest.raises(horizon.IdentityError) as e:
        horizon.Backing(bad)
    assert e.value.name == "HZ_EIDENTITY" and e.value.message


def test_corrupt_header_is_format_error(artifact, tmp_path):
    bad = corrupt(artifact, tmp_path / "magic.hzq", 0)
    with pytest.raises(horizon.FormatError) as e:
        horizon.Backing(bad)
    assert e.value.status == lib.HZ_EFORMAT and e.value.message


def test_truncated_artifact(artifact, tmp_path):
    bad = tmp_path / "short.hzq"
    bad.write_bytes(artifact.read_bytes()[:4096 + 100])
    with pytest.raises((horizon.FormatError, horizon.InputOutputError)) as e:
        horizon.Backing(bad)
    assert e.value.message


def test_out_of_range_token(model):
    v = model.info.vocab_size
    with model.session() as s:
        with pytest.raises(horizon.RangeError) as e:
            s.prefill([1, v])
        assert e.value.name == "HZ_ERANGE" and "vocabulary" in e.value.message and str(v) in e.value.message
        with pytest.raises(horizon.RangeError):
            s.decode(-1)
        with pytest.raises(horizon.RangeError):
            s.decode(2**40)  # does not even fit the C type
        assert s.position == 0  # nothing ran
        with pytest.raises(ValueError):  # RangeError is also a ValueError
            s.prefill([v + 10])


def test_context_overflow(model):
    with model.session(max_context=4) as s:
        with pytest.raises(horizon.RangeError) as e:
            s.prefill([1, 2, 3, 4, 5])
        assert "max_context" in e.value.message
    with pytest.raises(horizon.RangeError):
        model.session(max_context=model.info.max_context + 1)


def test_empty_prompt(model):
    with model.session() as s, pytest.raises(horizon.InvalidArgumentError):
        s.prefill([])


def test_unknown_device():
    with pytest.raises(horizon.InvalidArgumentError) as e:
        horizon.Device("tpu:7")
    assert "tpu:7" in e.value.message


def test_cache_capacity(artifact):
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d:
        with pytest.raises(horizon.CapacityError) as e:
            horizon.Cache(b, d, capacity=1000)
        assert e.value.message
        with pytest.raises(horizon.UnsupportedError) as e:
            horizon.Cache(b, d, eviction=7)
        assert "eviction" in e.value.message
        with pytest.raises(horizon.UnsupportedError):
            horizon.Cache(b, d, transport=4)


def test_unknown_executor(artifact):
    with pytest.raises(horizon.UnsupportedError) as e:
        horizon.load(artifact, device="cpu", executor="grouped")
    assert "grouped" in e.value.message


def test_cuda_matches_cpu(artifact):
    """Without a GPU (or CUDA in the build) opening cuda:0 fails cleanly with the library's message;
    with one, the GPU path generates the same greedy tokens as the CPU reference."""
    try:
        dev = horizon.Device("cuda:0")
    except (horizon.UnsupportedError, horizon.DeviceError) as e:
        assert e.message
        return
    dev.close()
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    with horizon.load(artifact, device="cpu") as m, m.session() as s:
        cpu = list(s.generate(prompt, max_tokens=12))
    with horizon.load(artifact, device="cuda:0") as m, m.session() as s:
        gpu = list(s.generate(prompt, max_tokens=12))
    assert gpu == cpu


def test_status_helpers():
    assert horizon.status_name(-4) == "HZ_EFORMAT"
    assert horizon.strerror(0) == "success"
    assert horizon.status_name(-999) == "HZ_UNKNOWN"
    from horizon.raw import check, error
    check(0)
    err = error(-999)  # a code newer than the bindings still raises the base class
    assert type(err) is horizon.HorizonError and err.status == -999
