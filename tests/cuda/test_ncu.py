"""Nsight Compute: the command line, and the CSV parsers on fixtures.

`ncu_captured_h200_*.csv` are real exports, captured on an NVIDIA H200 (driver
580.159.04, CUDA 13.0, ncu 2025.3.1.0) by
`test_gpu.py::test_ncu_profiles_one_kernel_of_a_worker_run`: the raw page of one
`softmax_rows` baseline launch, the same with `--section SourceCounters` exported to a
report, and that report's SASS source page (`--import ... --page source`). The values
asserted on them were read from the files. The other `ncu_*.csv` (several launches with
auto-scaled units, the long details form) are still built by hand from NVIDIA's
documented format; see fixtures/README.md for which is which and the command lines.
"""

from __future__ import annotations

import csv

import pytest

from kernelcrew.tools.observe.ncu import (
    DEFAULT_METRICS,
    STALL_METRIC,
    SUMMARY_METRICS,
    hottest,
    ncu_command,
    ncu_import_command,
    ncu_path,
    ncu_prefix,
    ncu_to_summary_fields,
    parse_number,
    parse_raw_csv,
    parse_source_csv,
    to_base,
)
from tests.cuda.helpers import FIXTURES

RAW = "ncu_captured_h200_softmax_raw.csv"  # --page raw --print-units base --metrics ...
SC_RAW = "ncu_captured_h200_softmax_sourcecounters_raw.csv"  # the same + SourceCounters
SOURCE = "ncu_captured_h200_softmax_source.csv"  # --import of SC_RAW's report, --page source


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def _columns(name: str) -> dict[str, tuple[str, str]]:
    """A captured one-launch raw export read with the csv module alone: {column: (unit,
    text)}, to check the parser against the file itself."""
    lines = [ln for ln in _read(name).splitlines() if ln.startswith('"')]
    header, units, row = csv.reader(lines)
    return {h: (u, v) for h, u, v in zip(header, units, row, strict=True)}


def test_command_is_non_interactive_and_targets_one_kernel() -> None:
    argv = ncu_command("/s/job.json", kernel="softmax_rows", ncu="/opt/ncu", python="/py")
    assert argv[0] == "/opt/ncu"
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert "--csv" in argv and argv[argv.index("--page") + 1] == "raw"
    assert argv[argv.index("--print-units") + 1] == "base"
    assert argv[argv.index("-k") + 1] == "regex:^softmax_rows$"
    assert argv[argv.index("-c") + 1] == "1"
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert metrics == list(DEFAULT_METRICS)
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in metrics
    assert argv[-4:] == ["/py", "-m", "kernelcrew.tools.judge.worker", "/s/job.json"]


def test_prefix_with_source_counters_export_and_skip() -> None:
    argv = ncu_prefix(kernel="a.b", sections=["SourceCounters"], launch_skip=2,
                      export="/o/rep", ncu="ncu")
    assert argv[argv.index("-k") + 1] == r"regex:^a\.b$"
    assert argv[argv.index("--section") + 1] == "SourceCounters"
    assert argv[argv.index("-s") + 1] == "2"
    assert argv[-3:] == ["-f", "-o", "/o/rep"]
    imp = ncu_import_command("/o/rep.ncu-rep", page="source", ncu="ncu")
    assert imp[:3] == ["ncu", "--import", "/o/rep.ncu-rep"]
    assert imp[imp.index("--print-source") + 1] == "sass"


@pytest.mark.parametrize(("text", "value"), [("1,234,567", 1234567.0), ("24.31", 24.31),
                                             ("n/a", None), ("", None), ("(256, 1, 1)", None)])
def test_numbers(text, value) -> None:
    assert parse_number(text) == value


def test_units_are_scaled_to_base() -> None:
    assert to_base(3.91, "Tbyte/second") == (pytest.approx(3.91e12), "byte/second")
    assert to_base(25.5, "usecond") == (pytest.approx(25.5e-6), "second")
    assert to_base(28864.0, "nsecond") == (pytest.approx(28864e-9), "second")
    assert to_base(12.0, "%") == (12.0, "%")


