"""Fixtures: a tiny OLMoE artifact made with the built tools (hz-mkmodel, hz-pack).

The tools are found in the meson build directory given by --hz-build-root or $HZ_BUILD_ROOT
(tests/python/run.sh passes it)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import horizon

SOURCE_ROOT = Path(os.environ.get("HZ_SOURCE_ROOT") or Path(__file__).resolve().parents[3])


def pytest_addoption(parser):
    parser.addoption("--hz-build-root", default=os.environ.get("HZ_BUILD_ROOT"),
                     help="meson build directory holding tools/hz-mkmodel and tools/hz-pack")


@pytest.fixture(scope="session")
def build_root(pytestconfig) -> Path:
    root = pytestconfig.getoption("--hz-build-root")
    if not root:
        pytest.fail("set HZ_BUILD_ROOT (or --hz-build-root) to the meson build directory", pytrace=False)
    root = Path(root)
    for tool in ("hz-mkmodel", "hz-pack"):
        if not (root / "tools" / tool).is_file():
            pytest.fail(f"{root / 'tools' / tool} is missing: build first (ninja -C {root})", pytrace=False)
    return root


@pytest.fixture(scope="session")
def artifact(build_root, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("model")
    src, out = d / "src", d / "tiny.hzq"
    subprocess.run([str(build_root / "tools" / "hz-mkmodel"), "--arch", "olmoe", "--preset", "tiny",
                    "--seed", "1", str(src)], check=True, capture_output=True)
    subprocess.run([str(build_root / "tools" / "hz-pack"), str(src), str(out)], check=True,
                   capture_output=True)
    return out


@pytest.fixture
def model(artifact):
    with horizon.load(artifact, device="cpu") as m:
        yield m
