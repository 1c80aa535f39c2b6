"""One kernel's worker in a run, driven call by call by the parent (`Contender`), and a
kernel run alone (`solo`: verification, profiling re-runs, peers' timings).

Every call follows the same steps, with the worker stopped at both ends (see `session`):
  1. for a timed run: the run's input changes applied to its input set (`Changes`);
  2. the kernel's outputs for that set poisoned (NaN, or the integer poison);
  3. for a cold case: the last-level cache flushed by the parent;
  4. the call, timed by the parent's clock;
  5. every output sampled for poison left in it; a checked run (the first call of every
     input set, and the timed runs `plan_checks` picked) copied whole from the parent's
     mapping and compared with the float64 reference of exactly those inputs;
  6. the changes undone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import Case
from kernelcrew.results import CaseRow, CompileResult, WorkerOutcome
from kernelcrew.tools.judge.records import (
    Changes,
    HarnessView,
    KernelRun,
    case_key,
    fail_row,
    load_error_hint,
    plan_checks,
    poison_all,
)
from kernelcrew.tools.judge.session import Session, SessionFailed
from kernelcrew.tools.sandbox import SandboxRun

RefFor = Callable[[], dict[str, np.ndarray]]


@dataclass
class CaseState:
    """What one contender got on one case so far."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    times: list[float] = field(default_factory=list)  # ms per timed run, in run order
    per_round: list[list[float]] = field(default_factory=list)
    repeats: int = 1
    row: CaseRow | None = None  # a failing row, once the case failed


