"""Inputs a kernel was never timed on, checked before a win is accepted.

The op's cases (`op.yaml`) and its inputs (standard normal by default) are known in
advance, so a kernel could be right only on them: code specialized to the listed sizes,
or math that is wrong for values a standard normal rarely reaches (a GELU that returns 0
for |x| > 6.5). Before `judge` accepts a win it verifies the challenger on:
- UNSEEN_CASES sizes the op does not list, drawn at random near the op's own cases
  (each size between half and twice the anchor's, never a listed value, the case at most
  UNSEEN_MAX_BYTES; a size listed only as 0 or 1, a flag or a mode, keeps its value), in
  a fresh sandboxed worker;
- on each of them, input sets beyond the standard normal: large magnitudes (x 30), ties
  and exact zeros (rounded to halves), tiny values down to subnormal numbers, and, for an
  op that declares `specials: true`, a few NaN and infinities in place; each only for the
  float inputs the op draws itself (inputs an op's `inputs.py` makes keep their
  structure) and inside the input's `domain:` where the op declares one.

The op's baseline is the arbiter of which of these the op defines: an input set on which
the baseline does not match the float64 reference (the reference is undefined there, or
the op's contract does not cover it) is dropped before the challenger sees it.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import Case, OpSpec
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.judge.harness import Harness
from kernelcrew.tools.judge.harness import case_key as _key
from kernelcrew.tools.judge.runs import Contender
from kernelcrew.tools.judge.session import SessionFailed

Kernel = tuple[CompileResult, KernelFile]
UNSEEN_CASES = 3
UNSEEN_MAX_BYTES = 8 << 20
DRAWS = 40  # tries to find sizes the op can make inputs and a reference for


def _normal(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return a


def _wide(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return a * 30


def _ties(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.round(a * 2) / 2


def _tiny(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    fi = np.finfo(a.dtype)
    return a * (float(fi.tiny) * 4)  # the smallest normal numbers, and subnormal ones


def _specials(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = a.copy()
    flat = out.reshape(-1)
    if flat.size:
        idx = rng.choice(flat.size, size=min(flat.size, max(1, flat.size // 100)), replace=False)
        flat[idx] = rng.choice([np.nan, np.inf, -np.inf], size=idx.size)
    return out


STRESS: dict[str, tuple[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]]] = {
    "normal": ("standard normal values", _normal),
    "wide": ("large magnitudes (standard normal x 30)", _wide),
    "ties": ("ties and exact zeros (standard normal rounded to halves)", _ties),
    "tiny": ("tiny values down to subnormal numbers", _tiny),
    "specials": ("a few NaN and infinities among standard normal values", _specials),
}


def size_rules(spec: OpSpec) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    """What every listed case of the op keeps, read from the cases themselves: each size's
    largest value (an unseen size stays under it: a code base's fixed array extents, say,
    bound its loop sizes), and each pair of sizes that is equal, or ordered, in every case
    (`lda == k`, `n <= ldc`), as (a, "==" or "<=", b)."""
    cases = [c.sizes for c in spec.cases()]
    top = {s: max(c[s] for c in cases) for s in spec.sizes}
    rules = []
    for i, a in enumerate(spec.sizes):
        for b in spec.sizes[i + 1:]:
            if all(c[a] == c[b] for c in cases):
                rules.append((a, "==", b))
            elif all(c[a] <= c[b] for c in cases):
                rules.append((a, "<=", b))
            elif all(c[b] <= c[a] for c in cases):
                rules.append((b, "<=", a))
    return top, rules


def _keeps(sizes: dict[str, int], top: dict[str, int],
           rules: list[tuple[str, str, str]]) -> bool:
    if any(sizes[s] > top[s] for s in sizes):
        return False
    return all(sizes[a] == sizes[b] if op == "==" else sizes[a] <= sizes[b]
               for a, op, b in rules)


def unseen_sizes(spec: OpSpec, rng: np.random.Generator, n: int = UNSEEN_CASES,
                 max_bytes: int = UNSEEN_MAX_BYTES) -> list[dict[str, int]]:
    """Up to n size tuples the op does not list, near its own cases (see the module
    text), each moving at most `max_bytes` by the op's cost model, within the op's
    ranges: no size above its largest listed value, and every equality and order between
    two sizes that all listed cases keep, kept (`size_rules`)."""
    cases = list(spec.cases())
    listed = {s: {c.sizes[s] for c in cases} for s in spec.sizes}
    top, rules = size_rules(spec)
    anchors = sorted(cases, key=lambda c: spec.cost_bytes(c.sizes))
    anchors = anchors[: max(1, (len(anchors) + 1) // 2 + 1)]
    out: list[dict[str, int]] = []
    for _ in range(DRAWS):
        if len(out) >= n:
            break
        a = anchors[int(rng.integers(len(anchors)))].sizes
        sizes = {}
        for s, v in a.items():
            lo, hi = max(1, v // 2), min(max(3, 2 * v), top[s])
            if max(listed[s]) <= 1 or lo > hi:
                # 0 and 1 only: a flag or a mode (`trans_A`), whose other values may be
                # paths the function lacks; the listed value stands
                sizes[s] = int(v)
                continue
            choices = [x for x in rng.integers(lo, hi + 1, size=8) if x not in listed[s]]
            sizes[s] = int(choices[0]) if choices else int(v)
        for x, op, y in rules:  # equal in every case: equal here
            if op == "==":
                sizes[y] = sizes[x]
        for _shrink in range(40):  # keep it small: halve the largest size until it fits
            if spec.cost_bytes(sizes) <= max_bytes:
                break
            big = max(sizes, key=lambda k: sizes[k])
            sizes[big] = max(1, sizes[big] // 2)
            if sizes[big] in listed[big]:
                sizes[big] += 1
            for x, op, y in rules:
                if op == "==" and big in (x, y):
                    sizes[x] = sizes[y] = sizes[big]
        if spec.cost_bytes(sizes) > max_bytes or sizes in out or \
                all(sizes[s] in listed[s] for s in sizes) or not _keeps(sizes, top, rules):
            continue
        out.append(sizes)
    return out


def _sets(h: Harness, case: Case, rng: np.random.Generator) -> tuple[list[dict], list[str]]:
    """The input sets of one unseen case, one per STRESS kind that applies, and their kinds."""
    spec = h.spec
    base = h.make_arrays(case, rng)
    made = set()
    if spec.inputs_fn() is not None:  # the op's own inputs keep their structure
        made = set(spec.inputs_fn()(np.random.default_rng(0), **case.sizes) or {})
    sets, kinds = [], []
    for kind, (_, fn) in STRESS.items():
        if kind == "specials" and not spec.specials:
            continue
        st = {}
        changed = kind == "normal"
        for name, a in base.items():
            t = spec.inputs[name]
            if a.dtype.kind != "f" or name in made or not t.refresh:
                st[name] = a
                continue
            if t.domain is not None and kind == "specials":
                st[name] = a
                continue
            v = fn(a.astype(np.float64), rng)
            if t.domain is not None:
                v = np.clip(v, *t.domain)
            st[name] = v.astype(a.dtype)
            changed = True
        if changed:
            sets.append(st)
            kinds.append(kind)
    return sets, kinds


def atol_scales(d, k: int) -> dict[str, float]:
    """Per output, how much larger the reference of input set k is than that of the
    standard normal set (set 0), at least 1: a kernel's absolute error grows with the
    size of its values (an approximation accurate to 1e-7 of 1 is accurate to 3e-6 of
    30), so the op's atol, set for standard normal inputs, grows with them here. Gross
    errors (a clipped range, a zero, an overflow) stay far outside it."""
    out = {}
    for name, ref in d.references[k].items():
        base = d.references[0][name]
        big = float(np.nanmax(np.abs(ref[np.isfinite(ref)]), initial=0.0))
        norm = float(np.nanmax(np.abs(base[np.isfinite(base)]), initial=0.0))
        out[name] = max(1.0, big / norm) if norm > 0 else 1.0
    return out


def unseen_failure(h: Harness, challenger: Kernel, *, incumbent: Kernel | None
                   ) -> tuple[str, CaseRow | None]:
    """Why the challenger fails on inputs it was never timed on (see the module text), and
    the failing row (group `unseen`), or ("", None) when it passes every one the op's
    baseline (`incumbent`) passes. Without a baseline to arbitrate, the unseen sizes on
    standard normal values only are used."""
    rng = np.random.default_rng(secrets.randbits(63))
    sub_cases, sets_of, kinds_of = [], {}, {}
    sub = Harness(h.spec, h.backend, limits=h.limits,
                  bench=replace(h.bench, input_sets=len(STRESS)), cases=[])
    try:
        for i, sizes in enumerate(unseen_sizes(h.spec, rng)):
            case = Case("unseen", i, sizes, 0.0)
            try:
                sets, kinds = _sets(sub, case, rng)
                if incumbent is None:
                    sets, kinds = sets[:1], kinds[:1]
                if not _reference_survives(sub, case, sets):
                    continue  # sizes the op's reference cannot take
                sub._data[f"unseen[{i}]"] = sub._make(case, sets)
            except (InputError, ValueError, TypeError, IndexError) as e:
                del e  # the op cannot make these sizes: try the others
                continue
            sub_cases.append(case)
            sets_of[i], kinds_of[i] = sets, kinds
        if not sub_cases:
            return "", None
        sub.cases = sub_cases
        valid = _passes(sub, incumbent) if incumbent is not None else \
            {ci: set(range(len(kinds_of[c.index]))) for ci, c in enumerate(sub_cases)}
        return _first_failure(sub, challenger, valid, kinds_of)
    finally:
        sub.close()


def _reference_survives(h: Harness, case: Case, sets: list[dict[str, np.ndarray]]) -> bool:
    """Whether the op's reference takes these sizes: run first in a child process, so a
    reference that is compiled code (an imported function's float64 build) reading or
    writing out of bounds on sizes its code base never meant kills the child, not
    kernelcrew. False on a crash, an error or after the worker timeout."""
    pid = os.fork()
    if pid == 0:  # the child: compute, and say only whether it could
        code = 1
        try:
            for ins in sets:
                h.reference(case, ins)
            code = 0
        except BaseException:  # noqa: BLE001 - any failure means "not these sizes"
            code = 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + h.limits.timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.01)


def _passes(sub: Harness, k: Kernel) -> dict[int, set[int]]:
    """Per case, the input sets on which kernel k matches the reference (all of them are
    tried; a worker that dies ends the trial with what passed so far)."""
    cn = Contender(sub, *k, wall_s=sub.limits.timeout_s * (2 * len(sub.cases) + 3) + 10,
                   name="arbiter")
    ok: dict[int, set[int]] = {}
    try:
        cn.start()
        for ci, c in enumerate(sub.cases):
            cn.open_case(ci)
            d = sub.data(c)
            ok[ci] = set()
            for s in range(len(d.slots)):
                cn.call(ci, s, False, check=True)
                got = {n: a.copy() for n, a in cn.out_views(ci, s).items()}
                row, _, _ = sub.judge_outputs(c, got, d.references[s], "", atol_scales(d, s))
                if row is None:
                    ok[ci].add(s)
    except SessionFailed:
        pass
    finally:
        cn.finish(False)
        cn.result()
    return ok


def _first_failure(sub: Harness, k: Kernel, valid: dict[int, set[int]],
                   kinds_of: dict[int, list[str]]) -> tuple[str, CaseRow | None]:
    cn = Contender(sub, *k, wall_s=sub.limits.timeout_s * (2 * len(sub.cases) + 3) + 10,
                   name="challenger")
    why, bad = "", None
    try:
        cn.start()
        for ci, c in enumerate(sub.cases):
            if not valid.get(ci):
                continue
            cn.open_case(ci)
            d = sub.data(c)
            for s in sorted(valid[ci]):
                cn.call(ci, s, False, check=True)
                got = {n: a.copy() for n, a in cn.out_views(ci, s).items()}
                row = cn.state[_key(c)].row or \
                    sub.judge_outputs(c, got, d.references[s], "", atol_scales(d, s))[0]
                if row is not None:
                    kind = STRESS[kinds_of[c.index][s]][0]
                    why = (f"wrong result on inputs it was never timed on: sizes {c.label} "
                           f"(not a case of op.yaml), {kind}: {row.detail.lstrip(': ')}")
                    return why, row
    except SessionFailed as e:
        cn.fail(e)
    finally:
        cn.finish(False)
        res = cn.result()
    if cn.failed:
        why = f"failed on inputs it was never timed on: {res.first_failure()}"
        bad = next((r for r in res.rows if r.status == "fail"), None)
    return why, bad
