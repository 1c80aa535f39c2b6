"""What authors are told is built from structured fields: the judge's own words, the
gate's band and the benchmark's case sizes never reach them; the operator's contract
shows sizes as ranges; compile errors are kept from the first error on."""

from __future__ import annotations

from kernelcrew.agents.contract import contract_of, redact, size_range
from kernelcrew.graph.feedback import (
    INTEGRITY,
    compile_feedback,
    race_note,
    rejection_note,
    wrong_result_feedback,
)
from kernelcrew.kernels.spec import load_op
from kernelcrew.results import CaseRow, CompileResult, CompilerMessage
from tests.conftest import OPS

PROBE = "timed run with a few input elements changed in place (a replayed or cached result?)"


def row(**kw) -> dict:
    base = {"group": "typical", "case": "n=200000", "sizes": {"n": 200000}, "status": "fail"}
    return CaseRow(**{**base, **kw}).model_dump(mode="json")


def test_a_wrong_value_is_told_by_output_index_and_values_not_by_the_judges_words():
    rows = [row(status="pass"),
            row(group="boundary", case="n=31", sizes={"n": 31}, detail=PROBE,
                output="y", worst_index=[30], got=2.5, want=1.5, cause="wrong-values",
                max_abs_err=1.0, max_rel_err=0.667, failing_indices=[[30]])]
    text = wrong_result_feedback(rows, "rtol=1e-05, atol=1e-06")
    assert "boundary case 1 (n odd and not a multiple of 16): wrong values: y[30] is 2.5, " \
           "the reference says 1.5; max abs err 1, max rel err 0.667" in text
    assert "rtol=1e-05, atol=1e-06" in text
    for leak in ("changed in place", "replayed", "n=31", "200000", "probe"):
        assert leak not in text, leak


def test_an_integrity_rejection_says_only_that():
    rows = [row(detail="the worker report lacks the probe run (tampered report?)",
                cause="integrity"), row(output="y", worst_index=[0], got=1.0, want=2.0,
                                        cause="wrong-values")]
    assert wrong_result_feedback(rows, "rtol=1e-05") == f"The candidate was {INTEGRITY}."
    assert rejection_note(rows) == INTEGRITY


def test_unknown_causes_never_fall_back_to_the_detail_text():
    text = rejection_note([row(detail="timings disagree with the parent's clock")])
    assert text == "typical case 1: rejected by the judge's checks"
    note = rejection_note([row(cause="modified-inputs", output="x",
                               detail="the kernel modified its input(s) ['x']")])
    assert note == "typical case 1: input x was written to (inputs are read-only)"


def test_race_notes_carry_ratios_and_groups_never_the_band():
    note = race_note("same", 1.04, {"typical": 1.05, "boundary": 0.98})
    assert note == "no measurable difference (1.04x vs the best); per group: typical 1.05x, " \
                   "boundary 0.98x"


def test_compile_errors_are_kept_from_the_first_error_on():
    log = "\n".join([f"k.cpp: In function 'f': note {i}" for i in range(5)]
                    + ["k.cpp:8:3: error: expected ';' before '}' token"]
                    + [f"k.cpp:{i}:1: error: cascade {i}" for i in range(100)])
    comp = CompileResult(ok=False, reason="compile failed", log=log, messages=[
        CompilerMessage(line=9, kind="warning", message="unused"),
        CompilerMessage(line=8, kind="error", message="expected ';' before '}' token")])
    fb = compile_feedback(comp, max_lines=10)
    lines = fb.splitlines()
    assert lines[1] == "line 8: error: expected ';' before '}' token"  # errors first
    assert "k.cpp:8:3: error: expected ';'" in fb  # the first error of the log is kept
    assert "cascade 0" in fb and "cascade 50" not in fb
    assert fb.endswith("more lines omitted")


def test_the_contract_shows_groups_as_ranges_never_the_cases():
    spec = load_op(OPS / "vadd")
    c = contract_of(spec)
    text = "\n".join(c.lines())
    assert "x: float32[n] (input)" in text and "y: float32[n] (output)" in text
    assert "shape group typical (weight 1): n from 10^5 to 10^6" in text
    assert "shape group boundary (weight 0.25): n from 1 to 10^2; includes n = 1, odd n, " \
           "n not a multiple of 16" in text
    assert "Tolerance: rtol=1e-05, atol=1e-06" in text
    for size in ("200000", "100003", "n=31", "n=1,"):
        assert size not in text
    # a range never starts or ends at one of its own sizes
    assert size_range([1000]) == "10^2 to 10^4" and size_range([999, 12]) == "10 to 10^3"


def test_redact_takes_case_labels_and_sizes_out_of_tool_texts():
    spec = load_op(OPS / "vadd")
    text = redact("typical[0] n=200000: 1.2 GB/s over 200000 elements (line 7)", spec)
    assert text == "a typical case: 1.2 GB/s over N elements (line 7)"
