"""The CUDA rewrites refuse what they cannot do legally (no compiler needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcrew.agents.transforms import apply_transform, not_applicable, parse_any
from kernelcrew.kernels.spec import load_op


def base(op: str) -> str:
    return load_op(op).baseline_path("cuda").read_text()


def test_fusion_refuses_a_temp_read_at_another_index():
    t = base("add_gelu_muladd")
    assert apply_transform("launch_fusion", t) is not None
    bad = t.replace("y[i] = h2[i] * s[j] + t[j];", "y[i] = h2[i > 0 ? i - 1 : 0] * s[j] + t[j];")
    assert bad != t and apply_transform("launch_fusion", bad) is None


def test_fusion_refuses_launches_over_different_index_spaces():
    t = base("add_gelu_muladd")
    bad = t.replace('grid: ["ceil_div(rows*cols, BLOCK)"]\n    block: [BLOCK]\n    shared_bytes: 0'
                    "\n    args: [h1, h2, rows, cols]",
                    'grid: ["ceil_div(rows*cols, 128)"]\n    block: [128]\n    shared_bytes: 0'
                    "\n    args: [h1, h2, rows, cols]")
    assert bad != t and apply_transform("launch_fusion", bad) is None


def test_vector_access_refuses_synchronizing_work():
    t = base("add_gelu_muladd").replace("h1[i] = x[i] + r[i];",
                                        "h1[i] = x[i] + r[i];\n    __syncthreads();")
    out = apply_transform("vector_access", t)
    assert out is not None and "__syncthreads();\n" in out  # the other two kernels only
    assert out.count("static_assert(VEC") == 2


def test_block_reduce_refuses_a_sum_that_does_not_start_at_zero():
    t = base("scale_shift_sum")
    assert apply_transform("block_reduce", t) is not None
    bad = t.replace("float acc = 0.0f;", "float acc = 1.0f;")
    assert bad != t and apply_transform("block_reduce", bad) is None


def test_block_reduce_refuses_a_loop_carried_dependence():
    t = base("softmax_rows").replace("yr[j] = yr[j] / sum;", "yr[j] = yr[j - 1] / sum;")
    assert apply_transform("block_reduce", t) is None


def test_smem_tile_refuses_a_plain_copy():
    t = base("transpose").replace("y[j * rows + i] = x[idx];", "y[i * cols + j] = x[idx];")
    assert apply_transform("smem_tile", t) is None


# ---------------------------------------------------------------- the moves of the CUDA crew

KERNELS = Path(__file__).resolve().parents[1] / "cuda" / "emu" / "kernels"


def kernel(name: str) -> str:
    return (KERNELS / f"{name}.cu").read_text()


def one_kernel(body: str, args: str, launch_args: str, grid: str = "ceil_div(n, BLOCK)",
               block: str = "[BLOCK]") -> str:
    """A kernel file with one launch of kernel `k`."""
    return (f"/* kernelcrew\nknobs: {{BLOCK: 128}}\nlaunch:\n  - kernel: k\n"
            f"    grid: [\"{grid}\"]\n    block: {block}\n    args: [{launch_args}]\n*/\n"
            f"extern \"C\" __global__ void k({args}) {{\n{body}\n}}\n")


MATMUL_ARGS = "const float* a, const float* b, float* c, long long m, long long k, long long n"
MATMUL_LAUNCH = "a, b, c, m, k, n"
FLAT = "    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n" \
       "    if (idx >= m * n) return;\n    long long i = idx / n, j = idx % n;\n"


def matmul(loop: str, store: str = "    c[idx] = acc;", pre: str = "    float acc = 0.0f;\n"
           ) -> str:
    return one_kernel(FLAT.replace("long long i = idx / n, j = idx % n;",
                                   "long long i = idx / n;\n    long long j = idx % n;")
                      + pre + loop + "\n" + store, MATMUL_ARGS, MATMUL_LAUNCH,
                      grid="ceil_div(m*n, BLOCK)")


GOOD_LOOP = "    for (long long q = 0; q < k; ++q) acc += a[i * k + q] * b[q * n + j];"


def test_matmul_tile_applies_to_every_form_of_the_product():
    assert apply_transform("matmul_tile", matmul(GOOD_LOOP)) is not None
    for name in ("sgemm_2d", "gemm_nt_flat", "batched_quotient", "hgemm_2d"):
        out = apply_transform("matmul_tile", kernel(name))
        assert out is not None, name
        assert "kc_As[TILE_K][TILE_M + 4]" in out and "__syncthreads();" in out
        kf = parse_any(out)
        assert kf.meta.launch[0].block == ["TILE_N // REG_N", "TILE_M // REG_M"]
        assert {"TILE_M", "TILE_N", "TILE_K", "REG_M", "REG_N"} <= set(kf.meta.knobs)
    out = apply_transform("matmul_tile", base("small_matmul"))
    assert "ceil_div(n, TILE_N) * ceil_div(m, TILE_M) * (batch)" in out
    # the parameters are the tile's knobs
    small = apply_transform("matmul_tile", base("small_matmul"),
                            {"tile_m": 32, "tile_n": 32, "reg_m": 2, "reg_n": 2})
    assert parse_any(small).meta.knobs["TILE_M"] == 32


@pytest.mark.parametrize(("loop", "why"), [
    # a mat-vec: B does not move with a column of its own
    ("    for (long long q = 0; q < k; ++q) acc += a[i * k + q] * b[q];",
     "do not each move with an output coordinate"),
    # a gather: the offset is not affine
    ("    for (long long q = 0; q < k; ++q) acc += a[i * k + q] * b[(long long)a[q] * n + j];",
     "does not read exactly one element"),
    # the reduction does not start at 0
    ("    for (long long q = 1; q < k; ++q) acc += a[i * k + q] * b[q * n + j];",
     "is not `for (q = 0; q < K; ++q)`"),
    # the bound depends on the output (a triangular product)
    ("    for (long long q = 0; q < i; ++q) acc += a[i * k + q] * b[q * n + j];",
     "depends on the output"),
    # not a product
    ("    for (long long q = 0; q < k; ++q) acc += a[i * k + q] + b[q * n + j];",
     "is not `acc += L * R;`"),
    # a stride that moves with the output row
    ("    for (long long q = 0; q < k; ++q) acc += a[i * k + q * i] * b[q * n + j];",
     "fixed stride"),
])
def test_matmul_tile_refuses_what_is_not_a_product_it_can_tile(loop, why):
    text = matmul(loop)
    assert apply_transform("matmul_tile", text) is None
    assert why in not_applicable(text)["matmul_tile"]


def test_matmul_tile_refuses_a_kernel_that_writes_its_operand():
    text = matmul(GOOD_LOOP, store="    c[idx] = acc;\n    ((float*)a)[idx] = 0.0f;")
    assert apply_transform("matmul_tile", text) is None
    assert "writes a" in not_applicable(text)["matmul_tile"]


def test_matmul_tile_refuses_library_ops_that_are_not_products():
    why = not_applicable(base("softmax_rows"))["matmul_tile"]
    assert why.startswith("softmax_rows():")


def test_tensor_core_checks_the_precision_against_the_tolerance():
    # float operands, small_matmul's rtol 1e-4: TF32 would not pass
    t = base("small_matmul")
    assert apply_transform("tensor_core", t, {"rtol": 1e-4, "atol": 1e-4, "tf32": 1}) is None
    why = describe_why(t, "tensor_core", {"rtol": 1e-4, "atol": 1e-4, "tf32": 1})
    assert "TF32 keeps 10 mantissa bits" in why and "0.0001" in why
    # without tf32=1 a float product is not rounded to TF32 at all
    assert "pass tf32=1" in describe_why(t, "tensor_core", {"rtol": 1e-2, "atol": 1e-2})
    # a tolerance that admits TF32
    out = apply_transform("tensor_core", t, {"rtol": 1e-2, "atol": 1e-2, "tf32": 1})
    assert out is not None and "wmma::precision::tf32" in out and "__float_to_tf32" in out
    # without the tolerance the check cannot be made: refused, and said so
    assert "tolerance is not known" in not_applicable(t)["tensor_core"]
    # half operands: exact products, a float sum
    h = kernel("hgemm_2d")
    out = apply_transform("tensor_core", h, {"rtol": 1e-3, "atol": 1e-3})
    assert out is not None and "wmma::mma_sync" in out and "#include <mma.h>" in out
    assert parse_any(out).meta.launch[0].block == [128]


@pytest.mark.parametrize(("edit", "why"), [
    (("float sum = 0.0f;", "double sum = 0.0;"), "accumulator is double"),
    (("__half2float(b[i * N + col])", "2.0f * __half2float(b[i * N + col])"),
     "more than a conversion"),
    (("const __half* b", "const float* b"), "are __half and float"),
])
def test_tensor_core_refuses_what_the_tensor_cores_would_compute_differently(edit, why):
    h = kernel("hgemm_2d")
    bad = h.replace(*edit)
    assert bad != h
    p = {"rtol": 1e-3, "atol": 1e-3}
    assert apply_transform("tensor_core", bad, p) is None
    assert why in describe_why(bad, "tensor_core", p)


def describe_why(text: str, move: str, params: dict) -> str:
    """Why a parameterized move refuses: its module's reasons for those parameters."""
    from kernelcrew.agents.transforms.cuda import tensor_core
    kf = parse_any(text)
    assert move == "tensor_core"
    return "; ".join(tensor_core._reasons(kf, {"rtol": -1, "atol": -1, "tf32": 0, **params}))


