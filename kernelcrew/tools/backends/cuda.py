"""CUDA backend: nvcc builds a cubin (device code only); the worker loads it with CuPy.

Compiling needs only nvcc (no GPU): the ptxas report gives each kernel's registers,
spills, stack and shared memory. Running needs CuPy and a device (`can_run`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.policy import blank_comments_and_strings, check_source
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.kernels.text import split_top
from kernelcrew.results import CompileResult, KernelResources
from kernelcrew.tools.backends.backend import Backend, PeakRates
from kernelcrew.tools.backends.compile import compile_cached
from kernelcrew.tools.backends.toolkit import cuda_tool

DEFAULT_ARCH = "sm_90"  # the lent machine's H200; KERNELCREW_CUDA_ARCH overrides
_ARCH = re.compile(r"^sm_\d{2,3}[a-z]?$")
# environment the worker needs to find the driver, CuPy's libraries and the device
# (run_confined starts it with an otherwise empty environment)
_FORWARD_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_PATH", "CUDA_HOME",
                "LD_LIBRARY_PATH", "CUPY_CUDA_PATH", "CUPY_GPU_MEMORY_LIMIT")


NVCC_MISSING = ("nvcc not found (install the CUDA toolkit, pip install nvidia-cuda-nvcc, "
                "or set KERNELCREW_NVCC)")


def nvcc_path() -> str | None:
    """nvcc from KERNELCREW_NVCC, else from PATH, else from the nvidia-cuda-nvcc wheel."""
    return cuda_tool("nvcc", "KERNELCREW_NVCC")


@functools.cache
def nvcc_version(exe: str) -> str:
    """`nvcc --version` in one line ("release 13.0, V13.0.88"), part of the cache key."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    m = re.search(r"release [\d.]+, V[\d.]+", out)
    return m.group(0) if m else hashlib.sha256(out.encode()).hexdigest()[:12]


# -- device probe ----------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceInfo:
    ok: bool
    reason: str  # why not, one line ("" when ok)
    name: str = ""
    arch: str = ""  # "sm_90"
    sm_count: int = 0
    l2_bytes: int = 0
    memory_bytes: int = 0


@functools.cache
def probe_device() -> DeviceInfo:
    """Import CuPy and look for device 0. Never raises: every failure is a reason."""
    try:
        import cupy
    except ImportError:
        return DeviceInfo(False, "CuPy not installed (pip install kernelcrew[cuda])")
    except Exception as e:  # noqa: BLE001 - a broken CuPy install also means "cannot run"
        return DeviceInfo(False, f"CuPy failed to import: {type(e).__name__}: {_first_line(e)}")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - CUDARuntimeError: no driver, device, old driver
        return DeviceInfo(False, f"no CUDA device ({_first_line(e)})")
    if count <= 0:
        return DeviceInfo(False, "no CUDA device")
    try:
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return DeviceInfo(True, "", name=name, arch=f"sm_{props['major']}{props['minor']}",
                          sm_count=int(props["multiProcessorCount"]),
                          l2_bytes=int(props["l2CacheSize"]),
                          memory_bytes=int(props["totalGlobalMem"]))
    except Exception as e:  # noqa: BLE001 - a device that cannot be queried cannot run
        return DeviceInfo(False, f"CUDA device 0 cannot be queried ({_first_line(e)})")


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


# -- flags -----------------------------------------------------------------------------
def nvcc_flags(flags: list[str]) -> list[str]:
    """Front-matter flags (already allow-listed) -> what nvcc accepts, in order, no repeats.

    nvcc's `-O<n>` optimizes host code only, and a kernel file has none; a kernel file
    that asks for `-O<n>` means the device code, so ptxas gets it too (unless the file
    sets `-Xptxas=-O<n>` itself). Bare `-dlcm=...` is a ptxas option.
    """
    explicit_ptxas_o = any(f.startswith("-Xptxas=-O") for f in flags)
    out: list[str] = []
    for f in flags:
        if re.fullmatch(r"-O[0-3]", f):
            out.append(f)
            if not explicit_ptxas_o:
                out.append(f"-Xptxas=-O{f[2]}")
        elif f.startswith("-dlcm="):
            out.append(f"-Xptxas={f}")
        else:
            out.append(f)
    seen: set[str] = set()
    return [f for f in out if not (f in seen or seen.add(f))]


# -- the ptxas report ------------------------------------------------------------------
_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPS = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, "
                    r"(?P<ld>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")


