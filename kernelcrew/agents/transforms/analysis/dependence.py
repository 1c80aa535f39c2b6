"""Dependence analysis: may the iterations of a loop run in any order (threads, SIMD)?

An array write is independent across iterations of a loop when its offset is one-to-one
in the loop's variable (`affine.digits`); reads of an array that the loop writes must sit
at the same digit position (same element partition), and scalars declared outside the
loop may only be updated as recognized reductions (`reductions`).

Distinct pointer parameters are assumed not to overlap: the harness passes distinct
buffers for an operator's inputs and outputs (helpers are checked at their call sites).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelcrew.agents.transforms.analysis.reductions import call_name, reduction
from kernelcrew.agents.transforms.analysis.types import type_cast
from kernelcrew.csource.affine import (
    VAR_MARK,
    FunctionModel,
    Poly,
    digits,
    split_terms,
)
from kernelcrew.csource.syntax import (
    Loop,
    Node,
    Source,
    function_name,
    functions,
    lookup,
    per_source,
    walk,
    within,
)

# Calls that read their arguments and return a value, nothing else.
PURE_CALLS = frozenset(["exp", "expf", "exp2", "exp2f", "expm1", "expm1f", "log", "logf", "log2", "log2f", "log1p", "log1pf", "log10", "log10f", "sqrt", "sqrtf", "rsqrt", "rsqrtf", "cbrt", "cbrtf", "pow", "powf", "erf", "erff", "erfc", "erfcf", "tanh", "tanhf", "sinh", "cosh", "sin", "sinf", "cos", "cosf", "tan", "tanf", "atan", "atanf", "atan2", "atan2f", "fabs", "fabsf", "abs", "fmax", "fmaxf", "fmin", "fminf", "max", "min", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "trunc", "truncf", "fma", "fmaf", "copysign", "copysignf", "__expf", "__logf", "__fdividef", "__frcp_rn", "__fsqrt_rn", "__ldg", "__saturatef", "isnan", "isinf", "isfinite", "__builtin_fabsf", "__builtin_fabs", "__builtin_copysignf", "__builtin_copysign", "__builtin_inff", "__builtin_inf", "__builtin_nanf", "__builtin_nan", "__builtin_sqrtf", "__builtin_sqrt", "__builtin_fmaf", "__builtin_fma", "__builtin_fmaxf", "__builtin_fminf", "__builtin_floorf", "__builtin_ceilf", "__builtin_truncf", "__builtin_roundf", "__builtin_expect", "__builtin_isnan", "__builtin_isinf", "sqrtl", "expl", "logl", "fabsl"])


@dataclass
class Access:
    root: str
    offset: Poly | None
    read: bool
    write: bool
    node: Node
    # bounds the language gives the access's counters (`a[i][j]` of `T a[N][M]`: j < M)
    spans: dict[str, Poly] = field(default_factory=dict)


@dataclass
class Verdict:
    ok: bool
    reason: str = ""
    reductions: dict[str, str] = field(default_factory=dict)  # var -> + | * | max | min
    rewrites: list[tuple[Node, str]] = field(default_factory=list)  # if-max -> ternary
    # conditions the verdict rests on, to be tested at run time (`ldc >= N`: a leading
    # dimension no smaller than the row it strides over); only with check_loop(assume=)
    assume: list[str] = field(default_factory=list)


def assign_target(n: Node) -> Node | None:
    """The variable or element an assignment or ++/-- writes (None for other nodes)."""
    if n.type == "assignment_expression":
        return n.child_by_field_name("left")
    if n.type == "update_expression":
        return n.child_by_field_name("argument")
    return None


def accesses(model: FunctionModel, region: Node) -> list[Access] | str:
    """Every array access in a region, or a reason why the region cannot be analysed."""
    out: list[Access] = []
    for n in walk(region):
        if n.type == "subscript_expression":
            if n.parent is not None and n.parent.type == "subscript_expression" and \
                    n.parent.child_by_field_name("argument") == n and \
                    model.subscript(n.parent, region) is not None:
                continue  # `a[i]` of `a[i][j]`: a row, not an element; the chain is one access
            root = model.subscript(n, region)
            p = n.parent
            write = read = False
            if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
                write = True
                read = p.child_by_field_name("operator").type != "="
            elif p.type == "update_expression":
                write = read = True
            else:
                read = True
            if root is None:
                if write:
                    return f"cannot resolve the array written at line {model.src.line_of(n)}"
                return f"cannot resolve the array read at line {model.src.line_of(n)}"
            out.append(Access(root[0], root[1], read, write, n, model.subscript_spans(n, region)))
        elif n.type == "pointer_expression" and n.child_by_field_name("operator").type == "*":
            p = n.parent
            if assign_target(p) == n:
                return f"writes through a pointer at line {model.src.line_of(n)}"
            root = model.pointer_root(n.child_by_field_name("argument"), region)
            if root is None:
                return f"cannot resolve the pointer read at line {model.src.line_of(n)}"
            out.append(Access(root[0], root[1], True, False, n))
    return out

@per_source
def defined_functions(src: Source) -> set[str]:
    """Names of the functions defined in the source (helpers a kernel calls)."""
    return {function_name(f) for f in functions(src)} - {None}


_ASSIGNS = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--|[-+*/%&|^]=|<<=|>>=")


@per_source
def pure_macros(src: Source) -> set[str]:
    """Function-like macros (`#define SQ(a) ((a) * (a))`) whose body assigns nothing, calls
    only pure functions and names nothing but its parameters, constants and other such
    macros: a call to one is an expression of its arguments like any other. A macro that
    names an array or a size of the code around it (`#define U(i, j) u[(i) * nx + (j)]`)
    reads memory the dependence check would not see: not pure (the moves see through it
    on the macro-expanded source, `views`)."""
    defs: dict[str, tuple[list[str] | None, str]] = {}
    for n in walk(src.root):
        if n.type not in ("preproc_function_def", "preproc_def"):
            continue
        name, body = n.child_by_field_name("name"), n.child_by_field_name("value")
        ps = n.child_by_field_name("parameters")
        args = [c.text.decode() for c in ps.named_children] if ps is not None else None
        if name is not None:
            defs[name.text.decode()] = (args, src.text_of(body) if body is not None else "")
    consts = {nm for nm, (args, text) in defs.items() if args is None and
              not re.search(r"[A-Za-z_]", re.sub(r"\b\d[\w.]*", "", text))}
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for nm, (args, text) in defs.items():
            if args is None or nm in out or _ASSIGNS.search(text) or "#" in text:
                continue
            calls = re.findall(r"([A-Za-z_]\w*)\s*\(", text)
            words = set(re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"\b\d[\w.]*", "", text)))
            allowed = set(args) | PURE_CALLS | consts | out | _TYPE_WORDS
            if all(c in PURE_CALLS or c in out for c in calls) and words <= allowed:
                out.add(nm)
                changed = True
    return out


# x86 vector intrinsics (immintrin.h): value operations are pure; the ones that move data
# between memory and registers, and the few with state, are not
_INTRINSIC = re.compile(r"_mm(?:256|512)?_\w+")
_LOADS = re.compile(r"_mm(?:256|512)?_(?:mask_|maskz_)?(?:\w*load\w*|\w*gather\w*|"
                    r"broadcast_(?:ss|sd|ps|pd)|prefetch)")
_STORES = re.compile(r"_mm(?:256|512)?_(?:mask_)?(?:\w*store\w*|stream_(?!load)\w+|"
                     r"\w*scatter\w*)")
_STATEFUL = frozenset(["_mm_malloc", "_mm_free", "_mm_setcsr", "_mm_getcsr", "_mm_sfence",
                       "_mm_lfence", "_mm_mfence", "_mm_pause", "_mm_clflush", "_mm_empty",
                       "_mm_monitor", "_mm_mwait"])


def intrinsic_kind(name: str) -> str | None:
    """'pure', 'load', 'store' or 'state' for an x86 intrinsic; None for other names."""
    if not _INTRINSIC.fullmatch(name):
        return None
    if name in _STATEFUL:
        return "state"
    if _STORES.fullmatch(name):
        return "store"
    if _LOADS.fullmatch(name):
        return "load"
    return "pure"


@per_source
def vector_helpers(src: Source) -> set[str]:
    """Defined functions that load or store through vector intrinsics."""
    return {name for fn in functions(src) if (name := function_name(fn)) is not None and
            any(n.type == "call_expression" and intrinsic_kind(
                src.text_of(n.child_by_field_name("function")).strip()) in ("load", "store")
                for n in walk(fn))}


def pure_call(name: str) -> bool:
    """A call that reads only its arguments' values and returns a value."""
    return name in PURE_CALLS or intrinsic_kind(name) == "pure"


