"""Run a CUDA kernel file's launch plan on the CPU: its device code compiled as host C++
(g++) after tests/cuda/emu/kc_emu.h, one program per kernel file, driven per case with the
launch plan's grid and block evaluated like the harness does (plan_launches). Outputs and
temps start as NaN, as in the harness, so an element nobody wrote fails the comparison."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.tools.backends.cuda_runtime import plan_launches, temp_shapes

EMU = Path(__file__).parent / "emu"
_C = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
      "float16": "__half"}


_DYN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w ]*?)\s+"
                         r"([A-Za-z_]\w*)\s*\[\s*\]\s*;")


class EmulationFailed(RuntimeError):
    pass


def _program(kf, spec: OpSpec) -> str:
    """main(): read inputs, NaN-fill outputs and temps, launch the plan, write outputs."""
    arrays = {**{n: t.dtype for n, t in spec.inputs.items()},
              **{n: t.dtype for n, t in spec.outputs.items()},
              **{n: t.dtype for n, t in kf.meta.temps.items()}}
    lines = ["int main(int argc, char** argv) {",
             "    (void)argc;",
             "    FILE* plan = std::fopen(argv[1], \"r\");",
             ("    auto num = [&]() { long long v = 0; if (std::fscanf(plan, \"%lld\", &v) != 1)"
             " std::exit(5); return v; };"),
             ("    auto real = [&]() { double v = 0; if (std::fscanf(plan, \"%lf\", &v) != 1)"
             " std::exit(5); return v; };")]
    for n in spec.sizes:
        lines.append(f"    long long {n} = num();")
    for n, sc in spec.scalars.items():
        lines.append(f"    {_C[sc.dtype]} {n} = ({_C[sc.dtype]})real();")
    for n, dt in arrays.items():
        c = _C[dt]
        # KC_EMU_MISALIGN=1: every array starts one element past a 16-byte boundary, so a
        # kernel's vector path must notice and take its scalar one
        lines.append(f"    size_t {n}_len = num();")
        lines.append(f"    std::vector<{c}> {n}_buf({n}_len + 4);")
        lines.append(f"    {c}* {n} = {n}_buf.data() + KC_EMU_MISALIGN;")
        if n in spec.inputs:
            lines.append(f"    {{ FILE* f = std::fopen(\"in_{n}.bin\", \"rb\"); "
                         f"if (!f || std::fread({n}, sizeof({c}), {n}_len, f)"
                         f" != {n}_len) std::exit(6); std::fclose(f); }}")
        else:
            lines.append(f"    std::fill({n}, {n} + {n}_len, ({c})NAN);")
    for lc in kf.meta.launch:
        lines.append("    { dim3 kc_g, kc_b; kc_g.x = num(); kc_g.y = num(); kc_g.z = num(); "
                     "kc_b.x = num(); kc_b.y = num(); kc_b.z = num(); size_t kc_s = num();")
        lines.append(f"      kc_emu::launch(kc_g, kc_b, kc_s, [&] {{ {lc.kernel}({', '.join(lc.args)}); }}); }}")
    for n in spec.outputs:
        c = _C[spec.outputs[n].dtype]
        lines.append(f"    {{ FILE* f = std::fopen(\"out_{n}.bin\", \"wb\"); "
                     f"std::fwrite({n}, sizeof({c}), {n}_len, f); "
                     "std::fclose(f); }")
    lines.append("    return 0;\n}")
    return "\n".join(lines) + "\n"


def build(kernel_text: str, spec: OpSpec, work: Path, *, coverage: bool = False,
          misalign: bool = False) -> Path:
    """Compile the emulation program for a kernel file (cached by content in `work`).

    With `misalign`, every array is passed one element past a 16-byte boundary (the
    vector paths' alignment checks must send the kernel down its scalar path). With
    `coverage`, the program is built for gcov (no optimization): every run adds its
    line and branch counts to the object's .gcda, which `coverage` reads back per line of
    the kernel file."""
    kf = parse_kernel_text(kernel_text, "cuda")
    defines = [f"-D{k}={v}" for k, v in kf.meta.knobs.items()]
    defines.append(f"-DKC_EMU_MISALIGN={int(misalign)}")
    key = hashlib.sha256((kernel_text + str(defines) + str(coverage)).encode()).hexdigest()[:16]
    exe = work / f"emu-{key}"
    if exe.exists():
        return exe
    src = work / f"emu-{key}.cc"
    device = _DYN_SHARED.sub(lambda m: f"{m.group(1)}* {m.group(2)} = "
                             f"kc_emu::dynamic_shared<{m.group(1)}>();", kernel_text)
    src.write_text(f'#include "kc_emu.h"\n#line 1 "kernel.cu"\n{device}\n'
                   f'#line 1 "driver"\n{_program(kf, spec)}')
    gxx = shutil.which("g++")
    if gxx is None:
        raise EmulationFailed("g++ not found")
    base = [gxx, "-std=c++17", "-w", f"-I{EMU}", *defines]
    if coverage:
        obj = exe.with_suffix(".o")
        steps = [[*base, "-O0", "--coverage", "-c", str(src), "-o", str(obj)],
                 [gxx, "--coverage", str(obj), "-o", str(exe)]]
    else:
        steps = [[*base, "-O1", str(src), "-o", str(exe)]]
    for argv in steps:
        r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        if r.returncode != 0:
            raise EmulationFailed(f"emulation build failed:\n{r.stderr[-3000:]}")
    return exe


@dataclass
class LineCoverage:
    """gcov's counts for the lines of the kernel file (1-based, as in the file)."""

    lines: dict[int, int] = field(default_factory=dict)  # line -> times executed
    branches: dict[int, list[int]] = field(default_factory=dict)  # line -> taken counts

    def merge(self, other: LineCoverage, shift: int = 0) -> None:
        for ln, n in other.lines.items():
            self.lines[ln + shift] = self.lines.get(ln + shift, 0) + n
        for ln, b in other.branches.items():
            cur = self.branches.setdefault(ln + shift, [0] * len(b))
            if len(cur) == len(b):
                self.branches[ln + shift] = [x + y for x, y in zip(cur, b, strict=True)]


def coverage(exe: Path) -> LineCoverage:
    """Line and branch counts of kernel.cu from a coverage build's runs so far."""
    gcov = shutil.which("gcov")
    if gcov is None:
        raise EmulationFailed("gcov not found")
    obj = exe.with_suffix(".o")
    r = subprocess.run([gcov, "--json-format", "--stdout", "--branch-probabilities", obj.name],
                       cwd=obj.parent, capture_output=True, text=True, check=False, timeout=120)
    if r.returncode != 0:
        raise EmulationFailed(f"gcov failed: {r.stderr[-1000:]}")
    cov = LineCoverage()
    for chunk in r.stdout.splitlines():
        if not chunk.strip().startswith("{"):
            continue
        for f in json.loads(chunk).get("files", []):
            if f["file"] != "kernel.cu":
                continue
            for ln in f["lines"]:
                n = ln["line_number"]
                cov.lines[n] = cov.lines.get(n, 0) + ln["count"]
                taken = [b["count"] for b in ln.get("branches", []) if not b.get("throw")]
                if taken:
                    old = cov.branches.get(n)
                    cov.branches[n] = [x + y for x, y in zip(old, taken, strict=True)] \
                        if old and len(old) == len(taken) else taken
    return cov


def run(exe: Path, kernel_text: str, spec: OpSpec, sizes: dict[str, int],
        inputs: dict[str, np.ndarray], work: Path, timeout: float = 120
        ) -> dict[str, np.ndarray]:
    kf = parse_kernel_text(kernel_text, "cuda")
    plans = plan_launches([x.model_dump() for x in kf.meta.launch], kf.meta.knobs, sizes)
    temps = temp_shapes({k: v.model_dump() for k, v in kf.meta.temps.items()}, kf.meta.knobs,
                        sizes)
    vals: list[str] = [str(sizes[n]) for n in spec.sizes]
    vals += [repr(float(sc.value)) for sc in spec.scalars.values()]
    for n in spec.inputs:
        vals.append(str(int(np.prod(spec.shape(n, sizes)))))
    for n in spec.outputs:
        vals.append(str(int(np.prod(spec.shape(n, sizes)))))
    for n in kf.meta.temps:
        vals.append(str(int(np.prod(temps[n][0]))))
    for d in plans:
        vals += [str(v) for v in (*d.grid, *d.block, d.shared_bytes)]
    run_dir = work / "case"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    (run_dir / "plan.txt").write_text(" ".join(vals) + "\n")
    for n, a in inputs.items():
        np.ascontiguousarray(a).tofile(run_dir / f"in_{n}.bin")
    r = subprocess.run([str(exe), "plan.txt"], cwd=run_dir, capture_output=True, text=True,
                       check=False, timeout=timeout)
    if r.returncode != 0:
        raise EmulationFailed(f"emulated run failed (rc {r.returncode}): {r.stderr[-500:]}")
    out = {}
    for n, t in spec.outputs.items():
        out[n] = np.fromfile(run_dir / f"out_{n}.bin", dtype=t.dtype).reshape(
            spec.shape(n, sizes))
    return out
