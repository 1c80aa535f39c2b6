"""What can be said about a compiled CUDA kernel file without running it: per launched
kernel, ptxas registers, spills and shared memory, the theoretical occupancy of its launch
shape on the target arch (first typical case), and SASS instruction counts (128-bit
global accesses, shuffles, barriers, shared and local memory traffic). Used when there is
no device, so the crew's candidates are described by evidence, never by invented times."""

from __future__ import annotations

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.cuda import CudaBackend
from kernelcrew.tools.backends.cuda_runtime import LaunchError, plan_launches
from kernelcrew.tools.backends.occupancy import theoretical_occupancy
from kernelcrew.tools.backends.sass import disassemble

_SHOWN = (("global_loads_128", "LDG.128"), ("global_stores_128", "STG.128"),
          ("shuffles", "SHFL"), ("barriers", "BAR"), ("shared_loads", "LDS"),
          ("shared_stores", "STS"), ("local_loads", "LDL"), ("local_stores", "STL"),
          ("tensor_ops", "HMMA"), ("async_copies", "LDGSTS"))


def static_evidence(spec: OpSpec, kf: KernelFile, comp: CompileResult,
                    backend: CudaBackend) -> dict:
    """What the CUDA toolchain says of a compiled kernel file (ptxas, SASS, occupancy)."""
    arch = backend.target_arch()
    out: dict = {"arch": arch, "launches": len(kf.meta.launch), "kernels": [], "text": ""}
    if not comp.ok:
        out["text"] = f"does not compile: {comp.reason}"
        return out
    try:
        sass = {k: v.features() for k, v in disassemble(comp.artifact).items()}
        sass_note = ""
    except RuntimeError as e:
        sass, sass_note = {}, str(e)
    case = next((c for c in spec.cases() if c.group == "typical"), None) or \
        next(iter(spec.cases()))
    try:
        plans = plan_launches([x.model_dump() for x in kf.meta.launch], kf.meta.knobs,
                              case.sizes)
    except LaunchError:
        plans = []
    shapes = {d.kernel: d for d in plans}
    res = {r.kernel: r for r in comp.resources}
    parts = []
    for name in dict.fromkeys(lc.kernel for lc in kf.meta.launch):
        r = res.get(name)
        d = shapes.get(name)
        item: dict = {"kernel": name}
        if r is not None:
            item.update(registers=r.registers, spill_bytes=(r.spill_stores_bytes or 0)
                        + (r.spill_loads_bytes or 0), shared_bytes=r.shared_bytes)
        occ_text = ""
        if r is not None and r.registers and d is not None:
            try:
                occ = theoretical_occupancy(arch, block_threads=d.threads_per_block,
                                            registers_per_thread=r.registers,
                                            shared_bytes_per_block=(r.shared_bytes or 0)
                                            + d.shared_bytes)
                item["occupancy_pct"] = round(occ.occupancy * 100, 1)
                item["occupancy_limiter"] = occ.limiter
                occ_text = f", {occ.occupancy:.0%} theoretical occupancy ({occ.limiter})"
            except InputError as e:
                occ_text = f", occupancy n/a ({e})"
        f = sass.get(name)
        if f is not None:
            item["sass"] = f
        sass_text = ", ".join(f"{label} {f[k]}" for k, label in _SHOWN if f and f[k]) \
            if f else (sass_note or "no SASS")
        parts.append(f"{name}: {item.get('registers', '?')} regs, "
                     f"{item.get('spill_bytes', '?')} B spilled, "
                     f"{item.get('shared_bytes', 0)} B smem{occ_text}; SASS: "
                     f"{sass_text or 'no vector, shuffle or shared-memory instructions'}")
    out["kernels"] = _items(parts, res, sass, shapes)
    out["text"] = f"{len(kf.meta.launch)} launch(es); " + "; ".join(parts)
    return out


def _items(parts, res, sass, shapes) -> list[dict]:
    out = []
    for name in dict.fromkeys(list(res) + list(sass)):
        r = res.get(name)
        out.append({"kernel": name,
                    "registers": r.registers if r else None,
                    "spill_bytes": ((r.spill_stores_bytes or 0) + (r.spill_loads_bytes or 0))
                    if r else None,
                    "shared_bytes": r.shared_bytes if r else None,
                    "launched": name in shapes,
                    "sass": sass.get(name)})
    return out
