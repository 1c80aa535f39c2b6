"""Nsight Compute: the command line that profiles one kernel of a worker run, and parsers
for its CSV exports, turned into the named metrics a profile summary uses.

Formats parsed (`ncu --csv`):
- raw page (`--page raw`): a header row (ID, Process ID, ..., Kernel Name, ..., then one
  column per metric), a units row, then one row per profiled launch;
- the long form (`--page details`, or `--metrics` without `--page raw`): one row per
  (launch, metric) with Metric Name / Metric Unit / Metric Value columns;
- source page (`--page source --print-source sass`): per kernel a `"Kernel Name",NAME`
  row, then a header (Address, Source, Warp Stall Sampling (All Samples), ...) and one
  row per SASS instruction (or Line No / Source rows for the CUDA-source view).
ncu prints `==PROF==` / `==WARNING==` lines around the CSV; numbers may carry thousands
separators; a metric it could not collect reads `n/a`.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.results import HotRegion, Metric

STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
    "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc",
    "no_instruction", "not_selected", "selected", "short_scoreboard", "sleeping",
    "tex_throttle", "wait",
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

# summary field -> (ncu metric, unit of the summary value)
SUMMARY_METRICS: dict[str, tuple[str, str]] = {
    "duration_ms": ("gpu__time_duration.sum", "ms"),
    "dram_throughput_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "dram_bytes_per_s": ("dram__bytes.sum.per_second", "byte/s"),
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "l1_ld_sectors_per_request": (
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio", "sectors"),
    "l1_st_sectors_per_request": (
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio", "sectors"),
    "l2_hit_rate_pct": ("lts__t_sector_hit_rate.pct", "%"),
    "registers_per_thread": ("launch__registers_per_thread", "registers"),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct", "%"),
    "branch_efficiency_pct": ("smsp__sass_average_branch_targets_threads_uniform.pct", "%"),
}
DEFAULT_METRICS: tuple[str, ...] = (
    *(m for m, _ in SUMMARY_METRICS.values()),
    "launch__block_size", "launch__grid_size",
    *(STALL_METRIC.format(r) for r in STALL_REASONS),
)
WORKER_MODULE = "kernelcrew.tools.judge.worker"


def ncu_path() -> str | None:
    """ncu from KERNELCREW_NCU, else from PATH, else the CUDA toolkit's.

    KERNELCREW_NCU=none turns ncu off (profiles take the event-timing fallback)."""
    env = os.environ.get("KERNELCREW_NCU", "").strip()
    if env.lower() in ("none", "off", "0"):
        return None
    exe = env or shutil.which("ncu")
    if exe:
        return exe
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "bin", "ncu").exists():
            return str(Path(root, "bin", "ncu"))
    return None


def kernel_filter(kernel: str) -> str:
    """`-k` value matching exactly this (unmangled, extern "C") kernel name."""
    return f"regex:^{re.escape(kernel)}$"


def ncu_prefix(*, kernel: str, metrics: Sequence[str] = DEFAULT_METRICS,
               sections: Sequence[str] = (), launch_skip: int = 0, launch_count: int = 1,
               page: str = "raw", export: str | Path | None = None,
               print_source: str | None = None, ncu: str | None = None) -> list[str]:
    """The ncu part of the command, to put before a target (e.g. `Harness.run(wrap=...)`).

    Non-interactive: CSV on stdout in base units (no auto-scaled Gbyte/usecond), clocks
    left alone (`--clock-control none`: the lent machine's VM cannot lock them, and the
    timings stay comparable to the harness's). `-k` matches the kernel name exactly.
    With `export`, the report is also saved (`-o`; ncu appends `.ncu-rep`) for
    `ncu_import_command`. `sections=("SourceCounters",)` collects the per-instruction
    stall samples behind the hot lines (printed with `page="source"`,
    `print_source="sass"`, or later from the export).
    """
    argv = [ncu or ncu_path() or "ncu", "--clock-control", "none", "--csv", "--page", page,
            "--print-units", "base"]
    if print_source:
        argv += ["--print-source", print_source]
    if metrics:
        argv += ["--metrics", ",".join(dict.fromkeys(metrics))]
    for s in sections:
        argv += ["--section", s]
    argv += ["-k", kernel_filter(kernel), "-c", str(launch_count)]
    if launch_skip:
        argv += ["-s", str(launch_skip)]
    if export is not None:
        argv += ["-f", "-o", str(export)]
    return argv


def ncu_command(job_path: str | Path, *, kernel: str, python: str | None = None,
                **prefix: object) -> list[str]:
    """argv profiling `kernel` in a worker run of job.json (`python -m` the worker).

    Keyword arguments other than `python` go to `ncu_prefix`.
    """
    return [*ncu_prefix(kernel=kernel, **prefix),  # type: ignore[arg-type]
            python or sys.executable, "-m", WORKER_MODULE, str(job_path)]


def ncu_import_command(report: str | Path, *, page: str = "raw", ncu: str | None = None
                       ) -> list[str]:
    """argv printing a saved report as CSV: `raw` metrics or the `source` page (SASS)."""
    argv = [ncu or ncu_path() or "ncu", "--import", str(report), "--csv", "--page", page,
            "--print-units", "base"]
    if page == "source":
        argv += ["--print-source", "sass"]
    return argv


# -- parsing ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NcuLaunch:
    """One profiled kernel launch: its identity and {metric: (value, unit)}."""

    id: int
    kernel: str  # the name as ncu prints it (a signature for C++ kernels)
    block: str = ""  # "(256, 1, 1)"
    grid: str = ""
    device: str = ""
    cc: str = ""
    metrics: dict[str, tuple[float | None, str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The kernel name without a parameter list."""
        return self.kernel.split("(", 1)[0].strip()

    def value(self, metric: str) -> float | None:
        return self.metrics.get(metric, (None, ""))[0]


_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time",
               "Context", "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name",
               "Function Name", "Demangled Name", "Mangled Name", "API Name"}


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV rows of an ncu output, skipping its ==PROF== and other non-CSV lines."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return [r for r in csv.reader(io.StringIO("\n".join(lines))) if r]