class Contender:
    """One kernel's worker in a run (see the module text)."""

    def __init__(self, h: HarnessView, comp: CompileResult, kf: KernelFile, *, wall_s: float,
                 wrap: tuple[str, ...] = (), name: str = "worker") -> None:
        self.h, self.kf, self.name = h, kf, name
        self.outputs, self.out_slots = h.fresh_outputs()
        self.out_dir = h.new_run_dir()
        job = h.job(comp, kf, self.outputs, self.out_slots)
        # a worker running the kernel's code on the host is stopped between commands; a
        # device worker runs kernelcrew's host code only (its kernel is device code), and
        # a profiler's re-run judges nothing
        self.freeze = not wrap and h.backend.untrusted_host
        self.session = Session(h, job, self.out_dir, self.outputs, wall_s=wall_s, wrap=wrap,
                               freeze=self.freeze, name=name)
        self.step = h.limits.timeout_s
        self.state: dict[str, CaseState] = {}
        self.failure = ""  # why it failed ("" with `failed`: its exit says why)
        self.failed = False
        self.integrity = False  # the failure is the judge's own check of the worker
        self.where: Case | None = None  # the case it was in when it failed
        self.pick = np.random.default_rng()
        self.phase = "starting"  # starting | loading | running: where a death happened
        self.ended_by_parent = False  # the parent stopped it early (a wrong result, the
        # other kernel of a duel failed): its killed worker is not its failure

    # -- the worker's life ----------------------------------------------------------
    def start(self) -> None:
        s = self.session
        s.start(self.step)
        s.calibrate(self.step, self.h.flusher.flush)
        self.phase = "loading"
        s.command("load", expect="loaded", timeout_s=self.step)
        self.phase = "running"

    def open_case(self, ci: int) -> None:
        self.where = self.h.cases[ci]
        self.state.setdefault(case_key(self.where), CaseState())
        self.session.command("case", ci, expect="ready", timeout_s=self.step)

    def fail(self, e: SessionFailed) -> None:
        self.failed, self.failure, self.integrity = True, e.why, e.integrity

    def out_views(self, ci: int, k: int) -> dict[str, np.ndarray]:
        return {n: self.outputs.array(s) for n, s in self.out_slots[ci][k].items()}

    # -- calls ------------------------------------------------------------------------
    def call(self, ci: int, k: int, cold: bool, check: bool = False) -> float:
        """One call on input set k, its outputs poisoned first; the measured ms per run.
        `check`: the call's outputs will be checked in full (a device worker then also
        looks whether the kernel changed its inputs on the device)."""
        h = self.h
        poison_all(self.out_views(ci, k))
        if cold and h.backend.untrusted_host:
            h.flusher.flush()  # the CPU: the parent evicts; a device worker does it itself
        rep = self.session.command("call", k, int(cold), int(check), expect="done",
                                   timeout_s=self.step, exact=not h.backend.device_timer)
        if not h.backend.device_timer:
            s = self.session
            return max(0.0, rep.ms - (s.cold_overhead_ms if cold and h.backend.untrusted_host
                                      else s.overhead_ms))
        # the device's own timer, read by the worker's host code (not the kernel's)
        try:
            ms, n = float(rep.words[1]), int(rep.words[2])
        except (IndexError, ValueError):
            raise SessionFailed(f"the worker's reply {' '.join(rep.words)[:60]!r} holds no "
                                "time", integrity=True) from None
        if ms * n > rep.ms * 1.05 + 0.05:
            raise SessionFailed(f"the worker reported {ms * n:.4g} ms for a call the parent "
                                f"timed at {rep.ms:.4g} ms", integrity=True)
        changed = next((w.split("=", 1)[1] for w in rep.words[3:]
                        if w.startswith("modified=")), "")
        if changed:
            c = h.cases[ci]
            self.state[case_key(c)].row = fail_row(
                c, f"the kernel modified its input(s) {changed.split(',')}",
                cause="modified-inputs")
        self.state[case_key(h.cases[ci])].repeats = n
        return ms

    def first_calls(self, ci: int) -> bool:
        """The first call on every input set, unchanged inputs, checked in full."""
        c = self.h.cases[ci]
        d = self.h.data(c)
        st = self.state[case_key(c)]
        for k in range(len(d.slots)):
            self.call(ci, k, False, check=True)
            if st.row is not None:
                return False
            got = {n: a.copy() for n, a in self.out_views(ci, k).items()}
            if not self._judge(c, got, d.references[k], f"first call, input set {k}", st):
                return False
        return True

    def timed(self, ci: int, r: int, changes: Changes, checked: bool, ref_for: RefFor,
              cold: bool, judge: bool = True) -> bool:
        """Timed run r of case ci on its input set, with its changes; False when it failed."""
        c = self.h.cases[ci]
        d = self.h.data(c)
        st = self.state[case_key(c)]
        views = d.inputs(changes.set)
        changes.apply(views)
        try:
            st.times.append(self.call(ci, changes.set, cold, check=checked))
            if st.row is not None:
                return False
            if not judge:
                return True
            outs = self.out_views(ci, changes.set)
            when = f"timed run {r} (inputs changed since the first call), input set {changes.set}"
            row = self.h.unwritten(c, outs, d.references[changes.set], self.pick, when,
                                   confirm=ref_for)
            if row is not None:
                st.row = row
                return False
            if checked:
                got = {n: a.copy() for n, a in outs.items()}
                return self._judge(c, got, ref_for(), when, st)
            return True
        finally:
            changes.undo(views)

    def warm(self, ci: int, k: int, n: int) -> None:
        if n > 0:
            self.session.command("warm", k, n, expect="done", timeout_s=self.step * max(1, n))

    def _judge(self, c: Case, got: dict, ref: dict, when: str, st: CaseState) -> bool:
        row, a, r = self.h.judge_outputs(c, got, ref, when)
        if row is not None:
            st.row = row
            return False
        st.max_abs, st.max_rel = max(st.max_abs, a), max(st.max_rel, r)
        return True

    # -- the end ------------------------------------------------------------------------
    def finish(self, finished: bool) -> None:
        """End the worker: a polite `end` when the run finished, else kill its sandbox."""
        s = self.session
        if finished and not self.failed:
            try:
                s.command("end", expect="bye", timeout_s=self.step, stop=False)
            except SessionFailed as e:
                self.fail(e)
        s.close_pipes()
        if not finished:
            self.ended_by_parent = True
        if s.thread.ident is not None:
            s.thread.join(self.step if finished else 2.0)
            if s.thread.is_alive():
                s.kill()
                s.thread.join(15.0)
        s.release()

    def result(self, *, keep: bool = False, judge: bool = True) -> KernelRun:
        """The run as a KernelRun: the outcome of the worker, a row per case."""
        h = self.h
        run = self.session.run or SandboxRun(None, True, 0.0, "", "", "")
        reason = ""
        if self.failed:
            reason = self.failure or self._exit_reason(run)
            if self.where is not None and " in case " not in reason:
                reason += f" in case {case_key(self.where)} ({self.where.label})"
            if not self.failure and run.signal_name in ("SIGSEGV", "SIGBUS") and \
                    self.phase == "running" and self.h.backend.untrusted_host:
                reason += (" (a kernel's inputs are read-only memory: a write to one faults, "
                           "as does an access out of bounds)")
        ok = not self.failed and (run.returncode == 0 or self.ended_by_parent)
        if not ok and not reason:
            reason = self._exit_reason(run)
        outcome = WorkerOutcome(ok=ok, reason=reason, seconds=run.seconds, sandbox=run.sandbox)
        rows, samples, repeats = [], {}, {}
        for c in h.cases:
            key = case_key(c)
            st = self.state.get(key)
            if st is None:
                # a case after the one a kernel crashed or hung in was not run: the failure
                # is that case's, not this one's (the judge's own findings mark them all)
                later = self.where is not None and c is not self.where and not self.integrity
                rows.append(CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                                    detail=(f"not run: {reason}" if later else reason)
                                    or "not run (the run ended before it)",
                                    cause=self._cause() if reason and not later else "not-run"))
                continue
            if st.row is not None:
                row = st.row
            elif self.failed and c is self.where:
                row = CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                              detail=reason, cause=self._cause())
            elif not judge:
                row = CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="pending",
                              detail="not judged (a profiling re-run)")
            else:
                row = CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="pass",
                              max_abs_err=st.max_abs, max_rel_err=st.max_rel)
            if st.times:
                t = np.asarray(st.times)
                row.median_ms = float(np.median(t))
                row.p10_ms = float(np.percentile(t, 10))
                row.p90_ms = float(np.percentile(t, 90))
                row.runs_per_timing = st.repeats
                samples[key] = list(map(float, t))
                repeats[key] = st.repeats
            rows.append(row)
        if not keep:
            shutil.rmtree(self.out_dir, ignore_errors=True)
        self.outputs.close()
        return KernelRun(outcome, rows, samples, out_dir=self.out_dir if keep else None,
                         repeats=repeats, overhead_ms=self.session.overhead_ms,
                         jitter_ms=self.session.jitter_ms)

    def _cause(self) -> str:
        if self.integrity:
            return "integrity"
        run = self.session.run
        if run is not None and run.timed_out or "timed out" in self.failure:
            return "timeout"
        return "crash"

    def _exit_reason(self, run: SandboxRun) -> str:
        # a CPU kernel runs inside the worker and controls what it prints: quoting its
        # stderr would hand the kernel a channel to the verdict (a host file's lines)
        quote = not self.h.backend.untrusted_host or bool(os.environ.get("KERNELCREW_DEBUG"))
        if run.returncode == 0 and not run.timed_out:
            return "worker exited before it was done"
        what = run.describe(quote_stderr=quote)
        if self.phase == "starting" and not run.timed_out:
            what += " while starting the worker"
        elif self.phase == "loading" and not run.timed_out:
            what += " while loading the kernel"
            if not quote:
                what += load_error_hint(run.stderr, self.kf)
        return f"kernel {what}"


