"""nvcc from the nvidia-cuda-nvcc wheel (the dev extra) where no CUDA toolkit is on PATH:
found by nvcc_path, it compiles a library baseline in the sandbox (its own headers, cicc and
ptxas from beside itself), and the cuobjdump wheel reads the cubin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcrew.tools.backends.cuda import nvcc_version
from kernelcrew.tools.backends.toolkit import wheel_roots, wheel_tool
from tests.cuda.helpers import OPS, baseline_cu

WHEEL_NVCC = wheel_tool("nvcc")
pytestmark = pytest.mark.skipif(WHEEL_NVCC is None,
                                reason="nvidia-cuda-nvcc wheel not installed (dev extra)")

_CHILD = r"""
import json, shutil, sys
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_path, nvcc_version
from kernelcrew.tools.backends.sass import disassemble, sass_tool

op, path = sys.argv[1], sys.argv[2]
res = CudaBackend().compile(load_kernel(path), load_op(op))
sass = disassemble(res.artifact) if res.ok else {}
print(json.dumps({
    "which": shutil.which("nvcc"), "nvcc": nvcc_path(), "version": nvcc_version(nvcc_path()),
    "ok": res.ok, "reason": res.reason, "log": res.log, "cached": res.cached,
    "command": res.command, "regs": {k.kernel: k.registers for k in res.resources},
    "cuobjdump": sass_tool(),
    "sass": {k: v.features()["instructions"] for k, v in sass.items()},
}))
"""


def _path_without(tool: str, shadow_root: Path) -> str:
    """PATH with `tool` gone: each directory that has it is replaced by one of links to
    its other entries (the compiler, bwrap, ... may live beside a distribution's nvcc)."""
    dirs = []
    for i, d in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not d or not (Path(d) / tool).exists():
            dirs.append(d)
            continue
        shadow = shadow_root / f"bin{i}"
        shadow.mkdir(parents=True)
        for entry in Path(d).iterdir():
            if entry.name != tool:
                (shadow / entry.name).symlink_to(entry)
        dirs.append(str(shadow))
    return os.pathsep.join(dirs)


def test_nvcc_path_falls_back_to_the_wheel_and_it_compiles(tmp_path):
    op = "softmax_rows" if "softmax_rows" in OPS else OPS[0]
    env = {k: v for k, v in os.environ.items()
           if k not in ("KERNELCREW_NVCC", "KERNELCREW_CUOBJDUMP")}
    env["PATH"] = _path_without("nvcc", tmp_path / "shadow")
    env["KERNELCREW_CACHE_DIR"] = str(tmp_path / "cache")  # a real compile, not a cache hit
    env["KERNELCREW_CUDA_ARCH"] = "sm_90"
    assert shutil.which("nvcc", path=env["PATH"]) is None
    r = subprocess.run([sys.executable, "-c", _CHILD, op, str(baseline_cu(op))], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["which"] is None
    roots = [str(p) for p in wheel_roots()]
    assert out["nvcc"] == WHEEL_NVCC and any(out["nvcc"].startswith(p) for p in roots), out
    assert out["version"] == nvcc_version(WHEEL_NVCC) and out["version"].startswith("release")
    assert out["ok"], out["reason"] + "\n" + out["log"]
    assert not out["cached"] and out["command"][:3] == ["nvcc", "-cubin", "-arch=sm_90"]
    assert out["regs"] and all(n and n > 0 for n in out["regs"].values()), out["regs"]
    # cuobjdump comes from PATH if a toolkit left one there, else from its wheel
    assert out["cuobjdump"]
    assert set(out["sass"]) == set(out["regs"]) and all(n > 0 for n in out["sass"].values())
