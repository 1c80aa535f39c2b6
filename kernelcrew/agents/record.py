"""Track records: how each kind of change fared in earlier runs, from the shared memory.

Memory counts reflections per recorded kind, and a merged candidate is recorded under its
compound kind ("simd+omp_parallel+flags"). `kind_records` folds those counts into one
record per part: a merged candidate that helped (accepted, or faster than the incumbent but
outdone in its iteration) counts as help for every part; one that failed is ambiguous (any
part could be at fault), so it counts only as a try for its parts. Records written before
outcomes were stored know only `accepted`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindRecord:
    tried: int = 0
    helped: int = 0  # beat the incumbent (alone or as part of a merge)
    failed: int = 0  # slower, incorrect or did not compile, on its own

    @property
    def proven(self) -> bool:
        """It helped before and never failed on its own."""
        return self.helped > 0 and self.failed == 0

    @property
    def discredited(self) -> bool:
        """It failed on its own before and never helped."""
        return self.failed > 0 and self.helped == 0

    def note(self, kind: str) -> str:
        return (f"{kind} helped {self.helped} of {self.tried} tries"
                + (f", failed {self.failed}" if self.failed else ""))


def parts(kind: str) -> list[str]:
    return [k for k in kind.split("+") if k]


def kind_records(stats: dict[str, dict] | None) -> dict[str, KindRecord]:
    """Per-part records from memory's per-kind counts (see the module docstring)."""
    acc: dict[str, list[int]] = {}
    for kind, s in (stats or {}).items():
        tried = int(s.get("tried", 0) or 0)
        helped = int(s.get("helped", s.get("accepted", 0)) or 0)  # "accepted" only: schema 1
        failed = int(s.get("failed", 0) or 0)
        ps = parts(kind)
        for part in ps:
            t = acc.setdefault(part, [0, 0, 0])
            t[0] += tried
            t[1] += helped
            t[2] += failed if len(ps) == 1 else 0
    return {k: KindRecord(*v) for k, v in acc.items()}


def acceptance_weight(kind: str, records: dict[str, KindRecord]) -> float:
    """A score multiplier from 0.5 to 1.5 (1.0 when unknown): Laplace-smoothed help rate,
    the product over the parts of a compound kind."""
    w = 1.0
    for part in parts(kind):
        r = records.get(part)
        if r is not None and r.tried:
            w *= 0.5 + (r.helped + 1) / (r.tried + 2)
    return w


def confidence_factor(kind: str, records: dict[str, KindRecord]) -> float:
    """A proposal confidence multiplier: 1.0 below two tries; 0.6 for a kind that never
    helped; up to 1.15 for one that always did."""
    r = records.get(kind)
    if r is None or r.tried < 2:
        return 1.0
    rate = r.helped / r.tried
    return 0.6 if rate == 0 else min(1.15, 0.8 + 0.4 * rate)