_TYPE_WORDS = frozenset(["float", "double", "int", "long", "unsigned", "short", "char",
                         "int32_t", "int64_t", "uint32_t", "uint64_t", "size_t", "const"])


# copies into `&local` (the bit casts of the vector math helpers) stay inside the call
_COPIES = frozenset(["__builtin_memcpy", "memcpy"])


@per_source
def impure_helpers(src: Source) -> dict[str, str]:
    """Defined functions that write outside their own locals (through a pointer, to a
    global, a static local) or call something that may: name -> what they do."""
    out: dict[str, str] = {}
    calls: dict[str, set[str]] = {}
    defined = defined_functions(src)
    macros = pure_macros(src)
    for fn in functions(src):
        name = function_name(fn)
        if name is None:
            continue
        calls[name] = set()
        for n in walk(fn):
            target = assign_target(n)
            if target is not None and name not in out:
                if target.type != "identifier":
                    out[name] = f"writes {src.text_of(target)!r}"
                    continue
                d = lookup(target.text.decode(), target)
                if d is None or d.param is False and \
                        "static" in src.text_of(d.node).split("=")[0].split():
                    out[name] = f"writes {target.text.decode()}, which outlives the call"
            if n.type == "call_expression":
                callee = src.text_of(n.child_by_field_name("function")).replace(
                    "std::", "").strip()
                if callee in defined:
                    calls[name].add(callee)
                elif callee in _COPIES and name not in out:
                    dst = n.child_by_field_name("arguments").named_children[:1]
                    d = lookup(dst[0].named_children[0].text.decode(), dst[0]) if dst and \
                        dst[0].type == "pointer_expression" and \
                        dst[0].named_children[0].type == "identifier" else None
                    if d is None or d.param or d.pointer or \
                            "static" in src.text_of(d.node).split("=")[0].split():
                        out[name] = f"copies into {src.text_of(dst[0]) if dst else '?'}"
                elif intrinsic_kind(callee) == "store" and name not in out:
                    # a vector stored into the helper's own local array stays in the call
                    dst = n.child_by_field_name("arguments").named_children[:1]
                    if not dst or not _own_local_array(src, dst[0]):
                        out[name] = (f"stores a vector through "
                                     f"{src.text_of(dst[0]) if dst else '?'}")
                elif not pure_call(callee) and intrinsic_kind(callee) != "load" and \
                        callee not in macros and name not in out:
                    out[name] = f"calls {callee}()"
    changed = True
    while changed:  # a helper that calls an impure one is impure
        changed = False
        for name, callees in calls.items():
            bad = next((c for c in sorted(callees) if c in out and c != name), None)
            if name not in out and bad is not None:
                out[name] = f"calls {bad}(), which {out[bad]}"
                changed = True
    return out


