"""A NumPy stand-in for the few CuPy calls CudaRuntime and CudaBackend make.

It lets the CUDA runtime's host logic (uploads, poisoning, launch order, argument
types, snapshots, checksums) run on a machine without a GPU. Kernels are Python
functions registered by name; every launch is recorded. It checks the argument
types CuPy would accept, not CuPy's behaviour: the real thing runs in test_gpu.py.
"""

from __future__ import annotations

import types
from collections.abc import Callable

import numpy as np

uint8 = np.uint8
KERNELS: dict[str, Callable[..., None]] = {}  # name -> fn(grid, block, shared, *args)
LAUNCHES: list[tuple[str, tuple, tuple, int]] = []
# memsets and copies: (what, device pointer, bytes, kernel launches before it)
TRANSFERS: list[tuple[str, int, int, int]] = []
DEVICE_COUNT = 1
# None: every event pair reads 0.125 ms; a number: the pair reads that many ms per launch
# recorded between its two events (so repeated launches take proportionally longer)
LAUNCH_MS: float | None = None
# ms added to the next event pairs read, one each (a device waking up for its first timing)
EXTRA_MS: list[float] = []


_MEMORY: dict[int, np.ndarray] = {}  # fake device pointer -> the array behind it


class ndarray:  # CuPy's name
    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.data = types.SimpleNamespace(ptr=id(a))
        _MEMORY[id(a)] = a

    @property
    def nbytes(self) -> int:
        return self.a.nbytes

    @property
    def dtype(self) -> np.dtype:
        return self.a.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.a.shape

    def fill(self, v: object) -> None:
        self.a.fill(v)

    def reshape(self, *shape: int) -> ndarray:
        return ndarray(self.a.reshape(*shape))  # a view, as in CuPy

    def copy(self) -> ndarray:
        return ndarray(self.a.copy())

    def __getitem__(self, idx: object) -> ndarray:
        return ndarray(self.a[_np(idx)])

    def __setitem__(self, idx: object, value: object) -> None:
        self.a[_np(idx)] = _np(value)

    def set(self, a: np.ndarray, stream: object = None) -> None:
        """An upload from the host (CuPy's ndarray.set)."""
        self.a[...] = a

    def get(self, stream: object = None) -> np.ndarray:
        return self.a.copy()


def _np(x: object) -> object:
    return x.a if isinstance(x, ndarray) else x


def asarray(a: object, dtype: object = None) -> ndarray:
    return ndarray(np.array(_np(a), dtype=dtype, copy=True))


def empty(shape: tuple[int, ...] | int, dtype: object = np.float32) -> ndarray:
    return ndarray(np.empty(shape, dtype=dtype))


class _Kernel:
    def __init__(self, name: str) -> None:
        if name not in KERNELS:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        self.name = name
        self.max_dynamic_shared_size_bytes = 48 * 1024

    def __call__(self, grid: tuple, block: tuple, args: tuple, *, shared_mem: int = 0,
                 stream: object = None) -> None:
        assert isinstance(grid, tuple) and isinstance(block, tuple)
        for a in args:  # what CuPy's launcher accepts
            assert isinstance(a, ndarray | np.generic), f"bad kernel argument {a!r}"
        if shared_mem > self.max_dynamic_shared_size_bytes:
            raise RuntimeError("cudaErrorInvalidValue: too much dynamic shared memory")
        LAUNCHES.append((self.name, grid, block, shared_mem))
        KERNELS[self.name](grid, block, shared_mem,
                           *[a.a if isinstance(a, ndarray) else a for a in args])


class RawModule:
    def __init__(self, *, path: str) -> None:
        self.path = path

    def get_function(self, name: str) -> _Kernel:
        return _Kernel(name)


def _memset_async(ptr: int, value: int, size: int, stream: int) -> None:
    a = _MEMORY[ptr]
    assert size == a.nbytes and 0 <= value < 256 and isinstance(stream, int)
    a.view(np.uint8).fill(value)
    TRANSFERS.append(("memset", ptr, size, len(LAUNCHES)))


_PINNED: dict[int, bytearray] = {}


def _alloc_pinned_memory(size: int) -> types.SimpleNamespace:
    buf = bytearray(size)
    _PINNED[id(buf)] = buf
    return types.SimpleNamespace(ptr=id(buf), size=size)


def _memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    assert kind == 2 and isinstance(stream, int)  # device to host
    a, host = _MEMORY[src], _PINNED[dst]
    assert size <= a.nbytes and size <= len(host)
    host[:size] = a.view(np.uint8).reshape(-1)[:size].tobytes()
    TRANSFERS.append(("memcpy_d2h", src, size, len(LAUNCHES)))


class _Stream:
    ptr = 7

    def __init__(self, non_blocking: bool = False) -> None:
        pass

    def use(self) -> _Stream:
        return self

    def synchronize(self) -> None:
        pass


class _Event:
    at = 0

    def record(self, stream: object = None) -> None:
        self.at = len(LAUNCHES)

    def synchronize(self) -> None:
        pass


def _device_count() -> int:
    if isinstance(DEVICE_COUNT, Exception):
        raise DEVICE_COUNT
    return DEVICE_COUNT


PROPS = {"name": b"Fake H200", "major": 9, "minor": 0, "multiProcessorCount": 132,
         "l2CacheSize": 1 << 16, "totalGlobalMem": 1 << 30, "sharedMemPerBlockOptin": 232448}

cuda = types.SimpleNamespace(
    Device=lambda i=0: types.SimpleNamespace(use=lambda: None),
    Stream=_Stream,
    Event=_Event,
    get_elapsed_time=lambda a, b: (0.125 if LAUNCH_MS is None else LAUNCH_MS * (b.at - a.at))
    + (EXTRA_MS.pop(0) if EXTRA_MS else 0.0),
    runtime=types.SimpleNamespace(getDeviceCount=_device_count,
                                  getDeviceProperties=lambda i: dict(PROPS),
                                  memsetAsync=_memset_async, memcpyAsync=_memcpy_async,
                                  memcpyDeviceToHost=2),
    alloc_pinned_memory=_alloc_pinned_memory,
)
