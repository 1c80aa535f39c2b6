"""Fixtures for the CUDA tests: the backend (needs nvcc) and a NumPy stand-in for CuPy."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from kernelcrew.tools.backends import cuda as cuda_mod
from tests.cuda.helpers import HERE


@pytest.fixture
def needs_nvcc() -> None:
    if cuda_mod.nvcc_path() is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or set KERNELCREW_NVCC)")


@pytest.fixture
def backend(needs_nvcc: None) -> cuda_mod.CudaBackend:
    return cuda_mod.CudaBackend()


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """tests/cuda/fake_cupy.py as `cupy`, fresh for each test; the device probe re-runs."""
    spec = importlib.util.spec_from_file_location("cupy", HERE / "fake_cupy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setitem(sys.modules, "cupy", mod)
    cuda_mod.probe_device.cache_clear()
    yield mod
    cuda_mod.probe_device.cache_clear()
