"""The CUDA profiler, by what this machine allows:

- a device and Nsight Compute: `ncu` around the harness's worker (metrics of the
  heaviest launch, source counters for the hottest SASS lines), parsed by tools/ncu.py;
- a device, no ncu (or ncu failed): event timings from the harness against a copy
  bandwidth measured once per device (peaks.cuda_peaks), plus the compile-time data;
- no device: compile only. ptxas resources (registers, spills, shared memory) and the
  theoretical occupancy of the chosen launch shape; everything that needs a run is
  `n/a (no device)` and the bottleneck is inferred from the op's cost model
  (`measured: false`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import Case, OpSpec
from kernelcrew.results import (
    CompileResult,
    Diagnosis,
    KernelResources,
    Metric,
    ProfileResult,
    Roofline,
)
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.backends.cuda_runtime import LaunchError, plan_launches
from kernelcrew.tools.backends.occupancy import theoretical_occupancy
from kernelcrew.tools.backends.peaks import cuda_peaks
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.harness import Harness
from kernelcrew.tools.locks import bench_lock
from kernelcrew.tools.observe import ncu
from kernelcrew.tools.observe.regpressure import HOW, register_choices
from kernelcrew.tools.observe.summary import (
    Fields,
    ProfileFailed,
    Share,
    diagnose,
    render_summary,
    roofline,
    share_of,
)
from kernelcrew.tools.sandbox import run_confined

Say = Callable[[str], None]
LAUNCH_BOUND_MS = 0.02  # a kernel launch costs a few microseconds
NCU_TIMEOUT_S = 300.0
# nominal (DRAM GB/s, fp32 GFLOP/s) per arch, only to place a compile-only kernel on the
# roofline: H100/H200 SXM class for sm_90 (REFERENCE: ~4.3 TB/s copy measured on the H200)
NOMINAL = {"sm_80": (1900.0, 19500.0), "sm_86": (900.0, 35000.0), "sm_89": (1000.0, 80000.0),
           "sm_90": (4300.0, 67000.0)}
NOMINAL_SMS = {"sm_80": 108, "sm_86": 82, "sm_89": 128, "sm_90": 132}  # A100, 3090, 4090, H200
THREADS_PER_SM_NEEDED = 1024  # about half an SM's threads, to hide DRAM latency


@dataclass
class LaunchInfo:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int  # dynamic, from the launch plan
    resources: KernelResources | None
    occupancy: object | None  # occupancy.Occupancy
    occupancy_reason: str = ""

    @property
    def threads(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2] * self.block[0] * self.block[1] * \
            self.block[2]


def _dims(d: tuple[int, int, int]) -> str:
    return "x".join(str(v) for v in d)


def launches_of(kf: KernelFile, case: Case, comp: CompileResult, arch: str) -> list[LaunchInfo]:
    """The launch plan evaluated for the case, with each kernel's resources and occupancy."""

    try:
        plans = plan_launches([x.model_dump() for x in kf.meta.launch], kf.meta.knobs,
                              case.sizes)
    except LaunchError as e:
        raise InputError(str(e), path=kf.path, field="launch") from None
    res = {r.kernel: r for r in comp.resources}
    out = []
    for d in plans:
        r = res.get(d.kernel)
        occ, why = None, ""
        try:
            if r is not None and r.registers is not None:
                occ = theoretical_occupancy(arch, block_threads=d.threads_per_block,
                                            registers_per_thread=r.registers,
                                            shared_bytes_per_block=(r.shared_bytes or 0)
                                            + d.shared_bytes)
            else:
                why = "no ptxas registers"
        except ImportError:
            why = "occupancy module missing"
        except InputError as e:
            why = str(e)[:80]
        out.append(LaunchInfo(d.kernel, d.grid, d.block, d.shared_bytes, r, occ, why))
    return out


def profile_cuda(spec: OpSpec, kf: KernelFile, case: Case, *, bench: BenchSettings | None = None,
                 limits: Limits | None = None, threads: int | None = None,
                 say: Say | None = None) -> ProfileResult:
    """The CUDA profile (`threads` is the CPU's OpenMP setting: a launch plan sets a CUDA
    kernel's threads, so it is not used here)."""
    say = say or (lambda _m: None)
    try:
        be = get_backend("cuda")
    except ImportError as e:
        raise InputError(f"the CUDA backend is not available here ({e})") from None
    say("compiling (nvcc, ptxas report)")
    comp = be.compile(kf, spec)
    if not comp.ok:
        raise ProfileFailed(f"{kf.path or 'kernel'}: does not compile: {comp.reason}"
                            + (f": {comp.messages[0].message}" if comp.messages else ""))
    arch = be.target_arch()
    launches = launches_of(kf, case, comp, arch)
    if not launches:
        raise InputError("the launch plan launches nothing for this case", path=kf.path)
    main = max(launches, key=lambda x: x.threads)
    runnable, why = be.can_run()
    if not runnable:
        prof = _compile_only(spec, kf, case, be, launches, main, arch, why)
    else:
        prof = _on_device(spec, kf, case, be, comp, launches, main, arch, bench, limits, say)
    prof.compile_report = ptxas_lines(comp)
    _register_pressure(prof, spec, kf, be, main, say)
    return prof


