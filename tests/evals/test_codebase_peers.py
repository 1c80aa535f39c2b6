"""Part 8 of `make bench`: other compilers as peers (clang -O3, clang+Polly: real
compilers, timed in the same harness as any kernel; a missing one is a note, never an
error), where the public code bases come from, what NumPy writes for the imported
functions, and the issue-39 goals marked met or missed from hand-made rows."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcrew.evals.bench.codebases import CODEBASES, ENV, include_args, locate
from kernelcrew.evals.bench.sections.codebases import CodeBaseRow, behind, goals, march, render
from kernelcrew.evals.peers.compilers import (
    CLANG_ENV,
    PeerCompilerBackend,
    compiler_peers,
    find_clang,
)
from kernelcrew.evals.peers.numpy_codebases import CODEBASE_EXPRESSIONS
from kernelcrew.evals.peers.side_by_side import compiler_alone, time_side_by_side
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from tests.conftest import OPS

REGISTER = """/* kernelcrew
entry: vadd
flags: [-O2]
*/
#include <cstdint>
extern "C" void vadd(const float* x, const float* z, float* y, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { register float s = x[i]; y[i] = s + z[i]; }
}
"""


def test_a_missing_clang_is_a_note_not_an_error(monkeypatch):
    monkeypatch.setenv(CLANG_ENV, "no-such-clang++")
    peers, notes = compiler_peers()
    assert peers == [] and len(notes) == 1 and "peers are skipped" in notes[0]


@pytest.mark.tools  # clang: an optional system tool (make test-tools)
@pytest.mark.skipif(find_clang() is None, reason="clang is not installed here")
def test_clang_and_polly_build_and_time_the_baseline_beside_gcc(tmp_path):
    peers, notes = compiler_peers()
    labels = [p.label for p in peers]
    assert "clang -O3" in labels, notes
    spec = load_op(OPS / "vadd")
    kf = load_kernel(OPS / "vadd" / "baseline.cpp")
    src = tmp_path / "register.cpp"
    src.write_text(REGISTER)  # C's register and OpenMP, as imported C code has them
    reg = load_kernel(src)
    kernels = {"compiler alone": compiler_alone(kf)}
    compilers = {}
    for p in peers:
        kernels[p.label] = reg
        compilers[p.label] = PeerCompilerBackend(p)
        cmd = p.command(reg)
        assert cmd.split()[0].startswith("clang") and "-O3 -march=native" in cmd
        assert "-fopenmp" in cmd  # the source has pragmas
    timed = time_side_by_side(spec, kernels, reps=3, rounds=1, compilers=compilers)
    for label, t in timed.items():
        assert t.correct and t.typical_ms and t.typical_ms > 0, (label, t.error)


def test_code_bases_come_from_a_local_folder_or_are_skipped_with_why(tmp_path, monkeypatch):
    cb = CODEBASES[0]
    monkeypatch.setenv(ENV, str(tmp_path))
    path, why = locate(cb)
    assert path is None and f"not in {tmp_path}" in why
    (tmp_path / cb.name).mkdir()
    path, why = locate(cb)
    assert path == tmp_path / cb.name and ENV in why
    assert include_args(tmp_path, ("--include-dir", "utilities", "--define", "X")) == [
        "--include-dir", str(tmp_path / "utilities"), "--define", "X"]
    # every function of every code base has a NumPy spelling under its operator's name
    names = {c.op_name(f) for c in CODEBASES for f in c.functions}
    assert names <= set(CODEBASE_EXPRESSIONS), names - set(CODEBASE_EXPRESSIONS)
    assert march().startswith("-march=") or march() == "unknown"


def test_numpy_spellings_compute_what_the_c_functions_do():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7))
    x = rng.standard_normal(7)
    atax = dict(CODEBASE_EXPRESSIONS["polybench_kernel_atax"])["tmp = A @ x; A.T @ tmp"]
    out = atax(A=a, x=x, m=5, n=7)
    assert np.allclose(out["y"], a.T @ (a @ x))
    im2col = CODEBASE_EXPRESSIONS["darknet_im2col_cpu"][0][1]
    im = np.arange(2 * 4 * 4, dtype=np.float32)
    col = im2col(data_im=im, channels=2, height=4, width=4, ksize=3, stride=1, pad=1)["data_col"]
    img = np.pad(im.reshape(2, 4, 4), ((0, 0), (1, 1), (1, 1)))
    want = [img[c, ky + h, kx + w] for c in range(2) for ky in range(3) for kx in range(3)
            for h in range(4) for w in range(4)]  # darknet's row c*9 + ky*3 + kx
    assert np.array_equal(col, np.array(want, dtype=np.float32))


def _row(name: str, **ms: float) -> CodeBaseRow:
    r = CodeBaseRow("cb", name, "kind", f"cb_{name}", folder="x")
    r.ms = {k.replace("_", " ").replace("clang O3", "clang -O3"): v for k, v in ms.items()}
    return r


def test_goals_and_the_list_of_functions_the_crew_is_behind_on():
    fast = _row("fast", compiler_alone=10.0, crew=1.0, **{"clang+Polly": 5.0})
    fast.numpy_ms = 1.0
    slow = _row("slow", compiler_alone=10.0, crew=8.0, **{"clang+Polly": 4.0})
    slow.numpy_ms = 2.0
    data = {"codebases": {"rows": [fast, slow], "notes": ["clang -O3 skipped: x"],
                          "found": {"cb": "url at abc"}, "march": "-march=znver3"}}
    g = {row[0]: row for row in goals(data)}
    gm = next(v for k, v in g.items() if k.startswith("geomean"))
    assert gm[2] == f"{(10 * 1.25) ** 0.5:.2f}x" and "missed" in gm[3]
    each = next(v for k, v in g.items() if k.startswith("none under"))
    assert "slow 1.25x" in each[3]
    peers = next(v for k, v in g.items() if k.startswith("crew ahead"))
    assert peers[2] == "1 of 2" and "slow vs clang+Polly" in peers[3]
    assert behind(fast) == []
    assert behind(slow) == ["1.25x over the compiler alone", "clang+Polly 2.00x ahead",
                            "4.0x NumPy's time"]
    text = "\n".join(render(data))
    assert "-march=znver3" in text and "clang -O3 skipped: x" in text
    assert "cb slow: 1.25x over the compiler alone" in text
