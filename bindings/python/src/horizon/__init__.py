"""horizon: Python bindings for libhorizon (mixture-of-experts inference with a resident INT4 expert
cache). `horizon.raw` is the thin layer (cffi's ffi/lib); this module is the Pythonic one.

    import horizon
    with horizon.load("model.hzq", device="cpu") as model, model.session() as s:
        print(list(s.generate([1, 2, 3], max_tokens=8)))
"""
from ._api import (Backing, Cache, Device, Model, ModelInfo, Session, library_version, load,
                   set_log_callback, status_codes, status_name, strerror)
from .errors import (BusyError, CapacityError, ClosedError, DeviceError, FaultedError, FormatError,
                     HorizonError, IdentityError, InputOutputError, InvalidArgumentError,
                     OutOfMemoryError, RangeError, StateError, UnsupportedError)

__version__ = "0.1.0"

__all__ = [
    "Backing", "Cache", "Device", "Model", "ModelInfo", "Session", "load", "library_version",
    "set_log_callback", "status_codes", "status_name", "strerror",
    "HorizonError", "InvalidArgumentError", "OutOfMemoryError", "InputOutputError", "FormatError",
    "IdentityError", "UnsupportedError", "CapacityError", "BusyError", "FaultedError", "DeviceError",
    "RangeError", "StateError", "ClosedError",
]
