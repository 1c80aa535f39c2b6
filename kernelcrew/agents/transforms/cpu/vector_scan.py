"""Vector scan: a prefix sum computed a vector of elements at a time.

`for (j = a; j < b; ++j) { acc += x[j]; y[j] = acc; }` waits on one add per element (the
running sum's dependence chain: about four cycles an element). Eight floats (four doubles)
at a time, the prefix of a vector is taken in registers with log2(lanes) shift-and-add
steps (GCC vector extensions, so the same code is AVX2 on an AVX2 machine and AVX-512's
lower half on another), the running total is added as one broadcast vector, and the chain
from one vector to the next is one add and one lane broadcast:

    [x0 x1 x2 x3]  +  [0  x0 x1 x2]  ->  [s0 s01 s12 s23]
                   +  [0  0  s0 s01] ->  [s0 s01 s012 s0123]   (+ running total)

A value read from consecutive elements (`x[r * cols + j]`, the element type the sum's) is
one vector load at the first lane's element, a store to consecutive elements one vector
store; any other value is computed into a buffer by a loop of `lanes` copies of it (the
loop counter redeclared per lane, so its text is reused as written), and any other store
written back the same way. Leftover elements run the loop as written.

Legal where `analysis.prefix_sums.scan_plan` finds a running sum (updated only by `acc += v` or `acc -= v`,
read only by stores `Y[idx] = acc;`, the loop otherwise independent), the body holds only
that update and, after it, the stores (an inclusive scan), the sum is a float or a double,
and the loop is not itself a worksharing loop. Inside a thread's rows or a block of the
blocked scan it applies as well, so it goes after `blocked_scan` in a merge. The sum is
reassociated: results change in the last bits, which the verifier checks against the op's
tolerance.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    fresh_name,
    in_marked_block,
    in_small_path,
    innermost_reasons,
    invariant_text,
    repeat,
    statements,
)
from kernelcrew.agents.transforms.analysis.prefix_sums import VECTOR_MARK, scan_plan
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.csource.affine import FunctionModel, pointer_element_type, split_terms
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    lead_start,
    lookup,
    pragma_text,
    pragmas_before,
)
from kernelcrew.kernels.kernelfile import KernelFile

# lanes per 32-byte vector (half that in a 16-byte one), and the integer type of a shuffle
# mask of the same lane size
_LANES = {"float": (8, "int"), "double": (4, "long long")}


def vector_scan_plan(m: FunctionModel, lp: Loop) -> tuple[str, str, Node, bool, list[Node]] | str:
    """(running sum, its type, the update's value, whether it is subtracted, the stores'
    targets) of a scan loop this move can vectorize, or why `lp` is not one."""
    s = m.src
    line = s.line_of(lp.node)
    if in_marked_block(lp.node, VECTOR_MARK):
        return f"loop at line {line} is the leftover loop of a vector scan"
    if any(re.match(r"omp\b.*\bfor\b", pragma_text(s, p)) for p in pragmas_before(lp.node)):
        return f"loop at line {line} is an OpenMP worksharing loop"
    plan = scan_plan(m, lp, threads_ok=True)
    if isinstance(plan, str):
        return plan
    acc, ty, stores = plan
    if ty not in _LANES:
        return f"{acc} is a {ty}, not a float or a double"
    body = statements(lp.body)
    update = body[0] if body else None
    e = update.named_children[0] if update is not None and update.type == \
        "expression_statement" and update.named_children else None
    if e is None or e.type != "assignment_expression" or \
            e.child_by_field_name("left").type != "identifier" or \
            e.child_by_field_name("left").text.decode() != acc:
        return f"the loop at line {line} does not open with its update of {acc} " \
               "(an exclusive scan, or other work first)"
    if len(body) != 1 + len(stores) or any(x not in stores for x in body[1:]):
        return f"the loop at line {line} does other work than the scan and its stores"
    op = e.child_by_field_name("operator").type
    value = e.child_by_field_name("right")
    if op == "=":  # acc = acc + v
        value = value.child_by_field_name("right")
    targets = [x.named_children[0].child_by_field_name("left") for x in stores]
    return acc, ty, value, op == "-=", targets


def _contiguous(m: FunctionModel, lp: Loop, node: Node, ty: str) -> bool:
    """`node` reads or writes elements of type `ty` one after the other as `lp` counts:
    a subscript of a `ty` pointer whose offset steps by one with the loop variable."""
    while node.type == "parenthesized_expression" and len(node.named_children) == 1:
        node = node.named_children[0]
    if node.type != "subscript_expression" or \
            pointer_element_type(m.src, node.child_by_field_name("argument")) != ty:
        return False
    sub = m.subscript(node, lp.body)
    terms = split_terms(sub[1]) if sub is not None and sub[1] is not None else None
    return terms is not None and terms[0].get(lp.key) == {(): 1}


def _counter_type(s: Source, lp: Loop) -> str | None:
    d = lookup(lp.var, lp.body) if lp.var else None
    ty = d.node.child_by_field_name("type") if d is not None else None
    if ty is None or d.pointer or d.array:
        return None
    return s.text_of(ty).replace("const", "").strip()


def _once(s: Source, m: FunctionModel) -> str | None:
    for lp in m.loops:
        if lp.children or in_small_path(lp.node) or collapsed(s, lp):
            continue
        plan = vector_scan_plan(m, lp)
        if isinstance(plan, str):
            continue
        ctype = _counter_type(s, lp)
        start = invariant_text(s, m, lp.start, lp.node)
        end = invariant_text(s, m, lp.end, lp.node)
        if ctype is None or start is None or end is None:
            continue
        return finish(s, [Edit(lead_start(s, lp.node), lp.node.end_byte,
                               _rewrite(s, m, lp, plan, ctype, start, end))])
    return None


def _rewrite(s: Source, m: FunctionModel, lp: Loop, plan: tuple, ctype: str, start: str,
             end: str) -> str:
    """The text that replaces `lp` (and its pragmas): the vector loop, then the loop as
    written for the leftover elements."""
    # stays long: it writes the vector scan's block top to bottom (loads, the shift-and-add
    # steps, stores, the leftover loop) from the plan's pieces
    acc, ty, value, minus, targets = plan
    lanes, mask_t = _LANES[ty]
    vt, mt, n, k, z, run, x, v, lane, last = (fresh_name(m, b) for b in (
        "kc_sv", "kc_sm", "kc_sn", "kc_sk", "kc_sz", "kc_srun", "kc_sx", "kc_sv8", "kc_sl",
        "kc_slast"))
    masks = [fresh_name(m, f"kc_sh{w}") for w in range(3)]
    ind = s.indent_of(lp.node)
    i1, i2, i3, i4 = (ind + "    " * j for j in range(1, 5))
    own = lp.decl is not None and lp.decl.parent is not None and \
        lp.decl.parent.start_byte == lp.node.start_byte
    base = "" if start == "0" else f"({start}) + "
    here = f"({ctype})({base}{k} + {lane})"
    first = f"({ctype})({base}{k})"
    head = f"for ({ctype + ' ' if own else ''}{lp.var} = {first}; {lp.var} < {end}; " \
           f"++{lp.var}) "
    # the loop as written, for the leftover elements, one level deeper
    tail = head + "\n".join(ln if i == 0 or not ln.strip() or ln.lstrip().startswith("#")
                             else "    " + ln
                             for i, ln in enumerate(s.text_of(lp.body).split("\n")))
    value_text = s.text_of(value).strip()
    direct = [tg for tg in targets if _contiguous(m, lp, tg, ty)]
    rest = [tg for tg in targets if tg not in direct]
    contiguous_value = _contiguous(m, lp, value, ty)

    def part(lanes: int, nbytes: int) -> str:
        """The typedefs and the vector loop for vectors of `lanes` elements."""
        steps, w = [], 1
        while w < lanes:
            steps.append([i - w if i >= w else lanes + i for i in range(lanes)])
            w *= 2
        # a contiguous load or store is one vector's memcpy at the first lane's element;
        # anything else goes through a buffer, a lane at a time
        if contiguous_value:
            load = (f"{i3}{{\n{i4}const {ctype} {lp.var} = {first};\n"
                    f"{i4}__builtin_memcpy(&{v}, &({value_text}), sizeof {v});\n"
                    f"{i3}}}\n")
        else:
            load = (f"{i3}for (int {lane} = 0; {lane} < {lanes}; ++{lane}) {{\n"
                    f"{i4}const {ctype} {lp.var} = {here};\n"
                    f"{i4}{x}[{lane}] = ({value_text});\n"
                    f"{i3}}}\n"
                    f"{i3}__builtin_memcpy(&{v}, {x}, sizeof {v});\n")
        if minus:
            load += f"{i3}{v} = {z} - {v};\n"
        store = "".join(
            f"{i3}{{\n{i4}const {ctype} {lp.var} = {first};\n"
            f"{i4}__builtin_memcpy(&({s.text_of(tg).strip()}), &{v}, sizeof {v});\n"
            f"{i3}}}\n" for tg in direct)
        if rest:
            store += (f"{i3}__builtin_memcpy({x}, &{v}, sizeof {v});\n"
                      f"{i3}for (int {lane} = 0; {lane} < {lanes}; ++{lane}) {{\n"
                      f"{i4}const {ctype} {lp.var} = {here};\n"
                      + "".join(f"{i4}{s.text_of(tg).strip()} = {x}[{lane}];\n"
                                for tg in rest)
                      + f"{i3}}}\n")
        buffer = not contiguous_value or bool(rest)
        return (
            f"{i1}typedef {ty} {vt} __attribute__((vector_size({nbytes})));\n"
            f"{i1}typedef {mask_t} {mt} __attribute__((vector_size({nbytes})));\n"
            f"{i1}if ({n} >= {lanes}) {{\n"
            f"{i2}const {vt} {z} = {{}};\n"
            + "".join(f"{i2}const {mt} {mk} = {{{', '.join(map(str, st))}}};\n"
                      for mk, st in zip(masks, steps)) +
            f"{i2}const {mt} {last} = {{{', '.join([str(lanes - 1)] * lanes)}}};\n"
            f"{i2}{vt} {run} = {z} + {acc};\n"
            f"{i2}for (; {k} + {lanes} <= {n}; {k} += {lanes}) {{\n"
            + (f"{i3}{ty} {x}[{lanes}];\n" if buffer else "") +
            f"{i3}{vt} {v};\n"
            + load
            + "".join(f"{i3}{v} += __builtin_shuffle({v}, {z}, {mk});\n"
                      for mk in masks[:len(steps)]) +
            f"{i3}{v} += {run};\n"
            + store +
            f"{i3}{run} = __builtin_shuffle({v}, {last});\n"
            f"{i2}}}\n"
            f"{i2}{acc} = {run}[0];\n"
            f"{i1}}}\n")

    # 32-byte vectors where the target has AVX, 16-byte ones where not (SSE2: a
    # 32-byte vector there is emulated, slower than the loop as written)
    return (
        f"{ind}{{  {VECTOR_MARK}\n"
        f"{i1}const long long {n} = (long long)({end}) - (long long)({start});\n"
        f"{i1}long long {k} = 0;\n"
        "#if defined(__AVX__)\n"
        + part(lanes, 32) +
        "#else\n"
        + part(lanes // 2, 16) +
        "#endif\n"
        f"{i1}{tail}\n"
        f"{ind}}}")


def vector_scan(src: str, entry: str) -> str | None:
    """Every prefix-sum loop of `entry` scanned a vector at a time (module doc)."""
    return repeat(src, entry, _once)


def vector_scan_reasons(src: str, entry: str) -> list[str]:
    return innermost_reasons(src, entry, vector_scan_plan)


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, vector_scan_reasons, "no float or double prefix-sum loop (`acc += "
                     "x[i]; y[i] = acc;`)", as_written=True,
                     skip=("carries no running sum", "not an innermost"))