def test_async_copy_on_staging_copies_only():
    tiled = apply_transform("matmul_tile", base("small_matmul"))
    out = apply_transform("async_copy", tiled)
    assert out is not None and out.count("__pipeline_memcpy_async(") == 2
    assert out.count("__pipeline_wait_prior(0);") == 1  # one wait, before the barrier
    assert out.index("__pipeline_wait_prior(0);") < out.index("__syncthreads();")
    assert "#include <cuda_pipeline.h>" in out
    assert apply_transform("async_copy", out) is None
    tile_t = apply_transform("smem_tile", base("transpose"))
    assert apply_transform("async_copy", tile_t) is not None
    # nothing in shared memory: nothing to copy
    assert "no __shared__ array" in not_applicable(base("softmax_rows"))["async_copy"]


LOOP_COPY = ("for (int r = threadIdx.x; r < 128; r += blockDim.x) { if (r < n) { s[r] = x[r]; } "
             "else { ZERO = 0.0f; } }")
STAGE = """    __shared__ float s[128];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    {copy}
    {between}
    __syncthreads();
    if (i < n) y[i] = s[threadIdx.x] + s[(threadIdx.x + 1) % blockDim.x];"""


@pytest.mark.parametrize(("copy", "between", "ok"), [
    ("if (i < n) s[threadIdx.x] = x[i]; else s[threadIdx.x] = 0.0f;", "", True),
    ("if (i < n) { s[threadIdx.x] = x[i]; } else { s[threadIdx.x] = 0.0f; }", "", True),
    # in a loop, the zero fill of the other branch writes the same element of its iteration
    (LOOP_COPY.replace("ZERO", "s[r]"), "", True),
    # ... but not when it writes another element
    (LOOP_COPY.replace("ZERO", "s[0]"), "", False),
    # read before the barrier: the copy might not have landed
    ("if (i < n) s[threadIdx.x] = x[i];", "float v = s[threadIdx.x]; (void)v;", False),
    # another write to the array between the copy and the barrier
    ("if (i < n) s[threadIdx.x] = x[i];", "s[0] = 1.0f;", False),
    # a computed value, not a copy
    ("if (i < n) s[threadIdx.x] = 2.0f * x[i];", "", False),
    # the same element copied again by each iteration of a loop
    ("for (int r = 0; r < 4; ++r) s[threadIdx.x] = x[r];", "", False),
])
def test_async_copy_legality(copy, between, ok):
    text = one_kernel(STAGE.format(copy=copy, between=between),
                      "const float* x, float* y, long long n", "x, y, n")
    assert (apply_transform("async_copy", text) is not None) is ok


