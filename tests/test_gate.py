"""The gate's statistics on synthetic data: the rank-based noise, the band's two parts,
load outliers, and a group's regression judged by the incumbent's own noise (no timing
here; the gate's honesty on a real machine is measured by scripts/gate_honesty.py)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from kernelcrew.results import CaseRow, WorkerOutcome
from kernelcrew.tools.judge.duel import Duel, pooled
from kernelcrew.tools.judge.gate import (
    bootstrap_noise,
    decide,
    load_outliers,
    measured_noise,
    median_ci_ranks,
    own_noise,
)
from kernelcrew.tools.judge.harness import KernelRun


def rows(speedup: float) -> list[CaseRow]:
    return [CaseRow(group=g, case="c", sizes={}, status="pass", speedup=speedup)
            for g in ("typical", "boundary")]


W = {"typical": 1.0, "boundary": 0.25}


def test_median_ci_ranks_cover_at_least_95_percent():
    for n in range(6, 41):
        lo, hi = median_ci_ranks(n)
        assert hi == n + 1 - lo
        cover = 1 - 2 * sum(math.comb(n, j) for j in range(lo)) / 2**n
        assert cover >= 0.95, (n, lo, cover)
        # and the next rank inward would not
        inner = 1 - 2 * sum(math.comb(n, j) for j in range(lo + 1)) / 2**n
        assert inner < 0.95, (n, lo, inner)
    assert median_ci_ranks(10) == (2, 9)
    assert median_ci_ranks(20) == (6, 15)
    assert median_ci_ranks(4) == (1, 4)  # too few for 95%: the whole range


def test_one_outlier_round_moves_the_noise_by_one_rank_not_by_its_size():
    quiet = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.01]
    base = measured_noise(quiet)
    assert base is not None and base < 0.025
    spiky = quiet[:-1] + [1.9]  # a neighbour's job hit one round
    assert measured_noise(spiky) < 0.03
    # the old estimate, sigma = (P90 - P10) / 2.56 over the samples, would have given
    # a band of tens of percent from that one round


def test_noise_covers_the_spread_of_the_median_ratio():
    """Simulated A/A duels: log speedups per round ~ N(0, 4%); the CI of the median
    holds the true ratio (1.0) in at least 95% of them."""
    rng = random.Random(7)
    hits = 0
    trials = 2000
    for _ in range(trials):
        r = [math.exp(rng.gauss(0.0, 0.04)) for _ in range(10)]
        logs = sorted(math.log(x) for x in r)
        lo, hi = median_ci_ranks(10)
        hits += logs[lo - 1] <= 0.0 <= logs[hi - 1]
    assert hits / trials >= 0.95


def test_band_is_the_larger_of_the_minimum_and_the_measured_noise():
    tight = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0]
    g = decide(rows(1.15), W, 0.10, round_speedups=[1.15 * x for x in tight])
    assert g.verdict == "faster" and g.band == pytest.approx(0.10)
    assert g.measured_noise is not None and g.measured_noise < 0.02
    assert "the minimum speedup" in g.reason and "measured noise ±" in g.reason
    # with the threshold lowered, the machine's own noise is the band
    g0 = decide(rows(1.05), W, 0.0, round_speedups=[1.05 * x for x in tight])
    assert g0.verdict == "faster" and g0.band == pytest.approx(g0.measured_noise)
    # noisy rounds widen the band past the threshold: a real 15% cannot be told
    noisy = [0.8, 1.3, 1.0, 1.2, 0.85, 1.1, 0.9, 1.25, 0.95, 1.15]
    gn = decide(rows(1.15), W, 0.10, round_speedups=noisy)
    assert gn.verdict == "same" and gn.band > 0.15 and "the measured noise" in gn.reason


def test_verdicts_slower_and_same():
    r = [0.5, 0.51, 0.49, 0.5, 0.52, 0.5, 0.48, 0.5, 0.51, 0.5]
    assert decide(rows(0.5), W, 0.10, round_speedups=r).verdict == "slower"
    assert decide(rows(1.04), W, 0.10, round_speedups=[1.04] * 10).verdict == "same"
    g = decide(rows(1.2), W, 0.10, round_speedups=[1.2, 1.2])  # too few rounds
    assert g.measured_noise is None and g.band == pytest.approx(0.10)


def test_a_group_regresses_only_beyond_its_own_noise():
    """A group of short cases swinging 0.86x inside its own measured ±20% does not hold
    back a candidate 1.3x faster overall; the same swing measured to ±3% does, and a
    group slower beyond its own noise does too."""
    r = [CaseRow(group="typical", case="t", sizes={}, status="pass", speedup=1.55),
         CaseRow(group="unaligned", case="u", sizes={}, status="pass", speedup=0.86)]
    w = {"typical": 1.0, "unaligned": 0.5}
    noisy = decide(r, w, 0.10, noise=0.05, rounds=20,
                   group_noise={"typical": 0.04, "unaligned": 0.20})
    assert noisy.verdict == "faster", noisy.reason
    tight = decide(r, w, 0.10, noise=0.05, rounds=20,
                   group_noise={"typical": 0.04, "unaligned": 0.03})
    assert tight.verdict == "same" and "the unaligned group regresses (0.86x)" in tight.reason
    r[1] = r[1].model_copy(update={"speedup": 0.7})
    beyond = decide(r, w, 0.10, noise=0.05, rounds=20,
                    group_noise={"typical": 0.04, "unaligned": 0.20})
    assert beyond.verdict == "same"
    assert "the unaligned group regresses (0.70x, its own noise ±20%)" in beyond.reason


def test_two_duels_pool_into_one_with_the_rounds_of_both():
    def run(times: list[float]) -> KernelRun:
        return KernelRun(WorkerOutcome(ok=True), [], {"c": times})

    def duel(a: list[float], b: list[float]) -> Duel:
        return Duel(run(a), run(b), len(a),
                    {"a": {"c": [[t] for t in a]}, "b": {"c": [[t] for t in b]}},
                    [0.1] * len(a))

    both = pooled(duel([1.0, 2.0], [3.0, 4.0]), duel([5.0, 6.0, 7.0], [8.0, 9.0, 10.0]))
    assert both.rounds == 5 and len(both.busy) == 5
    assert [r["c"] for r in both.round_samples("a")] == [[1.0], [2.0], [5.0], [6.0], [7.0]]
    assert [r["c"] for r in both.round_samples("b")] == [[3.0], [4.0], [8.0], [9.0], [10.0]]


def _duel_cases(rng: random.Random, rounds: int, sigma: float, true: float = 1.0,
                outliers: float = 0.0) -> dict:
    """Per case (group, candidate runs per round, baseline runs per round): one run per
    round, log-normal spread `sigma`, the candidate `true` times faster; a share
    `outliers` of the runs costs 7 ms more (a CPU taken away for a whole time slice)."""
    def run(ms: float) -> list[float]:
        t = ms * math.exp(rng.gauss(0.0, sigma))
        return [t + 7.0 if rng.random() < outliers else t]
    cases = {}
    for key, group, ms in (("t0", "typical", 2.0), ("t1", "typical", 0.5),
                           ("b0", "boundary", 0.05)):
        cases[key] = (group, [run(ms / true) for _ in range(rounds)],
                      [run(ms) for _ in range(rounds)])
    return cases


def test_bootstrap_noise_is_not_spoiled_by_slow_runs_in_other_cases():
    """A slow run stays in its own case's median. With one run in twelve costing 7 ms
    more (scattered over three cases and both kernels), a round often holds one, and the
    median of per-round overall speedups is pulled with it in some duels; the bootstrap
    interval of the gate's own estimate stays tight in every one of 40 duels."""
    boot, ranked = [], []
    for seed in range(40):
        cases = _duel_cases(random.Random(seed), 20, 0.02, outliers=0.08)
        boot.append(bootstrap_noise(cases, W, floor=0.02))
        per_round = []
        for r in range(20):
            logs: dict[str, list[float]] = {g: [] for g in W}
            for group, cand, base in cases.values():
                logs[group].append(math.log(max(base[r][0], 0.02) / max(cand[r][0], 0.02)))
            total = sum(W[g] * sum(v) / len(v) for g, v in logs.items()) / sum(W.values())
            per_round.append(math.exp(total))
        ranked.append(measured_noise(per_round))
    assert max(boot) < 0.03
    assert max(ranked) > 0.2  # the same timings, judged round by round


