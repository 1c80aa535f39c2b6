"""The CUDA side of `kernelcrew import`: a `__global__` function with its launch given on
the command line (`--grid`, `--block`, `--shared-bytes`, expressions in the sizes).

The function's code stays as it is, except that its `__global__` becomes `__device__`:
a generated `extern "C" __global__` entry in kernelcrew's convention (inputs, outputs,
scalars, `long long` sizes) narrows the sizes and calls it, so `threadIdx`/`blockIdx`
mean what they meant. The derived float64 reference runs the same code on the CPU: each
block and thread of the launch in turn (kernels that synchronize threads, use shared
memory or warp intrinsics cannot be emulated that way and need `--reference`).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from kernelcrew.errors import InputError
from kernelcrew.kernels.importer.source import Function, SourceFile

NOT_EMULABLE = re.compile(r"\b(__syncthreads\w*|__shared__|__shfl\w*|__ballot\w*|__syncwarp|"
                          r"__any_sync|__all_sync|cooperative_groups|__activemask|"
                          r"atomicCAS|atomicExch|clock64|__match\w*)\b")
SIZE_CHECK = {"int": ("INT_MIN", "INT_MAX"), "int32_t": ("INT_MIN", "INT_MAX"),
              "unsigned": ("0", "UINT_MAX"), "unsigned int": ("0", "UINT_MAX")}

EMULATION = """\
// CPU emulation of the CUDA launch: every block and thread in turn, one at a time.
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <climits>
#include <cfloat>
struct kc_dim3 { unsigned x = 1, y = 1, z = 1; };
static kc_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __ldg(p) (*(p))
#define __trap() __builtin_trap()
template <class T> static inline T atomicAdd(T* a, T v) { T o = *a; *a += v; return o; }
template <class A, class B> static inline auto min(A a, B b) { return a < b ? a : b; }
template <class A, class B> static inline auto max(A a, B b) { return a < b ? b : a; }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static inline double __fdividef(double a, double b) { return a / b; }
static inline long long kc_ceil_div(long long a, long long b) { return (a + b - 1) / b; }
"""


def device_text(fn: Function, sf: SourceFile) -> str:
    """The function's text with `__global__` made `__device__` (nothing else changes)."""
    text = sf.data[fn.start:fn.end].decode()
    head_len = fn.body_start - fn.start
    head, body = text[:head_len], text[head_len:]
    head = re.sub(r"\b__global__\b", "__device__", head, count=1)
    head = re.sub(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)", "", head)
    return head + body


def c_expr(e: str) -> str:
    """An op.yaml expression (sizes, + - * // % min max ceil_div) as C."""
    return re.sub(r"\bceil_div\s*\(", "kc_ceil_div(", str(e)).replace("//", "/")


def emulation_entry(name: str, decl: list[str], call: str, pre: list[str], grid: list[str],
                    block: list[str]) -> str:
    dims = []
    for what, exprs in (("gridDim", grid), ("blockDim", block)):
        for axis, e in zip("xyz", [*exprs, "1", "1"][:3], strict=True):
            dims.append(f"  {what}.{axis} = (unsigned)({c_expr(e)});")
    loops = ("  for (unsigned bz = 0; bz < gridDim.z; ++bz)\n"
             "  for (unsigned by = 0; by < gridDim.y; ++by)\n"
             "  for (unsigned bx = 0; bx < gridDim.x; ++bx)\n"
             "  for (unsigned tz = 0; tz < blockDim.z; ++tz)\n"
             "  for (unsigned ty = 0; ty < blockDim.y; ++ty)\n"
             "  for (unsigned tx = 0; tx < blockDim.x; ++tx) {\n"
             "    blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;\n"
             "    threadIdx.x = tx; threadIdx.y = ty; threadIdx.z = tz;\n"
             f"    {call};\n  }}")
    body = "\n".join([*pre, *dims, loops])
    return f'extern "C" void {name}({", ".join(decl)}) {{\n{body}\n}}\n'


def check_emulable(sf: SourceFile, texts: list[tuple]) -> None:
    for it, text in texts:
        m = NOT_EMULABLE.search(text)
        if m:
            line = it.line + text[:m.start()].count("\n")
            raise InputError(f"line {line}: the kernel uses {m.group(1)}, so its float64 "
                             "reference cannot be derived by running it thread by thread on "
                             "the CPU; give your own with --reference reference.py",
                             path=sf.path)


def nvcc_check(sf: SourceFile, text: str, line_map: list[int | None], offset: int,
               nvcc: str | None) -> None:
    """Compile the baseline with `nvcc` (no device needed); no check when it is None."""
    if nvcc is None:
        return
    with tempfile.TemporaryDirectory(prefix="kc-import-") as d:
        p = Path(d) / "baseline.cu"
        p.write_text(text)
        r = subprocess.run([nvcc, "-arch=sm_90", "-cubin", "-std=c++17", "-o",
                            str(Path(d) / "k.cubin"), str(p)], capture_output=True, text=True,
                           timeout=300, check=False)
    if r.returncode == 0:
        return
    for ln in r.stderr.splitlines():
        m = re.match(r".*?baseline\.cu\((\d+)\): error: (.*)", ln)
        if m:
            k = int(m.group(1)) - offset - 1
            orig = line_map[k] if 0 <= k < len(line_map) else None
            where = f"line {orig}" if orig else "the generated entry"
            raise InputError(f"{where}: nvcc: {m.group(2)}; the extracted code must compile on "
                             "its own (define what it needs in the file, or --define NAME=VALUE)",
                             path=sf.path)
    raise InputError(f"the extracted code does not compile with nvcc: "
                     f"{r.stderr.strip()[:200]}", path=sf.path)
