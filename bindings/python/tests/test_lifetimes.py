"""Objects closed or garbage-collected in any order never crash and never leak an HZ_EBUSY."""
from __future__ import annotations

import gc
import itertools
import random

import pytest

import horizon


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