def parse_ptxas(log: str) -> list[KernelResources]:
    """`-Xptxas -v` output -> one KernelResources per entry function, in report order.

    ptxas omits smem when it is 0 (reported as 0 here) and, for sm_90, cmem entirely
    (None: not reported).
    """
    entries: dict[str, KernelResources] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    current: str | None = None  # the entry the next "Used" line belongs to
    props_for: str | None = None  # the function the next stack-frame line belongs to
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group("name")
            entries.setdefault(current, KernelResources(kernel=current))
            continue
        if m := _PROPS.search(line):
            props_for = m.group("name")
            continue
        if (m := _FRAME.search(line)) and props_for:
            frames[props_for] = (int(m.group("stack")), int(m.group("st")), int(m.group("ld")))
            props_for = None
            continue
        if (m := _USED.search(line)) and current:
            k = entries[current]
            k.registers = int(m.group("regs"))
            sm = _SMEM.search(line)
            k.shared_bytes = int(sm.group(1)) if sm else 0
            cm = _CMEM.findall(line)
            k.constant_bytes = sum(int(c) for c in cm) if cm else None
            current = None
    for name, k in entries.items():
        if name in frames:
            k.stack_bytes, k.spill_stores_bytes, k.spill_loads_bytes = frames[name]
    return list(entries.values())


def _ptxas_error(log: str) -> str:
    for line in log.splitlines():
        if re.match(r"\s*(ptxas|nvlink|nvcc)\s*(fatal|error)", line):
            return re.sub(r"\s+", " ", line.strip())[:200]
    return ""


# -- the source's kernels against the launch plan --------------------------------------
@dataclass(frozen=True)
class GlobalFunction:
    name: str
    params: list[str]  # parameter declarations as written (comments blanked)
    line: int
    template: bool


_SKIP_CALLS = {"__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__align__", "alignas",
               "__attribute__", "__declspec"}
_NAME_PAREN = re.compile(r"([A-Za-z_]\w*)\s*\(")


def global_functions(source: str) -> dict[str, GlobalFunction]:
    """Every `__global__` function defined or declared in the source, by name."""
    clean = blank_comments_and_strings(source)
    found: dict[str, GlobalFunction] = {}
    for g in re.finditer(r"\b__global__\b", clean):
        pos = g.end()
        while True:
            m = _NAME_PAREN.search(clean, pos)
            if not m:
                break
            close = _match_paren(clean, m.end() - 1)
            if close < 0:
                break
            if m.group(1) in _SKIP_CALLS:
                pos = close + 1
                continue
            if re.search(r"[;{}]", clean[pos:m.start()]):
                break  # ran past the declaration
            head_start = max(clean.rfind(c, 0, g.start()) for c in ";{}") + 1
            head = clean[head_start:m.start()]
            inner = clean[m.end():close]
            params = [p.strip() for p in split_top(inner, "([{<")] if inner.strip() else []
            if params == ["void"]:
                params = []
            name = m.group(1)
            if name not in found or clean[close + 1:].lstrip().startswith("{"):
                found[name] = GlobalFunction(name, params, clean.count("\n", 0, m.start()) + 1,
                                             bool(re.search(r"\btemplate\s*<", head)))
            break
    return found


def _match_paren(s: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "register",
               "struct", "__grid_constant__"}
# C type (words joined by one space) -> (kind, bytes); kind "f" float, "i" integer
_CTYPES: dict[str, tuple[str, int]] = {
    "float": ("f", 4), "double": ("f", 8), "__half": ("f", 2), "half": ("f", 2),
    "__nv_bfloat16": ("f", 2),
    "char": ("i", 1), "signed char": ("i", 1), "unsigned char": ("i", 1), "bool": ("i", 1),
    "short": ("i", 2), "unsigned short": ("i", 2), "int16_t": ("i", 2), "uint16_t": ("i", 2),
    "int": ("i", 4), "unsigned": ("i", 4), "unsigned int": ("i", 4), "signed": ("i", 4),
    "signed int": ("i", 4), "int32_t": ("i", 4), "uint32_t": ("i", 4),
    "long": ("i", 8), "long int": ("i", 8), "unsigned long": ("i", 8), "long long": ("i", 8),
    "long long int": ("i", 8), "unsigned long long": ("i", 8), "unsigned long long int": ("i", 8),
    "signed long long": ("i", 8), "int64_t": ("i", 8), "uint64_t": ("i", 8),
    "size_t": ("i", 8), "ptrdiff_t": ("i", 8), "std::int64_t": ("i", 8),
}
_DTYPE_C = {"float32": ("f", 4), "float64": ("f", 8), "float16": ("f", 2), "int32": ("i", 4),
            "int64": ("i", 8), "uint8": ("i", 1), "int8": ("i", 1), "uint16": ("i", 2),
            "int16": ("i", 2), "uint32": ("i", 4)}
