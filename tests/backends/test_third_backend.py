"""What adding a backend takes, shown on a third one (tests/backends/one_thread.py): a class
implementing the Backend contract, one line in REGISTRY and, for kernel files of its own,
one kernel format. Nothing else in the package names it, yet kernel files load as its own,
its flags and source rules apply, the baseline is found, it compiles through the package's
compile cache, and `check` runs it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.formats import FORMATS, format_of_name, register_format
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import REGISTRY, get_backend
from tests.backends.one_thread import FORMAT, OneThreadBackend

OP = "scale_shift_sum"


@pytest.fixture
def cpu1() -> Iterator[None]:
    """The two registration lines, undone after the test."""
    register_format(FORMAT)
    REGISTRY["cpu1"] = "tests.backends.one_thread:OneThreadBackend"
    try:
        yield
    finally:
        REGISTRY.pop("cpu1", None)
        FORMATS.pop("cpu1", None)


@pytest.fixture
def kernel(cpu1: None, tmp_path: Path) -> Path:
    """The op's CPU baseline saved as a kernel file of the new backend."""
    path = tmp_path / f"mine{FORMAT.suffix}"
    shutil.copy(load_op(OP).baseline_path("cpu"), path)
    return path


def test_the_new_backend_is_found_by_name_and_by_its_files(kernel: Path) -> None:
    be = get_backend("cpu1")
    assert isinstance(be, OneThreadBackend) and be.name == "cpu1"
    assert be.describe().startswith("cpu1 (1 thread")
    assert be.worker_env()["OMP_NUM_THREADS"] == "1"
    assert format_of_name(kernel).backend == "cpu1"  # the longest ending wins over .cpp
    assert format_of_name("other.cpp").backend == "cpu"
    kf = load_kernel(kernel)
    assert kf.backend == "cpu1" and kf.meta.entry
    spec = load_op(OP)
    assert spec.baseline_path("cpu1") == spec.baseline_path("cpu")  # it races the CPU's


def test_its_format_brings_the_flags_and_source_rules(kernel: Path) -> None:
    text = kernel.read_text()
    other = kernel.with_name(f"other{FORMAT.suffix}")
    with pytest.raises(PolicyViolation, match="not on the cpu1 allow-list"):
        load_kernel(_write(other, text.replace("flags: [", "flags: [-fplugin=x.so, ")))
    be = get_backend("cpu1")
    spec = load_op(OP)
    bad = load_kernel(_write(other, text.replace("#include", '#include "/etc/passwd"\n'
                                                  "#include", 1)))
    res = be.compile(bad, spec)
    assert not res.ok and "refused before compiling" in res.reason
    good = be.compile(load_kernel(kernel), spec)
    assert good.ok and good.artifact and Path(good.artifact).exists(), good.reason


def test_an_unknown_backend_or_ending_is_one_line_of_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown backend 'cpu1'"):
        get_backend("cpu1")
    odd = tmp_path / "k.cpu1.cpp"
    odd.write_text("/* kernelcrew\nentry: f\n*/\n")
    assert load_kernel(odd).backend == "cpu"  # without its format, .cpp is the CPU's
    with pytest.raises(InputError, match=r"unknown kernel file type '\.f90'"):
        load_kernel(_write(tmp_path / "k.f90", "x"))


def test_check_runs_a_kernel_through_the_new_backend(kernel: Path) -> None:
    from kernelcrew.tools.judge.check import check

    res = check(OP, kernel, "cpu1", seed=1)
    assert res.backend == "cpu1"
    assert res.correct and res.verdict in ("same", "faster", "slower"), res.reason
    assert all(r.status == "pass" for r in res.rows)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
