"""The CUDA rewrites refuse what they cannot do legally (no compiler needed)."""

from __future__ import annotations

from kernelcrew.agents.transforms import apply_transform
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