def parse_number(text: str) -> float | None:
    """ncu's number text -> float; "n/a", "" and words -> None."""
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
         "ms": 1e-3, "second": 1.0, "s": 1.0}


def to_base(value: float | None, unit: str) -> tuple[float | None, str]:
    """Auto-scaled units (Gbyte/second, usecond, Kbyte) -> base units (byte/second, second)."""
    if value is None:
        return None, unit
    u = unit.strip()
    if u in _TIME:
        return value * _TIME[u], "second"
    m = re.fullmatch(r"([KMGTP]?)(byte|B)(/s|/second)?", u)
    if m:
        return value * _SCALE[m.group(1)], "byte" + ("/second" if m.group(3) else "")
    return value, u


def parse_raw_csv(text: str) -> list[NcuLaunch]:
    """`ncu --csv --page raw` output (or the long details form) -> one NcuLaunch per launch."""
    rows = _csv_rows(text)
    if not rows:
        return []
    header = rows[0]
    if "Metric Name" in header and "Metric Value" in header:
        return _parse_long(header, rows[1:])
    units: list[str] = [""] * len(header)
    body = rows[1:]
    if body and (not body[0][0].strip()):  # the units row: empty under the ID columns
        units, body = body[0] + [""] * (len(header) - len(body[0])), body[1:]
    col = {name: i for i, name in enumerate(header)}
    launches = []
    for n, r in enumerate(body):
        if len(r) != len(header):
            continue  # a line cut short or a stray message
        metrics = {}
        for i, name in enumerate(header):
            if name in _ID_COLUMNS:
                continue
            metrics[name] = to_base(parse_number(r[i]), units[i])
        launches.append(NcuLaunch(
            id=_launch_id(r[col["ID"]], n) if "ID" in col else n,
            kernel=r[col["Kernel Name"]] if "Kernel Name" in col else "",
            block=r[col["Block Size"]] if "Block Size" in col else "",
            grid=r[col["Grid Size"]] if "Grid Size" in col else "",
            device=r[col["Device"]] if "Device" in col else "",
            cc=r[col["CC"]] if "CC" in col else "", metrics=metrics))
    return launches