REGISTER_BOUND_OCCUPANCY = 0.5  # below this, register-limited occupancy is worth a change


def _register_pressure(prof: ProfileResult, spec: OpSpec, kf: KernelFile, be, main: LaunchInfo,
                       say: Say) -> None:
    """When the heaviest launch is register-limited, rank the three ways out (smaller
    blocks, launch bounds with a min-blocks value, a register cap) with ptxas and the
    occupancy table; the winner is metric `register_choice` (value: index in HOW).
    Measured occupancy (ncu) decides whether it is needed when there is one."""
    occ, r = main.occupancy, main.resources
    if occ is None or r is None or not r.registers or occ.limiter != "registers":
        return
    achieved = prof.metrics.get("achieved_occupancy_pct")
    level = achieved.value / 100 if achieved is not None and achieved.value else occ.occupancy
    if level >= REGISTER_BOUND_OCCUPANCY:
        return
    say("register pressure: compiling the three choices")
    block = main.block[0] * main.block[1] * main.block[2]
    ranked = register_choices(spec, kf, be, main.kernel, block,
                              (r.shared_bytes or 0) + main.shared_bytes, r.registers)
    if not ranked:
        return
    best = ranked[0][0]
    src = "ncu achieved" if achieved is not None and achieved.value else "theoretical"
    prof.metrics["register_choice"] = Metric(
        value=HOW.index(best.how), unit="choice",
        reason=f"{main.kernel} at {level:.0%} {src} occupancy, register-limited; ranked: "
               + " > ".join(w for _, _, w in ranked))
    prof.metrics["register_choice_value"] = Metric(value=best.value, unit="", reason=best.label)


# -- shared pieces ---------------------------------------------------------------------
def _launch_field(launches: list[LaunchInfo]) -> str:
    first = launches[0]
    more = f" (+{len(launches) - 1} launches)" if len(launches) > 1 else ""
    return f"grid {_dims(first.grid)} block {_dims(first.block)}{more}"


def _regs_field(main: LaunchInfo) -> str:
    r = main.resources
    if r is None or r.registers is None:
        return "regs n/a (no ptxas report)"
    spill = (r.spill_stores_bytes or 0) + (r.spill_loads_bytes or 0)
    return (f"regs {r.registers}/thread, spill {spill} B, smem "
            f"{(r.shared_bytes or 0) + main.shared_bytes} B ({main.kernel})")


def _theoretical(main: LaunchInfo) -> str:
    occ = main.occupancy
    if occ is None:
        return f"theoretical n/a ({main.occupancy_reason or 'unknown'})"
    return (f"{occ.occupancy:.0%} theoretical ({occ.warps_per_sm}/{occ.max_warps_per_sm} warps, "
            f"limit: {occ.limiter})")


def _resource_metrics(m: dict[str, Metric], launches: list[LaunchInfo], main: LaunchInfo,
                      arch: str) -> None:
    r = main.resources or KernelResources(kernel=main.kernel)
    src = f"ptxas, {main.kernel}"
    m["registers_per_thread"] = Metric(value=r.registers, unit="registers", reason=src)
    m["spill_stores_bytes"] = Metric(value=r.spill_stores_bytes, unit="bytes", reason=src)
    m["spill_loads_bytes"] = Metric(value=r.spill_loads_bytes, unit="bytes", reason=src)
    m["stack_bytes"] = Metric(value=r.stack_bytes, unit="bytes", reason=src)
    m["shared_bytes_per_block"] = Metric(value=(r.shared_bytes or 0) + main.shared_bytes,
                                         unit="bytes", reason="static (ptxas) + dynamic (launch)")
    m["block_threads"] = Metric(value=main.block[0] * main.block[1] * main.block[2],
                                unit="threads", reason=main.kernel)
    m["grid_blocks"] = Metric(value=main.grid[0] * main.grid[1] * main.grid[2], unit="blocks",
                              reason=main.kernel)
    m["launches"] = Metric(value=len(launches), unit="launches", reason="launch plan")
    occ = main.occupancy
    m["theoretical_occupancy_pct"] = Metric(
        value=occ.occupancy * 100 if occ else None, unit="%",
        reason=f"occupancy calculator, {arch}, {occ.limiter}-limited" if occ
        else main.occupancy_reason)
    m["blocks_per_sm"] = Metric(value=occ.blocks_per_sm if occ else None, unit="blocks",
                                reason=arch if occ else main.occupancy_reason)


