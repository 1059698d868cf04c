"""Objects closed or garbage-collected in any order (and from several threads) never crash and never leak
an HZ_EBUSY."""
from __future__ import annotations

import gc
import itertools
import random
import threading
import warnings

import pytest

import horizon
from horizon import _api
from horizon.raw import ffi, lib


def make_chain(artifact, capacity=0):
    b = horizon.Backing(artifact, verify_checksums=False)
    d = horizon.Device("cpu")
    c = horizon.Cache(b, d, capacity=capacity)
    m = horizon.Model(b, d, c)
    s = m.session(max_context=8)
    return [b, d, c, m, s]


def test_close_in_every_order(artifact):
    for order in itertools.permutations(range(5)):
        objs = make_chain(artifact)
        for i in order:
            objs[i].close()
        assert all(o.closed for o in objs)
        assert all(o._freed for o in objs), order


def test_close_is_idempotent(artifact):
    objs = make_chain(artifact)
    for o in reversed(objs):
        o.close()
        o.close()
    for o in objs:
        o.close()


def test_children_keep_working_after_parents_close(artifact):
    b, d, c, m, s = make_chain(artifact)
    for o in (b, d, c, m):
        o.close()
    assert not any(o._freed for o in (b, d, c, m))  # deferred: the session still needs them
    assert len(list(s.generate([1, 2], max_tokens=3))) == 3
    s.close()
    assert all(o._freed for o in (b, d, c, m))


def test_closed_handle_raises(artifact):
    b, d, c, m, s = make_chain(artifact)
    s.close()
    with pytest.raises(horizon.ClosedError):
        s.prefill([1])
    m.close()
    with pytest.raises(horizon.ClosedError):
        m.describe()
    with pytest.raises(horizon.ClosedError):
        m.session()  # a closed parent takes no new children
    c.close()
    with pytest.raises(horizon.ClosedError):
        c.stats()
    d.close()
    b.close()
    with pytest.raises(horizon.ClosedError):
        b.identity


def test_del_in_random_orders(artifact):
    rng = random.Random(7)
    for _ in range(30):
        objs = make_chain(artifact, capacity=rng.choice([0, 2]))
        rng.shuffle(objs)
        while objs:
            objs.pop()  # drop the last reference; children keep their parents alive
            if rng.random() < 0.3:
                gc.collect()
    gc.collect()


def test_reference_cycles(artifact):
    """Inside a cycle the collector finalizes in an arbitrary order."""
    for _ in range(10):
        objs = make_chain(artifact)
        for o in objs:
            o.cycle = objs
        del objs, o
        gc.collect()


def test_session_outlives_everything_but_itself(artifact):
    def session_only():
        return make_chain(artifact)[-1]

    s = session_only()
    gc.collect()
    assert list(s.generate([3], max_tokens=2))
    del s
    gc.collect()


def test_load_owns_parents(artifact):
    m = horizon.load(artifact, device="cpu")
    s = m.session()
    parents = (m.backing, m.device, m.cache)
    m.close()
    assert not any(p._freed for p in parents)
    list(s.generate([1], max_tokens=2))
    s.close()
    assert m._freed and all(p._freed and p.closed for p in parents)


def test_failed_create_leaves_parents_usable(artifact):
    with horizon.Backing(artifact) as b, horizon.Device("cpu") as d:
        with pytest.raises(horizon.CapacityError):
            horizon.Cache(b, d, capacity=99)
        gc.collect()
        with horizon.Cache(b, d) as c:
            assert c.stats()["state"] == "OK"
    assert b._freed and d._freed


# --- a parent closed while a child's create runs; releases that cannot destroy an ancestor -------------

class _LibProxy:
    """Stands in for the package's `lib` with some functions replaced (cffi's lib cannot be patched)."""

    def __init__(self, real, **replaced):
        self._real, self._replaced = real, replaced

    def __getattr__(self, name):
        return self._replaced[name] if name in self._replaced else getattr(self._real, name)


def _held_create(monkeypatch, name):
    """Replaces lib.<name> with one that signals `entered` and waits for `go` before the real call; with
    `abort` set it raises instead of calling the library (whose parent the test saw destroyed)."""
    real = _api.lib
    entered, go, abort = threading.Event(), threading.Event(), threading.Event()

    def held(*args):
        entered.set()
        assert go.wait(30)
        if abort.is_set():
            raise RuntimeError(f"a parent was destroyed under {name}: not calling it")
        return getattr(real, name)(*args)

    monkeypatch.setattr(_api, "lib", _LibProxy(real, **{name: held}))
    return entered, go, abort


def _in_thread(fn):
    result = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # reported to the test thread
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, result


