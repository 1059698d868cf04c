"""The Pythonic layer: Backing, Device, Cache, Model, Session.

Lifetimes. The C library requires parents to outlive children (a backing and a device outlive their
caches and models, a cache its models, a model its sessions) and refuses a destroy that would break this
with HZ_EBUSY. Python frees objects in an order it chooses (and in any order inside a reference cycle),
so each wrapper keeps strong references to its parents and counts its live children. close() ends the
caller's use of a handle; the native object is destroyed once it is closed and no child needs it, then
its parents are offered the same. Hence any close()/del/garbage-collection order is safe and close() is
idempotent. Using a closed handle raises ClosedError.

A child is counted on its parents before its C create call runs (the GIL is released during it), so a
close() of a parent from another thread meanwhile only marks the parent closed and defers its destroy;
the count is taken back if the create fails.
"""
from __future__ import annotations

import atexit
import operator
import os
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import errors
from .raw import check, error, ffi, lib, take_json, text

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# Guards the child counts: objects may be closed from several threads, and the garbage collector may
# finalize one while another is being closed on the same thread (hence re-entrant).
_lock = threading.RLock()


def _check_type(value: Any, cls: type, what: str) -> None:
    if not isinstance(value, cls):
        raise TypeError(f"{what} must be a horizon.{cls.__name__}, not {type(value).__name__}")