def test_bootstrap_noise_covers_the_true_speedup():
    """Simulated duels of a kernel 1.15x faster, 20 rounds, 5% spread per run: the
    speedup the gate takes (ratio of medians, geometric mean over groups) lies within
    the bootstrap band of the true 1.15x in at least 90% of them (a bootstrap of a median
    of 20 runs covers a little less than its nominal 95%)."""
    rng = random.Random(11)
    hits, trials = 0, 300
    for _ in range(trials):
        cases = _duel_cases(rng, 20, 0.05, true=1.15)
        noise = bootstrap_noise(cases, W, floor=0.0)
        logs = {g: [] for g in W}
        for group, cand, base in cases.values():
            logs[group].append(math.log(statistics.median(b[0] for b in base)
                                        / statistics.median(c[0] for c in cand)))
        est = sum(W[g] * sum(v) / len(v) for g, v in logs.items()) / sum(W.values())
        hits += abs(est - math.log(1.15)) <= math.log(1 + noise)
    assert hits / trials >= 0.90


def test_bootstrap_noise_is_reproducible_and_needs_three_rounds():
    cases = _duel_cases(random.Random(5), 20, 0.03)
    assert bootstrap_noise(cases, W) == bootstrap_noise(cases, W)
    assert bootstrap_noise(_duel_cases(random.Random(5), 2, 0.03), W) is None
    assert bootstrap_noise({}, W) is None
    # the band decide() reports is the one given
    g = decide(rows(1.3), W, 0.10, noise=0.04, rounds=20)
    assert g.measured_noise == 0.04 and g.rounds == 20 and g.verdict == "faster"
    assert "measured noise ±4.0% over 20 rounds" in g.reason


