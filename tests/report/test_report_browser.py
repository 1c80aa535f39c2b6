"""report.html opened in a real headless Chromium: the table and both charts render."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.report.pngread import read_png, region_pixels

CHROMIUM = "/usr/bin/chromium"
# Chromium is an optional system tool: `make test` leaves these out, `make test-tools` runs them
pytestmark = pytest.mark.tools
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

GREEN = (0x1A, 0x98, 0x50)  # best-so-far line and the best kernel's point
BLUE = (0x21, 0x66, 0xAC)  # the bandwidth roof


def _near(px: tuple[int, int, int], color: tuple[int, int, int], tol: int = 40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(px, color, strict=True))


@pytest.fixture(scope="module")
def page(crew_run: dict, tmp_path_factory: pytest.TempPathFactory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; .ci/run "
                    "installs it)")
    from playwright.sync_api import sync_playwright  # the dev extra: pip install -e '.[dev]'

    html = Path(crew_run["run_dir"]) / "report.html"
    assert html.exists(), "finalize did not write report.html"
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000},
                                  device_scale_factor=1)
            pg.on("request", lambda r: requests.append(r.url))
            pg.goto(html.as_uri(), wait_until="load")
            shot = tmp_path_factory.mktemp("shot") / "report.png"
            pg.screenshot(path=str(shot), full_page=True)
            yield pg, requests, shot
        finally:
            browser.close()


def _box(pg, selector: str) -> dict:
    box = pg.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not rendered"
    assert box["width"] > 0 and box["height"] > 0, f"{selector} has no size: {box}"
    return box


def _marks(pg, chart: str, selector: str) -> list[dict]:
    """getBBox() of the drawn marks inside one chart."""
    return pg.eval_on_selector_all(
        f"#{chart} {selector}",
        "els => els.map(e => { const b = e.getBBox(); const s = getComputedStyle(e);"
        " return {w: b.width, h: b.height, cls: e.getAttribute('class'),"
        " visible: s.visibility !== 'hidden' && s.display !== 'none'}; })")


def _pixels(pg, selector: str) -> list[tuple[int, int, int]]:
    """Pixels of one element, from a real screenshot of that region."""
    box = _box(pg, selector)
    png = read_png(pg.screenshot(clip=box, full_page=True))
    return region_pixels(png, {"x": 0, "y": 0, "width": box["width"], "height": box["height"]})


def test_nothing_is_fetched_from_the_network(page):
    _, requests, _ = page
    assert requests, "the page made no request at all (did it load?)"
    assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests


def test_full_page_screenshot_is_taken(page):
    _, _, shot = page
    head = shot.read_bytes()[:32]
    width, height = struct.unpack(">II", head[16:24])  # from the IHDR chunk
    assert head[:4] == b"\x89PNG" and width >= 1000 and height > 1000, (width, height)


def test_regression_table_rows_are_visible(page, crew_run):
    pg, _, _ = page
    _box(pg, "#regression-table")
    rows = pg.locator("#regression-table tbody tr")
    n = rows.count()
    # baseline and best (final race) per shape group, then the candidates
    assert n >= 2 * len(crew_run["group_speedups"]) + 1, n
    for i in range(n):
        box = rows.nth(i).bounding_box()
        assert box and box["height"] > 5 and box["width"] > 300, (i, box)
    statuses = pg.locator("#regression-table td .status").all_inner_texts()
    assert statuses and set(statuses) <= {"pass", "fail", "pending"}, statuses
    first = pg.locator("#regression-table tbody tr").first.inner_text()
    assert "baseline" in first
    dark = [p for p in _pixels(pg, "#regression-table") if sum(p) < 300]
    assert len(dark) > 500, "the table shows no text"


def test_speedup_chart_draws_line_and_points(page, crew_run):
    pg, _, _ = page
    box = _box(pg, "#speedup-chart")
    assert box["width"] > 300 and box["height"] > 200
    line = _marks(pg, "speedup-chart", ".best-line")
    assert len(line) == 1 and line[0]["w"] > 50, line
    cands = _marks(pg, "speedup-chart", ".candidate")
    assert cands and all(m["w"] > 0 and m["h"] > 0 and m["visible"] for m in cands), cands
    final = _marks(pg, "speedup-chart", ".final")
    assert len(final) == 1 and final[0]["w"] > 0 and final[0]["h"] > 0
    px = _pixels(pg, "#speedup-chart")
    green = sum(_near(p, GREEN) for p in px)
    non_white = sum(p != (255, 255, 255) for p in px)
    assert green > 100, f"no best-so-far line in the pixels ({green} green pixels)"
    assert non_white > 0.02 * len(px), "the speedup chart is (nearly) blank"


def test_roofline_chart_draws_roofs_and_both_kernels(page):
    pg, _, _ = page
    box = _box(pg, "#roofline-chart")
    assert box["width"] > 300 and box["height"] > 200
    points = _marks(pg, "roofline-chart", ".roof-point")
    assert len(points) == 2 and all(m["w"] > 0 and m["h"] > 0 for m in points), points
    labels = pg.locator("#roofline-chart .point-label").all_text_contents()
    assert labels == ["baseline", "best"], labels
    roofs = _marks(pg, "roofline-chart", ".roof")
    assert roofs and all(m["w"] > 0 for m in roofs), "no roof drawn: were the peaks unknown?"
    px = _pixels(pg, "#roofline-chart")
    assert sum(_near(p, BLUE) for p in px) > 100, "no bandwidth roof in the pixels"
    assert sum(_near(p, GREEN) for p in px) > 20, "no best-kernel point in the pixels"
