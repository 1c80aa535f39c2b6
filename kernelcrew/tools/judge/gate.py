"""The regression gate: is a correct candidate faster than the baseline, beyond noise?

Method (also in docs/judging.md, 'The gate'):
- the two kernels are timed in many short alternating rounds (kernelcrew.tools.judge.duel);
  per case, speedup = baseline median / candidate median over all rounds;
- medians under the timing floor (the backend's, CPU 0.2 ms: the parent's clock times a
  round trip to the stopped worker; CUDA 5 us: launch overhead and the events' resolution;
  raised where a call of nothing jitters more, see judge.timing_floor) are clamped to it
  before speedups are taken;
- the overall speedup is the geometric mean of per-case speedups, averaged within
  each shape group and weighted across groups by op.yaml's weights;
- the measured noise is the half-width of a 95% bootstrap interval of that overall
  speedup: the rounds are resampled (a round keeps both kernels' runs of every case
  together) and the gate's own estimate (per-case ratio of medians, then the weighted
  geometric mean) is taken again on each resample (`bootstrap_noise`). Medians, so one
  slow run (a neighbour's job, a CPU taken for a few milliseconds) moves a case's
  median by one rank, not by its size, and a slow run in one case does not spoil the
  round's other cases. Rounds during which the machine was much busier than in the
  others are left out first (see `load_outliers`). `measured_noise`, the rank-based
  interval of the median of per-round speedups, remains for callers that only have
  per-round figures;
- the band is the larger of that measured noise and the minimum threshold (default
  10%, `--min-speedup`): a win must clear both;
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
    measured_noise: float | None = None  # the CI half-width alone (None: too few rounds)
    min_speedup: float = 0.0
    rounds: int = 0  # rounds the noise was measured over (after load outliers)


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """1-based ranks (lo, hi) of the order statistics bounding the median of n samples
    with at least `confidence` (binomial, distribution-free); (1, n) when n is too
    small for that confidence (then the coverage is 1 - 2^(1-n))."""
    alpha = (1 - confidence) / 2
    k, cdf = 0, 0.0
    # largest k with P(Binomial(n, 1/2) <= k - 1) <= alpha
    for j in range(n + 1):
        cdf += math.comb(n, j) / 2**n
        if cdf > alpha:
            break
        k = j + 1
    k = max(1, k)
    return k, n + 1 - k


def measured_noise(round_speedups: list[float], confidence: float = 0.95) -> float | None:
    """Relative half-width of the rank-based CI for the median per-round speedup, or None
    with fewer than 3 rounds (no spread can be told from so few)."""
    logs = sorted(math.log(r) for r in round_speedups if r and r > 0)
    if len(logs) < 3:
        return None
    lo, hi = median_ci_ranks(len(logs), confidence)
    return math.exp((logs[hi - 1] - logs[lo - 1]) / 2) - 1


BOOTSTRAP_RESAMPLES = 2000


def bootstrap_noise(cases: dict[str, tuple[str, list[list[float]], list[list[float]]]],
                    weights: dict[str, float], floor: float = 0.0, confidence: float = 0.95,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> float | None:
    """Relative half-width of the bootstrap interval of the overall speedup.

    `cases` maps a case to (its group, the candidate's runs per round, the baseline's
    runs per round), the rounds in the same order for both and for every case. Each
    resample draws rounds with replacement, takes per case the baseline's median over
    the drawn rounds' runs over the candidate's (each clamped to `floor`), averages the
    logs per group and weights the groups as `weighted_speedup` does. None with fewer
    than 3 rounds. The seed is fixed: the same timings give the same band."""
    rounds = {len(c) for _, c, _ in cases.values()} | {len(b) for _, _, b in cases.values()}
    if not cases or len(rounds) != 1 or (n := rounds.pop()) < 3:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    by_group: dict[str, list[np.ndarray]] = defaultdict(list)
    for group, cand, base in cases.values():
        by_group[group].append(_resampled_median(base, idx, floor)
                               - _resampled_median(cand, idx, floor))
    wsum = sum(weights.get(g, 1.0) for g in by_group)
    if not wsum:
        return None
    total = sum(weights.get(g, 1.0) * np.mean(v, axis=0) for g, v in by_group.items()) / wsum
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(total, [alpha, 1 - alpha])
    return float(math.exp((hi - lo) / 2) - 1)


def _resampled_median(per_round: list[list[float]], idx: np.ndarray, floor: float
                      ) -> np.ndarray:
    """log(max(median, floor)) of the runs of the rounds each row of `idx` draws."""
    m = min(len(r) for r in per_round)
    if m == 0:
        return np.zeros(idx.shape[0])
    # rounds hold the same number of runs unless reps is not a multiple of rounds: the
    # first m of each round are resampled then
    runs = np.array([r[:m] for r in per_round], dtype=float)  # (rounds, m)
    drawn = runs[idx].reshape(idx.shape[0], -1)
    return np.log(np.maximum(np.median(drawn, axis=1), max(floor, 1e-12)))


TRIM = 0.1  # the share of a kernel's slowest runs a tail mean clips (machine hiccups)


def _winsorized(sorted_runs: np.ndarray) -> np.ndarray:
    """Each row (sorted) with its slowest TRIM of runs set to the slowest run kept."""
    n = sorted_runs.shape[-1]
    clip = int(n * TRIM)
    if clip and n > clip:
        sorted_runs = sorted_runs.copy()
        sorted_runs[..., n - clip:] = sorted_runs[..., n - clip - 1: n - clip]
    return sorted_runs


def tail_mean(times: list[float] | np.ndarray, floor: float = 0.0) -> float:
    """The mean of a kernel's runs with the slowest TRIM of them clipped to the slowest run
    kept (a winsorized mean), clamped to the timing floor. Unlike the median it sees a
    slowdown in a minority of the calls (a kernel slow on 40% of them at random has the
    median of its fast calls); a rare hiccup of the machine still does not move it. A
    slowdown in more than TRIM of the calls counts in full: clipping, unlike leaving the
    slowest runs out, keeps a kernel whose slow calls just outnumber TRIM from being
    judged on its fast calls alone."""
    t = _winsorized(np.sort(np.asarray(times, dtype=float)))
    return max(float(t.mean()), floor)


def own_noise(per_case: dict[str, list[list[float]]], floor: float = 0.0,
              confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = 0, stat: str = "median") -> float | None:
    """The noise of one kernel alone over a set of cases (one group): the bootstrap
    interval of the mean log-median over its rounds, widened by sqrt(2) to stand for a
    ratio of two kernels that vary as much as this one. Taken from the incumbent's runs
    only, it judges whether a challenger's group regressed: a challenger cannot widen it
    by making its own runs noisy. None with fewer than 3 rounds."""
    rounds = {len(v) for v in per_case.values()}
    if not per_case or len(rounds) != 1 or (n := rounds.pop()) < 3:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    each = _resampled_median if stat == "median" else _resampled_tail_mean
    total = np.mean([each(v, idx, floor) for v in per_case.values()], axis=0)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(total, [alpha, 1 - alpha])
    return float(math.exp(math.sqrt(2) * (hi - lo) / 2) - 1)


def _resampled_tail_mean(per_round: list[list[float]], idx: np.ndarray, floor: float
                         ) -> np.ndarray:
    """log(tail_mean) of the runs of the rounds each row of `idx` draws."""
    m = min(len(r) for r in per_round)
    if m == 0:
        return np.zeros(idx.shape[0])
    runs = np.array([r[:m] for r in per_round], dtype=float)
    drawn = _winsorized(np.sort(runs[idx].reshape(idx.shape[0], -1), axis=1))
    return np.log(np.maximum(drawn.mean(axis=1), max(floor, 1e-12)))


def load_outliers(busy: list[float], margin: float = 0.25, keep_at_least: int = 6) -> set[int]:
    """Rounds during which the machine was much busier than usual: a busy share above
    the rounds' median by more than `margin` (another job started). At least
    `keep_at_least` rounds are kept (the least busy ones)."""
    if len(busy) <= keep_at_least:
        return set()
    med = float(np.median(busy))
    out = {i for i, b in enumerate(busy) if b > med + margin}
    if len(busy) - len(out) < keep_at_least:
        worst = sorted(out, key=lambda i: busy[i], reverse=True)
        out = set(worst[: len(busy) - keep_at_least])
    return out


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


def decide(rows: list[CaseRow], weights: dict[str, float], min_speedup: float,
           against: str = "the baseline",
           round_speedups: list[float] | None = None,
           noise: float | None = None, rounds: int | None = None,
           group_noise: dict[str, float | None] | None = None,
           group_tail: dict[str, tuple[float, float | None]] | None = None) -> GateDecision:
    """The verdict. The measured noise is `noise` when given (`bootstrap_noise` over
    `rounds` rounds), else the rank-based interval of `round_speedups`.

    A group regresses when its speedup is below the band, or below its own measured
    noise where that is wider (`group_noise`, the bootstrap interval of the group alone):
    a group of short cases can swing more than the whole, and a swing inside its own
    noise is not a measured regression. `group_tail`: per group, the speedup of the tail
    means (`tail_mean`: a slowdown in a minority of the calls) and its noise, both
    measured against the incumbent; a group regresses by it too."""
    if noise is None:
        noise = measured_noise(round_speedups or [])
        rounds = len(round_speedups or [])
    rounds = rounds or 0
    band = max(min_speedup, noise or 0.0)
    s, groups = weighted_speedup(rows, weights)
    hi, lo = 1 + band, 1 / (1 + band)
    gn = group_noise or {}
    regressing = {g: v for g, v in groups.items() if v < 1 / (1 + max(band, gn.get(g) or 0.0))}
    tails = {g: v for g, (v, tn) in (group_tail or {}).items()
             if g not in regressing and v < 1 / (1 + max(band, tn or 0.0))}
    what = "the minimum speedup" if band == min_speedup else "the measured noise"
    if s >= hi and not regressing and not tails:
        verdict: Verdict = "faster"
        reason = f"{s:.2f}x faster, beyond the band of ±{band:.0%} ({what})"
    elif s >= hi and tails:
        verdict = "same"
        worst = min(tails, key=tails.get)
        reason = (f"{s:.2f}x overall but the {worst} group regresses in its slower calls "
                  f"({tails[worst]:.2f}x by the mean of the runs, the slowest {TRIM:.0%} "
                  "clipped); not accepted")
    elif s >= hi:
        verdict = "same"
        worst = min(regressing, key=regressing.get)
        own = gn.get(worst)
        reason = (f"{s:.2f}x overall but the {worst} group regresses ({regressing[worst]:.2f}x"
                  + (f", its own noise ±{own:.0%}" if own and own > band else "")
                  + "); not accepted")
    elif s <= lo:
        verdict = "slower"
        reason = f"{1 / s:.2f}x slower than {against}"
    else:
        verdict = "same"
        reason = f"{s:.2f}x is inside the band of ±{band:.0%} ({what})"
    if noise is not None:
        reason += f"; measured noise ±{noise:.1%} over {rounds} rounds"
    return GateDecision(verdict, s, band, groups, reason, measured_noise=noise,
                        min_speedup=min_speedup, rounds=rounds)
