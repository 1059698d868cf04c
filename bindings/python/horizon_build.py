"""cffi build script for horizon-cffi (API mode, out of line).

Finds the installed libhorizon (HORIZON_PREFIX first, else pkg-config `horizon`), derives the cdef from
the installed header by running the C preprocessor over it, and compiles `horizon._horizon_cffi`
against that header and library.

Why the cdef comes from the preprocessor rather than a hand-written copy: the status codes are an
X-macro that cffi's parser cannot read, and a hand copy would be a second contract that can drift.
Preprocessing expands the X-macro into a plain enum; in API mode the C compiler then checks every
declaration, struct layout and constant against the very header the module is compiled with.

Environment:
  HORIZON_PREFIX   install prefix holding include/horizon/horizon.h and lib*/libhorizon.so
  PKG_CONFIG       the pkg-config program (default: pkg-config); PKG_CONFIG_PATH and
                   PKG_CONFIG_SYSROOT_DIR are honoured by it as usual
  HORIZON_RPATH    "0" to leave the library directory out of the extension's run path
  CC               the C compiler used for preprocessing (default: Python's, else cc)
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
from typing import List, Optional, Tuple

HEADER = os.path.join("horizon", "horizon.h")
LIBNAME = "libhorizon.so"

# Library directories the dynamic loader searches anyway: no run path is needed for them.
_SYSTEM_LIBDIRS = {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"}


class HorizonNotFound(RuntimeError):
    """libhorizon's header or shared library could not be located."""


def _multiarch() -> str:
    return sysconfig.get_config_var("MULTIARCH") or ""


def _lib_candidates(prefix: str) -> List[str]:
    dirs = []
    if _multiarch():
        dirs.append(os.path.join(prefix, "lib", _multiarch()))
    dirs += [os.path.join(prefix, "lib64"), os.path.join(prefix, "lib")]
    dirs += sorted(d for d in glob.glob(os.path.join(prefix, "lib", "*")) if os.path.isdir(d))
    return dirs


def _from_prefix(prefix: str) -> Tuple[str, str]:
    inc = os.path.join(prefix, "include")
    if not os.path.isfile(os.path.join(inc, HEADER)):
        raise HorizonNotFound(
            f"HORIZON_PREFIX={prefix}: {os.path.join(inc, HEADER)} does not exist "
            "(HORIZON_PREFIX must be the install prefix, e.g. /usr/local)")
    for d in _lib_candidates(prefix):
        if os.path.exists(os.path.join(d, LIBNAME)):
            return inc, d
    raise HorizonNotFound(
        f"HORIZON_PREFIX={prefix}: no {LIBNAME} in any of {', '.join(_lib_candidates(prefix)[:3])}")


def _pkg_config(*args: str) -> Optional[str]:
    exe = shutil.which(os.environ.get("PKG_CONFIG", "pkg-config"))
    if not exe:
        return None
    proc = subprocess.run([exe, *args, "horizon"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _from_pkg_config() -> Optional[Tuple[str, str]]:
    cflags = _pkg_config("--cflags-only-I")
    if cflags is None:
        return None
    libs = _pkg_config("--libs-only-L") or ""
    # pkg-config drops system directories (-I/usr/include) from --cflags; the variables still name
    # them. PKG_CONFIG_SYSROOT_DIR applies to flags but not to variables, so add it by hand.
    sysroot = os.environ.get("PKG_CONFIG_SYSROOT_DIR", "")
    incs = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    libdirs = [f[2:] for f in shlex.split(libs) if f.startswith("-L")]
    for var, out in (("includedir", incs), ("libdir", libdirs)):
        v = _pkg_config(f"--variable={var}")
        if v:
            out.append(sysroot + v if sysroot and not v.startswith(sysroot) else v)
    inc = next((d for d in incs if os.path.isfile(os.path.join(d, HEADER))), None)
    lib = next((d for d in libdirs if os.path.exists(os.path.join(d, LIBNAME))), None)
    if inc is None or lib is None:
        missing = HEADER if inc is None else LIBNAME
        raise HorizonNotFound(
            f"pkg-config found horizon.pc, but {missing} is not where it says "
            f"(include dirs {incs}, library dirs {libdirs}); is the install complete?")
    return inc, lib


def locate() -> Tuple[str, str]:
    """(include dir, library dir) of the installed libhorizon, or HorizonNotFound saying what to do."""
    prefix = os.environ.get("HORIZON_PREFIX")
    if prefix:
        return _from_prefix(prefix)
    found = _from_pkg_config()
    if found:
        return found
    raise HorizonNotFound(
        "horizon-cffi: cannot find libhorizon. Install it first (meson install -C BUILD), then either "
        "make `pkg-config horizon` work (PKG_CONFIG_PATH=<prefix>/lib/<arch>/pkgconfig) or set "
        "HORIZON_PREFIX to the install prefix (the directory holding include/horizon/horizon.h).")


def _compiler() -> List[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


# The one Python callback the package registers for hz_set_log_callback.
_EXTERN = 'extern "Python" void _hz_py_log(void *user, int level, const char *message);\n'


def header_cdef(header_path: str) -> str:
    """The header as cffi can parse it: includes dropped (cffi knows the stdint/stddef types), the
    preprocessor run (X-macro expanded, comments and the C++ guard gone), object-like HZ_ macros kept
    as `#define NAME ...` so the compiler supplies their values."""
    with open(header_path, encoding="utf-8") as f:
        text = f.read()
    body = re.sub(r"^\s*#\s*include\s*<[^>]*>.*$", "", text, flags=re.M)
    proc = subprocess.run([*_compiler(), "-E", "-P", "-x", "c", "-"], input=body, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"preprocessing {header_path} failed:\n{proc.stderr}")
    consts = []
    for m in re.finditer(r"^\s*#\s*define\s+(HZ_[A-Z0-9_]*[A-Z0-9])[ \t]+\S", text, flags=re.M):
        consts.append(f"#define {m.group(1)} ...")
    return proc.stdout + "\n" + "\n".join(consts) + "\n" + _EXTERN


def make_ffi():
    """The FFI builder; setup.py names this function in cffi_modules, so importing this script (the
    tests do, to check locate()) needs no installed library."""
    from cffi import FFI

    inc, libdir = locate()
    ffi = FFI()
    ffi.cdef(header_cdef(os.path.join(inc, HEADER)))
    rpath = []
    if os.environ.get("HORIZON_RPATH", "1") != "0" and os.path.realpath(libdir) not in _SYSTEM_LIBDIRS \
            and not os.path.realpath(libdir).startswith("/usr/lib/"):
        rpath = [libdir]
    ffi.set_source("horizon._horizon_cffi", "#include <horizon/horizon.h>\n", include_dirs=[inc],
                   library_dirs=[libdir], libraries=["horizon"], runtime_library_dirs=rpath)
    return ffi


if __name__ == "__main__":
    make_ffi().compile(verbose=True)
