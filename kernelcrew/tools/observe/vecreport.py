"""The compiler's vectorization report (`-fopt-info-vec-optimized-missed`) for a
kernel, per loop line, compiled confined and cached by source, flags and compiler."""

from __future__ import annotations

import shutil
import uuid

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.tools.backends.compile import cache_key, machine_fingerprint, tool_version
from kernelcrew.tools.backends.cpu import CXX
from kernelcrew.tools.config import CompileLimits, cache_dir, scratch_root
from kernelcrew.tools.observe.cpu_source import (
    VecLine,
    parse_vec_report,
)
from kernelcrew.tools.sandbox import run_confined


# -- the vectorization report ----------------------------------------------------------
def vec_report(kf: KernelFile) -> tuple[dict[int, VecLine], str]:
    """g++'s vectorization report for the kernel's own flags, per loop line (cached)."""
    flags = list(kf.meta.flags) + kf.defines
    key = cache_key(kf.text, "vec-report", flags, tool_version(CXX), machine_fingerprint())
    path = cache_dir() / "vecreport" / f"{key}.txt"
    if not path.exists():
        limits = CompileLimits()
        work = scratch_root() / f"vec-{key}-{uuid.uuid4().hex[:6]}"
        work.mkdir(parents=True)
        try:
            (work / "kernel.cpp").write_text(kf.text)
            run = run_confined(
                [CXX, "-std=c++17", "-shared", "-fPIC", "-fno-gnu-unique", *flags,
                 "-fopt-info-vec-optimized-missed=vec.txt", "kernel.cpp", "-o", "kernel.so"],
                scratch=work, timeout_s=limits.timeout_s, cpu_s=limits.timeout_s + 5,
                address_space_gib=limits.address_space_gib, file_size_mib=limits.file_size_mib,
                processes=32, log_name="compiler")
            if run.returncode != 0 or not (work / "vec.txt").exists():
                return {}, f"no report ({run.describe()})"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{uuid.uuid4().hex[:6]}.tmp")
            tmp.write_text((work / "vec.txt").read_text(errors="replace"))
            tmp.replace(path)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    report = parse_vec_report(path.read_text(), "kernel.cpp")
    if not any(f in flags for f in ("-O3", "-Ofast", "-ftree-vectorize")):
        # g++ >= 12 vectorizes at -O2 only under the very-cheap cost model, which refuses
        # any loop needing a runtime check or an epilogue and says "no vectype"
        for v in report.values():
            if v.reason == "no vectype":
                v.reason = "-O2 cheap cost model"
    return report, ""


