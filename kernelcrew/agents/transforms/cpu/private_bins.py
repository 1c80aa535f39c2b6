"""Private bins: thread a histogram / scatter-add loop with a private copy of the bins per
thread.

`for (i = 0; i < n; i++) counts[values[i]]++;` cannot be threaded as it is: two iterations
may hit the same bin. When the bins are only ever accumulated in the loop (`++`, `--`,
`+= v`, `-= v`, `b[e] = b[e] + v`) and not otherwise read or written there, each thread
can count its share into its own zeroed copy and the copies be added at the end: an
OpenMP 4.5 array-section reduction, `reduction(+ : counts[0:bins])`. The extent of the
section must be provable: it comes from the operator's shape of that array (op.yaml), never
from the code that clears it. The threaded copy runs only where it pays: enough work to
start threads (OMP_MIN_WORK), at least PRIVATE_PER_BIN values per bin (clearing and adding
the copies costs a pass over the bins per thread: four copies of 65536 counters for 999
values made a hand-written kernel 0.28x), and copies of at most PRIVATE_MAX_BYTES each
(GCC puts them on the threads' stacks); the serial loop, as written, everywhere else.

With `copies` > 1 (one array of bins, reached where the data says: `counts[values[i]]`,
not an affine position such as the `y[j]` of rows added into an output, which meets each
bin once per row), each thread keeps that many interleaved copies:
the loop is unrolled by `copies`, copy k of the body counting into copy k of the bins, so a
run of equal values (real data is skewed) is `copies` independent store-to-load chains
instead of one. The copies live in one zeroed heap buffer that the `parallel for` reduces
(`reduction(+ : counts_copies[0:bins * 4])`, the thread count set by `if (work >=
OMP_MIN_WORK)`, so mid-size shapes get the copies on one thread), the iterations left over
by the unrolling count into the bins directly, and the copies are added into the bins at
the end. A `continue` of the loop ends only its own copy (`do { } while (0)`). Below
PRIVATE_MIN_WORK updates, or PRIVATE_PER_BIN values per bin and copy, or when the buffer
cannot be had, the loop as written.

Integer bins give the same counts exactly (the values added must be integers too: a float
added to an int bin rounds at every step). Float bins are reassociated, as every reduction
move here is: the sums change in the last bits, which the verifier checks against the op's
tolerance.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.body_copies import copy_text, jam_header
from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    fresh_name,
    guard_edit,
    in_small_path,
    include_edit,
    invariant_text,
    model_of,
    reduction_clauses,
    serial_versions,
    statements,
)
from kernelcrew.agents.transforms.analysis.dependence import accesses, check_loop
from kernelcrew.agents.transforms.analysis.openmp import in_omp_construct
from kernelcrew.agents.transforms.analysis.types import resolve
from kernelcrew.agents.transforms.kernel_files import Outcome, called_in_loops, each_entry, entries
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    find_function,
    lead_start,
    lookup,
    params,
    pragma_text,
    pragmas_before,
    subscript_index,
    walk,
    within,
)
from kernelcrew.kernels.kernelfile import KernelFile

PER_BIN = 8  # values per bin below which private copies cost more than they save
MAX_BYTES = 1 << 20  # one private copy, on a thread's stack
COPIES_MIN_WORK = 1 << 14  # updates below which interleaved copies do not pay their set-up
_INT = re.compile(r"(const\s+)?(unsigned\s+)?(char|short|int|long|long long|unsigned|size_t|"
                  r"u?int(8|16|32|64)_t|std::u?int(8|16|32|64)_t)")
_FLOAT = re.compile(r"(const\s+)?(float|double)")


def _elem_type(s: Source, d) -> str | None:
    """The declared element type, a typedef or macro name resolved to the arithmetic type
    it stands for (`DATA_TYPE` -> `double`)."""
    ty = d.node.child_by_field_name("type")
    if ty is None:
        return None
    text = s.text_of(ty).replace("const", "").strip()
    if _INT.fullmatch(text) or _FLOAT.fullmatch(text):
        return text
    return resolve(s, text) or text


def _is_int_expr(m: FunctionModel, node: Node) -> bool:
    """An expression whose value is an integer: integer literals, integer variables and
    elements, and arithmetic on them (no division surprises: / of ints is an int)."""
    s = m.src
    t = node.type
    if t == "number_literal":
        return not re.search(r"[.eEpP]|[fF]$", node.text.decode()) or \
            node.text.decode().lower().startswith("0x") and "." not in node.text.decode()
    if t == "identifier":
        d = lookup(node.text.decode(), node)
        return d is not None and not d.pointer and not d.array and \
            bool(_INT.fullmatch(_elem_type(s, d) or ""))
    if t == "subscript_expression":
        root = m.pointer_root(node.child_by_field_name("argument"), node)
        if root is None:
            return False
        d = lookup(root[0].split("@")[0], node)
        return d is not None and bool(_INT.fullmatch(_elem_type(s, d) or ""))
    if t == "parenthesized_expression" and len(node.named_children) == 1:
        return _is_int_expr(m, node.named_children[0])
    if t == "cast_expression":
        return bool(_INT.fullmatch(s.text_of(node.child_by_field_name("type")).strip()))
    if t == "unary_expression":
        return _is_int_expr(m, node.child_by_field_name("argument"))
    if t == "binary_expression":
        op = node.child_by_field_name("operator").type
        return op in ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>") and \
            _is_int_expr(m, node.child_by_field_name("left")) and \
            _is_int_expr(m, node.child_by_field_name("right"))
    return False


def _mentions(node: Node | None, key: str) -> bool:
    if node is None:
        return False
    for n in walk(node):
        if n.type == "identifier":
            d = lookup(n.text.decode(), n)
            if d is not None and d.key == key:
                return True
    return False


def _updates(m: FunctionModel, lp: Loop, key: str) -> tuple[list[Node], list[Node], str] | str:
    """The accumulating updates of the array `key` in the loop: (update nodes, subscript
    nodes they own, the added value's kind "int"/"any"), or why the array is not only
    accumulated there."""
    s = m.src
    ups: list[Node] = []
    owned: list[Node] = []
    kinds = set()
    for n in walk(lp.body):
        if n.type == "update_expression":
            arg = n.child_by_field_name("argument")
            if arg.type == "subscript_expression" and _root_key(m, arg, lp) == key:
                ups.append(n)
                owned.append(arg)
                kinds.add("int")
        elif n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left.type != "subscript_expression" or _root_key(m, left, lp) != key:
                continue
            op = n.child_by_field_name("operator").type
            right = n.child_by_field_name("right")
            value = None
            if op in ("+=", "-="):
                value = right
            elif op == "=" and right.type == "binary_expression" and \
                    right.child_by_field_name("operator").type == "+":
                a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
                for same_side, other in ((a, b), (b, a)):
                    if same_side.type == "subscript_expression" and \
                            s.text_of(same_side).replace(" ", "") == \
                            s.text_of(left).replace(" ", ""):
                        value = other
                        owned.append(same_side)
                        break
            if value is None:
                return (f"{s.text_of(n)!r} at line {s.line_of(n)} is not an accumulation "
                        "(only ++, --, += and -= can be privatized)")
            if _mentions(value, key) or _mentions(left.child_by_field_name("indices"), key):
                return f"the bins are read in {s.text_of(n)!r} at line {s.line_of(n)}"
            ups.append(n)
            owned.append(left)
            kinds.add("int" if _is_int_expr(m, value) else "any")
    return ups, owned, "any" if "any" in kinds else "int"


def _root_key(m: FunctionModel, sub: Node, lp: Loop) -> str | None:
    got = m.subscript(sub, lp.node)
    return got[0] if got is not None else None


def scatter_plan(m: FunctionModel, lp: Loop, extents: dict[str, str]
                 ) -> tuple[dict[str, tuple[str, str]], str] | str:
    """Which arrays of `lp` to privatize: ({name: (element type, extent)}, reduction
    clauses of the loop's scalar reductions), or why the loop cannot be threaded that way."""
    s = m.src
    line = s.line_of(lp.node)
    if not lp.canonical or lp.step is not None or lp.inclusive:
        return f"loop at line {line} is not a countable unit-step loop"
    if in_omp_construct(s, lp.node) or any(re.match(r"omp\b", pragma_text(s, p))
                                            for p in pragmas_before(lp.node)):
        return f"loop at line {line} is inside an OpenMP construct or carries an omp pragma"
    accs = accesses(m, lp.node)
    if isinstance(accs, str):
        return accs
    roots = {a.root for a in accs if a.write}
    bins: dict[str, tuple[str, str]] = {}
    for key in sorted(roots):
        d = lookup(key.split("@")[0], lp.node)
        if d is None or d.key != key or within(d.node, lp.node):
            continue
        # one-to-one writes (y[i] = ..., y[i] += ...) need no private copy
        alone = check_loop(m, lp, allow_reductions=True, exclude=frozenset(roots - {key}))
        if alone.ok:
            continue
        if not any(w in alone.reason for w in ("reaches an element", "touches one element",
                                               "does not depend on", "cannot tell which")):
            return alone.reason  # the loop fails for another reason than these bins
        got = _updates(m, lp, key)
        if isinstance(got, str):
            return got
        ups, owned, kind = got
        mine = [a for a in accs if a.root == key]
        if not ups:
            continue
        stray = [a for a in mine if not any(a.node == o for o in owned)]
        if stray:
            a = stray[0]
            how = "written" if a.write else "read"
            return (f"the bins {d.name} are {how} at line {s.line_of(a.node)} "
                    f"({s.text_of(a.node)!r}) besides being accumulated")
        for o in owned:
            base = o.child_by_field_name("argument")
            if base.type != "identifier" or base.text.decode() != d.name:
                return (f"{s.text_of(o)!r} at line {s.line_of(o)} reaches the bins through "
                        f"another pointer: a private copy of {d.name} would not see it")
        if not d.param or not d.pointer:
            return (f"{d.name} is not a pointer parameter: the extent of its private copies "
                    "cannot be named")
        ety = _elem_type(s, d)
        if ety is None or not (_INT.fullmatch(ety) or _FLOAT.fullmatch(ety)):
            return f"the bins {d.name} are not of an arithmetic type"
        if _INT.fullmatch(ety) and kind != "int":
            return (f"integer bins {d.name} get a value that may not be an integer (it would "
                    "round at every step, not once per copy)")
        ext = extents.get(d.name)
        if ext is None:
            return (f"the extent of {d.name} is not known (it is taken from the operator's "
                    "shape of that array, passed to this move)")
        for ident in re.findall(r"\b[A-Za-z_]\w*\b", ext):
            e = lookup(ident, lp.node)
            if e is not None and (m.is_written(e) or within(e.node, lp.node)):
                return f"the extent {ext} of {d.name} changes in the function"
        bins[d.name] = (ety, ext)
    if not bins:
        return f"loop at line {line} accumulates into no array of bins"
    keys = frozenset(lookup(n, lp.node).key for n in bins)
    v = check_loop(m, lp, allow_reductions=True, exclude=keys)
    if not v.ok:
        return v.reason
    if v.rewrites:
        return f"loop at line {line} reduces through an if"
    for name in v.reductions:
        d = lookup(name, lp.node)
        if d is None or d.pointer or d.array or not (
                _INT.fullmatch(_elem_type(s, d) or "") or _FLOAT.fullmatch(_elem_type(s, d) or "")):
            return f"{name} is reduced but is not a plain arithmetic local"
    for node in (lp.start, lp.end):
        if invariant_text(s, m, node, lp.node) is None:
            return f"the bounds of the loop at line {line} change inside it"
    return bins, reduction_clauses(v.reductions)


def _updates_per_run(s: Source, m: FunctionModel, lp: Loop, bins: dict[str, tuple[str, str]],
                     trip: str) -> str:
    """How many updates of the bins one run of `lp` makes: its trip count times the trip
    counts of the loops inside it around the updates (a row added into an output vector
    per iteration, `y[j] += a[i * n + j] * x[i]`, updates each of n bins once per row).
    Where an inner count is not fixed over `lp`, or the updates sit in different nests,
    the trip count alone (a lower bound)."""
    nests = set()
    for name in bins:
        d = lookup(name, lp.node)
        got = _updates(m, lp, d.key) if d is not None else None
        if not isinstance(got, tuple):
            return trip
        for up in got[0]:
            counts = []
            p = up.parent
            while p is not None and p != lp.node:
                inner = next((x for x in m.loops if x.node == p), None)
                if inner is not None:
                    lo = invariant_text(s, m, inner.start, lp.node)
                    hi = invariant_text(s, m, inner.end, lp.node)
                    if lo is None or hi is None or inner.step is not None or inner.inclusive:
                        return trip
                    counts.append(f"(long long)({hi})" if lo == "0" else
                                  f"((long long)({hi}) - (long long)({lo}))")
                p = p.parent
            nests.add(" * ".join(counts))
    if len(nests) != 1 or not next(iter(nests)):
        return trip
    return f"{trip} * {next(iter(nests))}"


def _hint_free(s: Source, lp: Loop) -> bool:
    """No pragma on the loop but compiler hints (unroll, ivdep): the threaded copy drops
    them; any other pragma keeps the loop out."""
    return all(re.match(r"(GCC\s+)?(unroll|nounroll|ivdep)\b", pragma_text(s, p))
               for p in pragmas_before(lp.node))


def _continues(lp: Loop) -> bool:
    """A `continue` of `lp` itself in its body (one inside an inner loop is that loop's)."""
    for n in walk(lp.body):
        if n.type != "continue_statement":
            continue
        p = n.parent
        while p is not None and p.type not in ("for_statement", "while_statement",
                                                "do_statement"):
            p = p.parent
        if p == lp.node:
            return True
    return False


def _scattered(m: FunctionModel, lp: Loop, name: str) -> bool:
    """Some update of the bins `name` goes where the data says (`counts[values[i]]`), not
    to an affine position: only then may consecutive iterations hit one bin, the chain the
    copies break. Rows added into an output (`y[j] += a[i * n + j] * x[i]`) reach each bin
    once per row; copies there only multiply the memory the bins take."""
    d = lookup(name, lp.node)
    got = _updates(m, lp, d.key) if d is not None else None
    if not isinstance(got, tuple):
        return False
    return any(m.linear(subscript_index(o), lp.node) is None for o in got[1])


def _copies_text(s: Source, m: FunctionModel, lp: Loop, name: str, ety: str, ext: str,
                 clauses: str, work: str, knob: str, copies: int) -> tuple[str, bool] | None:
    """The loop over `copies` interleaved private copies of the bins `name` (see the module
    doc), and whether it needs <cstdlib> (calloc, free); None when the counter's type is unknown."""
    ind = s.indent_of(lp.node)
    taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
    head = jam_header(s, m, lp, copies, taken)
    if head is None:
        return None
    var, init, start, end, lim, cmp, lim_text = head
    buf = fresh_name(m, f"{name}_copies")
    fold = fresh_name(m, f"{name}_bin")
    d = lookup(name, lp.node)
    e = f"(long long)({ext})"
    size = f"(size_t)({ext}) * {copies}"
    # copy k of the body counts into copy k of the bins; a `continue` of the loop ends
    # only its own copy (`do { } while (0)` is what it continues)
    wrap = ("do {{ {} }} while (0);" if _continues(lp) else "{{ {} }}")
    stmts = statements(lp.body)
    st2 = ind + "        "
    body = ""
    for k in range(copies):
        base = buf if k == 0 else f"({buf} + {k} * {e})"
        parts = [copy_text(m, st, [(lp, f"({var} + {k})" if k else None)], {d.key: base})
                 for st in stmts]
        body += st2 + wrap.format(" ".join(p.strip() for p in parts)) + "\n"
    orig_body = s.text_of(lp.body).replace("\n", "\n    ")
    added = f" +\n{ind}            ".join(
        f"{buf}[{fold}]" if k == 0 else f"{buf}[{k} * {e} + {fold}]" for k in range(copies))
    cond = (f"{work} >= PRIVATE_PER_BIN * {copies} * {e} &&\n{ind}    "
            f"{work} >= PRIVATE_MIN_WORK &&\n{ind}    "
            f"{e} * {copies} * (long long)sizeof({ety}) <= PRIVATE_MAX_BYTES &&\n{ind}    "
            f"({buf} = ({ety}*)calloc({size}, sizeof({ety}))) != 0")
    text = (f"{ind}{ety}* {buf} = 0;\n"
            f"{ind}if ({cond}) {{  // kernelcrew: private bins, {copies} copies\n"
            f"{ind}    {lim_text}\n"
            f"#pragma omp parallel for schedule(static) reduction(+ : {buf}[0:{size}])"
            f"{clauses} if ({work} >= {knob})\n"
            f"{ind}    for ({init} = {start}; {var} < {lim}; {var} += {copies}) {{\n"
            f"{body}{ind}    }}\n"
            f"{ind}    for ({init} = {lim}; {var} {cmp} {end}; ++{var}) {orig_body}\n"
            f"{ind}    for (long long {fold} = 0; {fold} < {e}; ++{fold})\n"
            f"{ind}        {name}[{fold}] += {added};\n"
            f"{ind}    free({buf});\n"
            f"{ind}}} else {{\n")
    return text, not re.search(r"#include\s*<(stdlib\.h|cstdlib)>", s.text)


def _once(s: Source, m: FunctionModel, extents: dict[str, str], knob: str, min_work: int,
          copies: int = 1) -> str | None:
    for lp in m.loops:
        if in_small_path(lp.node) or collapsed(s, lp) or not _hint_free(s, lp):
            continue
        plan = scatter_plan(m, lp, extents)
        if isinstance(plan, str):
            continue
        bins, clauses = plan
        start = invariant_text(s, m, lp.start, lp.node)
        end = invariant_text(s, m, lp.end, lp.node)
        trip = f"(long long)({end})" if start == "0" else \
            f"((long long)({end}) - (long long)({start}))"
        ind = s.indent_of(lp.node)
        sections = ", ".join(f"{n}[0:{e}]" for n, (_, e) in bins.items())
        work = _updates_per_run(s, m, lp, bins, trip)
        conds = [f"{work} >= {knob}"]
        for ty, e in bins.values():
            conds.append(f"{work} >= PRIVATE_PER_BIN * (long long)({e})")
            conds.append(f"(long long)({e}) * (long long)sizeof({ty}) <= PRIVATE_MAX_BYTES")
        last = ""
        if lp.decl is None or lp.decl.parent is None or \
                lp.decl.parent.start_byte != lp.node.start_byte:
            last = f" lastprivate({lp.var})"  # declared outside: its value after the loop
        begin = lead_start(s, lp.node)
        original = s.data[begin:lp.node.end_byte].decode()
        # the threaded copy: a version test inside it that would start a nested team is
        # its serial copy there (the team would be one thread)
        at = s.line_start(lp.node)
        raw = s.data[at:lp.node.end_byte]
        for b, e, text in sorted(serial_versions(s, lp.body), reverse=True):
            raw = raw[:b - at] + text.encode() + raw[e - at:]
        bare = raw.decode()

        def shift(text: str) -> str:
            return "\n".join(ln if not ln.strip() or ln.lstrip().startswith("#") else
                             "    " + ln for ln in text.split("\n"))

        cond = (" &&\n" + ind + "    ").join(conds)
        many = None
        if copies > 1 and len(bins) == 1 and _scattered(m, lp, next(iter(bins))):
            (name, (ety, ext)), = bins.items()
            many = _copies_text(s, m, lp, name, ety, ext, clauses, work, knob, copies)
        if many is not None:
            text = many[0] + f"{shift(original)}\n{ind}}}"
        else:
            text = (f"{ind}if ({cond}) {{  // kernelcrew: private bins\n"
                    f"#pragma omp parallel for schedule(static) reduction(+ : {sections})"
                    f"{clauses}{last}\n{shift(bare)}\n"
                    f"{ind}}} else {{\n{shift(original)}\n{ind}}}")
        edits = [Edit(begin, lp.node.end_byte, text)]
        guards = [(knob, min_work), ("PRIVATE_PER_BIN", PER_BIN), ("PRIVATE_MAX_BYTES", MAX_BYTES)]
        if many is not None:
            guards.append(("PRIVATE_MIN_WORK", COPIES_MIN_WORK))
            if many[1]:
                edits.append(include_edit(s, m, "cstdlib"))
        for name, value in guards:
            if f"#define {name}" not in s.text:
                edits.append(guard_edit(s, m, name, value))
        return finish(s, edits)
    return None


def private_bins(src: str, entry: str, *, extents: dict[str, str] | None = None,
                 knob: str = "OMP_MIN_WORK", min_work: int = 1 << 20, copies: int = 1
                 ) -> str | None:
    """Thread the scatter-add loops of `entry` with private bins (see the module doc).
    `extents`: the element count of each array of bins, by its parameter name in `entry`;
    `copies`: interleaved copies of the bins per thread, where the loop has one array of
    bins (1: the bins themselves, an array-section reduction)."""
    got = model_of(src, entry)
    if got is None or not extents:
        return None
    s, m = got
    if "// kernelcrew: private bins" in s.text_of(m.fn):
        return None  # one of ours already
    return _once(s, m, dict(extents), knob, min_work, max(1, int(copies)))


def private_bins_reasons(src: str, entry: str, extents: dict[str, str] | None = None
                         ) -> list[str]:
    """Why each loop of `entry` that accumulates into an array cannot take private bins."""
    got = model_of(src, entry)
    if got is None:
        return []
    _, m = got
    out = []
    for lp in m.loops:
        plan = scatter_plan(m, lp, dict(extents or {}))
        if isinstance(plan, str) and "accumulates into no array" not in plan:
            out.append(plan)
    return out


# ---------------------------------------------------------------- on a kernel file

def helper_extents(body: str, entry: str, helper: str, extents: dict[str, str]
                   ) -> dict[str, str]:
    """The extents of the entry's arrays (`extents`, by the entry's parameter names) as the
    helper's parameters see them: a pointer parameter that every call of `helper` in the
    entry passes the same entry array, whole (casts aside), with every size in its extent
    passed too. Anything else stays unknown."""
    s = Source(body)
    fn, hfn = find_function(s, entry), find_function(s, helper)
    if fn is None or hfn is None:
        return {}
    hp = [p.name for p in params(hfn)]

    def bare(n):
        while n.type in ("parenthesized_expression", "cast_expression") and n.named_children:
            n = n.child_by_field_name("value") or n.named_children[-1]
        return n.text.decode() if n.type == "identifier" else None

    found: dict[str, str] | None = None
    for n in walk(fn):
        if n.type != "call_expression" or s.text_of(n.child_by_field_name("function")) \
                .strip() != helper:
            continue
        args = [bare(a) for a in n.child_by_field_name("arguments").named_children]
        if len(args) != len(hp):
            return {}
        mine = {}
        for name, a in zip(hp, args, strict=True):
            if a not in extents:
                continue
            ext = extents[a]
            words = set(re.findall(r"\b[A-Za-z_]\w*\b", ext))
            where = {w: hp[args.index(w)] for w in words if w in args}
            if len(where) != len(words):
                continue
            mine[name] = re.sub(r"\b[A-Za-z_]\w*\b", lambda mt, w=where: w[mt[0]], ext)
        if found is not None and found != mine:
            return {}
        found = mine
    return found or {}


def private_bins_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The private_bins move on a kernel file (params: extents, min_work, knob, copies):
    on the entry, and on a helper with the extents its parameters see."""
    extents = {str(k): str(v) for k, v in dict(p.get("extents") or {}).items()}
    if not extents or not kf.meta.entry:
        return None
    knob = str(p.get("knob") or "OMP_MIN_WORK")
    value = int(kf.meta.knobs.get(knob, p["min_work"]))
    names = entries(kf)
    inner = called_in_loops(kf.body, names[1:])
    entry = kf.meta.entry

    def one(src: str, e: str) -> str | None:
        if e in inner:
            return None
        ext = extents if e == entry else helper_extents(src, entry, e, extents)
        return through_views(private_bins)(src, e, extents=ext, knob=knob, min_work=value,
                                           copies=int(p.get("copies") or 1))

    out = each_entry(kf, one)
    if out is not None and f">= {knob}" in (out.body or ""):
        out.knobs = {knob: value}
    return out


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, private_bins_reasons, "no loop accumulates into an array of bins",
                     as_written=True)