# -- no device ---------------------------------------------------------------------------
def ptxas_lines(comp: CompileResult) -> str:
    """ptxas resources per kernel, as the compiler-flags specialist reads them."""
    if not comp.resources:
        return "ptxas: no resource report"
    return "ptxas resources:\n" + "\n".join(
        f"{r.kernel}: {r.registers} registers, spill stores {r.spill_stores_bytes} B, spill "
        f"loads {r.spill_loads_bytes} B, stack {r.stack_bytes} B, shared {r.shared_bytes} B"
        for r in comp.resources)


def _compile_only(spec, kf, case, be, launches, main, arch, why) -> ProfileResult:
    m: dict[str, Metric] = {"device": Metric(value=None, unit="", reason=be.describe())}
    _resource_metrics(m, launches, main, arch)
    for name, unit in (("time_ms", "ms"), ("achieved_bandwidth", "GB/s"),
                       ("dram_throughput_pct", "%"), ("l1_ld_sectors_per_request", "sectors"),
                       ("l1_st_sectors_per_request", "sectors"), ("l2_hit_rate_pct", "%"),
                       ("achieved_occupancy_pct", "%"), ("branch_efficiency_pct", "%")):
        m[name] = Metric(value=None, unit=unit, reason="no device")
    nbytes, flops = spec.cost_bytes(case.sizes), spec.cost_flops(case.sizes)
    intensity = flops / nbytes if nbytes else 0.0
    m["intensity"] = Metric(value=intensity, unit="FLOP/byte", reason="op cost model")
    bw, fl = NOMINAL.get(arch.rstrip("af"), (None, None))
    ridge = fl / bw if bw and fl else 10.0
    sms = NOMINAL_SMS.get(arch.rstrip("af"), 100)
    needed = sms * THREADS_PER_SM_NEEDED
    occ = (f"theoretical occupancy of {main.kernel} is {main.occupancy.occupancy:.0%}"
           if main.occupancy else f"theoretical occupancy unknown ({main.occupancy_reason})")
    if main.threads < needed:
        kind = "latency-bound"
        why_kind = (f"the largest launch has only {main.threads} threads "
                    f"({main.grid[0] * main.grid[1] * main.grid[2]} blocks) for the ~{sms} SMs "
                    f"of a {arch} GPU (~{needed} threads to half-fill them): too little "
                    "parallelism to hide memory latency")
    else:
        kind = "memory-bound" if intensity < ridge else "compute-bound"
        why_kind = (f"{intensity:.2f} FLOP/byte is {'below' if intensity < ridge else 'above'} "
                    f"the ~{ridge:.0f} FLOP/byte ridge of a {arch} GPU, so even a good kernel is "
                    f"{kind}")
    evidence = (f"Not measured ({why}); inferred from the launch plan and the op's cost model: "
                f"{why_kind}; {occ}.")
    nd = "n/a (no device)"
    fields = Fields(launch=_launch_field(launches), bandwidth=f"BW {nd}",
                    coalescing=f"sectors/req {nd}", l2=f"L2 hit {nd}",
                    registers=_regs_field(main),
                    occupancy=f"occupancy {nd} of {_theoretical(main)}",
                    hot=f"hot {nd}")
    return ProfileResult(op=spec.name, kernel=str(kf.path or "<memory>"), backend="cuda",
                         case=f"{case.group}[{case.index}] {case.label}", source="compile-only",
                         summary=render_summary(fields), metrics=m,
                         bottleneck=Diagnosis(kind=kind, evidence=evidence, measured=False),
                         roofline=None, hot_regions=[])