def _address_of(a: Node) -> Node:
    """An address argument without its parentheses and casts, and `&x[i][j]` as `x`."""
    while a.type in ("parenthesized_expression", "cast_expression") and a.named_children:
        a = a.child_by_field_name("value") or a.named_children[-1]
    if a.type == "pointer_expression" and a.child_by_field_name("operator").type == "&":
        a = a.child_by_field_name("argument")
        while a.type == "subscript_expression":
            a = a.child_by_field_name("argument") or a.named_children[0]
    return a


def _own_local_array(src: Source, a: Node) -> bool:
    """`t`, `&t[k]`, `t + k` of an array declared in the function (not static)."""
    a = _address_of(a)
    if a.type == "binary_expression" and a.child_by_field_name("operator").type == "+":
        a = a.child_by_field_name("left")
    if a.type != "identifier":
        return False
    d = lookup(a.text.decode(), a)
    return d is not None and d.array and not d.param and \
        "static" not in src.text_of(d.node).split("=")[0].split()


def pointer_roots(model: FunctionModel, a: Node, depth: int = 0) -> set[str] | None:
    """The parameters or local arrays a pointer argument may point into, at any offset:
    through casts, `&x[i]`, `x + e`, and local pointers followed through every value the
    function gives them (`bjj = B + j * K; ... bjj += K`). None where one cannot be told."""
    if depth > 8:
        return None
    a = _address_of(a)
    if a.type == "binary_expression" and a.child_by_field_name("operator").type in ("+", "-"):
        left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
        roots = [r for r in (pointer_roots(model, x, depth + 1) for x in (left, right)
                             if _pointer_valued(x))]
        return roots[0] if len(roots) == 1 else None
    if a.type != "identifier":
        return None
    d = lookup(a.text.decode(), a)
    if d is None:
        return None
    if d.param or d.array:
        return {d.key}
    if not d.pointer:
        return None
    values = [d.init] if d.init is not None else []
    name = a.text.decode()
    for n in walk(model.fn):
        t = assign_target(n)
        if t is None or t.type != "identifier" or t.text.decode() != name or \
                getattr(lookup(name, t), "key", None) != d.key:
            continue
        if n.type == "assignment_expression" and \
                n.child_by_field_name("operator").type == "=":
            values.append(n.child_by_field_name("right"))
        elif n.type == "assignment_expression" and \
                n.child_by_field_name("operator").type not in ("+=", "-="):
            return None
    out: set[str] = set()
    for v in values:
        got = pointer_roots(model, v, depth + 1)
        if got is None:
            return None
        out |= got
    return out or None


