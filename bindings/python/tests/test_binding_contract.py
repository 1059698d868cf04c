"""The compiled bindings cover the whole exported ABI, and the status codes agree with the header.

The cdef is generated from the installed header by the preprocessor (see horizon_build.py), so these
checks guard the generation step itself: a symbol the preprocessing lost, or a code without a class."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import horizon
from horizon import errors
from horizon.raw import ffi, lib

from conftest import SOURCE_ROOT

HEADER = SOURCE_ROOT / "include" / "horizon" / "horizon.h"
SYMBOLS = SOURCE_ROOT / "tests" / "abi" / "exported-symbols.txt"


def header_status_codes():
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"X\((HZ_[A-Z]+),\s*(-?\d+),", HEADER.read_text())}


@pytest.mark.skipif(not SYMBOLS.is_file(), reason="source tree not available")
def test_every_exported_symbol_is_bound():
    names = [l.strip() for l in SYMBOLS.read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert names
    missing = [n for n in names if not hasattr(lib, n)]
    assert not missing


@pytest.mark.skipif(not HEADER.is_file(), reason="source tree not available")
def test_status_codes_match_header():
    assert horizon.status_codes() == header_status_codes()


def test_every_code_has_a_class():
    for name, value in horizon.status_codes().items():
        if value == 0:
            continue
        cls = errors.class_for(name)
        assert cls is not horizon.HorizonError, name
        assert cls.status == value and cls.name == name
        assert horizon.status_name(value) == name


def test_constants():
    assert lib.HZ_VERSION_NUMBER == lib.HZ_VERSION_MAJOR * 10000 + lib.HZ_VERSION_MINOR * 100 + \
        lib.HZ_VERSION_PATCH == lib.hz_version_number()
    assert lib.HZ_BACKING_SKIP_CHECKSUMS == 1
    assert ffi.sizeof("hz_cache_options") >= 40


def test_log_callback(artifact):
    lines = []
    horizon.set_log_callback(lambda level, text: lines.append((level, text)), level=3)
    try:
        with horizon.load(artifact, device="cpu") as m, m.session() as s:
            list(s.generate([1], max_tokens=2))
    finally:
        horizon.set_log_callback(None)
    assert all(isinstance(l, int) and isinstance(t, str) for l, t in lines)


# The build script is not installed; load it from the package source to check how it fails.
BUILD_SCRIPT_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture
def build_script(monkeypatch):
    if not (BUILD_SCRIPT_DIR / "horizon_build.py").is_file():
        pytest.skip("package source not available")
    monkeypatch.syspath_prepend(str(BUILD_SCRIPT_DIR))
    import horizon_build
    return horizon_build


def test_build_script_bad_prefix(build_script, monkeypatch, tmp_path):
    monkeypatch.setenv("HORIZON_PREFIX", str(tmp_path))
    with pytest.raises(build_script.HorizonNotFound, match="HORIZON_PREFIX"):
        build_script.locate()


def test_build_script_nothing_found(build_script, monkeypatch, tmp_path):
    monkeypatch.delenv("HORIZON_PREFIX", raising=False)
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path))
    monkeypatch.setenv("PKG_CONFIG_LIBDIR", str(tmp_path))  # hide system-wide .pc files too
    monkeypatch.delenv("PKG_CONFIG_SYSROOT_DIR", raising=False)
    with pytest.raises(build_script.HorizonNotFound) as e:
        build_script.locate()
    assert "pkg-config" in str(e.value) and "HORIZON_PREFIX" in str(e.value)


def test_build_script_cdef_parses(build_script):
    from cffi import FFI
    text = build_script.header_cdef(str(HEADER))
    assert "HZ_EFORMAT = -4" in text
    FFI().cdef(text)


# --- options structs: filled by hz_X_init_sized with this package's sizeof ------------------------------

OPTION_STRUCTS = ["hz_backing_options", "hz_cache_options", "hz_model_options", "hz_model_info",
                  "hz_session_options", "hz_sampler_options"]


def test_init_sized_writes_only_the_size_given():
    for ctype in OPTION_STRUCTS:
        size = ffi.sizeof(ctype)
        for given in (4, size // 2, size):
            buf = ffi.new("uint64_t[]", (size + 32) // 8)  # 8-byte aligned
            raw = ffi.cast("unsigned char *", buf)
            ffi.memmove(raw, b"\xa5" * (size + 32), size + 32)
            getattr(lib, ctype + "_init_sized")(ffi.cast(ctype + " *", buf), given)
            data = bytes(ffi.buffer(raw, size + 32))
            assert int.from_bytes(data[:4], sys.byteorder) == given, ctype
            assert data[given:] == b"\xa5" * (size + 32 - given), f"{ctype}: bytes past {given} written"
        buf = ffi.new(ctype + " *")
        buf.struct_size = 77
        getattr(lib, ctype + "_init_sized")(buf, 3)  # below the struct_size field: nothing
        assert buf.struct_size == 77


class _RecordingLib:
    """The package's `lib` with the options initialisers recorded."""

    def __init__(self, real):
        self._real, self.calls = real, []

    def __getattr__(self, name):
        fn = getattr(self._real, name)
        if not name.endswith(("_init", "_init_sized")):
            return fn

        def recorded(*args):
            self.calls.append((name, args[1:]))
            return fn(*args)
        return recorded


def test_options_are_filled_with_the_package_sizeof(artifact, monkeypatch):
    """The Pythonic layer fills every options struct through hz_X_init_sized with ffi.sizeof of the struct
    this package was compiled with, never through hz_X_init (the library's sizeof, which a newer library
    could make larger than the package's struct)."""
    from horizon import _api
    rec = _RecordingLib(_api.lib)
    monkeypatch.setattr(_api, "lib", rec)
    with horizon.load(artifact, device="cpu") as m, m.session() as s:
        s.set_sampler(top_k=2)
    names = {name for name, _ in rec.calls}
    assert names == {c + "_init_sized" for c in OPTION_STRUCTS}, names
    for name, rest in rec.calls:
        assert rest == (ffi.sizeof(name[:-len("_init_sized")]),), (name, rest)