def test_captured_raw_page_identity_units_and_values() -> None:
    (launch,) = parse_raw_csv(_read(RAW))
    assert (launch.id, launch.name, launch.kernel, launch.block, launch.grid, launch.device,
            launch.cc) == (0, "softmax_rows", "softmax_rows", "(256, 1, 1)", "(16, 1, 1)",
                           "0", "9.0")
    m = launch.metrics
    # base units as ncu 2025.3 prints them: "ns" and "byte/s", not "nsecond", "byte/second"
    assert m["gpu__time_duration.sum"] == (pytest.approx(834560e-9), "second")
    assert m["dram__bytes.sum.per_second"] == (pytest.approx(21563496932.52), "byte/second")
    assert m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == (0.45, "%")
    assert m["launch__registers_per_thread"] == (30.0, "register/thread")
    assert (launch.value("launch__block_size"), launch.value("launch__grid_size")) == (256, 16)
    assert m["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"] == (
        32.0, "sector")
    assert m["lts__t_sector_hit_rate.pct"] == (96.30, "%")
    assert m[STALL_METRIC.format("long_scoreboard")] == (43.60, "inst")  # unit "inst", not ""
    # ncu adds ~300 columns it was not asked for: device attributes, launch__*, .avg/.min/.max
    assert m["launch__sm_count"] == (132.0, "SM")
    assert m["launch__thread_count"] == (4096.0, "thread")  # "4,096"
    assert m["gpu__time_duration.max"] == (pytest.approx(834560e-9), "second")
    assert m["device__attribute_display_name"] == (None, "")  # "NVIDIA H200": a word
    assert len(m) == 311 - 11  # every column but the 11 identity ones


@pytest.mark.parametrize("name", [RAW, SC_RAW])
def test_captured_summary_metrics_match_their_columns(name: str) -> None:
    """Each summary metric is the number in its own column of the file, in its unit."""
    cols = _columns(name)
    s = ncu_to_summary_fields(parse_raw_csv(_read(name)))
    for field_name, (metric, _unit) in SUMMARY_METRICS.items():
        unit, text = cols[metric]
        want = float(text.replace(",", ""))
        if metric == "gpu__time_duration.sum":
            assert unit == "ns"
            want *= 1e-6  # ns -> ms
        assert s.metrics[field_name].value == pytest.approx(want), field_name
        assert s.metrics[field_name].reason == "ncu"


def test_raw_page_three_launches_auto_units_and_na() -> None:
    launches = parse_raw_csv(_read("ncu_raw_three_kernels_auto_units.csv"))
    assert [x.name for x in launches] == ["add_kernel", "gelu_kernel", "muladd_kernel"]
    assert launches[1].metrics["lts__t_sector_hit_rate.pct"] == (None, "%")
    assert launches[2].value("gpu__time_duration.sum") == pytest.approx(1025.5e-6)
    assert launches[0].grid == "(16,384, 1, 1)"


def test_long_details_form_is_read_too() -> None:
    (launch,) = parse_raw_csv(_read("ncu_details_long.csv"))
    assert launch.name == "transpose"
    assert launch.kernel.startswith("transpose(const float *")
    assert launch.value("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio") \
        == 32.0


def test_no_csv_means_no_launches() -> None:
    assert parse_raw_csv("==PROF== Connected\n==ERROR== No kernels were profiled.\n") == []


def test_summary_fields_from_the_captured_launch() -> None:
    s = ncu_to_summary_fields(parse_raw_csv(_read(RAW)))
    m = {k: v.value for k, v in s.metrics.items()}
    assert s.kernel == "softmax_rows" and s.launches == 1
    assert m["duration_ms"] == pytest.approx(0.83456)
    assert m["dram_throughput_pct"] == 0.45
    assert m["dram_bytes_per_s"] == pytest.approx(21563496932.52)
    assert m["sm_throughput_pct"] == 0.76
    assert m["l1_ld_sectors_per_request"] == 32 and m["l1_st_sectors_per_request"] == 32
    assert m["l2_hit_rate_pct"] == 96.30 and m["registers_per_thread"] == 30
    assert m["achieved_occupancy_pct"] == 12.49 and m["theoretical_occupancy_pct"] == 100
    assert m["branch_efficiency_pct"] == 100
    assert s.top_stalls == [("long_scoreboard", 43.60), ("wait", 1.80),
                            ("short_scoreboard", 1.28)]  # "selected" (1) is not a stall
    assert s.metrics["dram_bytes_per_s"].unit == "byte/s"
    sc = ncu_to_summary_fields(parse_raw_csv(_read(SC_RAW)))  # the second, separate run
    assert sc.metrics["duration_ms"].value == pytest.approx(0.838624)
    assert sc.top_stalls[0] == ("long_scoreboard", 43.61)