def check_loop(model: FunctionModel, lp: Loop, *, allow_reductions: bool,
               owned: set[str] | None = None, exclude: frozenset[str] = frozenset(),
               assume: bool = False) -> Verdict:
    """Can the iterations of `lp` run in any order (parallel for / simd)? `exclude`: Decl
    keys of scalars and arrays that the caller has checked itself and will rewrite (the
    bins of a privatized histogram, a scan's running sum); they are left out here. With
    `assume`, a leading dimension that the code does not fix may make the answer
    conditional: the verdict's `assume` lists the conditions the caller must test at run
    time."""
    if not lp.canonical:
        return Verdict(False, f"loop at line {model.src.line_of(lp.node)} is not in the "
                              "countable form `for (i = a; i < b; ++i)`")
    # each step returns the first reason it finds; the order is the order reasons are given
    verdict = Verdict(True)
    red_stmts: list[Node] = []  # the statements that update a reduction variable
    for why in (_leaves(model.src, lp), _call_reason(model, lp),
                _scalar_reason(model, lp, exclude, allow_reductions, verdict, red_stmts),
                _reduction_read_reason(model.src, lp, verdict, red_stmts)):
        if why is not None:
            return Verdict(False, why)
    return _array_verdict(model, lp, owned, exclude, assume, verdict)


def _leaves(src: Source, lp: Loop) -> str | None:
    """Control flow that leaves the loop: its iterations could not all run."""
    for n in walk(lp.body):
        if n.type in ("return_statement", "goto_statement", "throw_statement"):
            return f"leaves the loop at line {src.line_of(n)}"
        if n.type == "break_statement" and innermost_breakable(n) == lp.node:
            return f"breaks out of the loop at line {src.line_of(n)}"
    return None


def _call_reason(model: FunctionModel, lp: Loop) -> str | None:
    """A call that may have side effects, or that is given a pointer (it could write
    through it)."""
    src = model.src
    defined = defined_functions(model.src)
    macros = pure_macros(model.src)
    for n in walk(lp.body):
        if n.type != "call_expression" or type_cast(src, n):
            continue
        name = call_name(model, n)
        if not pure_call(name) and name not in defined and name not in macros:
            return (f"calls {name}() at line {src.line_of(n)}, which may have "
                    "side effects")
        if name in defined and name in (impure := impure_helpers(src)):
            return (f"calls {name}() at line {src.line_of(n)}, which "
                    f"{impure[name]}")
        for a in n.child_by_field_name("arguments").named_children:
            if name == "__ldg" or not _pointer_valued(a):
                continue
            # a helper that writes nothing may read through a pointer into an array the
            # loop does not write: what it reads is the same in every order. Only for a
            # helper read through vector loads, whose elements no analysis sees: a plain
            # one is inlined by the views and its accesses checked one by one
            roots = pointer_roots(model, a) if name in defined and \
                name in vector_helpers(src) else None
            written = _written_roots(model, lp) if roots is not None else {"*"}
            if roots is None or "*" in written or roots & written:
                return f"passes a pointer to {name}() at line {src.line_of(n)}"
    return None


