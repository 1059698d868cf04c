# Metadata lives in pyproject.toml; setup.py exists only because cffi_modules is a setup() keyword.
from setuptools import setup

setup(cffi_modules=["horizon_build.py:make_ffi"])
