"""The judge's records, shared by the harness and the runs it drives: a kernel's run,
one case's inputs, the changes of a timed run, which runs are checked, failing rows.

Nothing here starts a process. `HarnessView` is what a run (`runs`, `session`) needs of
the harness, so those modules do not import it."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import Case, OpSpec
from kernelcrew.results import CaseRow, CompileResult, WorkerOutcome
from kernelcrew.tools.backends.backend import Backend
from kernelcrew.tools.backends.buffers import poison
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.shm import SharedBuffer, Slot
from kernelcrew.tools.judge.verify import Comparison
from kernelcrew.tools.sandbox import SandboxRun

CHECKED_RUNS = 3  # timed runs per case checked in full (besides every first call)


@dataclass
class CaseData:
    """One case's inputs (every input set, in one shared buffer) and references."""

    case: Case
    buffer: SharedBuffer
    slots: list[dict[str, Slot]]  # per input set: input name -> where it lives
    references: list[dict[str, np.ndarray]]  # per input set, on the inputs as made
    refreshed: tuple[str, ...]  # the inputs a timed run finds changed
    # per input set, the float inputs as made (the parent's own copy): a timed run's
    # inputs are made from them anew (see `Changes`)
    base: list[dict[str, np.ndarray]] = field(default_factory=list)

    def inputs(self, k: int) -> dict[str, np.ndarray]:
        """Input set k, the parent's (writable) view."""
        return {n: self.buffer.array(s) for n, s in self.slots[k].items()}

    def restore(self, k: int) -> None:
        """Input set k as made (after timed runs changed it)."""
        views = self.inputs(k)
        for name, a in self.base[k].items():
            views[name][...] = a

    def close(self) -> None:
        self.buffer.close()


REFRESH_PERIOD = 4099  # length of a run's multiplier pattern (a prime)


@dataclass
class Changes:
    """One timed run's inputs, new to the worker (see `Harness.fresh_changes`): every
    element of a float input scaled by 1 + d (|d| between 2^-9 and 2^-6, a pattern of
    REFRESH_PERIOD factors drawn per run and repeated, rotated by a random offset), and
    about 1 in 64 elements of an integer input swapped with others of the same input."""

    set: int
    where: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # ints: name -> (idx, old, new)
    scale: dict[str, tuple[np.ndarray, np.ndarray, tuple[float, float] | None]] = \
        field(default_factory=dict)  # floats: name -> (its base, the factors, its domain)

    def apply(self, views: dict[str, np.ndarray]) -> None:
        for name, (base, factors, domain) in self.scale.items():
            _scaled(base.reshape(-1), factors, views[name].reshape(-1), domain)
        for name, (idx, _, new) in self.where.items():
            views[name].reshape(-1)[idx] = new

    def undo(self, views: dict[str, np.ndarray]) -> None:
        """The swaps undone; scaled inputs stay as they are until the next run writes them
        anew from their base (a pass less per run), and `CaseData.restore` puts the base
        back when the case is done."""
        for name, (idx, old, _) in self.where.items():
            views[name].reshape(-1)[idx] = old  # duplicates hold the same old value


def _scaled(base: np.ndarray, factors: np.ndarray, out: np.ndarray,
            domain: tuple[float, float] | None) -> None:
    """out = base x factors repeated along it, in one pass (clipped to the domain)."""
    p = factors.size
    whole = base.size - base.size % p
    if whole:
        np.multiply(base[:whole].reshape(-1, p), factors, out=out[:whole].reshape(-1, p))
    if base.size > whole:
        np.multiply(base[whole:], factors[: base.size - whole], out=out[whole:])
    if domain is not None:
        np.clip(out, domain[0], domain[1], out=out)


@dataclass
class KernelRun:
    """One worker's run of one kernel over the cases, judged."""

    outcome: WorkerOutcome
    rows: list[CaseRow]
    samples: dict[str, list[float]] = field(default_factory=dict)  # case key -> ms
    out_dir: Path | None = None  # the worker's scratch, when the caller asked to keep it
    # case key -> runs of the plan behind each timing (CUDA times a short plan N times
    # back to back and reports ms per run; 1 on the CPU)
    repeats: dict[str, int] = field(default_factory=dict)
    overhead_ms: float = 0.0  # the calibrated cost of a call of nothing, subtracted
    # how much more than that least a call of nothing took (its median): measured
    # before the kernel was loaded, the round trip's jitter the clock cannot see through
    jitter_ms: float = 0.0

    @property
    def correct(self) -> bool:
        return self.outcome.ok and all(r.status == "pass" for r in self.rows)

    def first_failure(self) -> str:
        wrong = next((f"wrong result in {r.group} case {r.case}: {r.detail}" for r in self.rows
                      if r.status == "fail" and r.cause != "not-run"
                      and r.detail != self.outcome.reason), "")
        if not self.outcome.ok:
            return self.outcome.reason + (f"; before that: {wrong}" if wrong else "")
        return wrong


def case_key(c: Case) -> str:
    return f"{c.group}[{c.index}]"