def _written_roots(model: FunctionModel, lp: Loop) -> set[str]:
    """The arrays the loop writes (every root a write may reach; all of them where a write
    cannot be resolved, so nothing read beside it counts as safe)."""
    got = accesses(model, lp.body)
    if isinstance(got, str):
        return {"*"}
    out = {a.root for a in got if a.write}
    for n in walk(lp.body):
        t = assign_target(n)
        if t is not None and t.type == "identifier":
            d = lookup(t.text.decode(), t)
            if d is not None and (d.pointer or d.array) and not within(d.node, lp.body):
                out.add("*")  # a pointer declared outside moved on: anything it reaches
    return out


def _scalar_reason(model: FunctionModel, lp: Loop, exclude: frozenset[str],
                   allow_reductions: bool, verdict: Verdict, red_stmts: list[Node]
                   ) -> str | None:
    """A scalar declared outside the loop and written in it: a loop-carried dependence,
    unless (with `allow_reductions`) it is a recognized reduction, which goes into
    `verdict.reductions` (and its rewrite into `verdict.rewrites`)."""
    src = model.src
    region = lp.node
    for n in walk(lp.body):
        target = assign_target(n)
        if target is None:
            continue
        if target.type in ("subscript_expression", "pointer_expression"):
            continue
        if target.type != "identifier":
            return f"writes {src.text_of(target)!r} at line {src.line_of(n)}"
        name = target.text.decode()
        d = lookup(name, target)
        if d is None:
            return f"writes {name}, declared outside the function"
        if within(d.node, region):
            continue  # private to an iteration (or an inner loop's variable)
        if d.key in exclude:
            continue
        if not allow_reductions:
            return (f"updates {name} (declared outside the loop) at line "
                    f"{src.line_of(n)}: a loop-carried dependence")
        kind = reduction(model, n, d, lp)
        if kind is None:
            return (f"updates {name} at line {src.line_of(n)} in a way that is not "
                    "a recognized reduction")
        prev = verdict.reductions.get(name)
        if prev is not None and prev != kind[0]:
            return f"{name} is reduced two ways ({prev}, {kind[0]})"
        verdict.reductions[name] = kind[0]
        holder = kind[1][0] if kind[1] is not None else n.parent
        red_stmts.append(holder)
        if kind[1] is not None:
            verdict.rewrites.append(kind[1])
    return None


def _reduction_read_reason(src: Source, lp: Loop, verdict: Verdict, red_stmts: list[Node]
                           ) -> str | None:
    """A reduction variable read in the loop other than by its own update: the partial
    values of the lanes or threads would show."""
    for name in verdict.reductions:
        for ident in walk(lp.body):
            if ident.type != "identifier" or ident.text.decode() != name:
                continue
            if not any(within(ident, st) for st in red_stmts):
                return (f"{name} is read at line {src.line_of(ident)} while it is "
                        "being reduced")
    return None


def _array_verdict(model: FunctionModel, lp: Loop, owned: set[str] | None,
                   exclude: frozenset[str], assume: bool, verdict: Verdict) -> Verdict:
    """Arrays: every array the loop writes (but its own locals and `exclude`) is written
    at distinct elements by distinct iterations, and read only at the elements the same
    iteration writes (`_root_partition`), perhaps under run-time conditions (`assume`)."""
    region = lp.node
    own = {lp.key} | (owned or set())
    accs = accesses(model, region)
    if isinstance(accs, str):
        return Verdict(False, accs)
    local_roots = set()
    for a in accs:
        d = lookup(a.root.split("@")[0], a.node)
        if d is not None and within(d.node, region):
            local_roots.add(a.root)
    written = {a.root for a in accs if a.write} - local_roots - set(exclude)
    for root in written:
        # first as a whole (every counter one digit); failing that, with the enclosing
        # loops' counters held fixed (the region runs with them fixed); the first reason
        # is the one reported
        assumed = list(verdict.assume)
        why = _root_partition(model, lp, region, own, [x for x in accs if x.root == root],
                              verdict.assume if assume else None, frozen=False)
        if why is not None:
            verdict.assume[:] = assumed
            if _root_partition(model, lp, region, own, [x for x in accs if x.root == root],
                               verdict.assume if assume else None, frozen=True) is not None:
                return Verdict(False, why)
    verdict.assume = list(dict.fromkeys(verdict.assume))
    return verdict


