"""What the bindings refuse before anything reaches the library, and how failures travel: token ids
that are not ints, NUL characters in names, wrong handle types, out-of-range option values, generate()'s
arguments, the log callback, pickled exceptions, and a deferred destroy that cannot happen yet."""
from __future__ import annotations

import gc
import pickle
import warnings

import pytest

import horizon
from horizon.raw import ffi, lib


def test_token_ids_must_be_ints(model):
    with model.session() as s:
        for bad in ([1.7], ["5"], [True], [None]):
            with pytest.raises(TypeError, match="token id must be an int"):
                s.prefill(bad)
        for bad in ("123", b"ab", bytearray(b"a")):
            with pytest.raises(TypeError, match="sequence of token ids"):
                s.prefill(bad)
        for bad in (1.9, "7", True):
            with pytest.raises(TypeError, match="token id must be an int"):
                s.decode(bad)
        assert s.position == 0  # nothing ran
        s.prefill(range(1, 3))  # any iterable of ints
        assert s.position == 2


def test_numpy_integers_are_token_ids(model):
    np = pytest.importorskip("numpy")
    with model.session() as s, model.session() as t:
        assert s.prefill(np.array([1, 2, 3], dtype=np.int64)) == t.prefill([1, 2, 3])
        assert s.decode(np.int32(4)) == t.decode(4)
        with pytest.raises(TypeError):
            s.prefill(np.array([1.5, 2.5]))


def test_nul_characters_are_refused(artifact):
    with pytest.raises(ValueError, match="NUL"):
        horizon.Backing(str(artifact) + "\0-not-this-file")
    with pytest.raises(ValueError, match="NUL"):
        horizon.Device("cpu\0gpu")
    with pytest.raises(ValueError, match="NUL"):
        horizon.load(artifact, device="cpu", executor="reference\0x")
    with pytest.raises(TypeError):
        horizon.Device(None)


def test_wrong_handle_types_and_values(artifact):
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d:
        with pytest.raises(TypeError, match="backing must be a horizon.Backing"):
            horizon.Cache(None, d)
        with pytest.raises(TypeError, match="device must be a horizon.Device"):
            horizon.Cache(b, "cpu")
        with pytest.raises(ValueError, match="capacity = -1 does not fit"):
            horizon.Cache(b, d, capacity=-1)
        with pytest.raises(TypeError, match="capacity must be an int"):
            horizon.Cache(b, d, capacity=2.0)
        with horizon.Cache(b, d) as c:
            with pytest.raises(TypeError, match="cache must be a horizon.Cache"):
                horizon.Model(b, d, b)
            with horizon.Model(b, d, c) as m:
                with pytest.raises(ValueError, match="max_context = -5"):
                    m.session(max_context=-5)
                with pytest.raises(TypeError, match="model must be a horizon.Model"):
                    horizon.Session(c)
                with m.session() as s:
                    with pytest.raises(ValueError, match="top_k = -1"):
                        s.set_sampler(top_k=-1)
                    with pytest.raises(ValueError, match="seed = -1"):
                        s.set_sampler(seed=-1)
    gc.collect()


def test_another_handle_of_the_same_device_is_named_so(artifact):
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d, horizon.Device("cpu") as d2, \
            horizon.Cache(b, d) as c:
        with pytest.raises(horizon.InvalidArgumentError, match="another handle of device cpu"):
            horizon.Model(b, d2, c)


def test_generate_checks_its_arguments_when_called(model):
    s = model.session()
    with pytest.raises(ValueError, match="max_tokens must be 0 or more"):
        s.generate([1], -1)
    with pytest.raises(TypeError):
        s.generate([1], 2.0)
    with pytest.raises(TypeError):
        s.generate("12", 2)
    assert list(s.generate([1], 0)) == [] and s.position == 0
    s.close()
    with pytest.raises(horizon.ClosedError):
        s.generate([1], 0)


def test_log_callback_must_be_callable_and_its_exceptions_are_shown(capfd):
    with pytest.raises(TypeError, match="callable"):
        horizon.set_log_callback(5, level=3)

    def boom(level, text):
        raise RuntimeError("raised inside the callback")

    horizon.set_log_callback(boom, level=3)
    try:
        # the cpu device logs almost nothing: call the C trampoline the library would call
        lib._hz_py_log(ffi.NULL, 1, ffi.new("char[]", b"a warning"))
    finally:
        horizon.set_log_callback(None)
    err = capfd.readouterr().err
    assert "Exception ignored in the horizon log callback" in err
    assert "RuntimeError: raised inside the callback" in err


def test_exceptions_pickle_intact(tmp_path):
    with pytest.raises(horizon.InputOutputError) as info:
        horizon.Backing(tmp_path / "missing.hzq")
    e = info.value
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e)
    assert (back.status, back.name, back.message, back.description) == (e.status, e.name, e.message,
                                                                        e.description)
    assert str(back) == str(e)
    closed = horizon.ClosedError("this model is closed", status=lib.HZ_ESTATE, name="HZ_ESTATE")
    assert str(pickle.loads(pickle.dumps(closed))) == str(closed)


