"""Session.logits() as a memoryview and as a numpy array."""
from __future__ import annotations

import pytest

import horizon


def test_logits_memoryview(model):
    with model.session() as s:
        nxt = s.prefill([1, 2, 3])
        mv = s.logits()
        assert isinstance(mv, memoryview)
        assert mv.format == "f" and mv.itemsize == 4 and mv.ndim == 1
        assert mv.shape == (model.info.vocab_size,)
        vals = mv.tolist()
        assert vals.index(max(vals)) == nxt  # greedy sampling picks the arg-max


def test_logits_is_a_stable_copy(model):
    with model.session() as s:
        s.prefill([1])
        before = s.logits().tolist()
        s.decode(2)
        after = s.logits().tolist()
        assert before != after
        s.close()
        assert len(before) == model.info.vocab_size


def test_logits_numpy(model):
    np = pytest.importorskip("numpy")
    with model.session() as s:
        nxt = s.prefill([7, 8])
        a = s.logits_numpy()
        assert isinstance(a, np.ndarray)
        assert a.dtype == np.float32 and a.shape == (model.info.vocab_size,)
        assert int(a.argmax()) == nxt
        assert np.isfinite(a).all()
        assert np.array_equal(a, np.asarray(s.logits()))


def test_logits_before_any_token(model):
    with model.session() as s, pytest.raises(horizon.StateError) as e:
        s.logits()
    assert e.value.name == "HZ_ESTATE" and "no token" in e.value.message
