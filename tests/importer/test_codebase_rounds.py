"""Both ends, on code bases written the way real ones are (tests/importer/codebases): for
one function of each (a polyhedral-benchmark-style suite, a CNN library, a single-file LLM
program), copied to a scratch folder as a repository of its own: import it with `--case`
alone, optimize it with the heuristic crew, export the kernel as a patch, apply it to the
unchanged original file with `patch -p1`, build the code base with its own build line, run
its program and compare what it prints with the unpatched program's output. And a program
that times itself: its own timer shows the patch."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from tests.conftest import kernelcrew

CODEBASES = Path(__file__).resolve().parent / "codebases"


@dataclass
class Round:
    codebase: str
    file: str
    function: str
    case: str
    args: tuple[str, ...]  # import flags, folders relative to the code base
    build: tuple[str, ...]  # the code base's build line (run in its root); "SRC" globs src/*.c
    run: tuple[str, ...]


ROUNDS = [
    Round("polyhedral", "linalg/colsum/colsum.c", "kernel_colsum", "n=1000",
          ("--include-dir", "common"),
          ("gcc", "-O2", "-Icommon", "linalg/colsum/colsum.c", "-o", "prog", "-lm"),
          ("./prog", "3")),
    Round("cnn", "src/matmul.c", "gemm_acc", "M=64,N=1600,K=288,lda=288,ldb=1600,ldc=1600",
          ("--include-dir", "include"),
          ("gcc", "-O2", "-Iinclude", "SRC", "-o", "prog", "-lm"), ("./prog",)),
    Round("llm", "infer.c", "matvec", "n=512,d=1376", (),
          ("gcc", "-O2", "-fopenmp", "infer.c", "-o", "prog", "-lm"), ("./prog", "4")),
]


def as_repository(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    (dest / ".git").mkdir()  # the patch's paths are relative to the repository's root
    return dest


def build_and_run(root: Path, r: Round) -> str:
    argv = [a for x in r.build for a in
            (sorted(str(p.relative_to(root)) for p in (root / "src").glob("*.c"))
             if x == "SRC" else [x])]
    b = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
    assert b.returncode == 0, f"{r.codebase}: its own build fails: {b.stderr}"
    p = subprocess.run(list(r.run), cwd=root, capture_output=True, text=True, timeout=300,
                       check=False, env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    return p.stdout


def printed_values(out: str) -> dict[str, float]:
    """`name: value` and `name = value` lines, timings left out."""
    vals = {}
    for ln in out.splitlines():
        m = re.match(r"\s*(.+?)\s*[:=]\s*([-+0-9.eE]+)\s*$", ln)
        if m and "time" not in m.group(1):
            vals[m.group(1)] = float(m.group(2))
    return vals


def changed_kernel(run: Path, res: dict, op: Path) -> Path:
    """The crew's best kernel where it changed the function's code; else the last correct
    candidate of the run that did; else (the crew changed only flags or the generated
    entry: its moves do not read every function yet) a transform of the crew's catalogue
    applied to the baseline and checked here, so the patch path is exercised."""
    base = load_kernel(run / "baseline.cpp").body
    if _function_changed(load_kernel(res["best"]["path"]).body, base):
        return Path(res["best"]["path"])
    events = [json.loads(ln) for ln in (run / "trace.jsonl").read_text().splitlines()]
    ok = [Path(e["refs"]["kernel"]) for e in events if e["node"] == "verify" and e.get("correct")]
    ok = [k for k in ok if _function_changed(load_kernel(k).body, base)]
    if ok:
        return ok[-1]
    for name in ("unroll", "simd", "accumulators"):
        text = apply_transform(name, (op / "baseline.cpp").read_text())
        if text is None:
            continue
        k = run / f"{name}.cpp"
        k.write_text(text)
        p = kernelcrew("check", str(op), str(k), "--json", "--reps", "2", timeout=600)
        if p.returncode in (0, 1) and json.loads(p.stdout)["correct"]:
            return k
    raise AssertionError("no kernel with a code change to export")


def _function_changed(body: str, base: str) -> bool:
    cut = 'extern "C"'  # the generated entry does not go back into the file
    return body.split(cut)[0] != base.split(cut)[0]


@pytest.mark.slow
@pytest.mark.parametrize("r", ROUNDS, ids=[r.codebase for r in ROUNDS])
def test_import_optimize_export_patch_build_same_results(tmp_path, r):
    root = as_repository(CODEBASES / r.codebase, tmp_path / r.codebase)
    pristine = as_repository(CODEBASES / r.codebase, tmp_path / "pristine")
    args = [a if k == 0 or r.args[k - 1] != "--include-dir" else str(root / a)
            for k, a in enumerate(r.args)]
    op = tmp_path / "op"
    p = kernelcrew("import", str(root / r.file), "--function", r.function, "--case", r.case,
                   *args, "--out", str(op), timeout=300)
    assert p.returncode == 0, p.stderr
    spec = load_op(op)

    run = tmp_path / "run"
    p = kernelcrew("optimize", str(op), "--max-iters", "3", "--no-memory", "--reps", "5",
                   "--json", "--run-dir", str(run), timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["best"]["correct"] is True
    kernel = changed_kernel(run, res, op)

    patch = tmp_path / "round.patch"
    p = kernelcrew("export", str(run), "--patch", "--kernel", str(kernel), "--out", str(patch),
                   "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    exp = json.loads(p.stdout)
    assert exp["file"] == r.file and r.function in exp["changed"]
    a = subprocess.run(["patch", "-p1", "-i", str(patch)], cwd=root, capture_output=True,
                       text=True, check=False)
    assert a.returncode == 0, a.stdout + a.stderr
    assert (root / r.file).read_text() != (pristine / r.file).read_text()

    want = printed_values(build_and_run(pristine, r))
    got = printed_values(build_and_run(root, r))
    assert want and got.keys() == want.keys()
    # what the programs print are outputs and sums over many of them: the op's rtol, ten
    # times over for the sums' own rounding, relative to at least 1 for sums near zero
    rtol = 10 * max(spec.tolerance.rtol, 1e-6)
    for k, v in want.items():
        assert abs(got[k] - v) <= rtol * max(abs(v), 1.0), (k, got[k], v)


SELF_TIMED = """\
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void project(float *out, const float *a, const float *w, int rows, int inner, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float acc = 0.0f;
            for (int k = 0; k < inner; k++)
                acc += a[i * inner + k] * w[k * cols + j];
            out[i * cols + j] = acc;
        }
}

