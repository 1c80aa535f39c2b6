"""coarsen: thread coarsening, COARSEN indices per thread a block apart.

A kernel with one index per thread (`T i = blockIdx.x*blockDim.x + threadIdx.x;` and its
guard, `analysis.cuda_shapes.per_index`) handles COARSEN indices per thread instead: a
block covers COARSEN * blockDim.x consecutive indices, thread t the indices t, t +
blockDim.x, ... of them (each step's accesses as coalesced as before), in an unrolled
loop whose iterations are independent, so their loads are in flight together; the index
math and the block's start-up are paid once per COARSEN elements. The launch grid is
divided by COARSEN (a knob). Unlike `vector_access` it works for any element type and
for gathers (`w[idx[i] * C + c]`).

Legal because each index's work was already independent of the others (one thread
each, in no particular order). Refused when the work synchronizes, uses shared memory,
warp operations, atomics or the thread built-ins, returns early or writes the index, or
when a launch of the kernel is not 1-D.
"""

from __future__ import annotations

from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_shapes import (
    blocker,
    dedent_block,
    indent,
    per_index,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import Edit, Source, apply_edits, walk
from kernelcrew.kernels.kernelfile import KernelFile


def coarsen(src: str, kernel: str, knob: str = "COARSEN") -> tuple[str | None, str]:
    """(the rewritten source, "") or (None, why not)."""
    s = Source(src)
    pi = per_index(s, kernel)
    if pi is None:
        return None, "not one index per thread (blockIdx.x*blockDim.x + threadIdx.x and a guard)"
    why = blocker(s, pi.stmts, pi.var)
    if why is not None:
        return None, f"the work {why}"
    if any(n.type == "identifier" and n.text.decode() in ("kc_k", "kc_base")
           for n in walk(pi.fn)):
        return None, "the names kc_k / kc_base are taken"
    ty, var = pi.ty, pi.var
    work = dedent_block(s, pi.stmts)
    body = (f"{{\n"
            f"    // kernelcrew coarsen: {knob} indices per thread, a block apart\n"
            f"    const {ty} kc_base = ({ty})blockIdx.x * blockDim.x * {knob} + threadIdx.x;\n"
            f"    #pragma unroll\n"
            f"    for (int kc_k = 0; kc_k < {knob}; ++kc_k) {{\n"
            f"        const {ty} {var} = kc_base + ({ty})kc_k * blockDim.x;\n"
            f"        if ({var} < {pi.bound}) {{\n"
            f"{indent(work, ' ' * 12)}\n"
            f"        }}\n"
            f"    }}\n"
            f"}}")
    fb = pi.fn.child_by_field_name("body")
    out = apply_edits(s, [Edit(fb.start_byte, fb.end_byte, body)])
    return (None, "the rewrite does not parse") if Source(out).has_errors() else (out, "")


def _one_d(kf: KernelFile, kernel: str) -> bool:
    return all(len(lc.grid) == 1 and len(lc.block) == 1
               for lc in kf.meta.launch if lc.kernel == kernel)


def why_not(kf: KernelFile) -> str:
    reasons = []
    for e in entries(kf):
        if not _one_d(kf, e):
            reasons.append(f"{e}(): launched on more than one dimension")
            continue
        out, why = coarsen(kf.body, e)
        if out is None:
            reasons.append(f"{e}(): {why}")
    return "; ".join(reasons[:3]) or "no launched kernel"


def coarsen_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = str(p["knob"])
    body, changed = kf.body, set()
    for e in entries(kf):
        if not _one_d(kf, e):
            continue
        out, _why = coarsen(body, e, knob)
        if out is not None:
            body = out
            changed.add(e)
    if not changed:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in changed:
            lc.grid = [f"ceil_div({lc.grid[0]}, {knob})"]
        launch.append(lc)
    return Outcome(body=body, launch=launch,
                   knobs={knob: kf.meta.knobs.get(knob, int(p["default"]))})
