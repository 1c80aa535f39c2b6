"""Fixtures for the agents' tests: library ops cut down to small shapes, so the real
harness checks correctness of a transformed kernel in about a second."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kernelcrew.tools.config import BenchSettings

LIBRARY = Path(__file__).resolve().parents[2] / "kernelcrew" / "kernels" / "library"
OPS = ["scale_shift_sum", "small_matmul", "add_gelu_muladd", "softmax_rows", "rmsnorm",
       "transpose"]

# every group kept; the typical case is just above the threading threshold (1M inner
# iterations, OMP_MIN_WORK), so both the threaded and the serial copy of a kernel run
SMALL_SHAPES = {
    "scale_shift_sum": {"typical": [{"rows": 1024, "cols": 1100}],
                        "unaligned": [{"rows": 7, "cols": 10007}]},
    "small_matmul": {"typical": [{"batch": 32, "m": 32, "k": 32, "n": 33}],
                     "unaligned": [{"batch": 9, "m": 31, "k": 37, "n": 29}]},
    "add_gelu_muladd": {"typical": [{"rows": 1024, "cols": 1100}],
                        "unaligned": [{"rows": 17, "cols": 4099}]},
    "softmax_rows": {"typical": [{"rows": 1024, "cols": 1100}],
                     "unaligned": [{"rows": 5, "cols": 20011}]},
    "rmsnorm": {"typical": [{"rows": 1024, "cols": 1100}],
                "unaligned": [{"rows": 7, "cols": 10007}]},
    # not in OPS: a wide row (two strips of row accumulators) and a narrow odd one
    "conv2d": {"typical": [{"N": 1, "Cin": 4, "Cout": 3, "H": 9, "W": 300}],
               "unaligned": [{"N": 2, "Cin": 3, "Cout": 2, "H": 5, "W": 7}]},
    # not in OPS: rows inside the kept buffer
    "attention": {"typical": [{"B": 2, "T": 64, "D": 32}],
                  "unaligned": [{"B": 1, "T": 77, "D": 17}]},
    "transpose": {"typical": [{"rows": 1100, "cols": 1000}],
                  "unaligned": [{"rows": 3, "cols": 30011}]},
}
QUICK = BenchSettings(reps=3, rounds=1, warmup=1, input_sets=1)


def small_op(op: str, dest: Path) -> Path:
    """A copy of a library op folder with small shape cases (boundary group unchanged)."""
    folder = dest / op
    if folder.exists():
        return folder
    shutil.copytree(LIBRARY / op, folder)
    spec_path = folder / "op.yaml"
    data = yaml.safe_load(spec_path.read_text())
    for group, cases in SMALL_SHAPES[op].items():
        data["shapes"][group]["cases"] = cases
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


@pytest.fixture(scope="session")
def small_ops(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("ops")
    return lambda op: small_op(op, base)


def baseline_text(op: str, backend: str = "cpu") -> str:
    return (LIBRARY / op / ("baseline.cpp" if backend == "cpu" else "baseline.cu")).read_text()
