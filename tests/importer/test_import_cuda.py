"""`kernelcrew import` of a CUDA `__global__` function with its launch on the command line
(tests/importer/sources/gelu.cu: a __device__ helper, a macro, an int size, a host
launcher beside it). Without a GPU: the kernel file, the derived float64 reference (the
launch emulated on the CPU, thread by thread) against NumPy, nvcc compiling the baseline
where nvcc is installed, and the patch back into the .cu file; on a GPU: the check."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelcrew.kernels.importer.patch import make_patch
from kernelcrew.kernels.kernelfile import load_kernel, validate_against
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cuda import nvcc_path
from tests.conftest import kernelcrew

SOURCES = Path(__file__).resolve().parent / "sources"
GELU = SOURCES / "gelu.cu"
LAUNCH = ["--grid", "ceil_div(n, 256)", "--block", "256"]


def import_gelu(out: Path, *extra: str):
    return kernelcrew("import", str(GELU), "--function", "gelu_kernel", "--shape", "out=n",
                      "--shape", "inp=n", "--case", "n=100000", "--outputs", "out",
                      "--out", str(out), *extra, timeout=300)


@pytest.fixture(scope="module")
def gelu_op(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cu") / "gelu_kernel"
    p = import_gelu(out, *LAUNCH)
    assert p.returncode == 0, p.stderr
    return out


def test_a_cuda_kernel_becomes_a_device_function_behind_a_generated_launch(gelu_op):
    kf = load_kernel(gelu_op / "baseline.cu")
    spec = load_op(gelu_op)
    validate_against(kf, spec)
    assert spec.baselines == {"cuda": "baseline.cu"}
    (lc,) = kf.meta.launch
    assert lc.kernel == "gelu_kernel_entry" and lc.grid == ["ceil_div(n, 256)"]
    assert lc.block == [256] and lc.args == ["inp", "out", "n"]
    body = kf.body
    src = GELU.read_text()
    helper = src[src.index("__device__ __forceinline__"):src.index("__global__")]
    assert helper.strip() in body and "#define GELU_COEF 0.044715f" in body
    kernel = src[src.index("__global__ void gelu_kernel"):src.index("void gelu_launch")]
    assert kernel.strip().replace("__global__", "__device__", 1) in body
    assert "gelu_launch" not in body and "cuda_runtime.h" not in body and "<<<" not in body
    assert ('extern "C" __global__ void gelu_kernel_entry(const float* inp, float* out, '
            'long long n)') in body
    assert "if (n < INT_MIN || n > INT_MAX) __trap();" in body
    assert spec.origin.reference == "derived"


def test_the_derived_reference_runs_the_launch_on_the_cpu_and_agrees_with_numpy(gelu_op):
    ref = load_op(gelu_op).reference_fn()
    rng = np.random.default_rng(5)
    for n in (1, 255, 257, 3001):
        x = rng.standard_normal(n) * 3
        got = ref(inp=x, n=n)["out"]
        want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / 3.14159265358979) * (x + 0.044715 * x**3)))
        assert np.max(np.abs(got - want)) < 1e-12


def test_launch_errors_and_kernels_that_cannot_be_emulated(tmp_path):
    p = import_gelu(tmp_path / "a")
    assert p.returncode == 2 and "--block 256" in p.stderr and "line 13" in p.stderr
    src = tmp_path / "rowsum.cu"
    src.write_text("__global__ void rowsum(float* out, const float* inp, int n) {\n"
                   "  __shared__ float buf[256];\n"
                   "  buf[threadIdx.x] = inp[blockIdx.x * n + threadIdx.x];\n"
                   "  __syncthreads();\n"
                   "  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];\n}\n")
    p = kernelcrew("import", str(src), "--function", "rowsum", "--shape", "out=n",
                   "--shape", "inp=n*n", "--case", "n=256", "--outputs", "out",
                   "--grid", "n", "--block", "256", "--out", str(tmp_path / "b"), timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert f"{src}: line 2: the kernel uses __shared__" in lines[0]
    assert "--reference" in lines[0]


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed")
def test_code_that_nvcc_rejects_is_refused_at_its_line(tmp_path):
    src = tmp_path / "bad.cu"
    src.write_text("__global__ void bad(float* out, const float* inp, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) {\n"
                   "    float* p = inp;\n"  # drops the const: C++ refuses it, the parser not
                   "    out[i] = p[i];\n  }\n}\n")
    p = kernelcrew("import", str(src), "--function", "bad", "--shape", "out=n",
                   "--shape", "inp=n", "--case", "n=1000", "--outputs", "out", *LAUNCH,
                   "--out", str(tmp_path / "op"), timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert f"{src}: line 4: nvcc: " in lines[0] and "const float *" in lines[0], lines[0]
    assert not (tmp_path / "op").exists()


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed")
def test_the_patch_puts_a_rewritten_kernel_back_as_global(gelu_op, tmp_path):
    spec = load_op(gelu_op)
    base = (gelu_op / "baseline.cu").read_text()
    # the crew's rewrite of the device function, as a kernel file (a grid-stride loop)
    best = base.replace("    if (i < n) {\n        out[i] = gelu_scalar(inp[i]);\n    }",
                        "    for (; i < n; i += gridDim.x * blockDim.x) {\n"
                        "        out[i] = gelu_scalar(inp[i]);\n    }")
    assert best != base
    res = make_patch(spec, best, base)
    assert "Launch gelu_kernel with grid (ceil_div(n, 256)), block (256)" in res.patch
    tree = tmp_path / "tree"
    copy = tree / res.relpath
    copy.parent.mkdir(parents=True)
    shutil.copyfile(GELU, copy)
    patch = tmp_path / "gelu.patch"
    patch.write_text(res.patch)
    r = subprocess.run(["patch", "-p1", "-i", str(patch)], cwd=tree, capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    text = copy.read_text()
    assert "__global__ void gelu_kernel(float* out, const float* inp, int n) {\n" \
           "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    for (; i < n;" in text
    assert "gelu_kernel<<<" in text  # the host launcher is untouched
    r = subprocess.run([nvcc_path(), "-arch=sm_90", "-c", str(copy), "-o", str(tmp_path / "g.o")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_the_imported_cuda_kernel_passes_check_on_a_gpu(gelu_op):
    p = kernelcrew("check", str(gelu_op), str(gelu_op / "baseline.cu"), "--backend", "cuda",
                   "--json", "--reps", "3", timeout=600)
    res = json.loads(p.stdout)
    if not res.get("ran"):
        pytest.skip(f"no CUDA device: {res['reason']}")
    assert p.returncode == 0 and res["correct"] is True
