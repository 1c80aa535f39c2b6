"""Run a CUDA kernel file's launch plan on the CPU: its device code compiled as host C++
(g++) after tests/cuda/emu/kc_emu.h, one program per kernel file, driven per case with the
launch plan's grid and block evaluated like the harness does (plan_launches). Outputs and
temps start as NaN, as in the harness, so an element nobody wrote fails the comparison."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
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
        lines.append(f"    std::vector<{c}> {n}_buf(num());")
        if n in spec.inputs:
            lines.append(f"    {{ FILE* f = std::fopen(\"in_{n}.bin\", \"rb\"); "
                         f"if (!f || std::fread({n}_buf.data(), sizeof({c}), {n}_buf.size(), f)"
                         f" != {n}_buf.size()) std::exit(6); std::fclose(f); }}")
        else:
            lines.append(f"    std::fill({n}_buf.begin(), {n}_buf.end(), ({c})NAN);")
        lines.append(f"    {c}* {n} = {n}_buf.data();")
    for lc in kf.meta.launch:
        lines.append("    { dim3 kc_g, kc_b; kc_g.x = num(); kc_g.y = num(); kc_g.z = num(); "
                     "kc_b.x = num(); kc_b.y = num(); kc_b.z = num(); size_t kc_s = num();")
        lines.append(f"      kc_emu::launch(kc_g, kc_b, kc_s, [&] {{ {lc.kernel}({', '.join(lc.args)}); }}); }}")
    for n in spec.outputs:
        c = _C[spec.outputs[n].dtype]
        lines.append(f"    {{ FILE* f = std::fopen(\"out_{n}.bin\", \"wb\"); "
                     f"std::fwrite({n}_buf.data(), sizeof({c}), {n}_buf.size(), f); "
                     "std::fclose(f); }")
    lines.append("    return 0;\n}")
    return "\n".join(lines) + "\n"


def build(kernel_text: str, spec: OpSpec, work: Path) -> Path:
    """Compile the emulation program for a kernel file (cached by content in `work`)."""
    kf = parse_kernel_text(kernel_text, "cuda")
    defines = [f"-D{k}={v}" for k, v in kf.meta.knobs.items()]
    key = hashlib.sha256((kernel_text + str(defines)).encode()).hexdigest()[:16]
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
    r = subprocess.run([gxx, "-std=c++17", "-O1", "-w", f"-I{EMU}", *defines, str(src), "-o",
                        str(exe)], capture_output=True, text=True, check=False, timeout=300)
    if r.returncode != 0:
        raise EmulationFailed(f"emulation build failed:\n{r.stderr[-3000:]}")
    return exe


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
