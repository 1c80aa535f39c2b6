"""The CUDA backend without a device: nvcc builds cubins, ptxas reports are parsed, the
launch plan is checked against the source, diagnostics keep their line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcrew.kernels.kernelfile import load_kernel, parse_kernel_text, validate_against
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends import cuda as cuda_mod
from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_flags, parse_ptxas
from tests.cuda.helpers import FIXTURES, OPS, baseline_cu, fast_cu


def _compile(backend: CudaBackend, op: str, path: Path):
    spec = load_op(op)
    kf = load_kernel(path)
    validate_against(kf, spec)
    return kf, backend.compile(kf, spec)


def _assert_resources(kf, res) -> None:
    assert res.ok, res.reason + "\n" + res.log
    assert res.artifact and Path(res.artifact).exists()
    by_name = {k.kernel: k for k in res.resources}
    for launch in kf.meta.launch:
        k = by_name[launch.kernel]
        assert k.registers and k.registers > 0
        assert k.spill_stores_bytes == 0 and k.spill_loads_bytes == 0, k
        assert k.shared_bytes is not None and k.stack_bytes is not None


ARCHS = ["sm_90", pytest.param("sm_80", marks=pytest.mark.slow)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", OPS)
def test_library_baseline_compiles_with_resources(backend: CudaBackend, op: str, arch: str,
                                                  monkeypatch) -> None:
    monkeypatch.setenv("KERNELCREW_CUDA_ARCH", arch)
    kf, res = _compile(backend, op, baseline_cu(op))
    _assert_resources(kf, res)
    assert f"-arch={arch}" in res.command


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", OPS)
def test_fast_kernel_compiles_with_resources(backend: CudaBackend, op: str, arch: str,
                                             monkeypatch) -> None:
    monkeypatch.setenv("KERNELCREW_CUDA_ARCH", arch)
    path = fast_cu(op)
    assert path.exists(), f"{path} is missing: every library op needs a faster CUDA kernel"
    kf, res = _compile(backend, op, path)
    _assert_resources(kf, res)
    assert f"-arch={arch}" in res.command


def test_temps_two_launches_and_dynamic_shared_compile(backend: CudaBackend) -> None:
    kf, res = _compile(backend, "scale_shift_sum", FIXTURES / "ok" / "two_pass_temps.cu")
    _assert_resources(kf, res)
    assert [k.kernel for k in res.resources] and {"row_sums", "affine"} <= {
        k.kernel for k in res.resources}


def test_second_compile_is_cached_and_knobs_change_the_key(backend: CudaBackend) -> None:
    spec = load_op("transpose")
    kf = load_kernel(baseline_cu("transpose"))
    first = backend.compile(kf, spec)
    again = backend.compile(kf, spec)
    assert first.ok and again.ok and again.cached
    assert again.resources == first.resources
    other = backend.compile(kf.with_changes(knobs={"BLOCK": 128}), spec)
    assert other.ok and not other.cached
    assert "-DBLOCK=128" in other.command


# -- the ptxas report (captured from nvcc 13.0 here; sources in fixtures/*.cu.txt) -----
def test_parse_ptxas_entries_device_functions_and_mangled_names() -> None:
    res = {k.kernel: k for k in parse_ptxas((FIXTURES / "ptxas_sm90_mixed.log").read_text())}
    assert set(res) == {"uses_helper", "_Z7mangledPfx", "_Z2tkILi4EEvPf"}  # no device fns
    u = res["uses_helper"]
    assert (u.registers, u.stack_bytes, u.spill_stores_bytes, u.shared_bytes) == (40, 160, 0, 0)
    assert u.constant_bytes is None  # sm_90 ptxas does not report cmem
    assert res["_Z7mangledPfx"].registers == 8


def test_parse_ptxas_spills_and_cmem() -> None:
    sm90 = {k.kernel: k for k in parse_ptxas((FIXTURES / "ptxas_sm90_spills.log").read_text())}
    assert (sm90["sp"].registers, sm90["sp"].spill_stores_bytes,
            sm90["sp"].spill_loads_bytes, sm90["sp"].stack_bytes) == (32, 16, 16, 1216)
    sm80 = {k.kernel: k for k in parse_ptxas((FIXTURES / "ptxas_sm80_cmem_spills.log")
                                             .read_text())}
    assert sm80["sp"].constant_bytes == 368 + 2392
    assert sm80["cf"].constant_bytes == 368 and sm80["cf"].registers == 8


def test_parse_ptxas_smem() -> None:
    log = ("ptxas info    : Compiling entry function 'f' for 'sm_90'\n"
           "ptxas info    : Function properties for f\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem\n")
    (k,) = parse_ptxas(log)
    assert (k.kernel, k.registers, k.shared_bytes) == ("f", 12, 1024)


# -- flags -------------------------------------------------------------------------------
def test_nvcc_flags_translation() -> None:
    assert nvcc_flags(["-O3"]) == ["-O3", "-Xptxas=-O3"]
    assert nvcc_flags(["-O3", "-Xptxas=-O2"]) == ["-O3", "-Xptxas=-O2"]
    assert nvcc_flags(["-dlcm=ca", "-Xptxas=-dlcm=ca"]) == ["-Xptxas=-dlcm=ca"]
    assert nvcc_flags(["-maxrregcount=64", "--use_fast_math"]) == ["-maxrregcount=64",
                                                                   "--use_fast_math"]


def test_every_allowed_cuda_flag_is_accepted_by_nvcc(backend: CudaBackend) -> None:
    from kernelcrew.kernels.flags import allowed_flags

    spec = load_op("transpose")
    kf = load_kernel(baseline_cu("transpose"))
    flags = [f for f in allowed_flags("cuda") if not f.startswith("-O")]
    res = backend.compile(kf.with_changes(flags=flags + ["-maxrregcount=64"]), spec)
    assert res.ok, res.reason + "\n" + res.log


# -- failures are results ----------------------------------------------------------------
SSS_LAUNCH = """/* kernelcrew
knobs: {BLOCK: 256}
launch:
  - kernel: scale_shift_sum
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    args: [x, out, a, b, rows, cols]
*/
"""
GOOD_SIG = ("const float* x, float* out, float a, float b, long long rows, "
            "long long cols")


def _kf(body: str, header: str = SSS_LAUNCH):
    return parse_kernel_text(header + body, "cuda")


def test_nvcc_error_keeps_the_kernel_file_line(backend: CudaBackend) -> None:
    body = (f'extern "C" __global__ void scale_shift_sum({GOOD_SIG}) {{\n'
            "    out[0] = undefined_name;\n}\n")
    res = backend.compile(_kf(body), load_op("scale_shift_sum"))
    assert not res.ok and res.reason == "compile failed"
    assert res.messages[0].line == SSS_LAUNCH.count("\n") + 2
    assert res.messages[0].kind == "error" and "undefined_name" in res.messages[0].message


def test_ptxas_error_reaches_the_reason(backend: CudaBackend) -> None:
    body = (f'extern "C" __global__ void scale_shift_sum({GOOD_SIG}) {{\n'
            "    __shared__ float s[60000];\n    s[threadIdx.x] = x[threadIdx.x];\n"
            "    __syncthreads();\n    out[threadIdx.x] = s[threadIdx.x + 1];\n}\n")
    res = backend.compile(_kf(body), load_op("scale_shift_sum"))
    assert not res.ok
    assert "too much shared data" in res.reason


def _sss(params: str, head: str = 'extern "C" __global__') -> str:
    return f"{head} void scale_shift_sum({params}) {{}}\n"


@pytest.mark.parametrize(("body", "expect"), [
    ('extern "C" __global__ void other(' + GOOD_SIG + ") {}\n",
     "'scale_shift_sum' is not a __global__ function in the source"),
    (_sss(GOOD_SIG, 'extern "C" __device__'), "is not a __global__ function"),
    (_sss("const float* x, float* out, float a, float b, long long rows"), "is given 6 args"),
    (_sss("const float* x, float* out, float a, float b, int rows, long long cols"),
     "declare `long long rows`"),
    (_sss("const float* x, float* out, double a, float b, long long rows, long long cols"),
     "declare `float a`"),
    (_sss("float x, float* out, float a, float b, long long rows, long long cols"),
     "is an array"),
    (_sss("const float* x, float* out, float* a, float b, long long rows, long long cols"),
     "passed by value"),
    (_sss(GOOD_SIG, "template <int B> __global__"), "is a template"),
])
def test_launch_plan_mismatch_is_rejected_before_compiling(backend: CudaBackend, body: str,
                                                           expect: str) -> None:
    res = backend.compile(_kf(body), load_op("scale_shift_sum"))
    assert not res.ok
    assert res.reason.startswith("launch plan does not fit the source")
    assert expect in res.reason


def test_launch_plan_accepts_equivalent_types_and_launch_bounds(backend: CudaBackend) -> None:
    body = ('extern "C" __global__ void __launch_bounds__(256, 2) scale_shift_sum(\n'
            "    const float* __restrict__ x, float* __restrict__ out, const float a,\n"
            "    float b, int64_t rows, const long long int cols) {}\n")
    res = backend.compile(_kf("#include <cstdint>\n" + body), load_op("scale_shift_sum"))
    assert res.ok, res.reason + res.log


def test_mangled_kernel_name_is_rejected_with_the_fix(backend: CudaBackend) -> None:
    body = f"__global__ void scale_shift_sum({GOOD_SIG}) {{}}\n"
    res = backend.compile(_kf(body), load_op("scale_shift_sum"))
    assert not res.ok
    assert "mangled" in res.reason and 'extern "C"' in res.reason


def test_kernel_inside_disabled_if_is_reported(backend: CudaBackend) -> None:
    body = f'#if 0\nextern "C" __global__ void scale_shift_sum({GOOD_SIG}) {{}}\n#endif\n'
    res = backend.compile(_kf(body), load_op("scale_shift_sum"))
    assert not res.ok and "not in the compiled module" in res.reason


# -- device probe and arch ----------------------------------------------------------------
def test_target_arch_env_override(monkeypatch) -> None:
    monkeypatch.setenv("KERNELCREW_CUDA_ARCH", "sm_80")
    assert CudaBackend().target_arch() == "sm_80"
    monkeypatch.setenv("KERNELCREW_CUDA_ARCH", "8.9")
    assert CudaBackend().target_arch() == "sm_89"


def test_without_cupy_cannot_run_and_targets_sm90(monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import fails
    monkeypatch.delenv("KERNELCREW_CUDA_ARCH", raising=False)
    cuda_mod.probe_device.cache_clear()
    try:
        ok, why = CudaBackend().can_run()
        assert not ok and why == "CuPy not installed (pip install kernelcrew[cuda])"
        assert CudaBackend().target_arch() == "sm_90"
        assert "no device" in CudaBackend().describe()
    finally:
        cuda_mod.probe_device.cache_clear()


def test_with_a_device_can_run_and_targets_its_arch(fake_cupy, monkeypatch, needs_nvcc) -> None:
    monkeypatch.delenv("KERNELCREW_CUDA_ARCH", raising=False)
    fake_cupy.PROPS.update(major=8, minor=9)
    assert CudaBackend().can_run() == (True, "")
    assert CudaBackend().target_arch() == "sm_89"
    assert "Fake H200" in CudaBackend().describe()


def test_no_device_is_a_reason_not_an_exception(fake_cupy) -> None:
    fake_cupy.DEVICE_COUNT = RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    ok, why = CudaBackend().can_run()
    assert not ok
    assert why.startswith(("no CUDA device (cudaErrorNoDevice", "nvcc not found")), why
    fake_cupy.DEVICE_COUNT = 0
    cuda_mod.probe_device.cache_clear()
    assert CudaBackend().can_run()[0] is False


def test_worker_env_forwards_what_cuda_needs(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x")
    env = CudaBackend().worker_env()
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["LD_LIBRARY_PATH"] == "/opt/x"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("which", ["baseline", "fast"])
def test_every_case_of_every_library_kernel_is_launchable_on_sm90(backend: CudaBackend, op: str,
                                                                  which: str,
                                                                  monkeypatch) -> None:
    """Grid/block/shared expressions of every case pass the runtime's launch checks, and
    each block fits an SM (registers from ptxas, shared = static + dynamic)."""
    from kernelcrew.tools.backends.cuda_runtime import plan_launches, temp_shapes
    from kernelcrew.tools.backends.occupancy import sm_limits, theoretical_occupancy

    monkeypatch.setenv("KERNELCREW_CUDA_ARCH", "sm_90")
    kf, res = _compile(backend, op, baseline_cu(op) if which == "baseline" else fast_cu(op))
    assert res.ok, res.reason
    regs = {k.kernel: k for k in res.resources}
    launch = [x.model_dump() for x in kf.meta.launch]
    temps = {n: t.model_dump() for n, t in kf.meta.temps.items()}
    for case in load_op(op, "cuda").cases():  # the datacenter groups too
        temp_shapes(temps, kf.meta.knobs, case.sizes)
        for d in plan_launches(launch, kf.meta.knobs, case.sizes,
                               max_shared_bytes=sm_limits("sm_90").max_shared_per_block):
            k = regs[d.kernel]
            occ = theoretical_occupancy("sm_90", block_threads=d.threads_per_block,
                                        registers_per_thread=k.registers,
                                        shared_bytes_per_block=d.shared_bytes + k.shared_bytes)
            assert occ.blocks_per_sm >= 1, (case.label, d, occ.reason)


def test_nvcc_diagnostics_are_normalized() -> None:
    from kernelcrew.tools.backends.compile import normalize

    log = ('kernel.cu(12): error: identifier "undefined_name" is undefined\n'
           "      out[0] = undefined_name;\n"
           'kernel.cu(5): warning #177-D: variable "x" was declared but never referenced\n'
           'kernel.cu(1): catastrophic error: cannot open source file "foo.h"\n'
           "other.cu(3): error: not the kernel file\n")
    got = [(m.line, m.kind, m.message) for m in normalize(log, "kernel.cu")]
    assert got == [(12, "error", 'identifier "undefined_name" is undefined'),
                   (5, "warning", 'variable "x" was declared but never referenced'),
                   (1, "fatal", 'cannot open source file "foo.h"')]