def _parse_long(header: list[str], body: list[list[str]]) -> list[NcuLaunch]:
    col = {name: i for i, name in enumerate(header)}
    by_id: dict[str, dict] = {}
    for r in body:
        if len(r) != len(header):
            continue
        lid = r[col["ID"]] if "ID" in col else "0"
        entry = by_id.setdefault(lid, {
            "kernel": r[col["Kernel Name"]] if "Kernel Name" in col else "",
            "block": r[col["Block Size"]] if "Block Size" in col else "",
            "grid": r[col["Grid Size"]] if "Grid Size" in col else "",
            "device": r[col["Device"]] if "Device" in col else "",
            "cc": r[col["CC"]] if "CC" in col else "", "metrics": {}})
        unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
        entry["metrics"][r[col["Metric Name"]]] = to_base(parse_number(r[col["Metric Value"]]),
                                                          unit)
    return [NcuLaunch(id=_launch_id(lid, n), **e) for n, (lid, e) in enumerate(by_id.items())]


def _launch_id(text: str, default: int) -> int:
    v = parse_number(text)
    return int(v) if v is not None else default


@dataclass(frozen=True)
class SourceLine:
    """One row of the source page: a SASS instruction (or a CUDA source line)."""

    kernel: str
    where: str  # "0x00000070" (SASS address) or "line 12"
    source: str  # the instruction or source text
    samples: int  # Warp Stall Sampling (All Samples)
    not_issued: int  # Warp Stall Sampling (Not-issued Samples)
    executed: int | None  # Instructions Executed
    stalls: dict[str, int] = field(default_factory=dict)  # stall_<reason> columns


def parse_source_csv(text: str) -> list[SourceLine]:
    """`ncu --csv --page source` output -> rows of every kernel in it, in order."""
    rows = _csv_rows(text)
    out: list[SourceLine] = []
    kernel, header = "", None
    for r in rows:
        if r[0] == "Kernel Name":
            kernel, header = (r[1] if len(r) > 1 else ""), None
            continue
        if r[0] in ("Address", "Line No", "#"):
            header = r
            continue
        if r[0] == "File Name" or header is None or len(r) != len(header):
            continue
        col = {name: i for i, name in enumerate(header)}
        samples = _int(r, col, "Warp Stall Sampling (All Samples)",
                       "Warp Stall Sampling (All Cycles)")
        if samples is None:
            continue
        where = r[col["Address"]] if "Address" in col else f"line {r[col.get('Line No', 0)]}"
        out.append(SourceLine(
            kernel=kernel, where=where, source=r[col["Source"]].strip() if "Source" in col else "",
            samples=samples,
            not_issued=_int(r, col, "Warp Stall Sampling (Not-issued Samples)",
                            "Warp Stall Sampling (No Instructions Issued)") or 0,
            executed=_int(r, col, "Instructions Executed"),
            stalls={name.removeprefix("stall_"): v for name in header
                    if name.startswith("stall_") and "Not Issued" not in name
                    and (v := _int(r, col, name))}))
    return out


def _int(r: list[str], col: dict[str, int], *names: str) -> int | None:
    for n in names:
        if n in col:
            v = parse_number(r[col[n]])
            return int(v) if v is not None else None
    return None