_DTYPE_DECL = {"float32": "float", "float64": "double", "float16": "__half", "int32": "int",
               "int64": "long long", "uint8": "unsigned char", "int8": "signed char",
               "uint16": "unsigned short", "int16": "short", "uint32": "unsigned int"}


def _param_type(decl: str) -> tuple[bool, str | None]:
    """(is a pointer, base type as known C words or None when not a builtin)."""
    if "*" in decl or "[" in decl or "&" in decl:
        return True, None
    decl = re.sub(r"=.*$", "", decl)  # a default argument
    words = [w for w in re.findall(r"[A-Za-z_][\w:]*", decl) if w not in _QUALIFIERS]
    for n in (len(words), len(words) - 1):  # unnamed parameter, or the last word is the name
        t = " ".join(words[:n])
        if n > 0 and t in _CTYPES:
            return False, t
    return False, None


def check_launch_plan(kf: KernelFile, spec: OpSpec) -> str:
    """Why the launch plan does not fit the source's kernels ("" when it does)."""
    kernels = global_functions(kf.text)
    arrays = set(spec.inputs) | set(spec.outputs) | set(kf.meta.temps)
    for i, launch in enumerate(kf.meta.launch):
        where = f"launch[{i}] kernel {launch.kernel!r}"
        fn = kernels.get(launch.kernel)
        if fn is None:
            known = ", ".join(sorted(kernels)) or "none"
            return (f"{where} is not a __global__ function in the source (its __global__ "
                    f"functions: {known}); define `extern \"C\" __global__ void "
                    f"{launch.kernel}(...)` or fix the name")
        if fn.template:
            return (f"{where} is a template (line {fn.line}); the harness launches by name: "
                    "make it a plain `extern \"C\" __global__` function")
        if len(fn.params) != len(launch.args):
            return (f"{where} is given {len(launch.args)} args {launch.args} but takes "
                    f"{len(fn.params)} parameters (line {fn.line}); make them match")
        for j, (arg, decl) in enumerate(zip(launch.args, fn.params, strict=True)):
            pointer, ctype = _param_type(decl)
            what = f"{where} argument {j + 1} ({arg!r}) against parameter `{decl}`"
            if arg in arrays:
                if not pointer:
                    return f"{what}: {arg!r} is an array (a device pointer); declare a pointer"
                continue
            if pointer:
                return f"{what}: {arg!r} is passed by value; declare it without `*`"
            if arg in spec.sizes:
                want, decl_hint = ("i", 8), "long long"
            else:
                dtype = spec.scalars[arg].dtype
                want, decl_hint = _DTYPE_C[dtype], _DTYPE_DECL[dtype]
            if ctype is not None and _CTYPES[ctype] != want:
                kind = "a size" if arg in spec.sizes else f"a {spec.scalars[arg].dtype} scalar"
                return (f"{what}: {arg!r} is {kind}, passed as `{decl_hint}`; "
                        f"declare `{decl_hint} {arg}`")
    return ""


def _symbol_reason(kf: KernelFile, entries: list[str]) -> str:
    """Every launched kernel must be a cubin symbol under its own (unmangled) name."""
    for i, launch in enumerate(kf.meta.launch):
        name = launch.kernel
        if name in entries:
            continue
        where = f"launch[{i}] kernel {name!r}"
        if any(e.startswith(f"_Z{len(name)}{name}") for e in entries):
            return (f"{where} was compiled under a C++-mangled name; declare it "
                    f"`extern \"C\" __global__` so the harness can load it by name")
        return (f"{where} is not in the compiled module (compiled kernels: "
                f"{', '.join(entries) or 'none'}); is it inside an #if that is off?")
    return ""