def _root_partition(model: FunctionModel, lp: Loop, region: Node, own: set[str],
                    accs: list[Access], assume: list[str] | None, *, frozen: bool
                    ) -> str | None:
    """None when every access to one written buffer touches one element per iteration of
    `lp`, all at the same digit position (iterations then touch disjoint elements); else
    why not. With `frozen`, the enclosing loops' counters count as invariants."""
    src = model.src
    ref = None
    for a in accs:
        what = f"{'write' if a.write else 'read'} {src.text_of(a.node)!r} at line " \
               f"{src.line_of(a.node)}"
        if a.offset is None:
            return f"cannot tell which element the {what} touches"
        offset = freeze_enclosing(model, a.offset, region) if frozen else a.offset
        ds = digits(model, offset, region, assume, a.spans)
        if ds is None:
            return f"cannot prove the {what} touches one element per iteration " \
                   "(subscript not a mixed-radix form)"
        mine = [(v, c) for v, c in ds if v in own]
        if len(mine) != 1:
            return f"the {what} does not depend on {lp.var}: iterations would write the " \
                   "same element"
        split = split_terms(offset)
        # the loops that walk one tile (`owned`) all walk the same range of it, so two
        # accesses through two of them, at the same weight, touch the same tile
        var = mine[0][0] if mine[0][0] == lp.key else "tile"
        sig = (var, sorted(mine[0][1].items()), sorted(split[1].items()))
        if ref is None:
            ref = sig
        elif sig != ref:
            return f"the {what} reaches an element another iteration of {lp.var} writes"
    return None


def freeze_enclosing(model: FunctionModel, off: Poly, region: Node) -> Poly:
    """The offset with the counters of loops around `region` as plain symbols: they hold
    one value while the region runs, so only the region's own counters need to be one-to-one
    (`probs_bt[i]` with `probs_bt = probs + b*T*Vp + t*Vp` and `i < V`: the rows of b and t
    need not be disjoint for the iterations of i to write distinct elements). Two accesses
    still match only when their frozen parts are the same (`split_terms`' invariant rest)."""
    def plain(sym: str) -> str:
        if VAR_MARK not in sym:
            return sym
        lp = model.loop_by_key(sym)
        return sym if lp is None or within(lp.node, region) else sym.replace(VAR_MARK, "~")
    out: Poly = {}
    for mono, c in off.items():
        key = tuple(sorted(plain(x) for x in mono))
        out[key] = out.get(key, 0) + c
    return {k: v for k, v in out.items() if v}


def _pointer_valued(a: Node) -> bool:
    """An argument that hands the callee an address: `p`, `&x[i]`, `*pp`, `x + i * n`,
    `(const float*)p` (an array or pointer name, or arithmetic on one)."""
    while a.type in ("parenthesized_expression", "cast_expression") and a.named_children:
        a = a.child_by_field_name("value") or a.named_children[-1]
    if a.type == "pointer_expression":
        return True
    if a.type == "identifier":
        d = lookup(a.text.decode(), a)
        return d is not None and (d.pointer or d.array)
    if a.type == "binary_expression" and a.child_by_field_name("operator").type in ("+", "-"):
        return _pointer_valued(a.child_by_field_name("left")) or \
            _pointer_valued(a.child_by_field_name("right"))
    if a.type == "conditional_expression":
        return _pointer_valued(a.child_by_field_name("consequence")) or \
            _pointer_valued(a.child_by_field_name("alternative"))
    return False


def innermost_breakable(n: Node) -> Node | None:
    """The loop or switch a `break` at `n` ends."""
    p = n.parent
    while p is not None:
        if p.type in ("for_statement", "while_statement", "do_statement", "switch_statement",
                      "for_range_loop"):
            return p
        p = p.parent
    return None
