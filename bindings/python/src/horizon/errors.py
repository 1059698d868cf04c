"""Exceptions mapped from libhorizon's status codes.

Every failing call raises a subclass of HorizonError chosen by the status code; the exception carries
the code (`.status`), its enumerator name (`.name`) and the library's thread-local detail message
(`.message`, from hz_last_error_message, read right after the failing call on the same thread).
"""
from __future__ import annotations

from typing import Dict, Optional, Type


class HorizonError(Exception):
    """A libhorizon call failed. `status` is the negative hz_status code, `name` its enumerator name
    (e.g. "HZ_EFORMAT"), `message` the library's detail (which file, offset, tensor, expert)."""

    status: int = 0
    name: str = "HZ_UNKNOWN"

    def __init__(self, message: str = "", *, status: Optional[int] = None, name: Optional[str] = None,
                 description: str = ""):
        if status is not None:
            self.status = status
        if name is not None:
            self.name = name
        self.message = message
        self.description = description  # hz_strerror's fixed sentence
        text = f"{self.name}"
        if description:
            text += f" ({description})"
        if message:
            text += f": {message}"
        super().__init__(text)

    def __reduce__(self):
        # Rebuilt from its fields, so that pickling (multiprocessing, concurrent.futures) keeps the
        # status, name, description and message as they were.
        return (_rebuild, (type(self), self.message, self.status, self.name, self.description))


def _rebuild(cls: Type["HorizonError"], message: str, status: int, name: str,
             description: str) -> "HorizonError":
    return cls(message, status=status, name=name, description=description)


# One class per code. Where a builtin exception means the same thing it is a second base, so callers
# may catch either (e.g. `except ValueError`).
class InvalidArgumentError(HorizonError, ValueError):
    status, name = -1, "HZ_EINVAL"


class OutOfMemoryError(HorizonError, MemoryError):
    status, name = -2, "HZ_ENOMEM"


class InputOutputError(HorizonError, OSError):
    status, name = -3, "HZ_EIO"

    # OSError's constructor reinterprets (errno, strerror) argument pairs; keep HorizonError's.
    def __init__(self, message: str = "", **kw):
        HorizonError.__init__(self, message, **kw)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.name


class FormatError(HorizonError):
    status, name = -4, "HZ_EFORMAT"


class IdentityError(HorizonError):
    status, name = -5, "HZ_EIDENTITY"


class UnsupportedError(HorizonError, NotImplementedError):
    status, name = -6, "HZ_EUNSUPPORTED"


class CapacityError(HorizonError):
    status, name = -7, "HZ_ECAPACITY"


class BusyError(HorizonError):
    status, name = -8, "HZ_EBUSY"


class FaultedError(HorizonError):
    status, name = -9, "HZ_EFAULTED"


class DeviceError(HorizonError):
    status, name = -10, "HZ_EDEVICE"


class RangeError(HorizonError, ValueError):
    status, name = -11, "HZ_ERANGE"


class StateError(HorizonError):
    status, name = -12, "HZ_ESTATE"


class ClosedError(StateError):
    """The Python handle was closed; raised by the bindings, not by the library."""


_BY_NAME: Dict[str, Type[HorizonError]] = {
    cls.name: cls
    for cls in (InvalidArgumentError, OutOfMemoryError, InputOutputError, FormatError, IdentityError,
                UnsupportedError, CapacityError, BusyError, FaultedError, DeviceError, RangeError,
                StateError)
}


def class_for(name: str) -> Type[HorizonError]:
    """The exception class for an enumerator name; HorizonError itself for codes added to the library
    after these bindings were written."""
    return _BY_NAME.get(name, HorizonError)
