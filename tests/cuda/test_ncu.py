"""Nsight Compute: the command line, and the CSV parsers on fixtures.

The fixtures are built by hand from NVIDIA's documented CSV format, not captured on a
device (see fixtures/README.md); replace them with captured exports (issue #10).
"""

from __future__ import annotations

import pytest

from kernelcrew.tools.observe.ncu import (
    DEFAULT_METRICS,
    STALL_METRIC,
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


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


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


def test_raw_page_one_launch_skips_prof_lines_and_reads_units() -> None:
    (launch,) = parse_raw_csv(_read("ncu_raw_softmax_base_units.csv"))
    assert (launch.id, launch.name, launch.block, launch.grid, launch.cc) == (
        0, "softmax_rows", "(256, 1, 1)", "(16, 1, 1)", "9.0")
    assert launch.metrics["dram__bytes.sum.per_second"] == (1162335417344.0, "byte/second")
    assert launch.metrics["gpu__time_duration.sum"] == (pytest.approx(28864e-9), "second")
    assert launch.value(STALL_METRIC.format("long_scoreboard")) == 21.73


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


def test_summary_fields_from_one_launch() -> None:
    s = ncu_to_summary_fields(parse_raw_csv(_read("ncu_raw_softmax_base_units.csv")))
    m = {k: v.value for k, v in s.metrics.items()}
    assert s.kernel == "softmax_rows" and s.launches == 1
    assert m["dram_throughput_pct"] == 24.31
    assert m["dram_bytes_per_s"] == 1162335417344.0
    assert m["duration_ms"] == pytest.approx(0.028864)
    assert m["l1_ld_sectors_per_request"] == 31.87 and m["l1_st_sectors_per_request"] == 32
    assert m["l2_hit_rate_pct"] == 61.02 and m["registers_per_thread"] == 30
    assert m["achieved_occupancy_pct"] == 12.47 and m["theoretical_occupancy_pct"] == 100
    assert m["branch_efficiency_pct"] == 99.95
    assert s.top_stalls == [("long_scoreboard", 21.73), ("wait", 0.88),
                            ("short_scoreboard", 0.62)]  # "selected" is not a stall
    assert s.metrics["dram_bytes_per_s"].unit == "byte/s"


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


def test_source_page_sass_rows_and_hot_lines() -> None:
    lines = parse_source_csv(_read("ncu_source_softmax_sass.csv"))
    assert len(lines) == 9 and lines[0].kernel == "softmax_rows"
    assert lines[3].samples == 9874 and lines[3].stalls["long_sb"] == 9790
    assert lines[2].executed == 32768
    hot = hottest(lines, 3)
    assert [h.where for h in hot] == ["softmax_rows +0x0090", "softmax_rows +0x0150",
                                      "softmax_rows +0x0080"]
    assert hot[0].what.startswith("FMNMX") and "long_sb" in hot[0].what
    assert sum(x.samples for x in lines) == 19593
    assert hot[0].share == pytest.approx(9874 / 19593)


def test_summary_carries_the_hot_lines() -> None:
    s = ncu_to_summary_fields(parse_raw_csv(_read("ncu_raw_softmax_base_units.csv")),
                              parse_source_csv(_read("ncu_source_softmax_sass.csv")),
                              hot_lines=2)
    assert [h.where for h in s.hot_regions] == ["softmax_rows +0x0090", "softmax_rows +0x0150"]


def test_source_page_cuda_view_with_line_numbers() -> None:
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