def test_summary_picks_the_longest_launch_and_says_what_is_missing() -> None:
    launches = parse_raw_csv(_read("ncu_raw_three_kernels_auto_units.csv"))
    s = ncu_to_summary_fields(launches)
    assert s.kernel == "muladd_kernel" and s.launches == 3
    assert s.metrics["dram_bytes_per_s"].value == pytest.approx(3.95e12)
    assert s.metrics["branch_efficiency_pct"].value is None
    assert s.metrics["branch_efficiency_pct"].reason == "not collected"
    g = ncu_to_summary_fields(launches, kernel="gelu_kernel")
    assert g.metrics["l2_hit_rate_pct"].reason == "n/a in the ncu export"
    none = ncu_to_summary_fields(launches, kernel="nope")
    assert all(v.value is None for v in none.metrics.values()) and none.top_stalls == []


def test_captured_source_page_sass_rows() -> None:
    lines = parse_source_csv(_read(SOURCE))
    assert len(lines) == 528 and {x.kernel for x in lines} == {"softmax_rows"}
    first = lines[0]  # ncu indents the SASS text: "      LDC R1, c[0x0][0x28]"
    assert (first.where, first.source, first.samples, first.not_issued, first.executed,
            first.stalls) == ("0x7f5d997a0000", "LDC R1, c[0x0][0x28]", 4, 4, 128,
                              {"no_inst": 4})
    assert lines[9].source == "@P0   EXIT" and lines[9].where == "0x7f5d997a0090"
    assert (lines[-1].where, lines[-1].source, lines[-1].executed) == ("0x7f5d997a20f0",
                                                                       "NOP", 0)
    fchk = next(x for x in lines if x.where == "0x7f5d997a1360")
    assert (fchk.source, fchk.samples, fchk.not_issued, fchk.executed) == (
        "FCHK P0, R0, R13", 1644, 1599, 32768)
    # short stall names; the "(Not Issued)" columns are left out
    assert fchk.stalls == {"long_sb": 1637, "selected": 4, "wait": 3}


def test_captured_source_totals_match_the_sourcecounters_raw_export() -> None:
    """The per-instruction samples add up to the kernel-wide counters of the same report."""
    lines = parse_source_csv(_read(SOURCE))
    (launch,) = parse_raw_csv(_read(SC_RAW))
    assert sum(x.samples for x in lines) == launch.value("smsp__pcsamp_sample_count") == 12846
    assert sum(x.executed or 0 for x in lines) == launch.value("inst_executed") == 4352128
    for short, raw in [("long_sb", "long_scoreboard"), ("short_sb", "short_scoreboard"),
                       ("wait", "wait"), ("selected", "selected"),
                       ("branch_resolving", "branch_resolving"), ("lg", "lg_throttle"),
                       ("no_inst", "no_instructions")]:
        got = sum(x.stalls.get(short, 0) for x in lines)
        assert got == launch.value(f"smsp__pcsamp_warps_issue_stalled_{raw}"), short
    assert sum(x.stalls.get("long_sb", 0) for x in lines) == 11555


def test_captured_hot_lines() -> None:
    lines = parse_source_csv(_read(SOURCE))
    hot = hottest(lines, 3)
    assert [h.where for h in hot] == ["softmax_rows +0x1360", "softmax_rows +0x0bd0",
                                      "softmax_rows +0x1560"]
    assert hot[0].what == "FCHK P0, R0, R13  [long_sb, wait]"
    assert hot[1].what == "FADD R9, R9, -R12  [long_sb, wait]"
    assert hot[0].share == pytest.approx(1644 / 12846)


def test_summary_carries_the_hot_lines() -> None:
    s = ncu_to_summary_fields(parse_raw_csv(_read(SC_RAW)), parse_source_csv(_read(SOURCE)),
                              kernel="softmax_rows", hot_lines=2)
    assert [h.where for h in s.hot_regions] == ["softmax_rows +0x1360", "softmax_rows +0x0bd0"]
    assert s.hot_regions[1].share == pytest.approx(1353 / 12846)


def test_source_page_cuda_view_with_line_numbers() -> None:
    # built by hand: only the SASS view has been captured so far
    text = ('"Kernel Name","k"\n"File Name","/s/kernel.cu"\n'
            '"Line No","Source","Warp Stall Sampling (All Samples)",'
            '"Warp Stall Sampling (Not-issued Samples)"\n'
            '"12","    acc += x[i];","1,500","1,400"\n"13","    y[i] = acc;","20","5"\n')
    lines = parse_source_csv(text)
    assert [(x.where, x.samples) for x in lines] == [("line 12", 1500), ("line 13", 20)]
    assert hottest(lines, 1)[0].where == "k line 12"


def test_ncu_can_be_turned_off_and_pointed_at(monkeypatch) -> None:
    monkeypatch.setenv("KERNELCREW_NCU", "none")
    assert ncu_path() is None
    monkeypatch.setenv("KERNELCREW_NCU", "/opt/nsight/ncu")
    assert ncu_path() == "/opt/nsight/ncu"
