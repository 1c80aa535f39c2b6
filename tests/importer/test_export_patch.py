"""Bring your own kernel, both ends: import a function from a C file, optimize it with the
crew, export the best kernel as a patch, apply it with `patch -p1` to a copy of the
original file, compile that file as C, and check that the patched function computes what
the best kernel computes. Real compilers, the real CLI; nothing scripted."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.kernels.importer.patch import make_patch
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from tests.conftest import kernelcrew

SOURCES = Path(__file__).resolve().parent / "sources"
ROWNORM = SOURCES / "rownorm.c"


def _kernel_to_export(res: dict, run: Path) -> Path:
    """The run's best kernel when its code changed; when nothing beat the baseline beyond
    the noise (a loaded machine) or only flags did, the last candidate whose code changed
    and that was correct on every group: the patch path is the same."""
    base = load_kernel(run / "baseline.cpp").body
    if load_kernel(res["best"]["path"]).body != base:
        return Path(res["best"]["path"])
    events = [json.loads(ln) for ln in (run / "trace.jsonl").read_text().splitlines()]
    ok = [Path(e["refs"]["kernel"]) for e in events if e["node"] == "verify" and e.get("correct")]
    ok = [k for k in ok if load_kernel(k).body != base]
    assert ok, "no candidate of the run changed the code and was correct"
    return ok[-1]


@pytest.mark.slow
def test_import_optimize_export_patch_apply_compile_same_results(tmp_path):
    op = tmp_path / "project_rows"
    p = kernelcrew("import", str(ROWNORM), "--function", "project_rows",
                   "--shape", "out=rows,cols", "--shape", "inp=rows,inner",
                   "--shape", "w=inner,cols", "--case", "rows=96,inner=160,cols=128",
                   "--outputs", "out", "--out", str(op), timeout=120)
    assert p.returncode == 0, p.stderr

    run = tmp_path / "run"
    p = kernelcrew("optimize", str(op), "--max-iters", "2", "--no-memory", "--reps", "5",
                   "--json", "--run-dir", str(run), timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["best"]["correct"] is True

    kernel = _kernel_to_export(res, run)
    kf = load_kernel(kernel)
    patch_file = tmp_path / "project_rows.patch"
    args = ["export", str(run), "--patch", "--out", str(patch_file), "--json"]
    if kernel != Path(res["best"]["path"]):
        args += ["--kernel", str(kernel)]
    p = kernelcrew(*args, timeout=120)
    assert p.returncode == 0, p.stderr
    exp = json.loads(p.stdout)
    assert exp["file"].endswith("rownorm.c") and "project_rows" in exp["changed"]
    text = patch_file.read_text()
    assert f"--- a/{exp['file']}" in text and f"+++ b/{exp['file']}" in text

    # apply it to a copy of the original, laid out as under the repository root
    tree = tmp_path / "tree"
    copy = tree / exp["file"]
    copy.parent.mkdir(parents=True)
    shutil.copyfile(ROWNORM, copy)
    (copy.parent / "project_config.h").write_text("/* the project's own header */\n")
    r = subprocess.run(["patch", "-p1", "-i", str(patch_file)], cwd=tree, capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    patched = copy.read_text()
    assert patched != ROWNORM.read_text()
    # only project_rows changed: the rest of the file is as it was
    assert "int main(void)" in patched and "static void print_row" in patched

    # the patched file compiles as C with the flags the export names
    lib = tmp_path / "patched.so"
    r = subprocess.run(["gcc", "-std=gnu11", *exp["flags"], "-shared", "-fPIC", str(copy),
                        "-o", str(lib)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    kernel_lib = tmp_path / "kernel.so"
    r = subprocess.run(["g++", "-std=c++17", *kf.meta.flags, *kf.defines, "-shared", "-fPIC",
                        "-x", "c++", str(kernel), "-o", str(kernel_lib)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr

    rows, inner, cols = 37, 53, 29
    rng = np.random.default_rng(3)
    a = rng.standard_normal((rows, inner)).astype(np.float32)
    w = rng.standard_normal((inner, cols)).astype(np.float32)
    got = np.full((rows, cols), np.nan, np.float32)
    want = np.full((rows, cols), np.nan, np.float32)
    ptr = ctypes.c_void_p
    fn = ctypes.CDLL(str(lib)).project_rows
    fn.argtypes = [ptr, ptr, ptr, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn(got.ctypes.data, a.ctypes.data, w.ctypes.data, rows, inner, cols)
    entry = getattr(ctypes.CDLL(str(kernel_lib)), kf.meta.entry)
    entry.argtypes = [ptr, ptr, ptr, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    entry(a.ctypes.data, w.ctypes.data, want.ctypes.data, rows, inner, cols)
    assert not np.isnan(want).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def _build_and_compare(tmp_path: Path, patched_c: Path, flags: list[str], kernel_text: str):
    """project_rows from the patched C file and from the kernel file, on the same inputs."""
    lib = tmp_path / "patched.so"
    r = subprocess.run(["gcc", "-std=gnu11", *flags, "-shared", "-fPIC", str(patched_c), "-o",
                        str(lib)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    kf_path = tmp_path / "kernel.cpp"
    kf_path.write_text(kernel_text)
    kf = load_kernel(kf_path)
    klib = tmp_path / "kernel.so"
    r = subprocess.run(["g++", "-std=c++17", *kf.meta.flags, *kf.defines, "-shared", "-fPIC",
                        str(kf_path), "-o", str(klib)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    rows, inner, cols = 64, 33, 40
    rng = np.random.default_rng(11)
    a = rng.standard_normal((rows, inner)).astype(np.float32)
    w = rng.standard_normal((inner, cols)).astype(np.float32)
    got, want = (np.full((rows, cols), np.nan, np.float32) for _ in range(2))
    ptr = ctypes.c_void_p
    fn = ctypes.CDLL(str(lib)).project_rows
    fn.argtypes = [ptr, ptr, ptr, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn(got.ctypes.data, a.ctypes.data, w.ctypes.data, rows, inner, cols)
    entry = getattr(ctypes.CDLL(str(klib)), kf.meta.entry)
    entry.argtypes = [ptr, ptr, ptr, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    entry(a.ctypes.data, w.ctypes.data, want.ctypes.data, rows, inner, cols)
    np.testing.assert_array_equal(got, want)


def test_a_transformed_kernel_with_a_knob_block_goes_back_into_the_file(tmp_path):
    """The crew's OpenMP transform (a knob guarded by #ifndef, a threshold branch, pragmas)
    and its interchange, applied for real to the imported baseline, then exported."""
    op = tmp_path / "project_rows"
    p = kernelcrew("import", str(ROWNORM), "--function", "project_rows",
                   "--shape", "out=rows,cols", "--shape", "inp=rows,inner",
                   "--shape", "w=inner,cols", "--case", "rows=96,inner=160,cols=128",
                   "--outputs", "out", "--out", str(op), timeout=120)
    assert p.returncode == 0, p.stderr
    base = (op / "baseline.cpp").read_text()
    best = apply_transform("omp_parallel", base, {"min_work": 1024})
    assert best is not None and "#ifndef OMP_MIN_WORK" in best
    res = make_patch(load_op(op), best, base)
    assert res.patch.count("#define OMP_MIN_WORK") == 1
    assert "-fopenmp" in res.flags and "project_rows" in res.changed
    tree = tmp_path / "tree"
    copy = tree / res.relpath
    copy.parent.mkdir(parents=True)
    shutil.copyfile(ROWNORM, copy)
    (copy.parent / "project_config.h").write_text("\n")
    (tmp_path / "p.patch").write_text(res.patch)
    r = subprocess.run(["patch", "-p1", "-i", str(tmp_path / "p.patch")], cwd=tree,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    text = copy.read_text()
    assert "#ifndef OMP_MIN_WORK\n#define OMP_MIN_WORK 1024" in text
    assert text.count("#pragma omp parallel for") == 2  # rownorm_forward's, and the new one
    _build_and_compare(tmp_path, copy, res.flags, best)