# -- with a device -------------------------------------------------------------------------
def _on_device(spec, kf, case, be, comp, launches, main, arch, bench, limits, say
               ) -> ProfileResult:
    bench = bench or BenchSettings()
    ncu_fields = None
    ncu_reason = ""
    with Harness(spec, be, cases=[case], bench=bench, limits=limits) as h:
        h.data(case)
        with bench_lock():
            say(f"timing ({bench.reps} runs, CUDA events)")
            run = h.run(comp, kf)
            if not run.correct:
                raise ProfileFailed(f"{kf.path or 'kernel'}: not correct "
                                    f"({run.first_failure()}); profile a kernel that passes "
                                    "`kernelcrew check`")
            t_ms = run.rows[0].median_ms or 0.0
            try:
                if ncu.ncu_path() is None:
                    ncu_reason = "no ncu"
                else:
                    say("Nsight Compute")
                    ncu_fields, ncu_reason = _run_ncu(h, comp, kf, main.kernel, ncu)
            except ImportError:
                ncu_reason = "ncu module missing"
    copy_peak, peak_note = None, ""
    if ncu_fields is None or not _has_dram(ncu_fields.metrics):
        try:
            copy_peak, peak_note = cuda_peaks(be).copy_gbps, "device copy bandwidth"
        except RuntimeError as e:
            peak_note = f"no peak ({str(e)[:60]})"
    return device_result(spec, kf, case, launches=launches, main=main, arch=arch,
                         time_ms=t_ms, ncu_summary=ncu_fields, ncu_reason=ncu_reason,
                         copy_peak_gbps=copy_peak, peak_note=peak_note, device=be.describe())


def _has_dram(nm: dict[str, Metric]) -> bool:
    return bool(nm.get("dram_throughput_pct") and nm["dram_throughput_pct"].value
                and nm.get("dram_bytes_per_s") and nm["dram_bytes_per_s"].value)


def device_result(spec: OpSpec, kf: KernelFile, case: Case, *, launches: list[LaunchInfo],
                  main: LaunchInfo, arch: str, time_ms: float | None, ncu_summary=None,
                  ncu_reason: str = "", copy_peak_gbps: float | None = None,
                  peak_note: str = "", device: str = "") -> ProfileResult:
    """A device profile from its measurements: the harness's median time, an NcuSummary
    (tools/ncu.py) when ncu ran, and the copy-bandwidth peak otherwise. Pure: tests feed
    it an ncu export fixture."""

    m: dict[str, Metric] = {"device": Metric(value=None, unit="", reason=device or "cuda")}
    _resource_metrics(m, launches, main, arch)
    nm = ncu_summary.metrics if ncu_summary is not None else {}
    source = "ncu" if ncu_summary is not None else "cuda-fallback"
    if time_ms is None:
        d = nm.get("duration_ms")
        time_ms = d.value if d is not None and d.value else None
        if time_ms is None:
            raise InputError("no time: neither a timed run nor an ncu duration")
        time_note = "ncu gpu__time_duration"
    else:
        time_note = "median, CUDA events"
    if _has_dram(nm):
        peak_bw = nm["dram_bytes_per_s"].value / 1e9 / (nm["dram_throughput_pct"].value / 100)
        peak_note = "DRAM peak from ncu (bytes/s / % of peak)"
    else:
        peak_bw = copy_peak_gbps
    roof = roofline(spec, case.sizes, time_ms, peak_bw, None)
    sm = nm.get("sm_throughput_pct")
    sm_pct = sm.value if sm is not None else None
    extra, access = [], "unknown"
    ld = nm["l1_ld_sectors_per_request"].value if "l1_ld_sectors_per_request" in nm else None
    st = nm["l1_st_sectors_per_request"].value if "l1_st_sectors_per_request" in nm else None
    worst = max((v for v in (ld, st) if v is not None), default=None)
    if worst is not None:
        access = "poor" if worst > 8 else "good"
        if worst > 8:
            extra.append(f"uncoalesced: {worst:.1f} sectors per request (ideal 4 for fp32): a "
                         "poor access pattern")
    if ncu_summary is not None and ncu_summary.top_stalls:
        extra.append("top stalls " + ", ".join(f"{r} {v:.1f}" for r, v in
                                                 ncu_summary.top_stalls[:3]))
    if main.threads < NOMINAL_SMS.get(arch.rstrip("af"), 100) * THREADS_PER_SM_NEEDED:
        extra.append(f"only {main.threads} threads in the largest launch")
    compute = (Share(sm_pct / 100, f"SM throughput {sm_pct:.0f}% of peak (ncu)")
               if sm_pct is not None else Share(None, f"{roof.achieved_gflops:.1f} GFLOP/s "
                                                      "(no FLOP/s peak measured on the device)"))
    diag = diagnose(time_ms, share_of(roof.achieved_gbps, peak_bw, "GB/s",
                                      peak_note or "no peak"), compute,
                    launch_ms=LAUNCH_BOUND_MS, per_call="the launch", access=access,
                    evidence_extra=extra, above_peak="above the peak: data partly in L2")
    for k, v in nm.items():
        m[k] = v
    m["time_ms"] = Metric(value=time_ms, unit="ms", reason=time_note)
    m["achieved_bandwidth"] = Metric(value=roof.achieved_gbps, unit="GB/s",
                                     reason="cost model bytes / time")
    m["peak_bandwidth"] = Metric(value=peak_bw, unit="GB/s", reason=peak_note)
    m["bandwidth_pct"] = Metric(value=roof.bandwidth_share * 100 if roof.bandwidth_share
                                else None, unit="%", reason=peak_note)
    for name, unit in (("dram_throughput_pct", "%"), ("l1_ld_sectors_per_request", "sectors"),
                       ("l1_st_sectors_per_request", "sectors"), ("l2_hit_rate_pct", "%"),
                       ("achieved_occupancy_pct", "%"), ("branch_efficiency_pct", "%")):
        m.setdefault(name, Metric(value=None, unit=unit, reason=ncu_reason or "not collected"))
    fields = _device_fields(launches, main, roof, m, ncu_summary, ncu_reason)
    return ProfileResult(op=spec.name, kernel=str(kf.path or "<memory>"), backend="cuda",
                         case=f"{case.group}[{case.index}] {case.label}", source=source,
                         summary=render_summary(fields), metrics=m, bottleneck=diag,
                         roofline=roof,
                         hot_regions=ncu_summary.hot_regions if ncu_summary is not None else [])


