"""tensor_core: a matmul-like kernel on the tensor cores (WMMA, fp32 accumulation).

The kernel of the dot form (`analysis.cuda_dots`) becomes one block of four warps per
64 x 64 output tile: the A and B slices (32 deep) are staged through shared memory as
they are stored (zero past the edges), each warp multiplies a 32 x 32 quarter with 2 x 2
`wmma::mma_sync` fragments (16 x 16 x 16 for __half / __nv_bfloat16 operands, 16 x 16 x 8
with `precision::tf32` for float operands), the accumulators go through shared memory,
and each output is finished by the kernel's own declarations and epilogue.

Legal when the numbers allow it, read from the op (the `rtol`/`atol` parameters, the op's
tolerance) and the operands' element type:
- __half or __nv_bfloat16 operands read through a plain conversion to float
  (`__half2float(a[..])`, `(float)a[..]`) into a float accumulator: a product of two
  16-bit floats is exact in fp32 and the tensor cores accumulate in fp32, so only the
  order of the sum changes, as it does in any re-blocked sum; the op's tolerance must be
  known and at least FP32_SUM_RTOL (a float sum's own error class);
- float operands only with `tf32=1` and a tolerance of at least TF32_RTOL / TF32_ATOL:
  TF32 keeps 10 mantissa bits, so each operand is off by up to 2^-11 of itself, far
  above a float sum's error (an op that asks for 1e-4 cannot take it);
- the accumulator is float (double stays on the FP64 units).
bf16 and tf32 need sm_80 or newer (fp16 fragments exist from sm_70). The judge still
verifies the result on every shape group: these checks decide only whether to try.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_dots import (
    INDEX,
    DotKernel,
    batch_decode,
    dot_kernel,
    factor_with,
    launch_range,
    per_output,
    stage_loop,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import Edit, Source, apply_edits, walk
from kernelcrew.kernels.kernelfile import KernelFile

HALF = {"__half": "__half", "half": "__half", "__nv_bfloat16": "__nv_bfloat16",
        "nv_bfloat16": "__nv_bfloat16"}
HEADERS = {"__half": "cuda_fp16.h", "__nv_bfloat16": "cuda_bf16.h"}
FP32_SUM_RTOL = 1e-6  # below this even a float sum in another order fails
TF32_RTOL = 5e-3
TF32_ATOL = 5e-3
_CONVERSIONS = {"X", "__half2float(X)", "__bfloat162float(X)", "(float)X", "(float)(X)",
                "float(X)", "static_cast<float>(X)"}
BM, BN = 64, 64  # the block's output tile; four warps of 32 x 32


def precision_reason(dk: DotKernel, src: Source, rtol: float, atol: float,
                     tf32: bool) -> str | None:
    """Why the tensor cores may not compute this product (None: they may)."""
    if dk.acc_type != "float":
        return f"the accumulator is {dk.acc_type}: the tensor cores accumulate in float"
    ea, eb = dk.a.elem, dk.b.elem
    if ea != eb:
        return f"the operands are {ea} and {eb}: WMMA takes one type for both"
    for op in (dk.a, dk.b):
        form = re.sub(r"\s+", "", factor_with(src, op, "X"))
        if form not in _CONVERSIONS:
            return f"the factor {src.text_of(op.factor)!r} is more than a conversion of " \
                "its element to float"
    if rtol < 0 or atol < 0:
        return "the op's tolerance is not known (rtol/atol parameters): the precision " \
            "check cannot be made"
    if ea in HALF:
        if rtol < FP32_SUM_RTOL:
            return f"the op allows rtol {rtol:g}, below a float sum's own error " \
                f"({FP32_SUM_RTOL:g})"
        return None
    if ea == "float":
        if not tf32:
            return "float operands: the tensor cores would round them to TF32 (10 " \
                "mantissa bits); pass tf32=1 where the op's tolerance allows that"
        if rtol < TF32_RTOL or atol < TF32_ATOL:
            return f"float operands: TF32 keeps 10 mantissa bits (each operand off by up " \
                f"to 2^-11 of itself); the op allows rtol {rtol:g} / atol {atol:g}, TF32 " \
                f"needs at least {TF32_RTOL:g} / {TF32_ATOL:g}"
        return None
    return f"{ea} operands: the tensor-core moves take __half, __nv_bfloat16 or float"


def wmma_body(src: Source, dk: DotKernel) -> str:
    """The new body (see the module docstring)."""
    tf32 = dk.a.elem == "float"
    elem = "float" if tf32 else HALF[dk.a.elem]
    frag_t = "wmma::precision::tf32" if tf32 else elem
    kstep, depth = (8, 32) if tf32 else (16, 32)
    pad_ab = 4 if tf32 else 8  # ldm: a multiple of 16 bytes
    m, n = dk.range_text(dk.row), dk.range_text(dk.col)
    bdec, bnames = batch_decode(dk, "kc_t", "    ")
    finish = per_output(src, dk, "kc_i", "kc_j", bnames, f"kc_Cs[kc_e / {BN}][kc_e % {BN}]",
                        " " * 8)
    conv = ""
    if tf32:  # round the operands to TF32 as the conversion instruction does
        conv = """
                #pragma unroll
                for (int kc_t2 = 0; kc_t2 < kc_fa[kc_f].num_elements; ++kc_t2)
                    kc_fa[kc_f].x[kc_t2] = wmma::__float_to_tf32(kc_fa[kc_f].x[kc_t2]);
                #pragma unroll
                for (int kc_t2 = 0; kc_t2 < kc_fb[kc_f].num_elements; ++kc_t2)
                    kc_fb[kc_f].x[kc_t2] = wmma::__float_to_tf32(kc_fb[kc_f].x[kc_t2]);"""
    stage_a = stage_loop(src, dk, "A", bnames, " " * 8, str(BM), str(depth), "kc_As[kc_x][kc_q]")
    stage_b = stage_loop(src, dk, "B", bnames, " " * 8, str(BN), str(depth), "kc_Bs[kc_q][kc_x]")
    decode = "\n".join(bdec)
    frag = f"16, 16, {kstep}"
    return f"""{{
    // kernelcrew tensor_core: a {BM} x {BN} output tile per block of four warps, each warp
    // 32 x 32 of it on the tensor cores (wmma, fp32 accumulation); the operands staged
    // {depth} deep through shared memory, the sums through shared memory to the epilogue
    using namespace nvcuda;
    alignas(32) __shared__ {elem} kc_As[{BM}][{depth} + {pad_ab}];
    alignas(32) __shared__ {elem} kc_Bs[{depth}][{BN} + {pad_ab}];
    alignas(32) __shared__ float kc_Cs[{BM}][{BN} + 4];
    const {INDEX} kc_tiles_n = (({n}) + {BN} - 1) / {BN};
    const {INDEX} kc_tiles_m = (({m}) + {BM} - 1) / {BM};
    {INDEX} kc_t = blockIdx.x;
    const {INDEX} kc_col0 = (kc_t % kc_tiles_n) * {BN};
    kc_t /= kc_tiles_n;
    const {INDEX} kc_row0 = (kc_t % kc_tiles_m) * {BM};
    kc_t /= kc_tiles_m;
{decode}
    const int kc_tid = threadIdx.x, kc_nthreads = blockDim.x;
    const int kc_wr = (threadIdx.x / 32) / 2, kc_wc = (threadIdx.x / 32) % 2;
    wmma::fragment<wmma::accumulator, {frag}, float> kc_acc[2][2];
    #pragma unroll
    for (int kc_f = 0; kc_f < 4; ++kc_f) wmma::fill_fragment(kc_acc[kc_f / 2][kc_f % 2], 0.0f);
    for ({INDEX} kc_k0 = 0; kc_k0 < ({dk.k_bound}); kc_k0 += {depth}) {{
{stage_a}
{stage_b}
        __syncthreads();
        #pragma unroll
        for (int kc_kk = 0; kc_kk < {depth}; kc_kk += {kstep}) {{
            wmma::fragment<wmma::matrix_a, {frag}, {frag_t}, wmma::row_major> kc_fa[2];
            wmma::fragment<wmma::matrix_b, {frag}, {frag_t}, wmma::row_major> kc_fb[2];
            #pragma unroll
            for (int kc_f = 0; kc_f < 2; ++kc_f) {{
                wmma::load_matrix_sync(kc_fa[kc_f], &kc_As[kc_wr * 32 + kc_f * 16][kc_kk],
                                       {depth} + {pad_ab});
                wmma::load_matrix_sync(kc_fb[kc_f], &kc_Bs[kc_kk][kc_wc * 32 + kc_f * 16],
                                       {BN} + {pad_ab});{conv}
            }}
            #pragma unroll
            for (int kc_f = 0; kc_f < 4; ++kc_f)
                wmma::mma_sync(kc_acc[kc_f / 2][kc_f % 2], kc_fa[kc_f / 2], kc_fb[kc_f % 2],
                               kc_acc[kc_f / 2][kc_f % 2]);
        }}
        __syncthreads();
    }}
    #pragma unroll
    for (int kc_f = 0; kc_f < 4; ++kc_f)
        wmma::store_matrix_sync(&kc_Cs[kc_wr * 32 + (kc_f / 2) * 16][kc_wc * 32 + (kc_f % 2) * 16],
                                kc_acc[kc_f / 2][kc_f % 2], {BN} + 4, wmma::mem_row_major);
    __syncthreads();
    for (int kc_e = threadIdx.x; kc_e < {BM} * {BN}; kc_e += blockDim.x) {{
        const {INDEX} kc_i = kc_row0 + kc_e / {BN}, kc_j = kc_col0 + kc_e % {BN};
{finish}
    }}
}}"""


def _grid(dk: DotKernel, args: list[str]) -> str | None:
    names = {p.name: a for p, a in zip(dk.params, args, strict=False)}
    parts = []
    for c, t in ((dk.col, BN), (dk.row, BM)):
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


def _include(body: str, header: str) -> str:
    if re.search(rf"#\s*include\s*<{re.escape(header)}>", body):
        return body
    return f"#include <{header}>\n" + body


def _reasons(kf: KernelFile, p: dict[str, Any]) -> list[str]:
    out = []
    for e in entries(kf):
        s = Source(kf.body)
        dk = dot_kernel(s, e)
        if isinstance(dk, str):
            out.append(f"{e}(): {dk}")
            continue
        why = precision_reason(dk, s, float(p["rtol"]), float(p["atol"]), bool(int(p["tf32"])))
        if why is not None:
            out.append(f"{e}(): {why}")
    return out


def why_not(kf: KernelFile) -> str:
    return "; ".join(_reasons(kf, {"rtol": -1, "atol": -1, "tf32": 0})[:3]) or \
        "a tile coordinate's range is not made of the launch's sizes"


# ---------------------------------------------------------------- on a kernel file

def tensor_core_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, grids, headers = kf.body, {}, set()
    for e in entries(kf):
        s = Source(body)
        dk = dot_kernel(s, e)
        if isinstance(dk, str) or any(n.type == "identifier" and
                                      n.text.decode().startswith("kc_") for n in walk(dk.fn)):
            continue
        if precision_reason(dk, s, float(p["rtol"]), float(p["atol"]),
                            bool(int(p["tf32"]))) is not None:
            continue
        launches = [lc for lc in kf.meta.launch if lc.kernel == e]
        g = [_grid(dk, lc.args) for lc in launches]
        if not launches or any(x is None for x in g):
            continue
        fb = dk.fn.child_by_field_name("body")
        new = apply_edits(s, [Edit(fb.start_byte, fb.end_byte, wmma_body(s, dk))])
        if Source(new).has_errors():
            continue
        body, grids[e] = new, g
        headers.add("mma.h")
        if dk.a.elem in HALF:
            headers.add(HEADERS[HALF[dk.a.elem]])
    if not grids:
        return None
    for h in sorted(headers, reverse=True):
        body = _include(body, h)
    launch, seen = [], {k: 0 for k in grids}
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in grids:
            lc.grid = [grids[lc.kernel][seen[lc.kernel]]]
            seen[lc.kernel] += 1
            lc.block = [128]
            lc.shared_bytes = 0
        launch.append(lc)
    return Outcome(body=body, launch=launch)
