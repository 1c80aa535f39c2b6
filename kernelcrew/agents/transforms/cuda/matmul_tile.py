"""matmul_tile: shared-memory and register tiling of a matmul-like kernel.

A kernel with one thread per output element and one product loop (`analysis.cuda_dots`:
`acc += A[.. row .. q ..] * B[.. q .. col ..]`, the coordinates from a flat index or a
2-D thread grid, batch digits allowed) becomes one block per TILE_M x TILE_N tile of the
output: for each TILE_K slice of the reduction the block's threads copy the A and B
slices into shared memory (consecutive threads read consecutive addresses of whichever
operand side is contiguous; zero where the slice passes the edge of A, B or K),
synchronize, and each thread accumulates REG_M x REG_N outputs in registers from them
(REG_M consecutive rows by REG_N consecutive columns: each step reads them from shared
memory as aligned vectors, LDS.128 for floats). Every output is then finished by the kernel's own declarations and
epilogue, its coordinates rebound, under the guard on row and column. The launch becomes a
1-D grid of tiles (batch digits included) of blocks [TILE_N/REG_N, TILE_M/REG_M]; the
five sizes are knobs.

Legal because each output still sums the same products in the same order (q ascending;
the zero padding only adds exact zeros), one thread finishes each output once, and the
operands are never written by the kernel (checked), so staging them in shared memory
between two barriers reads what the original read. Refused when the kernel is not of the
dot form (`why_not_dot` says what is missing), when an operand does not move with an
output coordinate of its own (a mat-vec: nothing to reuse across the tile), when a tile
coordinate's range is not made of the launch's size arguments, or when names starting
with `kc_` are taken.
"""

from __future__ import annotations

