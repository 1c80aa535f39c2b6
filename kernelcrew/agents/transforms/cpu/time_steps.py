"""time_steps: threads inside each step of a time-stepped loop nest, with one parallel
region for all the steps.

A stencil run for T steps (Jacobi: B from A, then A from B) has a sequential time loop
around independent loops. `omp_parallel` threads each of those loops on its own: a
parallel region is opened and closed twice per step, and each opening wakes the team.
Here the region goes around the time loop once; every thread runs the time loop, each
inner loop is an `omp for` whose implicit barrier keeps the steps in order:

    if (work_per_step * 64 >= OMP_MIN_WORK && steps * work_per_step >= OMP_MIN_WORK) {
    #pragma omp parallel
        for (int t = 0; t < tsteps; t++) {
    #pragma omp for schedule(static)
            for (i = 1; i < n - 1; i++) ... B[i][j] = ... A ...;
    #pragma omp for schedule(static)
            for (i = 1; i < n - 1; i++) ... A[i][j] = ... B ...;
        }
    } else { the nest as it was }

Legal when the time loop is countable with bounds fixed before it (every thread then runs
the same steps and meets the same barriers), declares its counter (each thread has its
own), holds no `break`, `continue`, `return` or `goto`, carries no pragma, and its body is
only loops, each of whose iterations are independent (`parallel_verdict`, no reductions:
the only values shared are the arrays, each written once per element per loop); the
barrier after each loop is the order the steps had. Refused inside an OpenMP construct
or where any of those fails, and where the outer loop is independent itself (threads
go on it then, `omp_parallel`); a body with other statements (a pointer swap, a scalar that
the steps carry) is refused, since every thread would run them. Tiling across steps is not
done: it needs the steps' dependence distances, which this move does not derive.

The threshold: OMP_MIN_WORK is the work that pays for starting a parallel region (waking
the team), and the region starts once here, so all the steps' work is held against it;
each step also pays a barrier per loop, a spin of threads already awake that costs a small
share of a start (STEP_SHARE), so a step needs OMP_MIN_WORK / STEP_SHARE of work. A 250 x
250 Jacobi step (62001 points) is under the default 1M per step, and threaded per region
it stayed serial; taken over its 100 steps it runs 1.85x faster than the serial code at
-O3 on two cores."""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.common import (
    finish,
    guard_edit,
    indented,
    invariant_text,
    model_of,
    statements,
)
from kernelcrew.agents.transforms.analysis.openmp import in_omp_construct
from kernelcrew.agents.transforms.analysis.parallel import (
    DEFAULT_MIN_WORK,
    parallel_verdict,
    work_expr,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, each_entry
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.agents.transforms.views import preferred, through_views
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Edit, Loop, Source, lead_start, pragma_text, walk
from kernelcrew.kernels.kernelfile import KernelFile

MARK = "// kernelcrew: one parallel region for the time steps"
STEP_SHARE = 64  # a barrier among awake threads against a region's start (module doc)


def step_reason(s: Source, m: FunctionModel, lp: Loop) -> str | None:
    """Why `lp` cannot be a time loop with one parallel region (None: it can)."""
    line = s.line_of(lp.node)
    if not lp.canonical or lp.node.type != "for_statement":
        return f"loop at line {line} is not countable"
    init = lp.node.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        return f"loop at line {line} does not declare its counter"
    if any(re.match(r"omp\b", pragma_text(s, p)) for p in walk(lp.node)
           if p.type == "preproc_call") or in_omp_construct(s, lp.node):
        return f"loop at line {line} has or sits in an OpenMP construct"
    for n in (lp.start, lp.end, lp.step):
        if n is not None and invariant_text(s, m, n, lp.node) is None:
            return f"the bounds of the loop at line {line} are not fixed before it"
    if any(n.type in ("break_statement", "continue_statement", "return_statement",
                      "goto_statement") for n in walk(lp.body)):
        return f"the loop at line {line} may leave a step early"
    body = [st for st in statements(lp.body) if st.type != "comment"]
    kids = {c.node.start_byte: c for c in lp.children}
    if not body or any(st.start_byte not in kids for st in body):
        return f"the body of the loop at line {line} is not only loops"
    if len(body) < 2 and not lp.children[0].children:
        return f"the loop at line {line} holds one flat loop (omp_parallel threads it)"
    if parallel_verdict(m, lp).ok:
        return f"the loop at line {line} is independent itself (omp_parallel threads it)"
    for st in body:
        v = parallel_verdict(m, kids[st.start_byte])
        if not v.ok:
            return f"the step's loop at line {s.line_of(st)} is not independent: {v.reason}"
        if v.assume:
            return f"the step's loop at line {s.line_of(st)} is independent only under " \
                   "a run-time condition"
    return None


def _rewrite(s: Source, m: FunctionModel, lp: Loop, threshold: str) -> Edit | None:
    loops = list(lp.children)
    works = [work_expr(s, m, c) for c in loops]  # the work of one step: all its loops
    if None in works:
        return None
    terms = list(dict.fromkeys(works))
    work = terms[0] if len(terms) == 1 else "(long long)" + " + ".join(
        w if re.fullmatch(r"[\w.]+", w) else f"({w})" for w in terms)
    steps = invariant_text(s, m, lp.end, lp.node)
    per_step = work if re.fullmatch(r"[\w.]+", work) else f"({work})"
    cond = f"{work} >= {threshold}" if steps is None else (
        f"{per_step} * {STEP_SHARE} >= {threshold} && "
        f"(long long)({steps}) * {per_step} >= {threshold}")
    start, end = lead_start(s, lp.node), lp.node.end_byte
    ind = s.indent_of(lp.node)
    original = s.data[start:end].decode()
    # the threaded copy: `omp for` on each step's loop
    text, base = bytearray(original.encode()), start
    for c in sorted(loops, key=lambda x: x.node.start_byte, reverse=True):
        at = s.line_start(c.node) - base
        text[at:at] = b"#pragma omp for schedule(static)\n"
    par = indented(text.decode())
    ser = indented(original)
    return Edit(start, end, f"{ind}if ({cond}) {{  {MARK}\n#pragma omp parallel\n"
                            f"{par}\n{ind}}} else {{\n{ser}\n{ind}}}")


def time_steps(src: str, entry: str, *, min_work: int = DEFAULT_MIN_WORK,
               knob: str | None = None) -> str | None:
    """One parallel region around each time loop of `entry` that takes it (module
    docstring); None where none does."""
    got = model_of(src, entry)
    if got is None or MARK in src:
        return None
    s, m = got
    if any(re.match(r"omp\s+(parallel|for)\b", pragma_text(s, n))
           for n in walk(m.body) if n.type == "preproc_call"):
        return None  # threaded already
    threshold = knob or str(min_work)
    for lp in m.loops:
        if lp.children and step_reason(s, m, lp) is None:
            edit = _rewrite(s, m, lp, threshold)
            if edit is None:
                continue
            edits = [edit]
            if knob and f"#define {knob}" not in s.text:
                edits.append(guard_edit(s, m, knob, min_work))
            return finish(s, edits)
    return None


def time_steps_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = p.get("knob") or None
    value = int(kf.meta.knobs.get(knob, p["min_work"])) if knob else int(p["min_work"])
    move = through_views(time_steps)
    out = each_entry(kf, lambda s, e: move(s, e, min_work=value, knob=knob))
    if out is not None and knob and f">= {knob}" in (out.body or ""):
        out.knobs = {knob: value}
    return out


def step_reasons(src: str, entry: str) -> list[str]:
    """Why no loop of `entry` takes one region for its steps: one reason per loop that
    holds loops (at most four), on the view with counters scoped."""
    got = model_of(preferred(src, entry), entry)
    if got is None:
        return []
    s, m = got
    return [r for lp in m.loops if lp.children
            and (r := step_reason(s, m, lp)) is not None][:4]


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, step_reasons, "no sequential loop around independent loop nests")