def test_async_copy_refuses_two_byte_elements_and_written_sources():
    half = one_kernel(STAGE.format(copy="if (i < n) s[threadIdx.x] = x[i];", between="")
                      .replace("float s[128]", "__half s[128]"),
                      "const __half* x, float* y, long long n", "x, y, n")
    assert apply_transform("async_copy", half) is None
    assert "cp.async copies 4, 8 or 16 bytes" in not_applicable(half)["async_copy"]
    written = one_kernel(STAGE.format(copy="if (i < n) s[threadIdx.x] = x[i];",
                                      between="") + "\n    x[0] = 0.0f;",
                         "float* x, float* y, long long n", "x, y, n")
    assert apply_transform("async_copy", written) is None


def test_atomic_reduce_on_per_element_and_per_block_atomics():
    for name in ("dot_atomic", "dot_tree"):
        out = apply_transform("atomic_reduce", kernel(name))
        assert out is not None, name
        assert "kc_block_reduce<kc_op_sum>(kc_sum0)" in out
        assert out.count("atomicAdd(") == 1  # once per block, by thread 0
        assert "gridDim.x * blockDim.x" in out and "__shared__ double sdata" not in out
        kf = parse_any(out)
        assert any("GRID_CAP" in str(lc.grid[0]) for lc in kf.meta.launch)


