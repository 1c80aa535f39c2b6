"""Inline SVG charts for the run report: no scripts, no fonts, no network.

Two charts: speedup per iteration (best-so-far line and every evaluated candidate) and
a roofline (log-log) with the baseline and the best kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from kernelcrew.report.timeline import SpeedupHistory

W, H = 640, 380
LEFT, RIGHT, TOP, BOTTOM = 70, 24, 44, 56

OUTCOME_COLORS = {
    "accepted": "#1a9850", "faster-not-best": "#4575b4", "same": "#878787",
    "slower": "#f46d43", "declined": "#984ea3", "pending": "#bdbdbd",
    "rejected": "#d73027", "compile-error": "#d73027",
}
_FAILED = ("rejected", "compile-error")


@dataclass
class Scale:
    lo: float
    hi: float
    a: float  # pixel of lo
    b: float  # pixel of hi
    log: bool = False

    def __call__(self, v: float) -> float:
        if self.log:
            v, lo, hi = math.log10(v), math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        return self.a + (v - lo) / (hi - lo) * (self.b - self.a)


def _f(v: float) -> str:
    return f"{v:.1f}"


def _num(v: float) -> str:
    """Axis label of a power of ten or a plain tick."""
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def _frame(chart_id: str, title: str, body: list[str], xlabel: str, ylabel: str) -> str:
    return "\n".join([
        (f'<svg id="{chart_id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" '
        f'width="{W}" height="{H}" role="img" aria-label="{escape(title)}" class="chart">'),
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
        f'<text x="{W / 2}" y="20" text-anchor="middle" class="chart-title">{escape(title)}</text>',
        *body,
        (f'<text x="{LEFT + (W - LEFT - RIGHT) / 2}" y="{H - 12}" text-anchor="middle" '
        f'class="axis-label">{escape(xlabel)}</text>'),
        (f'<text transform="translate(16,{TOP + (H - TOP - BOTTOM) / 2}) rotate(-90)" '
        f'text-anchor="middle" class="axis-label">{escape(ylabel)}</text>'),
        "</svg>"])


def _axes(xs: Scale, ys: Scale, xticks: list[float], yticks: list[float],
          xfmt=_num, yfmt=_num) -> list[str]:
    out = ['<g class="grid" stroke="#e5e5e5" stroke-width="1">']
    out += [f'<line x1="{_f(xs(t))}" y1="{TOP}" x2="{_f(xs(t))}" y2="{H - BOTTOM}"/>'
            for t in xticks]
    out += [f'<line x1="{LEFT}" y1="{_f(ys(t))}" x2="{W - RIGHT}" y2="{_f(ys(t))}"/>'
            for t in yticks]
    out.append("</g>")
    out.append(f'<g class="axes" stroke="#333" stroke-width="1.2"><line x1="{LEFT}" '
               f'y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}"/><line x1="{LEFT}" '
               f'y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}"/></g>')
    out += [f'<text x="{_f(xs(t))}" y="{H - BOTTOM + 18}" text-anchor="middle" '
            f'class="tick">{xfmt(t)}</text>' for t in xticks]
    out += [f'<text x="{LEFT - 8}" y="{_f(ys(t) + 4)}" text-anchor="end" class="tick">'
            f"{yfmt(t)}</text>" for t in yticks]
    return out


def _nice_step(span: float, n: int = 5) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _legend(items: list[tuple[str, str]], x: float, y: float) -> list[str]:
    out, cx = [], x
    for label, mark in items:
        out.append(f'<g transform="translate({_f(cx)},{_f(y)})">{mark}'
                   f'<text x="10" y="4" class="legend">{escape(label)}</text></g>')
        cx += 22 + 6.5 * len(label)
    return out


def _cross(x: float, y: float, color: str, title: str) -> str:
    return (f'<path class="mark candidate failed" d="M{_f(x - 5)},{_f(y - 5)} L{_f(x + 5)},'
            f'{_f(y + 5)} M{_f(x - 5)},{_f(y + 5)} L{_f(x + 5)},{_f(y - 5)}" stroke="{color}" '
            f'stroke-width="2.5"><title>{escape(title)}</title></path>')


def speedup_chart(history: SpeedupHistory, final: float | None, iterations: int,
                  chart_id: str = "speedup-chart") -> str:
    """Best-so-far speedup after each iteration's gate, and every evaluated candidate."""
    n = max([iterations, *(i for i, _ in history.best_line), 1])
    ys_all = [s for _, s in history.best_line] + [c.speedup for c in history.candidates
                                                  if c.speedup] + ([final] if final else [])
    top = max(ys_all + [1.0]) * 1.15
    step = _nice_step(top)
    top = math.ceil(top / step) * step
    xs = Scale(-0.3, n + 0.3, LEFT, W - RIGHT)
    ys = Scale(0.0, top, H - BOTTOM, TOP)
    xticks = list(range(0, n + 1, max(1, math.ceil(n / 12))))
    yticks = [k * step for k in range(round(top / step) + 1)]
    body = _axes(xs, ys, [float(t) for t in xticks], yticks,
                 xfmt=lambda t: "base" if t == 0 else f"{t:g}", yfmt=lambda t: f"{t:g}x")
    body.append(f'<line class="baseline-ref" x1="{LEFT}" y1="{_f(ys(1.0))}" x2="{W - RIGHT}" '
                f'y2="{_f(ys(1.0))}" stroke="#555" stroke-dasharray="5,4" stroke-width="1"/>')
    # best-so-far as a step line: it only moves at a gate
    pts = []
    for k, (it, s) in enumerate(history.best_line):
        if k:
            pts.append(f"L{_f(xs(it))},{_f(ys(history.best_line[k - 1][1]))}")
        pts.append(f"{'M' if not k else 'L'}{_f(xs(it))},{_f(ys(s))}")
    if history.best_line and history.best_line[-1][0] < n:
        pts.append(f"L{_f(xs(n))},{_f(ys(history.best_line[-1][1]))}")
    body.append(f'<path class="mark best-line" d="{" ".join(pts)}" fill="none" '
                f'stroke="#1a9850" stroke-width="3"><title>best so far</title></path>')
    for it, s in history.best_line:
        body.append(f'<circle class="mark best-point" cx="{_f(xs(it))}" cy="{_f(ys(s))}" r="3.5"'
                    f' fill="#1a9850"><title>best after iteration {it}: {s:.2f}x</title></circle>')
    per_iter: dict[int, list] = {}
    for c in history.candidates:
        per_iter.setdefault(c.iteration, []).append(c)
    for it, cands in per_iter.items():
        for k, c in enumerate(cands):
            x = xs(it + (k - (len(cands) - 1) / 2) * min(0.12, 0.6 / len(cands)))
            color = OUTCOME_COLORS.get(c.outcome, "#555")
            name = c.path.rsplit("/", 1)[-1]
            if c.outcome in _FAILED or (c.speedup is None and c.correct is False):
                body.append(_cross(x, ys(0) - 8, color, f"{name} ({c.author}): {c.outcome}"))
            elif c.speedup:
                body.append(f'<circle class="mark candidate" cx="{_f(x)}" cy="{_f(ys(c.speedup))}"'
                            f' r="6" fill="{color}" fill-opacity="0.85" stroke="#fff" '
                            f'stroke-width="1"><title>{escape(name)} ({escape(c.author)}): '
                            f"{c.speedup:.2f}x vs baseline, {c.outcome}</title></circle>")
    if final:
        x, y = xs(n), ys(final)
        body.append(f'<path class="mark final" d="M{_f(x)},{_f(y - 8)} L{_f(x + 8)},{_f(y)} '
                    f'L{_f(x)},{_f(y + 8)} L{_f(x - 8)},{_f(y)} Z" fill="#fee08b" '
                    f'stroke="#333" stroke-width="1.2"><title>final race vs the baseline: '
                    f"{final:.2f}x</title></path>")
        body.append(f'<text x="{_f(x - 12)}" y="{_f(y - 10)}" text-anchor="end" class="note">'
                    f"final {final:.2f}x</text>")
    legend = [("best so far",
               '<line x1="-6" y1="0" x2="6" y2="0" stroke="#1a9850" stroke-width="3"/>')]
    seen = {c.outcome for c in history.candidates}
    legend += [(o, f'<circle r="5" fill="{OUTCOME_COLORS[o]}"/>') for o in
               ("accepted", "faster-not-best", "same", "slower", "declined", "pending")
               if o in seen]
    if seen & set(_FAILED):
        legend.append(("rejected / no compile", ('<path d="M-4,-4 L4,4 M-4,4 L4,-4" '
                       'stroke="#d73027" stroke-width="2.5"/>')))
    if final:
        legend.append(("final race", ('<path d="M0,-6 L6,0 L0,6 L-6,0 Z" fill="#fee08b" '
                       'stroke="#333"/>')))
    body += _legend(legend, LEFT + 8, TOP - 10)
    return _frame(chart_id, "Speedup over the baseline per iteration", body, "iteration",
                  "speedup vs baseline")