def solo(h: HarnessView, comp: CompileResult, kf: KernelFile, *, mode: str, reps: int,
         wrap: tuple[str, ...] = (), keep: bool = False, judge: bool = True) -> KernelRun:
    """One kernel alone: the first calls on every case (`verify`), then in `bench` mode
    `reps` timed runs per case, rotating over the input sets (a warm case gets the op's
    warm-up calls first)."""
    cn = Contender(h, comp, kf, wall_s=h.limits.timeout_s * (2 * len(h.cases) + 3) + 10,
                   wrap=wrap)
    seed = [int(x) for x in np.random.default_rng().integers(0, 2**31, size=2)]
    finished = False
    try:
        cn.session.thread.name = "kernelcrew-worker"
        cn.start()
        for ci, c in enumerate(h.cases):
            cn.open_case(ci)
            if judge and not cn.first_calls(ci):
                break
            if mode != "bench":
                continue
            d = h.data(c)
            cold = h.cache_state(c) == "cold"
            if not cold:
                cn.warm(ci, 0, h.bench.warmup)
            checked = plan_checks(reps, len(d.slots)) if judge else set()
            try:
                for r in range(reps):
                    k = r % len(d.slots)
                    changes = h.fresh_changes(c, k, seed + [r])
                    if not cn.timed(ci, r, changes, r in checked,
                                    lambda c=c, k=k, d=d: h.reference(c, d.inputs(k)), cold,
                                    judge):
                        break
            finally:
                for k in range(len(d.slots)):
                    d.restore(k)
            if cn.state[case_key(c)].row is not None:
                break
        else:
            finished = True
    except SessionFailed as e:
        cn.fail(e)
    finally:
        cn.finish(finished)
    return cn.result(keep=keep, judge=judge)