def hottest(lines: Sequence[SourceLine], n: int = 5) -> list[HotRegion]:
    """The n lines with the most warp-stall samples, with their share of all samples."""
    total = sum(x.samples for x in lines)
    top = sorted((x for x in lines if x.samples > 0), key=lambda x: -x.samples)[:n]
    starts: dict[str, int] = {}  # SASS addresses are shown as offsets into their kernel
    for x in lines:
        if x.where.startswith("0x"):
            a = int(x.where, 16)
            starts[x.kernel] = min(a, starts.get(x.kernel, a))
    regions = []
    for x in top:
        stalls = [kv for kv in x.stalls.items() if kv[0] != "selected"]  # issuing, not a stall
        why = ", ".join(k for k, _ in sorted(stalls, key=lambda kv: -kv[1])[:2])
        at = f"+0x{int(x.where, 16) - starts[x.kernel]:04x}" if x.where.startswith("0x") \
            else x.where
        where = f"{x.kernel} {at}".strip()
        regions.append(HotRegion(where=where, share=x.samples / total if total else None,
                                 what=x.source + (f"  [{why}]" if why else "")))
    return regions


# -- the summary -----------------------------------------------------------------------
@dataclass(frozen=True)
class NcuSummary:
    """The named metrics of one profiled launch, ready for a ProfileResult."""

    kernel: str
    launches: int  # how many launches the export held
    metrics: dict[str, Metric]
    top_stalls: list[tuple[str, float]]  # (reason, warps stalled per issue), largest first
    hot_regions: list[HotRegion]


def pick_launch(launches: Sequence[NcuLaunch], kernel: str | None = None) -> NcuLaunch | None:
    """The launch of `kernel` (by plain name) that took longest; any kernel when None."""
    cands = [x for x in launches if kernel is None or x.name == kernel or x.kernel == kernel]
    if not cands:
        return None
    return max(cands, key=lambda x: x.value("gpu__time_duration.sum") or 0.0)


def ncu_to_summary_fields(launches: Sequence[NcuLaunch], source: Sequence[SourceLine] = (),
                          *, kernel: str | None = None, top: int = 3,
                          hot_lines: int = 5) -> NcuSummary:
    """Parsed exports -> the named metrics (each a Metric with its unit or why it is None),
    the top stall reasons and the hottest SASS lines."""
    launch = pick_launch(launches, kernel)
    metrics: dict[str, Metric] = {}
    for name, (ncu_name, unit) in SUMMARY_METRICS.items():
        if launch is None:
            metrics[name] = Metric(value=None, unit=unit, reason="no profiled launch")
            continue
        if ncu_name not in launch.metrics:
            metrics[name] = Metric(value=None, unit=unit, reason="not collected")
            continue
        value, got_unit = launch.metrics[ncu_name]
        if value is None:
            metrics[name] = Metric(value=None, unit=unit, reason="n/a in the ncu export")
            continue
        if unit == "ms" and got_unit == "second":
            value *= 1e3
        elif unit == "ms" and got_unit == "":
            value *= 1e-6  # ncu's base unit for gpu__time_duration is nanoseconds
        elif unit == "byte/s" and got_unit not in ("byte/second", ""):
            metrics[name] = Metric(value=None, unit=unit, reason=f"unit {got_unit!r}?")
            continue
        metrics[name] = Metric(value=value, unit=unit, reason="ncu")
    stalls: list[tuple[str, float]] = []
    if launch is not None:
        for reason in STALL_REASONS:
            v = launch.value(STALL_METRIC.format(reason))
            if v is not None and reason != "selected":  # issuing is not a stall
                stalls.append((reason, v))
    stalls.sort(key=lambda kv: -kv[1])
    name = launch.name if launch else (kernel or "")
    src = [x for x in source if not name or not x.kernel or x.kernel.split("(")[0] == name]
    return NcuSummary(kernel=name, launches=len(launches), metrics=metrics,
                      top_stalls=stalls[:top], hot_regions=hottest(src, hot_lines))