from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_dots import (
    INDEX,
    DotKernel,
    batch_decode,
    dot_kernel,
    launch_range,
    per_output,
    poly_c,
    stage_loop,
    update_with,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import Edit, Source, apply_edits, walk
from kernelcrew.kernels.kernelfile import KernelFile

KNOBS = ("TILE_M", "TILE_N", "TILE_K", "REG_M", "REG_N")


def tiled_body(src: Source, dk: DotKernel) -> str:
    """The new body of the kernel (see the module docstring)."""
    m, n = dk.range_text(dk.row), dk.range_text(dk.col)
    bdec, bnames = batch_decode(dk, "kc_t", "    ")
    upd = update_with(src, dk, "kc_acc[kc_r][kc_c]", "kc_a[kc_r]", "kc_b[kc_c]")
    finish = per_output(src, dk, "kc_i", "kc_j", bnames, "kc_acc[kc_r][kc_c]", " " * 12)
    return "\n".join([
        "{",
        "    // kernelcrew matmul_tile: one TILE_M x TILE_N tile of outputs per block, the",
        "    // operands staged through shared memory TILE_K at a time, REG_M x REG_N outputs",
        "    // per thread in registers",
        ("    static_assert(TILE_M % REG_M == 0 && TILE_N % REG_N == 0, "
         "\"REG_M must divide TILE_M and REG_N TILE_N\");"),
        "    // rows padded by 4 elements: the copies' stores spread over the banks, and each",
        "    // thread's REG_M (REG_N) consecutive elements stay one aligned vector load",
        f"    alignas(16) __shared__ {dk.a.elem} kc_As[TILE_K][TILE_M + 4];",
        f"    alignas(16) __shared__ {dk.b.elem} kc_Bs[TILE_K][TILE_N + 4];",
        f"    const {INDEX} kc_tiles_n = (({n}) + TILE_N - 1) / TILE_N;",
        f"    const {INDEX} kc_tiles_m = (({m}) + TILE_M - 1) / TILE_M;",
        f"    {INDEX} kc_t = blockIdx.x;",
        f"    const {INDEX} kc_col0 = (kc_t % kc_tiles_n) * TILE_N;",
        "    kc_t /= kc_tiles_n;",
        f"    const {INDEX} kc_row0 = (kc_t % kc_tiles_m) * TILE_M;",
        "    kc_t /= kc_tiles_m;",
        *bdec,
        "    const int kc_tid = threadIdx.y * blockDim.x + threadIdx.x;",
        "    const int kc_nthreads = blockDim.x * blockDim.y;",
        f"    {dk.acc_type} kc_acc[REG_M][REG_N];",
        "    #pragma unroll",
        "    for (int kc_r = 0; kc_r < REG_M; ++kc_r) {",
        "        #pragma unroll",
        (f"        for (int kc_c = 0; kc_c < REG_N; ++kc_c) kc_acc[kc_r][kc_c] = "
         f"({dk.acc_type})0;"),
        "    }",
        f"    for ({INDEX} kc_k0 = 0; kc_k0 < ({dk.k_bound}); kc_k0 += TILE_K) {{",
        stage_loop(src, dk, "A", bnames, " " * 8, "TILE_M", "TILE_K", "kc_As[kc_q][kc_x]"),
        stage_loop(src, dk, "B", bnames, " " * 8, "TILE_N", "TILE_K", "kc_Bs[kc_q][kc_x]"),
        "        __syncthreads();",
        "        #pragma unroll",
        "        for (int kc_q = 0; kc_q < TILE_K; ++kc_q) {",
        f"            {dk.a.elem} kc_a[REG_M];",
        f"            {dk.b.elem} kc_b[REG_N];",
        "            #pragma unroll",
        "            for (int kc_r = 0; kc_r < REG_M; ++kc_r)",
        "                kc_a[kc_r] = kc_As[kc_q][threadIdx.y * REG_M + kc_r];",
        "            #pragma unroll",
        "            for (int kc_c = 0; kc_c < REG_N; ++kc_c)",
        "                kc_b[kc_c] = kc_Bs[kc_q][threadIdx.x * REG_N + kc_c];",
        "            #pragma unroll",
        "            for (int kc_r = 0; kc_r < REG_M; ++kc_r) {",
        "                #pragma unroll",
        f"                for (int kc_c = 0; kc_c < REG_N; ++kc_c) {upd}",
        "            }",
        "        }",
        "        __syncthreads();",
        "    }",
        "    #pragma unroll",
        "    for (int kc_r = 0; kc_r < REG_M; ++kc_r) {",
        "        #pragma unroll",
        "        for (int kc_c = 0; kc_c < REG_N; ++kc_c) {",
        f"            const {INDEX} kc_i = kc_row0 + threadIdx.y * REG_M + kc_r;",
        f"            const {INDEX} kc_j = kc_col0 + threadIdx.x * REG_N + kc_c;",
        finish,
        "        }",
        "    }",
        "}",
    ])


def taken_names(src: Source, dk: DotKernel) -> bool:
    return any(n.type == "identifier" and n.text.decode().startswith("kc_")
               for n in walk(dk.fn))


def tile_grid(dk: DotKernel, args: list[str], tile_m: str, tile_n: str) -> str | None:
    """The launch grid (tiles x batch) in the launch's terms; None when a range uses
    anything but the launch's size arguments."""
    names = {p.name: a for p, a in zip(dk.params, args, strict=False)}
    parts = []
    for c, t in ((dk.col, tile_n), (dk.row, tile_m)):
        r = launch_range(dk, c, names)
        if r is None:
            return None
        parts.append(f"ceil_div({r}, {t})")
    for b in dk.batch:
        r = launch_range(dk, b, names)
        if r is None:
            return None
        parts.append(f"({r})")
    return " * ".join(parts)


def why_not(kf: KernelFile) -> str:
    reasons = []
    for e in entries(kf):
        got = dot_kernel(Source(kf.body), e)
        reasons.append(f"{e}(): {got}" if isinstance(got, str) else
                       f"{e}(): a tile coordinate's range is not made of the launch's sizes")
    return "; ".join(reasons[:3]) or "no launched kernel"


# ---------------------------------------------------------------- on a kernel file

def matmul_tile_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, grids = kf.body, {}
    for e in entries(kf):
        s = Source(body)
        dk = dot_kernel(s, e)
        if isinstance(dk, str) or taken_names(s, dk):
            continue
        launches = [lc for lc in kf.meta.launch if lc.kernel == e]
        g = [tile_grid(dk, lc.args, "TILE_M", "TILE_N") for lc in launches]
        if not launches or any(x is None for x in g):
            continue
        fb = dk.fn.child_by_field_name("body")
        new = apply_edits(s, [Edit(fb.start_byte, fb.end_byte, tiled_body(s, dk))])
        if Source(new).has_errors():
            continue
        body = new
        grids[e] = g
    if not grids:
        return None
    launch, seen = [], {k: 0 for k in grids}
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in grids:
            lc.grid = [grids[lc.kernel][seen[lc.kernel]]]
            seen[lc.kernel] += 1
            lc.block = ["TILE_N // REG_N", "TILE_M // REG_M"]
            lc.shared_bytes = 0
        launch.append(lc)
    defaults = {"TILE_M": p["tile_m"], "TILE_N": p["tile_n"], "TILE_K": p["tile_k"],
                "REG_M": p["reg_m"], "REG_N": p["reg_n"]}
    knobs = {k: int(kf.meta.knobs.get(k, defaults[k])) for k in KNOBS}
    return Outcome(body=body, launch=launch, knobs=knobs)


__all__ = ["matmul_tile_in_file", "poly_c", "why_not"]