@dataclass
class RoofPoint:
    label: str  # "baseline" | "best"
    time_ms: float
    bytes: int
    flops: int
    source: str  # where the point came from, for the caption

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def gflops(self) -> float:
        return self.flops / (self.time_ms * 1e-3) / 1e9

    @property
    def gbps(self) -> float:
        return self.bytes / (self.time_ms * 1e-3) / 1e9


@dataclass
class RoofData:
    case: str
    points: list[RoofPoint]
    peak_gbps: float | None
    peak_gflops: float | None
    peaks_source: str  # where the peaks came from, or why there are none


def _decades(lo: float, hi: float) -> tuple[float, float, list[float]]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b <= a:
        b = a + 1
    return 10.0 ** a, 10.0 ** b, [10.0 ** k for k in range(a, b + 1)]


_POINT_STYLE = {"baseline": ("#4d4d4d", "square"), "best": ("#1a9850", "circle")}


def _point(x: float, y: float, label: str, title: str, k: int) -> list[str]:
    """A labelled point; the first label goes left of its mark, the others right."""
    color, shape = _POINT_STYLE.get(label, ("#4575b4", "circle"))
    mark = (f'<rect class="mark roof-point" x="{_f(x - 6)}" y="{_f(y - 6)}" width="12" '
            f'height="12" fill="{color}">' if shape == "square" else
            f'<circle class="mark roof-point" cx="{_f(x)}" cy="{_f(y)}" r="7" fill="{color}">')
    end = "</rect>" if shape == "square" else "</circle>"
    return [f"{mark}<title>{escape(title)}</title>{end}",
            (f'<text x="{_f(x - 12 if k == 0 else x + 12)}" y="{_f(y + 4 + 12 * (k // 2))}" '
            f'text-anchor="{"end" if k == 0 else "start"}" class="point-label">{escape(label)}'
            "</text>")]