def test_deferred_destroy_that_cannot_happen_keeps_the_handle_closed(artifact):
    """A raw-layer event on a device is invisible to the child counts: the device, closed while its
    cache lives, cannot be destroyed when the cache closes. It stays closed (not reopened), says so with
    a ResourceWarning, and close() destroys it once the event is gone."""
    b, d = horizon.Backing(artifact), horizon.Device("cpu")
    c = horizon.Cache(b, d)
    ev = ffi.new("hz_event **")
    assert lib.hz_event_create(d._raw(), ev) == 0
    d.close()
    assert d.closed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c.close()
    assert d.closed and not d._freed
    assert any(issubclass(w.category, ResourceWarning) and "HZ_EBUSY" in str(w.message) for w in caught)
    with pytest.raises(horizon.BusyError):
        d.close()  # the event still lives
    assert d.closed
    lib.hz_event_destroy(ev[0])
    d.close()
    assert d._freed
    b.close()


def test_placement_is_checked_like_the_integer_options(artifact):
    """Each expert id of `placement` is an int in uint32 range: TypeError for what is not an int (a bool,
    a float, a nested list), ValueError outside the range, as for capacity and the other options."""
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d:
        layers = b.describe()["config"]["num_hidden_layers"]
        good = [0, 1] * layers
        for i, bad in ((0, -1), (1, 2**32), (0, -2**70)):
            p = list(good)
            p[i] = bad
            with pytest.raises(ValueError, match=rf"placement\[{i}\] = {bad} does not fit its C type uint32_t"):
                horizon.Cache(b, d, capacity=2, placement=p)
        for i, bad in ((1, True), (0, 1.0), (0, "1"), (0, None)):
            p = list(good)
            p[i] = bad
            with pytest.raises(TypeError, match=rf"placement\[{i}\].* must be an int, not {type(bad).__name__}"):
                horizon.Cache(b, d, capacity=2, placement=p)
        with pytest.raises(TypeError, match=r"placement\[0\].*flat, layer-major.* not list"):
            horizon.Cache(b, d, capacity=2, placement=[[0, 1]] * layers)
        with pytest.raises(TypeError, match="sequence of expert ids"):
            horizon.Cache(b, d, capacity=2, placement="01" * layers)
        with horizon.Cache(b, d, capacity=2, placement=good) as c:
            assert c.stats()["state"] == "OK"
        np = pytest.importorskip("numpy")
        with horizon.Cache(b, d, capacity=2, placement=np.array(good, dtype=np.int64)) as c:
            assert c.stats()["state"] == "OK"
    gc.collect()


def test_generate_checks_the_prompt_when_called(model):
    """An empty prompt, a token outside the vocabulary or a prompt longer than the context left fail at
    the generate() call, as prefill() would fail, not at the first next()."""
    vocab = model.info.vocab_size
    with model.session(max_context=8) as s:
        with pytest.raises(horizon.InvalidArgumentError, match="no tokens"):
            s.generate([], 3)
        with pytest.raises(horizon.InvalidArgumentError, match="no tokens"):
            s.generate(iter(()), 0)  # checked even when nothing would run
        for prompt in ([1, vocab], [-1], [2**40]):
            with pytest.raises(horizon.RangeError, match="outside the vocabulary"):
                s.generate(prompt, 2)
        with pytest.raises(horizon.RangeError, match="max_context 8"):
            s.generate([1] * 9, 1)
        assert s.position == 0  # nothing ran
        # what prefill() itself refuses is refused the same way
        with pytest.raises(horizon.RangeError):
            s.prefill([vocab])
        with pytest.raises(horizon.InvalidArgumentError):
            s.prefill([])
        assert len(list(s.generate([1] * 8, 1))) == 1  # exactly the context: fine
        with pytest.raises(horizon.RangeError, match="at position 8 exceed"):
            s.generate([1], 1)


def test_log_level_is_checked():
    def fn(level, text):
        pass

    try:
        for bad in (-1, 4, 2**40):
            with pytest.raises(ValueError, match="level must be 0 .* to 3"):
                horizon.set_log_callback(fn, level=bad)
            with pytest.raises(ValueError, match="level must be"):
                horizon.set_log_callback(None, level=bad)
        for bad in (True, 1.0, "1", None):
            with pytest.raises(TypeError, match="level must be an int"):
                horizon.set_log_callback(fn, level=bad)
        for good in range(4):
            horizon.set_log_callback(fn, level=good)
    finally:
        horizon.set_log_callback(None)


def test_lm_head_screen_option(artifact):
    # a bool only; on the cpu it changes nothing (the screen exists on cuda devices), so both models
    # decode the same tokens with the same logits
    with pytest.raises(TypeError, match="lm_head_screen must be a bool"):
        horizon.load(artifact, device="cpu", lm_head_screen=1)
    with pytest.raises(TypeError, match="lm_head_screen must be a bool"):
        horizon.load(artifact, device="cpu", lm_head_screen=None)
    with pytest.raises(TypeError, match="lm_head_screen must be a bool"):  # checked before the file is opened
        horizon.load(str(artifact) + ".missing", device="cpu", lm_head_screen="no")
    runs = []
    for screen in (True, False):
        with horizon.load(artifact, device="cpu", lm_head_screen=screen) as m, m.session() as s:
            assert m.describe()["lm_head_screen"] == {"requested": screen, "built": None}
            tokens = list(s.generate([1, 2, 3], 6))
            runs.append((tokens, list(s.logits())))
    assert runs[0] == runs[1]