int main(void)
{
    int rows = 256, inner = 384, cols = 512, reps = 5;
    float *a = malloc(sizeof(float) * rows * inner), *w = malloc(sizeof(float) * inner * cols);
    float *out = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * inner; i++) a[i] = (i % 13) / 13.0f - 0.5f;
    for (int i = 0; i < inner * cols; i++) w[i] = (i % 7) / 7.0f - 0.5f;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; r++) project(out, a, w, rows, inner, cols);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("time: %.6f\\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    double s = 0;
    for (int i = 0; i < rows * cols; i++) s += out[i] * (i % 3);
    printf("checksum: %.9e\\n", s);
    return 0;
}
"""


@pytest.mark.slow
def test_the_code_bases_own_timer_shows_the_patch(tmp_path):
    """A program that times its kernel, built with its own line (`gcc -O2 -fopenmp`, as
    an OpenMP code base builds): after the patch its own timer reads less, one thread
    each (the code change, not more cores), medians of alternating runs."""
    root = tmp_path / "app"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "prog.c").write_text(SELF_TIMED)
    pristine = tmp_path / "pristine"
    shutil.copytree(root, pristine)
    op = tmp_path / "op"
    p = kernelcrew("import", str(root / "prog.c"), "--function", "project", "--case",
                   "rows=256,inner=384,cols=512", "--out", str(op), timeout=300)
    assert p.returncode == 0, p.stderr
    run = tmp_path / "run"
    p = kernelcrew("optimize", str(op), "--max-iters", "3", "--no-memory", "--reps", "5",
                   "--json", "--run-dir", str(run), timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    kernel = changed_kernel(run, json.loads(p.stdout), op)
    patch = tmp_path / "p.patch"
    p = kernelcrew("export", str(run), "--patch", "--kernel", str(kernel), "--out", str(patch),
                   timeout=120)
    assert p.returncode == 0, p.stderr
    a = subprocess.run(["patch", "-p1", "-i", str(patch)], cwd=root, capture_output=True,
                       text=True, check=False)
    assert a.returncode == 0, a.stdout + a.stderr
    times: dict[str, list[float]] = {"original": [], "patched": []}
    sums = {}
    for label, folder in (("original", pristine), ("patched", root)):
        b = subprocess.run(["gcc", "-O2", "-fopenmp", "prog.c", "-o", "prog"], cwd=folder,
                           capture_output=True, text=True, check=False)
        assert b.returncode == 0, b.stderr
    for _ in range(5):
        for label, folder in (("original", pristine), ("patched", root)):
            out = subprocess.run(["./prog"], cwd=folder, capture_output=True, text=True,
                                 timeout=120, check=True,
                                 env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}).stdout
            vals = dict(re.findall(r"(\w+): ([-+0-9.eE]+)", out))
            times[label].append(float(vals["time"]))
            sums[label] = float(vals["checksum"])
    assert abs(sums["patched"] - sums["original"]) <= 1e-4 * abs(sums["original"])
    # faster beyond the runs' spread: every patched run under every original run
    med = {k: statistics.median(v) for k, v in times.items()}
    assert max(times["patched"]) < min(times["original"]), times
    assert med["patched"] < 0.95 * med["original"], med
