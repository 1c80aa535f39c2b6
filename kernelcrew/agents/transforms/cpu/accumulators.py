"""Multiple accumulators for a floating-point reduction loop.

`for (i = a; i < b; ++i) s += f(i);` vectorized with `omp simd reduction` still has one
vector accumulator: every add waits for the one before (3-4 cycles), while the core could
start two per cycle. Split into WAYS contiguous parts walked side by side, the loop keeps
WAYS independent chains (each a vector accumulator under `omp simd`), each part a unit
stride stream:

    q = (b - a) / WAYS;
    for (j = 0; j < q; ++j) { s += f(a + j); s_1 += f(a + q + j); ... }
    for (i = a + WAYS*q; i < b; ++i) s += f(i);          // the rest, under omp simd
    s += s_1 + ...;

A range shorter than WAYS * MIN_PART (a row of 32 or 64 floats, say) is left whole to the
last loop (q = 0): split in WAYS parts of a few elements, no part would fill the vector
registers of AVX-512, and the short loops would run in their scalar tails. The split loop
sits under `if (q > 0)`: g++ keeps an `omp simd` reduction's lanes in stack arrays that it
clears before the loop and adds up one lane at a time after it, even when the loop runs no
iteration; for a 64-float dot product under AVX-512 that was most of the time.

Legal for the same loops `omp simd` takes (iterations independent apart from recognized
+, max, min reductions); the sum is reassociated, as `omp simd` already does. Offered only
on innermost loops whose reads are unit-stride or invariant, outside a small-size path.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.body_copies import body_locals, rename_copy
from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    fresh_name,
    in_small_path,
    innermost_reasons,
    invariant_text,
    model_of,
    repeat,
    short_constant_loop,
    statements,
)
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.analysis.dot_nests import unit_or_invariant
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Source,
    lookup,
    pragma_text,
    pragmas_before,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

MIN_PART = 64  # elements per part below which the range runs as one simd chain
MARK = "// kernelcrew: accumulators"
_IDENTITY = {"+": "0"}


def accum_reason(m, lp: Loop) -> str | None:
    """Why the loop cannot get multiple accumulators (None: it can)."""
    s = m.src
    line = s.line_of(lp.node)
    if lp.children or not lp.canonical or lp.step is not None or lp.inclusive:
        return f"loop at line {line} is not an innermost unit-step loop"
    if (short := short_constant_loop(s, m, lp)) is not None:
        return short
    if any(re.match(r"omp\b(?!\s+simd\b)", pragma_text(s, p)) for p in pragmas_before(lp.node)):
        # a worksharing loop (`omp for reduction`) must stay one: its iterations are the
        # threads' shares, the rewrite would run the whole range on every thread
        return f"loop at line {line} carries an OpenMP worksharing pragma"
    v = check_loop(m, lp, allow_reductions=True)
    if not v.ok:
        return v.reason
    if not v.reductions:
        return f"loop at line {line} has no reduction"
    if v.rewrites:
        return f"loop at line {line} reduces through an if (rewrite it with simd first)"
    if any(op not in ("+", "max", "min") for op in v.reductions.values()):
        return f"loop at line {line} reduces with a product"
    bad = unit_or_invariant(m, lp)
    if bad is not None:
        return f"{bad} is strided in {lp.var}"
    for node in (lp.start, lp.end):
        if invariant_text(s, m, node, lp.node) is None:
            return f"the bounds of the loop at line {line} change inside it"
    for n in walk(lp.body):
        if n.type == "assignment_expression" and n.child_by_field_name("left").type == \
                "subscript_expression":
            return f"loop at line {line} also stores to memory"
    return None


def _once(s: Source, m, ways: int) -> str | None:
    # stays long: it checks the loop and writes its split form top to bottom, the text
    # using most of the names computed on the way
    for lp in m.loops:
        if in_small_path(lp.node) or collapsed(s, lp) or accum_reason(m, lp) is not None:
            continue
        if s.text_of(lp.node.parent).startswith("{  " + MARK):
            continue  # one of ours
        red = check_loop(m, lp, allow_reductions=True).reductions
        start = invariant_text(s, m, lp.start, lp.node)
        end = invariant_text(s, m, lp.end, lp.node)
        types = {}
        for name in red:
            d = lookup(name, lp.node)
            ty = d.node.child_by_field_name("type") if d is not None else None
            if ty is None or d.pointer or d.array:
                break
            types[name] = s.text_of(ty).replace("const", "").strip()
        else:
            q = fresh_name(m, "kc_q")
            j = fresh_name(m, "kc_j")
            # the partial sums are declared in the new block: a name is taken only where it
            # is visible at the loop or used in it (a sibling block's copies are not)
            inside = {n.text.decode() for n in walk(lp.node) if n.type == "identifier"}
            if any(f"{r}_{k}" in inside or lookup(f"{r}_{k}", lp.node) is not None
                   for r in red for k in range(1, ways)):
                continue
            ind = s.indent_of(lp.node)
            st1, st2 = ind + "    ", ind + "        "
            inits = []
            for r, op in red.items():
                init = _IDENTITY.get(op, r)  # max/min: the value so far is neutral
                inits.append(f"{st1}{types[r]} " + ", ".join(
                    f"{r}_{k} = {init}" for k in range(1, ways)) + ";\n")
            body = statements(lp.body)
            keys = body_locals(lp.body)
            for r in red:
                d = lookup(r, lp.node)
                keys.add(d.key)
            copies = []
            for k in range(ways):
                offset = f"({start}) + {j}" + (f" + {k} * {q}" if k > 1 else
                                                f" + {q}" if k == 1 else "")
                for st in body:
                    copies.append(st2 + rename_copy(m, st, lp, k, f"({offset})", keys) + "\n")
            names = [f"{r}_{k}" if k else r for r in red for k in range(ways)]
            by_op: dict[str, list[str]] = {}
            for r in names:
                by_op.setdefault(red[r.rsplit("_", 1)[0] if r not in red else r], []).append(r)
            clauses = "".join(f" reduction({op} : {', '.join(ns)})"
                              for op, ns in sorted(by_op.items()))
            combine = []
            for r, op in red.items():
                for k in range(1, ways):
                    if op == "+":
                        combine.append(f"{st1}{r} += {r}_{k};\n")
                    else:
                        cmp = ">" if op == "max" else "<"
                        combine.append(f"{st1}{r} = {r}_{k} {cmp} {r} ? {r}_{k} : {r};\n")
            cond = "<"
            tail_head = (s.data[lp.node.start_byte:lp.start.start_byte].decode()
                         + f"({start}) + {ways} * {q}"
                         + s.data[lp.start.end_byte:lp.body.start_byte].decode())
            tail_clauses = "".join(f" reduction({op} : {r})" for r, op in red.items())
            span = f"((long long)({end}) - ({start}))"
            split = (f"#pragma omp simd{clauses}\n"
                     f"{st1}for (long long {j} = 0; {j} {cond} {q}; ++{j}) {{\n"
                     + "".join(copies) + f"{st1}}}\n").splitlines(keepends=True)
            text = (f"{{  {MARK}: {ways}\n"
                    f"{st1}const long long {q} = {span} >= {ways * MIN_PART} ? "
                    f"{span} / {ways} : 0;  // a short range: one chain\n"
                    + "".join(inits) +
                    f"{st1}if ({q} > 0) {{  // g++ sets up and reduces the simd lanes even "
                    f"for no iteration\n"
                    + "".join(ln if ln.startswith("#") else "    " + ln for ln in split) +
                    f"{st1}}}\n"
                    f"#pragma omp simd{tail_clauses}\n"
                    f"{st1}{tail_head}{s.text_of(lp.body).replace(chr(10), chr(10) + '    ')}\n"
                    + "".join(combine) +
                    f"{ind}}}")
            at = pragmas_before(lp.node)
            begin = s.line_start(at[0]) if at else lp.node.start_byte
            return finish(s, [Edit(begin, lp.node.end_byte, (ind if at else "") + text)])
    return None


def accumulators(src: str, entry: str, ways: int = 4) -> str | None:
    """Give every innermost reduction loop of `entry` `ways` accumulators."""
    if ways < 2 or model_of(src, entry) is None:
        return None
    return repeat(src, entry, lambda s, m: _once(s, m, ways))


def accum_reasons(src: str, entry: str) -> list[str]:
    return innermost_reasons(src, entry, accum_reason)


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, accum_reasons, "no innermost reduction loop")