def _cstr(value: Any, what: str) -> bytes:
    """A str for the C library: UTF-8 without NUL (C would stop at the NUL and use a shorter name)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{what} contains a NUL character: {value!r}")
    return value.encode()


def _path(path: Any) -> bytes:
    b = os.fsencode(path)  # TypeError for what is not a path
    if b"\0" in b:
        raise ValueError(f"the path contains a NUL byte: {path!r}")
    return b


def _int(value: Any, what: str) -> int:
    """An int (or an integer type such as numpy's); a bool, float or str is refused with TypeError
    rather than converted."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return operator.index(value)


def _bool(value: Any, what: str) -> bool:
    """A bool; anything else (an int, None) is refused with TypeError rather than converted."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    return value


def _options(ctype: str) -> Any:
    """A new `ctype` struct (hz_cache_options, ...) filled with the library's defaults through
    hz_X_init_sized and this package's sizeof of it: the library writes only the bytes the struct has as
    this package was compiled, however large its own struct is."""
    opts = ffi.new(ctype + " *")
    getattr(lib, ctype + "_init_sized")(opts, ffi.sizeof(ctype))
    return opts


_UINT32_MAX = 2**32 - 1


def _placement(placement: Any) -> List[int]:
    """The expert ids of a placement: a flat, layer-major sequence of ints in uint32 range (TypeError for
    what is not an int, ValueError outside the range, as for the integer options)."""
    if isinstance(placement, (str, bytes, bytearray)):
        raise TypeError(f"placement must be a sequence of expert ids, not {type(placement).__name__}")
    ids = []
    for i, value in enumerate(placement):
        v = _int(value, f"placement[{i}] (a flat, layer-major list of expert ids)")
        if not 0 <= v <= _UINT32_MAX:
            raise ValueError(f"placement[{i}] = {v} does not fit its C type uint32_t")
        ids.append(v)
    return ids


def _set_int(opts: Any, field: str, value: Any) -> None:
    """Sets an integer option field: TypeError for what is not an int, ValueError outside its C type."""
    v = _int(value, field)
    try:
        setattr(opts, field, v)
    except OverflowError:
        ctype = dict(ffi.typeof(opts).item.fields)[field].type.cname
        raise ValueError(f"{field} = {v} does not fit its C type {ctype}") from None


class _Handle:
    """A native object plus the parent bookkeeping described in the module docstring."""

    _what = "object"
    # Bound here so finalizers run during interpreter shutdown still find them.
    _lib = lib
    _ffi = ffi
    _lock = _lock

    def __init__(self, parents: Sequence["_Handle"] = ()) -> None:
        self._ptr: Any = ffi.NULL
        self._parents: Tuple[_Handle, ...] = tuple(parents)
        self._children = 0
        self._closed = False
        self._freed = False
        self._reserved = False  # counted on the parents (from _reserve until released)
        for p in self._parents:
            p._raw()  # a closed parent cannot take new children

    def _reserve(self) -> Tuple[Any, ...]:
        """Counts this object, about to be created, as a child of each parent and returns the parents'
        native pointers; ClosedError (nothing counted) when a parent is closed. Called right before the C
        create: the GIL is released during it, and a parent closed by another thread meanwhile must
        defer its destroy (its count includes this create) rather than free what the create reads."""
        with self._lock:
            ptrs = tuple(p._raw() for p in self._parents)
            for p in self._parents:
                p._children += 1
            self._reserved = True
        return ptrs

    def _unreserve(self) -> None:
        """Takes back the counts of a create that failed; a parent closed meanwhile is released now."""
        with self._lock:
            if not self._reserved:
                return
            self._reserved = False
            self._release_parents()

    def _adopt(self, ptr: Any) -> None:
        """Stores the pointer a successful create returned (the parents were counted by _reserve)."""
        with self._lock:
            self._ptr = ptr

    def _create(self, create: Callable[..., int], out_type: str, *args: Any) -> Any:
        """Runs the C create `create(*parents' pointers, *args, out)` with the parents reserved (counts
        taken back if it fails or raises) and adopts the object it made; returns its pointer."""
        out = self._ffi.new(out_type)
        ptrs = self._reserve()
        try:
            check(create(*ptrs, *args, out))
        except BaseException:
            self._unreserve()
            raise
        self._adopt(out[0])
        return out[0]

    def _destroy(self, ptr: Any) -> int:
        raise NotImplementedError

    def _raw(self) -> Any:
        """The native pointer; ClosedError once close() was called."""
        if self._closed or self._ptr == self._ffi.NULL:
            raise errors.ClosedError(f"this {self._what} is closed", status=lib.HZ_ESTATE,
                                     name="HZ_ESTATE")
        return self._ptr

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Ends this handle. The native object is destroyed now, or when its last child is closed."""
        with self._lock:
            if self._closed:
                self._release("raise")  # retries a destroy that failed after this handle was closed
                return
            self._closed = True
            self._release("reopen")

    def _release(self, on_failure: str) -> None:
        """Destroys the native object once it is closed and childless. A destroy fails only when children
        made through the raw layer (leases, events), which the counts do not see, still live: the object is
        then kept rather than freed under them, and `on_failure` says how the caller hears of it: "reopen"
        (the close() that failed raises and leaves the handle open), "raise" (a repeated close() raises and
        the handle stays closed) or, for ancestors released by a destroy (the last child's close()), one
        ResourceWarning naming every object kept, issued after all of them were released or kept: the
        handles stay closed, and close() on them again retries."""
        kept: List[str] = []
        try:
            self._release_into(on_failure, kept)
        finally:
            _warn_kept(kept)

    def _release_into(self, on_failure: str, kept: List[str]) -> None:
        if self._freed or not self._closed or self._children:
            return
        ptr, self._ptr = self._ptr, self._ffi.NULL
        self._freed = True
        if ptr == self._ffi.NULL:
            # creation failed (its counts were taken back then) or never ran
            if self._reserved:
                self._reserved = False
                self._release_parents(kept)
            return
        st = self._destroy(ptr)
        if st != 0:
            self._ptr, self._freed = ptr, False
            err = error(st)
            if on_failure == "reopen":
                self._closed = False
                raise err
            if on_failure == "raise":
                raise err
            kept.append(f"the closed {self._what} is kept, not destroyed: {err}")
            return
        self._reserved = False
        self._release_parents(kept)

    def _release_parents(self, kept: Optional[List[str]] = None) -> None:
        """Drops this object's count on every parent, then releases the parents that this left closed and
        childless (and so on up). Nothing raises in between: an ancestor that cannot be destroyed is
        recorded in `kept` (None: warned about here, after all of them)."""
        if kept is None:
            collected: List[str] = []
            try:
                self._release_parents(collected)
            finally:
                _warn_kept(collected)
            return
        for p in self._parents:
            p._children -= 1
        for p in self._parents:
            p._release_into("warn", kept)

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_parents", None) is None:
            return  # __init__ did not get far
        try:
            self.close()
        except Exception:
            pass  # a finalizer must not raise; the object is kept instead of freed unsafely

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<horizon.{type(self).__name__} {state}>"


def _warn_kept(kept: List[str]) -> None:
    """One ResourceWarning for the objects a release had to keep (see _Handle._release)."""
    if kept:
        warnings.warn("horizon: " + "; ".join(kept) + "; close() them again once the raw-layer objects made "
                      "on them are gone", ResourceWarning, stacklevel=4)


class Backing(_Handle):
    """The immutable host backing of a .hzq artifact (hz_host_backing_open): validated and copied into
    process memory; the file is not read again."""

    _what = "backing"

    def __init__(self, path: PathLike, *, verify_checksums: bool = True) -> None:
        super().__init__()
        self.path = os.fsdecode(path)
        opts = _options("hz_backing_options")
        if not verify_checksums:
            opts.flags |= lib.HZ_BACKING_SKIP_CHECKSUMS
        self._create(lib.hz_host_backing_open, "hz_host_backing **", _path(path), opts)

    def _destroy(self, ptr: Any) -> int:
        return self._lib.hz_host_backing_close(ptr)

    @property
    def identity(self) -> str:
        """The whole-artifact identity (XXH3-128, 32 hex digits)."""
        return text(lib.hz_host_backing_identity(self._raw()))

    def describe(self) -> Dict[str, Any]:
        return take_json(lib.hz_host_backing_describe_json, self._raw())


class Device(_Handle):
    """A device by name: "cpu", "cuda:N" or "auto"."""

    _what = "device"

    def __init__(self, name: str = "auto") -> None:
        super().__init__()
        self._create(lib.hz_device_open, "hz_device **", _cstr(name, "the device name"))

    def _destroy(self, ptr: Any) -> int:
        return self._lib.hz_device_close(ptr)

    @property
    def name(self) -> str:
        """The canonical name ("cpu", "cuda:0")."""
        return text(lib.hz_device_name(self._raw()))

    def describe(self) -> Dict[str, Any]:
        return take_json(lib.hz_device_describe_json, self._raw())


# hz_transport by name (the header's HZ_TRANSPORT_* values, read through cffi).
TRANSPORTS = {
    "serial": lib.HZ_TRANSPORT_SERIAL,
    "threaded": lib.HZ_TRANSPORT_THREADED,
    "registered": lib.HZ_TRANSPORT_REGISTERED,
    "auto": lib.HZ_TRANSPORT_AUTO,
}

# hz_prefetch by name (HZ_PREFETCH_* values).
PREFETCH = {
    "off": lib.HZ_PREFETCH_OFF,
    "next_layer": lib.HZ_PREFETCH_NEXT_LAYER,
}


def _by_name(table: Dict[str, int], what: str, value: Union[int, str]) -> int:
    if isinstance(value, str):
        if value not in table:
            raise ValueError(f"unknown {what} {value!r}; known: {', '.join(table)}")
        return table[value]
    return value


class Cache(_Handle):
    """The generation cache of routed experts on a device (hz_cache_create). `capacity` is resident
    experts per layer (0 = all); `placement` an optional flat, layer-major list of layers x capacity
    expert ids (ints in uint32 range, distinct within a layer);
    `transport` a name of TRANSPORTS ("serial", "threaded", "registered", "auto") or an hz_transport
    value (the default 0 is serial; load() asks for "auto");
    `staging_threads` the threaded transport's copy threads (0 = 3/4 of the online CPUs, at most 12);
    `prefetch` a name of PREFETCH ("off", "next_layer") or an hz_prefetch value."""

    _what = "cache"

    def __init__(self, backing: Backing, device: Device, *, capacity: int = 0, spare_rows: int = 0,
                 staging_bytes: int = 0, eviction: int = 0, transport: Union[int, str] = 0,
                 placement: Optional[Sequence[int]] = None, staging_threads: int = 0,
                 prefetch: Union[int, str] = 0) -> None:
        _check_type(backing, Backing, "backing")
        _check_type(device, Device, "device")
        super().__init__((backing, device))
        self.backing, self.device = backing, device
        opts = _options("hz_cache_options")
        _set_int(opts, "capacity", capacity)
        _set_int(opts, "spare_rows", spare_rows)
        _set_int(opts, "staging_bytes", staging_bytes)
        _set_int(opts, "eviction", eviction)
        _set_int(opts, "transport", _by_name(TRANSPORTS, "transport", transport))
        _set_int(opts, "staging_threads", staging_threads)
        _set_int(opts, "prefetch", _by_name(PREFETCH, "prefetch", prefetch))
        keep = None
        if placement is not None:
            ids = _placement(placement)
            keep = ffi.new("uint32_t[]", ids)
            opts.initial_placement = keep
            opts.initial_placement_count = len(ids)
        self._create(lib.hz_cache_create, "hz_cache **", opts)
        del keep  # read during creation only

    def _destroy(self, ptr: Any) -> int:
        return self._lib.hz_cache_destroy(ptr)

    def stats(self) -> Dict[str, Any]:
        """Counters (hits, misses, h2d_bytes, expert_d2h_bytes, ...) as a dict."""
        return take_json(lib.hz_cache_stats_json, self._raw())

    def prefetch_wait(self) -> None:
        """Waits until the prefetch thread has nothing queued or loading (hz_cache_prefetch_wait), so that
        the next stats() holds every load's copies together with its miss-path and prefetch counters.
        Not while this thread holds a lease another thread's miss may wait for."""
        lib.hz_cache_prefetch_wait(self._raw())


@dataclass(frozen=True)
class ModelInfo:
    vocab_size: int
    hidden_size: int
    layers: int
    experts: int
    top_k: int
    max_context: int
    eos_token: Optional[int]
    bos_token: Optional[int]


class Model(_Handle):
    """A model on a device, serving routed experts through `cache` (hz_model_create). On a cuda device
    `lm_head_screen` (default True) keeps an INT8 copy of the lm_head rows there, through which greedy
    steps pick the same token faster (vocab x hidden bytes of device memory); False spends none."""

    _what = "model"

    def __init__(self, backing: Backing, device: Device, cache: Cache, *,
                 executor: Optional[str] = None, lm_head_screen: bool = True) -> None:
        _check_type(backing, Backing, "backing")
        screen = _bool(lm_head_screen, "lm_head_screen")
        _check_type(device, Device, "device")
        _check_type(cache, Cache, "cache")
        super().__init__((backing, device, cache))
        self.backing, self.device, self.cache = backing, device, cache
        self._owned: Tuple[_Handle, ...] = ()
        opts = _options("hz_model_options")
        name = ffi.new("char[]", _cstr(executor, "executor")) if executor is not None else ffi.NULL
        opts.executor = name
        opts.flags = 0 if screen else lib.HZ_MODEL_NO_LM_HEAD_SCREEN
        ptr = self._create(lib.hz_model_create, "hz_model **", opts)
        info = _options("hz_model_info")
        check(lib.hz_model_get_info(ptr, info))
        self.info = ModelInfo(info.vocab_size, info.hidden_size, info.layers, info.experts, info.top_k,
                              info.max_context, info.eos_token if info.eos_token >= 0 else None,
                              info.bos_token if info.bos_token >= 0 else None)

    def _destroy(self, ptr: Any) -> int:
        return self._lib.hz_model_destroy(ptr)

    def close(self) -> None:
        """Ends the model, and the parents horizon.load() made for it. Each of them is closed even when
        closing the model or another of them raises; the first exception is raised after all of them."""
        first: Optional[Exception] = None
        try:
            super().close()
        except Exception as e:
            first = e
        # Parents made by horizon.load() belong to the model; closing them is deferred until the
        # model's native object is gone, so the order here does not matter.
        for h in getattr(self, "_owned", ()):
            try:
                h.close()
            except Exception as e:
                if first is None:
                    first = e
        if first is not None:
            raise first

    def describe(self) -> Dict[str, Any]:
        """Architecture, config, executor and precision declaration as a dict."""
        return take_json(lib.hz_model_describe_json, self._raw())

    def session(self, *, max_context: int = 0) -> "Session":
        return Session(self, max_context=max_context)


def _token_list(tokens: Iterable[int]) -> List[int]:
    if isinstance(tokens, (str, bytes, bytearray)):
        raise TypeError(f"a prompt is a sequence of token ids, not {type(tokens).__name__}")
    return [_int(t, "a token id") for t in tokens]


def _tokens(tokens: Iterable[int]) -> Tuple[Any, int]:
    seq = _token_list(tokens)
    try:
        return ffi.new("int32_t[]", seq), len(seq)
    except OverflowError:
        bad = next(t for t in seq if not -2**31 <= t < 2**31)
        raise errors.RangeError(f"token {bad} does not fit an int32 token id", status=lib.HZ_ERANGE,
                                name="HZ_ERANGE") from None


class Session(_Handle):
    """A KV cache, a position and a sampler on a model (hz_session_create)."""

    _what = "session"

    def __init__(self, model: Model, *, max_context: int = 0) -> None:
        _check_type(model, Model, "model")
        super().__init__((model,))
        self.model = model
        opts = _options("hz_session_options")
        _set_int(opts, "max_context", max_context)
        self._create(lib.hz_session_create, "hz_session **", opts)
        self._max_context = int(opts.max_context) or model.info.max_context  # as hz_session_create
        self._next = ffi.new("int32_t *")

    def _destroy(self, ptr: Any) -> int:
        self._lib.hz_session_destroy(ptr)
        return 0

    @property
    def position(self) -> int:
        """Tokens already in the KV cache."""
        return int(lib.hz_session_position(self._raw()))

    def prefill(self, tokens: Iterable[int]) -> int:
        """Runs the prompt tokens; returns the sampled next token."""
        arr, n = _tokens(tokens)
        check(lib.hz_prefill(self._raw(), arr, n, self._next))
        return int(self._next[0])

    def decode(self, token: int) -> int:
        """Runs one token (hz_decode_step); returns the sampled next token."""
        arr, _ = _tokens((token,))
        check(lib.hz_decode_step(self._raw(), arr[0], self._next))
        return int(self._next[0])

    def generate(self, prompt: Iterable[int], max_tokens: int, *,
                 stop_at_eos: bool = False) -> Iterator[int]:
        """Prefills `prompt`, then yields up to `max_tokens` generated token ids, each fed back as the
        next input. With stop_at_eos the model's EOS token ends the stream (and is yielded). The
        arguments and the session are checked here, before the first token is asked for, even when
        max_tokens is 0 (which runs nothing): a closed session raises ClosedError, a negative max_tokens
        ValueError, an empty prompt InvalidArgumentError, a token outside the vocabulary or a prompt
        longer than the context left RangeError (all as prefill() would)."""
        n = _int(max_tokens, "max_tokens")
        if n < 0:
            raise ValueError(f"max_tokens must be 0 or more, not {n}")
        seq = _token_list(prompt)
        self._raw()
        if not seq:
            raise errors.InvalidArgumentError("generate: the prompt has no tokens", status=lib.HZ_EINVAL,
                                              name="HZ_EINVAL", description=strerror(lib.HZ_EINVAL))
        position = self.position  # the length first, as hz_prefill checks it
        if len(seq) > self._max_context - position:
            raise errors.RangeError(f"generate: {len(seq)} prompt token(s) at position {position} exceed the "
                                    f"session's max_context {self._max_context}", status=lib.HZ_ERANGE,
                                    name="HZ_ERANGE", description=strerror(lib.HZ_ERANGE))
        vocab = self.model.info.vocab_size
        for i, t in enumerate(seq):
            if not 0 <= t < vocab:
                raise errors.RangeError(f"generate: prompt token {i} of {len(seq)} is {t}, outside the "
                                        f"vocabulary [0, {vocab})", status=lib.HZ_ERANGE, name="HZ_ERANGE",
                                        description=strerror(lib.HZ_ERANGE))
        return self._generate(seq, n, stop_at_eos)

    def _generate(self, prompt: List[int], max_tokens: int, stop_at_eos: bool) -> Iterator[int]:
        if max_tokens == 0:
            return
        eos = self.model.info.eos_token if stop_at_eos else None
        token = self.prefill(prompt)
        for produced in range(1, max_tokens + 1):
            yield token
            if produced == max_tokens or (eos is not None and token == eos):
                return
            token = self.decode(token)

    def _logits(self) -> Tuple[Any, int]:
        ptr = ffi.new("float **")
        count = ffi.new("uint32_t *")
        check(lib.hz_session_logits(self._raw(), ptr, count))
        return ptr[0], int(count[0])

    def logits(self) -> memoryview:
        """The FP32 logits of the last token run, as a 1-D memoryview of format 'f' (vocab_size items).
        It is a copy: the library's buffer changes with the next call, the copy does not."""
        ptr, n = self._logits()
        return memoryview(bytearray(ffi.buffer(ptr, 4 * n))).cast("f")

    def logits_numpy(self) -> Any:
        """The logits as a numpy float32 array of shape (vocab_size,) (a copy). Needs numpy."""
        try:
            import numpy
        except ImportError as e:
            raise ImportError("Session.logits_numpy() needs numpy; use Session.logits() without it") from e
        return numpy.frombuffer(self.logits(), dtype=numpy.float32)

    def reset(self) -> None:
        """Back to position 0; the sampler restarts its seed."""
        check(lib.hz_session_reset(self._raw()))

    def set_sampler(self, *, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                    seed: int = 0) -> None:
        """temperature 0 = greedy (the default); top_k 0 and top_p 1 = off."""
        opts = _options("hz_sampler_options")
        opts.temperature = temperature
        _set_int(opts, "top_k", top_k)
        opts.top_p = top_p
        _set_int(opts, "seed", seed)
        check(lib.hz_session_set_sampler(self._raw(), opts))

    def stats(self) -> Dict[str, Any]:
        """Tokens prefilled and decoded and the seconds spent, as a dict."""
        return take_json(lib.hz_session_stats_json, self._raw())


def load(path: PathLike, *, device: str = "auto", capacity: int = 0, executor: Optional[str] = None,
         verify_checksums: bool = True, lm_head_screen: bool = True,
         transport: Union[int, str] = "auto") -> Model:
    """Opens an artifact on a device with a cache of `capacity` resident experts per layer (0 = all)
    and returns the Model; its backing, device and cache (model.backing, ...) close with it.
    `transport` is the cache's (Cache); "auto" registers the backing for direct copies where experts
    will miss, and falls back to the threaded transport where the host refuses the registration.
    The default device "auto" is cuda:0 when the library was built with CUDA and a GPU is present,
    else the cpu device."""
    _bool(lm_head_screen, "lm_head_screen")  # refused before anything is opened
    transport_id = _by_name(TRANSPORTS, "transport", transport)
    made: List[_Handle] = []
    try:
        b = Backing(path, verify_checksums=verify_checksums)
        made.append(b)
        d = Device(device)
        made.append(d)
        c = Cache(b, d, capacity=capacity, transport=transport_id)
        made.append(c)
        m = Model(b, d, c, executor=executor, lm_head_screen=lm_head_screen)
    except BaseException:
        for h in reversed(made):
            h.close()
        raise
    m._owned = (c, d, b)
    return m


# --- library-wide calls ---------------------------------------------------------------------------

def library_version() -> str:
    """The loaded library's version ("MAJOR.MINOR.PATCH")."""
    return text(lib.hz_version())


def strerror(status: int) -> str:
    return text(lib.hz_strerror(status))


def status_name(status: int) -> str:
    return text(lib.hz_status_name(status))


def status_codes() -> Dict[str, int]:
    """Every hz_status enumerator the bindings were compiled with, name -> value."""
    return {name: value for value, name in ffi.typeof("hz_status").elements.items()
            if not name.endswith("_")}


_log_fn: Optional[Callable[[int, str], None]] = None


@ffi.def_extern()
def _hz_py_log(user: Any, level: int, message: Any) -> None:
    fn = _log_fn
    if fn is not None:
        try:
            fn(int(level), text(message))
        except Exception as exc:  # it cannot travel back through C: reported as Python does unraisables
            err = sys.stderr
            if err is not None:
                try:
                    print("Exception ignored in the horizon log callback", repr(fn), file=err)
                    traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
                except Exception:
                    pass


def set_log_callback(fn: Optional[Callable[[int, str], None]], level: int = 1) -> None:
    """Routes the library's log lines at `level` or more severe (0 error .. 3 debug) to fn(level, text),
    which may be called from library threads; None silences the library (its default). Install it
    before creating objects (the library does not synchronise it with calls in flight). fn may run
    while the library holds an internal lock: it must not call into this package (record the line and
    act on it later), or that call may deadlock. `level` must be an int (TypeError otherwise) from 0 to 3
    (ValueError otherwise), also with fn None."""
    global _log_fn
    if fn is not None and not callable(fn):
        raise TypeError(f"the log callback must be callable or None, not {type(fn).__name__}")
    lv = _int(level, "level")
    if not lib.HZ_LOG_ERROR <= lv <= lib.HZ_LOG_DEBUG:
        raise ValueError(f"level must be {lib.HZ_LOG_ERROR} (errors) to {lib.HZ_LOG_DEBUG} (debug), not {lv}")
    _log_fn = fn
    if fn is None:
        lib.hz_set_log_callback(ffi.NULL, ffi.NULL, 0)
    else:
        lib.hz_set_log_callback(lib._hz_py_log, ffi.NULL, lv)


@atexit.register
def _silence_at_exit() -> None:
    # Library threads must not call into an interpreter that is shutting down.
    if _log_fn is not None:
        lib.hz_set_log_callback(ffi.NULL, ffi.NULL, 0)