def test_parent_closed_while_a_create_runs_is_deferred(artifact, monkeypatch):
    """The GIL is released inside hz_cache_create. A close() of its backing from another thread meanwhile
    (here while the call is held at its start) must only mark the backing closed and defer the destroy
    to the cache's close, never free it under the create."""
    entered, go, abort = _held_create(monkeypatch, "hz_cache_create")
    b, d = horizon.Backing(artifact, verify_checksums=False), horizon.Device("cpu")
    t, result = _in_thread(lambda: horizon.Cache(b, d))
    assert entered.wait(30)
    b.close()
    destroyed = b._freed
    if destroyed:
        abort.set()  # do not let the create read a freed backing
    go.set()
    t.join(30)
    assert not destroyed, "close() destroyed the backing while hz_cache_create was running on it"
    assert b.closed and "error" not in result, result
    c = result["value"]
    assert c.stats()["state"] == "OK"  # the cache works on the closed (deferred) backing
    with pytest.raises(horizon.ClosedError):
        horizon.Cache(b, d)  # a closed parent takes no new children
    c.close()
    assert c._freed and b._freed and b._children == 0
    d.close()
    assert d._freed


def test_parent_closed_while_a_create_fails_is_released_by_the_failure(artifact, monkeypatch):
    entered, go, abort = _held_create(monkeypatch, "hz_cache_create")
    b, d = horizon.Backing(artifact, verify_checksums=False), horizon.Device("cpu")
    t, result = _in_thread(lambda: horizon.Cache(b, d, capacity=99))  # more than the experts
    assert entered.wait(30)
    d.close()
    destroyed = d._freed
    if destroyed:
        abort.set()
    go.set()
    t.join(30)
    assert not destroyed, "close() destroyed the device while hz_cache_create was running on it"
    assert isinstance(result.get("error"), horizon.CapacityError), result
    assert d._freed and d._children == 0  # the failed create took its count back and released it
    assert b._children == 0 and not b.closed
    b.close()
    assert b._freed


def test_kept_ancestor_with_warnings_as_errors_releases_the_others(artifact):
    """A raw-layer cache on the backing keeps it from being destroyed when the Python cache, its last
    counted child, closes. With warnings as errors the ResourceWarning saying so must come after every
    parent was released: the device, closed as well, is destroyed, and no count stays up."""
    b, d, d2 = horizon.Backing(artifact), horizon.Device("cpu"), horizon.Device("cpu")
    raw = ffi.new("hz_cache **")
    assert lib.hz_cache_create(b._raw(), d2._raw(), ffi.NULL, raw) == 0
    c = horizon.Cache(b, d)
    b.close()
    d.close()
    assert not b._freed and not d._freed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ResourceWarning, match="backing is kept"):
            c.close()
    assert c._freed
    assert d._freed and d._children == 0, "the device was left counted (leaked) by the warning"
    assert b.closed and not b._freed and b._children == 0
    lib.hz_cache_destroy(raw[0])
    b.close()  # retries the destroy
    assert b._freed
    d2.close()


def test_deferred_model_release_with_warnings_as_errors(artifact):
    """The same through horizon.load(): the session's close releases the model and then its owned
    parents; the backing cannot go (a raw-layer cache), everything else must."""
    m = horizon.load(artifact, device="cpu")
    b, d, c = m.backing, m.device, m.cache
    d2 = horizon.Device("cpu")
    raw = ffi.new("hz_cache **")
    assert lib.hz_cache_create(b._raw(), d2._raw(), ffi.NULL, raw) == 0
    s = m.session()
    m.close()
    assert all(o.closed and not o._freed for o in (m, c, d, b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ResourceWarning, match="backing is kept"):
            s.close()
    assert s._freed and m._freed and c._freed and d._freed
    assert not b._freed and b._children == 0
    lib.hz_cache_destroy(raw[0])
    b.close()
    assert b._freed
    d2.close()


def test_model_close_closes_every_owned_parent_even_when_one_raises(artifact):
    """horizon.load()'s model closes its cache, device and backing; a raw-layer event keeps the device
    (its close() raises BusyError and leaves it open), which must not stop the backing's close."""
    m = horizon.load(artifact, device="cpu")
    b, d, c = m.backing, m.device, m.cache
    ev = ffi.new("hz_event **")
    assert lib.hz_event_create(d._raw(), ev) == 0
    with pytest.raises(horizon.BusyError):
        m.close()
    assert m._freed and c._freed
    assert b.closed, "the backing was not closed after the device's close() raised"
    assert b._freed
    assert not d.closed and not d._freed
    lib.hz_event_destroy(ev[0])
    d.close()
    assert d._freed