@pytest.mark.parametrize(("edit", "why"), [
    (("atomicAdd(&out[0], p);", "atomicAdd(&out[i % 4], p);"), "differs between threads"),
    (("atomicAdd(&out[0], p);", "double old = atomicAdd(&out[0], p); (void)old;"),
     "is used"),
    (("double p = x[i] * y[i];", "double p = x[i] * y[i];\n        __syncthreads();"),
     "calls __syncthreads"),
])
def test_atomic_reduce_refusals(edit, why):
    t = kernel("dot_atomic")
    bad = t.replace(*edit)
    assert bad != t
    assert apply_transform("atomic_reduce", bad) is None
    assert why in not_applicable(bad)["atomic_reduce"]


def test_atomic_reduce_refuses_a_histogram():
    hist = one_kernel("    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "    if (i >= n) return;\n    atomicAdd(&counts[values[i]], 1);",
                      "const int* values, int* counts, long long n", "values, counts, n")
    assert apply_transform("atomic_reduce", hist) is None
    assert "differs between threads" in not_applicable(hist)["atomic_reduce"]


def test_online_softmax_one_pass_per_thread_and_per_block():
    for text in (base("softmax_rows"), kernel("softmax_if_max")):
        out = apply_transform("online_softmax", text)
        assert out is not None and out.count("for (") == text.count("for (") - 1
        assert "= -INFINITY" in out
        both = apply_transform("online_softmax", apply_transform("block_reduce", text))
        assert both is not None and "kc_block_online_softmax(" in both
        assert "kc_block_reduce<kc_op_max>" not in both.split("*/", 1)[1].split(
            "extern \"C\"")[-1]


