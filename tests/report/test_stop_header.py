"""The report's header gives why the run stopped in one line; the moves a run with nothing
left to try lists (every move of the catalogue, several thousand characters) are folded
below it, once, and the timeline does not repeat them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.reflect import stop_reason
from kernelcrew.report.build import build_report, split_stop_reason
from kernelcrew.report.html import render_html
from kernelcrew.report.markdown import render_markdown
from tests.graph.test_stop_reason import state_for


@pytest.fixture
def long_reason(tmp_path: Path) -> str:
    """The stop reason the crew writes when nothing is left to try (the real function)."""
    reason = stop_reason(state_for(tmp_path), RunContext())
    assert reason.startswith("nothing left to try") and len(reason) > 1500, len(reason)
    return reason


def test_the_reason_splits_into_one_line_and_the_moves(long_reason: str) -> None:
    stop = split_stop_reason(long_reason)
    assert "\n" not in stop.line and len(stop.line) < 120, stop.line
    assert stop.line.startswith("nothing left to try: no specialist had a new proposal; ")
    assert stop.line.endswith(f"{len(stop.considered)} moves considered")
    # each item is one move, whole: a reason's own `; ` inside parentheses stays in it
    assert len(stop.considered) == long_reason.count(" (tried: ") + long_reason.count(
        " (not applicable: ") + long_reason.count(" (applies; ")
    assert all(i.count("(") == i.count(")") for i in stop.considered), stop.considered
    assert "flags (tried: accepted)" in stop.considered
    assert "unroll (applies; no specialist's evidence called for it)" in stop.considered
    # a reason without the list is left as it is
    assert split_stop_reason("max iterations (2)").line == "max iterations (2)"
    assert split_stop_reason("max iterations (2)").considered == []


def test_header_shows_one_line_and_folds_the_moves(crew_run: dict, tmp_path: Path,
                                                   long_reason: str) -> None:
    """A real run's folder whose result carries the long reason, as a run that stopped with
    nothing left to try does."""
    run_dir = tmp_path / "run"
    shutil.copytree(crew_run["run_dir"], run_dir)
    result = json.loads((run_dir / "result.json").read_text())
    result["stop_reason"] = long_reason
    (run_dir / "result.json").write_text(json.dumps(result))
    rep = build_report(run_dir)
    stop = split_stop_reason(long_reason)
    assert dict(rep.facts)["stop reason"] == stop.line
    assert rep.considered == stop.considered

    html = render_html(rep)
    head, rest = html.split('<section class="charts">', 1)
    assert f'<div class="stop" id="stop-reason"><b>stop:</b> {stop.line}</div>' in head
    assert head.count("stop:") == 1 and stop.line in head  # once, not twice
    folded = head.split('<details class="considered" id="moves-considered">', 1)[1]
    assert "<details" not in folded and " open" not in folded.split(">", 1)[0]  # closed
    assert folded.count("<li>") == len(stop.considered)
    assert "moves considered: " not in rest  # the timeline keeps to the one line

    md = render_markdown(rep)
    top = md.split("## Regression table", 1)[0]
    assert f"- **stop reason**: {stop.line}" in top
    assert top.count("<details>") == 1 and top.count("\n- ") >= len(stop.considered)
    assert "moves considered: " not in md.split("## Regression table", 1)[1]


@pytest.mark.tools  # Chromium: an optional system tool (make test-tools)
def test_header_in_chromium_is_short_until_the_moves_are_opened(crew_run: dict, tmp_path: Path,
                                                                 long_reason: str) -> None:
    """In a real browser the stop reason is one line of text and the charts begin right
    under the facts; the folded list opens on a click."""
    from tests.report.test_report_browser import ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; .ci/run "
                    "installs it)")
    from playwright.sync_api import sync_playwright

    run_dir = tmp_path / "run"
    shutil.copytree(crew_run["run_dir"], run_dir)
    result = json.loads((run_dir / "result.json").read_text())
    result["stop_reason"] = long_reason
    (run_dir / "result.json").write_text(json.dumps(result))
    html = run_dir / "report.html"
    html.write_text(render_html(build_report(run_dir)))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.goto(html.as_uri(), wait_until="load")
            stop = pg.locator("#stop-reason").bounding_box()
            line = pg.evaluate("parseFloat(getComputedStyle("
                               "document.querySelector('#stop-reason')).lineHeight)")
            assert stop and stop["height"] <= 1.5 * line, (stop, line)
            folded = pg.locator("#moves-considered").bounding_box()
            assert folded and folded["height"] <= 1.5 * line, folded
            assert not pg.locator("#moves-considered li").first.is_visible()
            charts = pg.locator("section.charts").bounding_box()
            assert charts and charts["y"] < 500, charts  # the charts on the first screen
            pg.click("#moves-considered summary")
            assert pg.locator("#moves-considered li").first.is_visible()
            assert pg.locator("#moves-considered").bounding_box()["height"] > 5 * line
        finally:
            browser.close()