# -- the backend -----------------------------------------------------------------------
class CudaBackend(Backend):
    name = "cuda"
    suffix = ".cu"
    timing_floor_ms = 0.005  # events resolve ~0.5 us; a launch costs a few us

    def can_run(self) -> tuple[bool, str]:
        if nvcc_path() is None:
            return False, NVCC_MISSING
        dev = probe_device()
        return dev.ok, dev.reason

    def device_info(self) -> DeviceInfo:
        """Device 0 as CuPy sees it (probed once)."""
        return probe_device()

    def cache_bytes(self) -> int | None:
        """The device's L2 (what a cold timed run is flushed from); None without one."""
        return probe_device().l2_bytes or None

    def target_arch(self) -> str:
        """KERNELCREW_CUDA_ARCH, else the device's compute capability, else sm_90."""
        env = os.environ.get("KERNELCREW_CUDA_ARCH", "").strip()
        if env:
            arch = env if env.startswith("sm_") else "sm_" + env.replace(".", "")
            if not _ARCH.match(arch):
                raise InputError(f"KERNELCREW_CUDA_ARCH={env!r} is not an arch; use e.g. sm_90")
            return arch
        dev = probe_device()
        return dev.arch if dev.ok else DEFAULT_ARCH

    def compile(self, kf: KernelFile, spec: OpSpec, *, extra_flags: tuple[str, ...] = ()
                ) -> CompileResult:
        try:
            check_source(kf.text, "cuda", path=kf.path)
        except PolicyViolation as e:
            return CompileResult(ok=False, reason=f"refused before compiling: {e}")
        plan = check_launch_plan(kf, spec)
        if plan:
            return CompileResult(ok=False, reason=f"launch plan does not fit the source: {plan}")
        nvcc = nvcc_path()
        if nvcc is None:
            return CompileResult(ok=False, reason=NVCC_MISSING)
        arch = self.target_arch()
        flags = nvcc_flags(list(kf.meta.flags) + list(extra_flags)) + kf.defines

        def argv(src, out):
            return [nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *flags,
                    str(src.name), "-o", str(out.name)]

        res = compile_cached(
            source_text=kf.text, source_name="kernel.cu", argv_for=argv,
            artifact_name="kernel.cubin", key_parts=("cuda", arch, flags, nvcc_version(nvcc)),
            parse_extra=lambda log: {"resources": parse_ptxas(log)},
        )
        if not res.ok:
            if not res.messages and (why := _ptxas_error(res.log)):
                return res.model_copy(update={"reason": f"{res.reason}: {why}"})
            return res
        missing = _symbol_reason(kf, [k.kernel for k in res.resources])
        if missing:
            return res.model_copy(update={"ok": False, "reason": missing})
        return res

    def worker_env(self) -> dict[str, str]:
        return {k: os.environ[k] for k in _FORWARD_ENV if k in os.environ}

    # A CUDA kernel is device code only: the worker's host code is kernelcrew's, and the
    # device's events time each call (see Backend)
    untrusted_host = False
    device_timer = True

    def worker_address_space_gib(self, limits) -> float | None:
        """None: the CUDA driver reserves virtual address space for the whole device at
        init, so an RLIMIT_AS of a few GiB makes cuInit fail."""
        return None

    def peak_rates(self) -> PeakRates:
        from kernelcrew.tools.backends import peaks

        try:
            pk = peaks.cuda_peaks(self)
        except RuntimeError as e:
            return PeakRates(None, None, None, None, f"peaks unknown ({e})")
        flops = (f"; FP32 {pk.fp32_gflops:.0f} GFLOP/s from the spec sheet ({pk.sm_count} SMs "
                 f"at {pk.clock_mhz:.0f} MHz)" if pk.fp32_gflops else
                 "; FP32 peak unknown")
        return PeakRates(pk.copy_gbps, None, pk.fp32_gflops or None,
                         probe_device().l2_bytes or None, pk.method + flops)

    def worker_devices(self) -> list[str]:
        """Device nodes to bind into the worker's sandbox (`bwrap --dev-bind P P`)."""
        found = [str(p) for p in sorted(Path("/dev").glob("nvidia*")) if not p.is_dir()]
        caps = Path("/dev/nvidia-caps")
        if caps.is_dir():
            found.append(str(caps))
        return found

    def describe(self) -> str:
        nvcc = nvcc_path()
        tool = f"nvcc {nvcc_version(nvcc)}" if nvcc else "no nvcc"
        dev = probe_device()
        where = f"{dev.name}, {dev.arch}, {dev.sm_count} SMs" if dev.ok else \
            f"no device: {dev.reason}; compiles for {self.target_arch()}"
        return f"cuda ({where}; {tool})"