@pytest.mark.parametrize(("edit", "why"), [
    # mx used between the loops: it would see -INFINITY instead of the maximum
    (("float sum = 0.0f;", "float sum = 0.0f * mx;"), "use mx"),
    # the exponentials of other values than the maximum compared
    (("float e = expf(xr[j] - mx);", "float e = expf(2.0f * xr[j] - mx);"),
     "different values"),
    # the stored exponentials read at another index later
    (("yr[j] = yr[j] / sum;", "yr[j] = yr[cols - 1 - j] / sum;"), "other than as yr[j]"),
    # the stored exponentials are the output: nothing writes them again
    (("yr[j] = yr[j] / sum;", "sum += 0.0f;"), "keeps the exponentials"),
])
def test_online_softmax_refusals(edit, why):
    t = base("softmax_rows")
    bad = t.replace(*edit)
    assert bad != t
    assert apply_transform("online_softmax", bad) is None
    assert why in not_applicable(bad)["online_softmax"]


def test_launch_fusion_fuses_a_row_pass_into_the_element_pass():
    t = kernel("rms_two_pass")
    out = apply_transform("launch_fusion", t)
    assert out is not None
    kf = parse_any(out)
    assert len(kf.meta.launch) == 1 and kf.meta.temps == {}  # inv became a register
    assert kf.meta.launch[0].grid == ["ceil_div(rows, BLOCK)"]
    assert apply_transform("block_reduce", out) is not None  # then a block per row
    # the element pass reads the row pass's temp at another row: not fusable
    bad = t.replace("y[i] = x[i] * inv[row] * w[i % C];",
                    "y[i] = x[i] * inv[row > 0 ? row - 1 : 0] * w[i % C];")
    assert bad != t and apply_transform("launch_fusion", bad) is None
    # the row pass reads what the element pass writes
    bad2 = t.replace("for (long long j = 0; j < C; ++j) ss += x[r * C + j] * x[r * C + j];",
                     "for (long long j = 0; j < C; ++j) ss += x[r * C + j] * x[r * C + j];\n"
                     "    ss += inv[0];")
    assert bad2 != t and apply_transform("launch_fusion", bad2) is None


def test_coarsen_and_its_refusal():
    out = apply_transform("coarsen", base("transpose"))
    assert out is not None and "kc_k < COARSEN" in out
    assert parse_any(out).meta.launch[0].grid == ["ceil_div(ceil_div(rows*cols, BLOCK), COARSEN)"]
    assert "calls __syncthreads" in not_applicable(
        base("transpose").replace("y[j * rows + i] = x[idx];",
                                  "y[j * rows + i] = x[idx];\n    __syncthreads();"))["coarsen"]


def test_launch_bounds_on_a_tile_shaped_block():
    tiled = apply_transform("matmul_tile", base("small_matmul"))
    out = apply_transform("launch_bounds", tiled)
    assert "__launch_bounds__((TILE_N / REG_N) * (TILE_M / REG_M))" in out
    # a block made of sizes is not known when the kernel is compiled
    sized = base("transpose").replace("block: [BLOCK]", "block: [rows]")
    assert apply_transform("launch_bounds", sized) is None


def test_launch_fusion_through_shared_memory_and_its_refusals():
    t = kernel("square_blur")
    out = apply_transform("launch_fusion", t)
    assert out is not None and "__shared__ float kc_stage[BLOCK + 2];" in out
    kf = parse_any(out)
    assert len(kf.meta.launch) == 1 and kf.meta.temps == {}
    assert out.index("__syncthreads();") < out.index("y[i] = acc;")
    # a neighbour at an index that is not a constant offset: no halo bounds it
    bad = t.replace("acc += t[i - 1];", "acc += t[i / 2];")
    assert apply_transform("launch_fusion", bad) is None
    # a halo wider than MAX_HALO
    assert apply_transform("launch_fusion", t.replace("t[i + 1]", "t[i + 40]")) is None
    # the first pass writes something else too (its halo would be written twice)
    two = t.replace("t[i] = x[i] * x[i];", "t[i] = x[i] * x[i];\n    ((float*)x)[i] = 0.0f;")
    assert apply_transform("launch_fusion", two) is None
    # a block size not known when compiling (the staged array's size)
    sized = t.replace("block: [BLOCK]", "block: [n]")
    assert apply_transform("launch_fusion", sized) is None