def _device_fields(launches, main, roof: Roofline, m: dict[str, Metric], ncu_fields,
                   ncu_reason: str):
    def val(name: str) -> float | None:
        return m[name].value if name in m else None

    why = ncu_reason or "not collected"
    pct = f" ({roof.bandwidth_share:.0%})" if roof.bandwidth_share is not None else ""
    peak = f"{roof.peak_gbps:.0f}" if roof.peak_gbps else "n/a"
    ld, st = val("l1_ld_sectors_per_request"), val("l1_st_sectors_per_request")
    coal = (f"sectors/req ld {ld:.1f} st {st:.1f} (ideal 4)" if ld is not None and st is not None
            else f"sectors/req n/a ({why})")
    l2 = val("l2_hit_rate_pct")
    ach = val("achieved_occupancy_pct")
    occ = (f"occupancy {ach:.0f}% of " if ach is not None
           else f"occupancy n/a ({why}) of ") + _theoretical(main)
    hot = (ncu_fields.hot_regions if ncu_fields is not None else [])[:3]
    hot_text = "; ".join(f"{r.where} {r.share:.0%} {r.what[:40]}" if r.share is not None
                         else f"{r.where} {r.what[:40]}" for r in hot) or f"n/a ({why})"
    return Fields(launch=_launch_field(launches),
                  bandwidth=f"BW {roof.achieved_gbps:.0f} of {peak} GB/s{pct}",
                  coalescing=coal,
                  l2=f"L2 hit {l2:.0f}%" if l2 is not None else f"L2 hit n/a ({why})",
                  registers=_regs_field(main), occupancy=occ, hot=f"hot: {hot_text}")


def _run_ncu(h, comp, kf, kernel: str, ncu):
    """ncu around one worker run (1 timed call); returns (NcuSummary | None, why not)."""

    argv = ncu.ncu_command("__JOB__", kernel=kernel, sections=("SourceCounters",),
                           export="report", python="__PY__")
    prefix = argv[:argv.index("__PY__")]
    run = h.run(comp, kf, reps=1, wrap=prefix, keep=True, judge=False)
    try:
        out = run.out_dir
        if out is None or not run.outcome.ok:
            return None, "ncu run failed: " + (run.outcome.reason or "no output")[:80]
        report = out / "report.ncu-rep"
        raw_text = (out / "worker.stdout").read_text(errors="replace")
        source_text = ""
        if report.exists():
            for page in ("raw", "source"):
                r = run_confined(ncu.ncu_import_command(report, page=page), scratch=out,
                                 timeout_s=NCU_TIMEOUT_S, log_name=f"import-{page}",
                                 env=h.backend.worker_env())
                text = (out / f"import-{page}.stdout").read_text(errors="replace")
                if r.returncode == 0 and page == "raw" and text.strip():
                    raw_text = text
                elif r.returncode == 0 and page == "source":
                    source_text = text
        launches = ncu.parse_raw_csv(raw_text)
        if not launches:
            return None, "ncu gave no metrics (counter permission?)"
        return ncu.ncu_to_summary_fields(launches, ncu.parse_source_csv(source_text),
                                         kernel=kernel), ""
    finally:
        if run.out_dir is not None:
            shutil.rmtree(run.out_dir, ignore_errors=True)

