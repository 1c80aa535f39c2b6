"""The regression gate: is a correct candidate faster than the baseline, beyond noise?

Method (also in the README):
- per case, speedup = baseline median / candidate median, both timed in the same
  process in alternating rounds;
- the noise band is the larger of the minimum threshold (default 10%) and twice
  the relative standard error of the two medians, from the measured spreads
  (SE(median) ~ 1.25 sigma / sqrt(N), sigma ~ (P90 - P10) / 2.56), averaged over
  cases with the groups' weights, widened to twice the standard error of the
  per-round overall speedups (each round runs in fresh workers, and worker-to-worker
  variation is the largest noise on a shared machine);
- medians under the backend's timing floor (CPU 20 us, CUDA 5 us: call overhead and
  timer resolution) are clamped to it before speedups are taken;
- the overall speedup is the geometric mean of per-case speedups, averaged within
  each shape group and weighted across groups by op.yaml's weights;
- `faster` needs the overall speedup above 1 + band and no group below
  1 / (1 + band); `slower` is an overall speedup below 1 / (1 + band); anything
  else is `same`. Incorrect kernels are `rejected` before any timing counts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from kernelcrew.results import CaseRow, Verdict


@dataclass(frozen=True)
class GateDecision:
    verdict: Verdict
    speedup: float
    band: float
    group_speedups: dict[str, float]
    reason: str


def relative_se(samples: list[float]) -> float:
    """Relative standard error of the median of the samples."""
    a = np.asarray(samples)
    if len(a) < 3 or np.median(a) <= 0:
        return 0.0
    sigma = (np.percentile(a, 90) - np.percentile(a, 10)) / 2.56
    return float(1.25 * sigma / np.sqrt(len(a)) / np.median(a))


def noise_band(baseline: dict[str, list[float]], candidate: dict[str, list[float]],
               weights: dict[str, float], min_speedup: float) -> float:
    """max(min_speedup, 2 x combined relative SE of the medians, weighted over cases)."""
    num = den = 0.0
    for key, b in baseline.items():
        c = candidate.get(key, [])
        w = weights.get(key.split("[")[0], 1.0)
        num += w * 2 * float(np.hypot(relative_se(b), relative_se(c)))
        den += w
    return max(min_speedup, num / den if den else 0.0)


def weighted_speedup(rows: list[CaseRow], weights: dict[str, float]) -> tuple[float, dict]:
    logs: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.speedup and r.speedup > 0:
            logs[r.group].append(math.log(r.speedup))
    groups = {g: math.exp(sum(v) / len(v)) for g, v in logs.items()}
    wsum = sum(weights.get(g, 1.0) for g in groups)
    if not wsum:
        return 1.0, groups
    total = sum(weights.get(g, 1.0) * math.log(s) for g, s in groups.items()) / wsum
    return math.exp(total), groups


def decide(rows: list[CaseRow], baseline_samples: dict[str, list[float]],
           candidate_samples: dict[str, list[float]], weights: dict[str, float],
           min_speedup: float, against: str = "the baseline",
           round_speedups: list[float] | None = None) -> GateDecision:
    band = noise_band(baseline_samples, candidate_samples, weights, min_speedup)
    s_all = weighted_speedup(rows, weights)[0]
    rounds = [math.log(r) for r in (round_speedups or []) if r and r > 0]
    if len(rounds) > 1 and s_all > 0:
        # rounds that disagree widen the band: the spread between repeated measurements in
        # fresh workers is noise the within-round spread does not see (2 x its SE)
        se = float(np.std(rounds, ddof=1)) / math.sqrt(len(rounds))
        band = max(band, math.exp(2 * se) - 1)
    s, groups = weighted_speedup(rows, weights)
    hi, lo = 1 + band, 1 / (1 + band)
    regressing = {g: v for g, v in groups.items() if v < lo}
    if s >= hi and not regressing:
        verdict: Verdict = "faster"
        reason = f"{s:.2f}x faster, beyond the noise band of ±{band:.0%}"
    elif s >= hi:
        verdict = "same"
        worst = min(regressing, key=regressing.get)
        reason = (f"{s:.2f}x overall but the {worst} group regresses ({regressing[worst]:.2f}x); "
                  "not accepted")
    elif s <= lo:
        verdict = "slower"
        reason = f"{1 / s:.2f}x slower than {against}"
    else:
        verdict = "same"
        reason = f"{s:.2f}x is inside the noise band of ±{band:.0%}"
    return GateDecision(verdict, s, band, groups, reason)
