"""May a loop's iterations run on different threads: the verdict the threading moves
share, and the work a threshold compares against."""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import descendants, invariant_text
from kernelcrew.agents.transforms.analysis.dependence import Verdict, check_loop
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Loop, Source, find_function, lookup, walk


def work_expr(s: Source, m: FunctionModel, lp: Loop) -> str | None:
    """A product of loop trip bounds for the nest under `lp`: the work an `if` clause
    compares against a threshold."""
    factors = []
    cur: Loop | None = lp
    while cur is not None:
        t = invariant_text(s, m, cur.end, lp.node)
        if t is not None:
            factors.append(t if re.fullmatch(r"[\w.]+", t) else f"({t})")
        # follow the deepest child whose bound is known where the pragma goes
        kids = [c for c in cur.children if invariant_text(s, m, c.end, lp.node) is not None]
        last = cur
        cur = max(kids or cur.children, key=lambda c: len(descendants(c)), default=None)
    helper = _helper_trips(s, m, last, lp) if factors else None
    if helper is not None:
        factors.append(helper if re.fullmatch(r"[\w.]+", helper) else f"({helper})")
    if len(factors) > 1:  # `int` sizes: the product is taken in 64 bits
        factors[0] = f"(long long){factors[0]}"
    return " * ".join(factors) if factors else None


def _helper_trips(s: Source, m: FunctionModel, inner: Loop, at: Loop) -> str | None:
    """The trips of a loop inside a helper the innermost loop calls, in the caller's terms:
    `out[r] = dot(cols, a + r * cols, v)` with `for (...; i < n; ...)` in `dot(int n, ...)`
    is `cols` more work per iteration. The first call and loop that tell; None else."""
    for n in walk(inner.body):
        if n.type != "call_expression":
            continue
        name = s.text_of(n.child_by_field_name("function")).strip()
        fn = find_function(s, name)
        decl = fn.child_by_field_name("declarator") if fn is not None else None
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        if plist is None:
            continue
        params = [next((i.text.decode() for i in walk(p) if i.type == "identifier"), "")
                  for p in plist.named_children]
        args = n.child_by_field_name("arguments").named_children
        for f in walk(fn):
            cond = f.child_by_field_name("condition") if f.type == "for_statement" else None
            if cond is None or cond.type != "binary_expression" or \
                    cond.child_by_field_name("operator").type not in ("<", "<="):
                continue
            bound = cond.child_by_field_name("right")
            if bound.type == "identifier" and bound.text.decode() in params:
                k = params.index(bound.text.decode())
                if k < len(args):
                    return invariant_text(s, m, args[k], at.node)
    return None


def owned_loops(m: FunctionModel, lp: Loop) -> set[str]:
    """Inner loops that walk one tile of a tiled loop: `for (i = i0; i < min(i0 + T, n); ..)`
    inside `for (i0 = 0; i0 < n; i0 += T)`. Distinct tiles own disjoint ranges of i."""
    if lp.step is None:
        return set()
    out = set()
    step_text = m.src.text_of(lp.step).replace(" ", "")
    for inner in descendants(lp):
        if inner.start is None or inner.start.type != "identifier" or \
                inner.start.text.decode() != lp.var or inner.end is None:
            continue
        end = inner.end
        if end.type == "identifier":
            d = lookup(end.text.decode(), end)
            end = d.init if d is not None and d.init is not None else end
        arms = m._min_arms(end) if end.type in ("conditional_expression",
                                                "call_expression") else None
        arms = arms or _strip_end_arms(m, end, lp.var, step_text)
        for arm in arms or []:
            t = m.src.text_of(arm).replace(" ", "")
            if t in (f"{lp.var}+{step_text}", f"{step_text}+{lp.var}"):
                out.add(inner.key)
    return out


def _strip_end_arms(m: FunctionModel, end, var: str, step: str) -> list | None:
    """The arms of `(n) - i0 > T ? i0 + T : (n)`, the end of a strip written without the
    overflow of `i0 + T < n`: the value is at most either arm as well."""
    if end.type != "conditional_expression":
        return None
    cond = end.child_by_field_name("condition")
    a, b = end.child_by_field_name("consequence"), end.child_by_field_name("alternative")
    while cond is not None and cond.type == "parenthesized_expression" and cond.named_children:
        cond = cond.named_children[0]
    if cond is None or a is None or b is None or cond.type != "binary_expression" or \
            cond.child_by_field_name("operator").type not in (">", ">="):
        return None
    text = m.src.text_of
    left = text(cond.child_by_field_name("left")).replace(" ", "")
    limit = text(cond.child_by_field_name("right")).replace(" ", "")
    bound = text(b).replace(" ", "")
    if limit != step or left not in (f"{bound}-{var}", f"({bound})-{var}") or \
            text(a).replace(" ", "") not in (f"{var}+{step}", f"{step}+{var}"):
        return None
    return [a, b]


def parallel_verdict(m: FunctionModel, lp: Loop, *, reductions: bool = False,
                     assume: bool = False) -> Verdict:
    """Whether the iterations of `lp` may run on different threads (tiles count as the
    elements they own). With `reductions`, scalars declared outside the loop may also be
    updated as recognized reductions (+, *, max, min) of plain arithmetic locals: each
    thread then reduces into its own copy, combined at the end (`reduction(op : s)`).
    With `assume`, the answer may rest on run-time conditions (`Verdict.assume`), which the
    caller must test before the threaded copy."""
    v = check_loop(m, lp, allow_reductions=False, owned=owned_loops(m, lp), assume=assume)
    if v.ok or not reductions:
        return v
    r = check_loop(m, lp, allow_reductions=True, owned=owned_loops(m, lp), assume=assume)
    if not r.ok or not r.reductions or r.rewrites:
        return v  # an if-max form must be rewritten first (simd does that)
    for name in r.reductions:
        d = lookup(name, lp.node)
        ty = d.node.child_by_field_name("type") if d is not None else None
        if d is None or d.pointer or d.array or ty is None or \
                "&" in m.src.text_of(d.node).split("=")[0] or \
                not _ARITH.fullmatch(m.src.text_of(ty).strip()):
            return v
    return r


_ARITH = re.compile(r"(const\s+)?(float|double|int|long|long long|unsigned|unsigned int|"
                    r"unsigned long|short|int(8|16|32|64)_t|uint(8|16|32|64)_t|size_t)")


DEFAULT_MIN_WORK = 1 << 20
