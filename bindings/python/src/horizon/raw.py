"""The thin layer: the compiled cffi module (`ffi`, `lib`: every function, struct, enum and constant of
horizon.h, under its C name) plus the helpers the Pythonic layer is built from. Use it for what the
Pythonic layer does not wrap (events, generation leases); ownership rules are the header's."""
from __future__ import annotations

import json
from typing import Any, Callable

from . import errors
from ._horizon_cffi import ffi, lib

__all__ = ["ffi", "lib", "check", "error", "take_string", "take_json", "text"]


def text(ptr: Any) -> str:
    """A library-owned C string as str ("" for NULL)."""
    return "" if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")


def error(status: int) -> errors.HorizonError:
    """The exception for a failed call's status, with the calling thread's last-error message. Call it
    right after the failing call: the message is overwritten by the next library call."""
    message = text(lib.hz_last_error_message())
    name = text(lib.hz_status_name(status))
    cls = errors.class_for(name)
    return cls(message, status=status, name=name, description=text(lib.hz_strerror(status)))


def check(status: int) -> None:
    """Raises the mapped HorizonError subclass when `status` is not HZ_OK."""
    if status != lib.HZ_OK:
        raise error(status)


def take_string(fn: Callable[..., int], *args: Any) -> str:
    """Calls fn(*args, char **out), returns the string and frees it with hz_free."""
    out = ffi.new("char **")
    check(fn(*args, out))
    try:
        return text(out[0])
    finally:
        lib.hz_free(out[0])


def take_json(fn: Callable[..., int], *args: Any) -> Any:
    """As take_string, parsed as JSON (the *_json calls)."""
    return json.loads(take_string(fn, *args))