def roofline_chart(data: RoofData, chart_id: str = "roofline-chart") -> str:
    """Log-log roofline: attainable GFLOP/s against arithmetic intensity.

    An op that does no arithmetic (a copy, a transpose) has no intensity to plot; its
    chart is the bandwidth roof instead: achieved GB/s against the bytes it moves."""
    pts = [p for p in data.points if p.time_ms and p.time_ms > 0 and p.bytes > 0]
    if not pts:
        body = [(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" class="note">no timed '
                "point to place: the run has neither a profile nor a final race</text>")]
        return _frame(chart_id, "Roofline", body, "", "")
    zero_flops = all(p.flops == 0 for p in pts)
    bw, fl = data.peak_gbps, data.peak_gflops
    body: list[str] = []
    if zero_flops:
        xv = [p.bytes for p in pts]
        yv = [p.gbps for p in pts] + ([bw] if bw else [])
        x0, x1, xt = _decades(min(xv) / 3, max(xv) * 3)
        y0, y1, yt = _decades(min(yv) / 3, max(yv) * 2)
        xs, ys = Scale(x0, x1, LEFT, W - RIGHT, True), Scale(y0, y1, H - BOTTOM, TOP, True)
        body += _axes(xs, ys, xt, yt, xfmt=_bytes)
        if bw:
            body.append(f'<path class="mark roof" d="M{LEFT},{_f(ys(bw))} L{W - RIGHT},'
                        f'{_f(ys(bw))}" stroke="#2166ac" stroke-width="2.5" fill="none">'
                        f"<title>peak bandwidth {bw:.1f} GB/s</title></path>")
            body.append(f'<text x="{W - RIGHT - 4}" y="{_f(ys(bw) - 6)}" text-anchor="end" '
                        f'class="roof-label">peak {bw:.1f} GB/s</text>')
        for k, p in enumerate(pts):
            body += _point(xs(p.bytes), ys(p.gbps), p.label,
                           f"{p.label}: {p.gbps:.2f} GB/s, {p.time_ms:.4g} ms ({p.source})", k)
        title = f"Bandwidth roofline ({data.case}; the op does no arithmetic)"
        return _frame(chart_id, title, body, "bytes moved (cost model)", "achieved GB/s")
    xv = [max(p.intensity, 1e-6) for p in pts]
    yv = [max(p.gflops, 1e-6) for p in pts]
    ridge = fl / bw if bw and fl else None
    x0, x1, xt = _decades(min(xv + ([ridge] if ridge else [])) / 4,
                          max(xv + ([ridge] if ridge else [])) * 4)
    y0, y1, yt = _decades(min(yv) / 4, max(yv + ([fl] if fl else [])) * 2)
    xs, ys = Scale(x0, x1, LEFT, W - RIGHT, True), Scale(y0, y1, H - BOTTOM, TOP, True)
    body += _axes(xs, ys, xt, yt)
    if bw:
        # bandwidth roof: y = bw * x, clipped to the plot and to the compute roof
        xa = max(x0, y0 / bw)
        xb = min(x1, ridge if ridge else x1, y1 / bw)
        body.append(f'<path class="mark roof" d="M{_f(xs(xa))},{_f(ys(bw * xa))} '
                    f'L{_f(xs(xb))},{_f(ys(bw * xb))}" stroke="#2166ac" stroke-width="2.5" '
                    f'fill="none"><title>bandwidth roof {bw:.1f} GB/s</title></path>')
        lx = math.sqrt(xa * xb)
        body.append(f'<text transform="translate({_f(xs(lx))},{_f(ys(bw * lx) - 8)}) '
                    f'rotate({_f(_slope_deg(xs, ys, xa, xb, bw))})" text-anchor="middle" '
                    f'class="roof-label">{bw:.1f} GB/s</text>')
    if fl:
        xa = ridge if ridge else x0
        body.append(f'<path class="mark roof" d="M{_f(xs(max(xa, x0)))},{_f(ys(fl))} '
                    f'L{W - RIGHT},{_f(ys(fl))}" stroke="#b2182b" stroke-width="2.5" '
                    f'fill="none"><title>compute roof {fl:.1f} GFLOP/s</title></path>')
        body.append(f'<text x="{W - RIGHT - 4}" y="{_f(ys(fl) - 6)}" text-anchor="end" '
                    f'class="roof-label">peak {fl:.0f} GFLOP/s</text>')
    for k, p in enumerate(pts):
        body += _point(xs(max(p.intensity, 1e-6)), ys(max(p.gflops, 1e-6)), p.label,
                       f"{p.label}: {p.gflops:.3g} GFLOP/s, {p.gbps:.2f} GB/s, {p.time_ms:.4g} ms, "
                       f"intensity {p.intensity:.3g} FLOP/B ({p.source})", k)
    return _frame(chart_id, f"Roofline ({data.case})", body, "arithmetic intensity (FLOP/byte)",
                  "GFLOP/s")


def _slope_deg(xs: Scale, ys: Scale, xa: float, xb: float, bw: float) -> float:
    dx, dy = xs(xb) - xs(xa), ys(bw * xb) - ys(bw * xa)
    return math.degrees(math.atan2(dy, dx)) if dx else 0.0


def _bytes(v: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= size:
            return f"{v / size:g} {unit}"
    return f"{v:g} B"