def test_load_outliers_leaves_out_busier_rounds_but_keeps_enough():
    busy = [0.5, 0.52, 0.5, 0.51, 1.0, 0.5, 0.49, 0.5, 0.98, 0.5]
    assert load_outliers(busy) == {4, 8}
    assert load_outliers([0.5] * 10) == set()
    assert load_outliers([0.5, 1.0, 0.5, 1.0, 0.5, 1.0]) == set()  # too few rounds to drop
    many = [0.5, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 0.99, 0.98]
    out = load_outliers(many)
    assert len(many) - len(out) >= 6 and 5 in out and 6 in out


def _rounds(rng: random.Random, ms: float, sigma: float, n: int = 20,
            coin: float = 0.0) -> list[list[float]]:
    """n rounds of one run: log-normal spread `sigma`; with probability `coin` a run takes
    3x as long (a kernel that slows itself at random)."""
    return [[ms * math.exp(rng.gauss(0.0, sigma)) * (3.0 if rng.random() < coin else 1.0)]
            for _ in range(n)]


def test_own_noise_is_the_incumbents_and_a_noisy_challenger_cannot_widen_it():
    """A group's regression is judged against the incumbent's own noise in that group.
    A challenger that makes half its runs 3x slower at random (its mean time in that group
    0.5x the incumbent's) gets no wider band: the incumbent's noise is what it was, and
    the regression shows; the old per-group bootstrap of both kernels grew with the
    challenger's swing and excused it."""
    rng = random.Random(7)
    base = {"u0": _rounds(rng, 1.0, 0.02), "u1": _rounds(rng, 2.0, 0.02)}
    quiet = own_noise(base)
    assert quiet is not None and quiet < 0.05
    coin = {"u0": _rounds(rng, 1.0, 0.02, coin=0.5), "u1": _rounds(rng, 2.0, 0.02, coin=0.5)}
    both = bootstrap_noise({k: ("unaligned", coin[k], base[k]) for k in base},
                           {"unaligned": 1.0})
    assert both is not None and both > 3 * quiet  # what a challenger could inflate
    r = [CaseRow(group="typical", case="t", sizes={}, status="pass", speedup=2.0),
         CaseRow(group="unaligned", case="u", sizes={}, status="pass", speedup=0.55)]
    w = {"typical": 1.0, "unaligned": 0.5}
    g = decide(r, w, 0.10, noise=0.05, rounds=20,
               group_noise={"typical": 0.03, "unaligned": quiet})
    assert g.verdict == "same" and "the unaligned group regresses (0.55x)" in g.reason
    assert own_noise({"u0": _rounds(rng, 1.0, 0.02, n=2)}) is None  # too few rounds