def case_cache_state(mode: str, llc_bytes: int | None, working_set: int) -> str:
    """`cold` or `warm` for a case whose rotating input sets move `working_set` bytes per
    round: the mode itself unless it is `auto`, then warm when that fits in half the
    last-level cache (the data would stay resident between calls), cold otherwise. The one
    rule for the kernels' harness and for the peers timed next to them."""
    if mode != "auto":
        return mode
    return "warm" if llc_bytes and working_set * 2 <= llc_bytes else "cold"


def plan_checks(reps: int, nsets: int = 1, pick: np.random.Generator | None = None
                ) -> set[int]:
    """The timed runs of a case checked in full: CHECKED_RUNS picked at random, and the
    last run of every input set (a kernel that goes wrong after enough calls is caught at
    the end; the worker is never told how many runs there will be). The parent's secret:
    every run looks the same to the worker."""
    pick = pick or np.random.default_rng(secrets.randbits(64))
    n = min(reps, CHECKED_RUNS)
    chosen = {int(r) for r in pick.choice(reps, size=n, replace=False)} if n else set()
    return chosen | set(range(max(0, reps - nsets), reps))


def fail_row(c: Case, detail: str, cmp: Comparison | None = None, cause: str = "") -> CaseRow:
    """A failing row for case c: `detail` for people, the comparison's data for agents."""
    if cmp is None:
        return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                       detail=detail, cause=cause or None)
    return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                   max_abs_err=_finite(cmp.max_abs_err), max_rel_err=_finite(cmp.max_rel_err),
                   detail=detail, failing_indices=cmp.failing_indices, output=cmp.output,
                   worst_index=cmp.worst_index, got=cmp.got, want=cmp.want,
                   cause=cmp.cause or cause or None)


def poison_all(outs: dict[str, np.ndarray]) -> None:
    for a in outs.values():
        poison(a)


class HarnessView(Protocol):
    """What a kernel's run needs of the harness (see `harness.Harness`)."""

    spec: OpSpec
    backend: Backend
    limits: Limits
    bench: BenchSettings
    cases: list[Case]
    python: str

    @property
    def flusher(self) -> Flusher: ...
    def data(self, case: Case) -> CaseData: ...
    def fresh_changes(self, case: Case, k: int, seed: Sequence[int]) -> Changes: ...
    def reference(self, case: Case, ins: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...
    def fresh_outputs(self) -> tuple[SharedBuffer, list[list[dict[str, Slot]]]]: ...
    def new_run_dir(self) -> Path: ...
    def job(self, comp: CompileResult, kf: KernelFile, outputs: SharedBuffer,
            out_slots: list[list[dict[str, Slot]]]) -> dict: ...
    def cache_state(self, c: Case) -> str: ...
    def judge_outputs(self, c: Case, got: dict[str, np.ndarray],
                      ref: dict[str, np.ndarray], when: str,
                      atol_scale: dict[str, float] | None = None
                      ) -> tuple[CaseRow | None, float, float]: ...
    def unwritten(self, c: Case, got: dict[str, np.ndarray], base: dict[str, np.ndarray],
                  pick: np.random.Generator, when: str,
                  confirm: Callable[[], dict[str, np.ndarray]] | None = None
                  ) -> CaseRow | None: ...
    def confined(self, job: dict, out_dir: Path, wrap: Sequence[str] = (),
                 timeout_s: float | None = None, pass_fds: Sequence[int] = (),
                 on_start: Callable[[int], None] | None = None, notify: int | None = None,
                 notify_ready: Callable[[bool], None] | None = None) -> SandboxRun: ...


class Flusher:
    """Evicts the last-level cache before a cold call: a read-only sweep over twice its
    size, done by the parent on the worker's CPU while the worker is stopped (dirty
    lines are written back during the sweep, not during the timed call)."""

    def __init__(self, llc_bytes: int | None) -> None:
        self.buf = np.ones(max(2 * (llc_bytes or 32 << 20), 1 << 20) // 8, dtype=np.uint64)
        self.sink = 0

    def flush(self) -> None:
        self.sink = int(self.buf.sum())


def digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(a).data, digest_size=32).digest()


def load_error_hint(stderr: str, kf: KernelFile) -> str:
    """Why the library did not load, from the worker's stderr, naming only identifiers
    that are in the kernel's own source (the kernel may have written that stderr: a name
    it did not already contain would be a channel out of the sandbox)."""
    m = None
    for m in re.finditer(r"undefined symbol: ([A-Za-z_][A-Za-z0-9_]{0,200})", stderr):
        pass
    if m is None:
        return ""
    symbol = m.group(1)
    names = [symbol] if re.search(rf"\b{symbol}\b", kf.text) else []
    for d in re.finditer(r"\d+", symbol):  # a C++ (mangled) name: _Z18helper_not_definedf
        n = int(d.group(0))
        name = symbol[d.end(): d.end() + n]
        if len(name) == n and re.fullmatch(r"[A-Za-z_]\w*", name) and \
                re.search(rf"\b{name}\b", kf.text):
            names.append(name)
    if symbol == kf.meta.entry and names:
        return f": the entry function {symbol!r} is not in the library (is it extern \"C\"?)"
    if names:
        return f": undefined symbol {names[0]!r} (declared but not defined?)"
    return ": an undefined symbol"


def _finite(x: float) -> float | None:
    return x if np.isfinite(x) else None