def test_check_json_reports_the_noise_the_threshold_and_the_cache_state_apart():
    import json
    from pathlib import Path

    from tests.conftest import kernelcrew

    tiny = Path(__file__).parent / "adversarial" / "ops" / "tiny_sss"
    r = kernelcrew("check", str(tiny), str(tiny / "baseline.cpp"), "--json", "--reps", "6",
                   "--min-speedup", "3%", "--cache", "cold", env={"KERNELCREW_ROUNDS": "6"})
    doc = json.loads(r.stdout)
    assert doc["correct"] is True, doc["reason"]
    assert doc["min_speedup"] == pytest.approx(0.03) and doc["rounds"] == 6
    assert doc["measured_noise"] is not None and doc["measured_noise"] >= 0
    assert doc["noise_band"] == pytest.approx(max(0.03, doc["measured_noise"]))
    assert set(doc["cache"].values()) == {"cold"}
    bad = kernelcrew("check", str(tiny), str(tiny / "baseline.cpp"), "--min-speedup", "-1")
    assert bad.returncode == 2 and "--min-speedup" in bad.stderr


def test_a_slowdown_in_a_minority_of_the_calls_is_a_regression():
    """A challenger slow on 40% of its calls in one group at random has the median of its
    fast calls there, so the median-based group speedup looks like a win; the tail mean
    (the slowest 10% of the runs clipped) shows the regression and the verdict is not
    `faster`. Honest spread (a few hiccups in both kernels) does not trip it."""
    from kernelcrew.tools.judge.gate import tail_mean

    rng = random.Random(5)
    base = [1.0 * math.exp(rng.gauss(0, 0.02)) for _ in range(20)]
    fast = [0.3 * math.exp(rng.gauss(0, 0.02)) for _ in range(20)]
    coin = [t * (10.0 if i % 5 < 2 else 1.0) for i, t in enumerate(fast)]  # 40% of calls
    assert statistics.median(coin) < statistics.median(base)  # the median is fooled
    tail = tail_mean(base) / tail_mean(coin)
    assert tail < 1.0
    r = [CaseRow(group="typical", case="t", sizes={}, status="pass", speedup=3.0),
         CaseRow(group="unaligned", case="u", sizes={}, status="pass",
                 speedup=statistics.median(base) / statistics.median(coin))]
    w = {"typical": 1.0, "unaligned": 0.5}
    g = decide(r, w, 0.10, noise=0.03, rounds=20, group_noise={"unaligned": 0.02},
               group_tail={"typical": (3.0, 0.02), "unaligned": (tail, 0.02)})
    assert g.verdict == "same" and "regresses in its slower calls" in g.reason, g.reason
    # an honest kernel with a hiccup in two of its runs: still faster
    hiccup = fast[:18] + [f * 8 for f in fast[18:]]
    ok = decide(r, w, 0.10, noise=0.03, rounds=20, group_noise={"unaligned": 0.02},
                group_tail={"typical": (3.0, 0.02),
                            "unaligned": (tail_mean(base) / tail_mean(hiccup), 0.02)})
    assert ok.verdict == "faster", ok.reason
