"""async_copy: copies from global into shared memory as asynchronous copies (cp.async).

A statement `S[e] = G[f];` (or `S[e] = __ldg(&G[f]);`) that copies one element of a
buffer the kernel only reads into a `__shared__` array of the same element type of 4, 8
or 16 bytes becomes `__pipeline_memcpy_async(&S[e], &G[f], sizeof(S[e]))`: on sm_80 and
newer one LDGSTS, the element goes from L2/L1 to shared memory without passing through a
register (older archs: an ordinary copy, by the header). Before the `__syncthreads()`
that publishes the shared array, `__pipeline_commit(); __pipeline_wait_prior(0);` makes
the thread's copies complete; the barrier then shows them to the block, as it showed the
plain stores.

Legal when, between the copy and that barrier (the rest of the copy's block, the loops
around it repeated, nothing nested that synchronizes), nothing reads S and nothing else
writes it except the other branch of the copy's own `if` (the zero fill at an edge:
another element, in the same iteration only one of the two runs); when the copy's
destination moves with every loop it repeats in (a staging copy writes each element
once: two asynchronous copies to one element complete in no given order); and when G is
never written by the kernel. Refused for elements of other sizes (cp.async moves 4, 8
or 16 bytes: half-precision elements one by one cannot) and where no barrier follows.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_shapes import is_shared_decl, param_ref
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    declarators,
    find_function,
    lookup,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

SIZES = {"float": 4, "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4,
         "uint32_t": 4, "double": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8,
         "float2": 8, "int2": 8, "float4": 16, "int4": 16, "double2": 16, "uint4": 16}
HEADER = "cuda_pipeline.h"


def _shared_arrays(s: Source, fn: Node) -> dict[str, str]:
    """name -> element type of the `__shared__` arrays declared in the kernel."""
    out = {}
    for n in walk(fn):
        if not is_shared_decl(s, n):
            continue
        if "extern" in s.data[s.line_start(n):n.end_byte].decode().split("__shared__")[0]:
            continue  # dynamic shared memory: its element type is the launch's business
        ty = s.text_of(n.child_by_field_name("type")).strip()
        for name, _init, ptr, arr in declarators(n):
            if arr and not ptr:
                out[name] = re.sub(r"\s+", " ", ty)
    return out


def _root(n: Node) -> Node:
    while n is not None and n.type == "subscript_expression":
        n = n.child_by_field_name("argument")
    return n


def _is_sync(s: Source, st: Node) -> bool:
    return st.type == "expression_statement" and \
        re.sub(r"\s+", "", s.text_of(st)) == "__syncthreads();"


def _has_sync(s: Source, node: Node) -> bool:
    return any(n.type == "call_expression" and
               s.text_of(n.child_by_field_name("function")).strip().startswith("__sync")
               for n in walk(node))


def _copy(s: Source, fn: Node, st: Node, shared: dict[str, str]) -> tuple[str, str, str] | None:
    """(S, destination text, source text) of `S[e] = G[f];` copies (None otherwise)."""
    if st.type != "expression_statement" or not st.named_children:
        return None
    e = st.named_children[0]
    if e.type != "assignment_expression" or e.child_by_field_name("operator").type != "=":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    if left.type != "subscript_expression":
        return None
    root = _root(left)
    if root is None or root.type != "identifier" or root.text.decode() not in shared:
        return None
    name = root.text.decode()
    if right.type == "call_expression" and \
            s.text_of(right.child_by_field_name("function")).strip() == "__ldg":
        args = right.child_by_field_name("arguments").named_children
        if len(args) != 1 or args[0].type != "pointer_expression":
            return None
        right = args[0].child_by_field_name("argument")
    if right.type != "subscript_expression":
        return None
    g = right.child_by_field_name("argument")
    if g is None or g.type != "identifier":
        return None
    p = param_ref(fn, g)
    if p is None:
        return None
    ptype = _param_elem(s, fn, p)
    if ptype is None or ptype != shared[name]:
        return None
    if _written(s, fn, p):
        return None
    return name, s.text_of(left), s.text_of(right)


def _param_elem(s: Source, fn: Node, name: str) -> str | None:
    for n in walk(fn.child_by_field_name("declarator")):
        if n.type != "parameter_declaration":
            continue
        ids = [x for x in walk(n) if x.type == "identifier" and x.text.decode() == name]
        if not ids or s.text_of(n).count("*") != 1:
            continue
        ty = s.text_of(n.child_by_field_name("type")).strip()
        return re.sub(r"\s+", " ", ty)
    return None


def _written(s: Source, fn: Node, param: str) -> bool:
    for n in walk(fn):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is None:
            continue
        r = _root(t)
        if t.type == "pointer_expression" or (r is not None and r.type == "identifier" and
                                               param_ref(fn, r) == param):
            return True
    return False


def _derived_from(s: Source, ident: Node, var: str, depth: int = 0) -> bool:
    """An identifier that is `var` or a local initialized from it (transitively)."""
    name = ident.text.decode()
    if name == var:
        return True
    if depth > 6:
        return False
    d = lookup(name, ident)
    if d is None or d.init is None:
        return False
    return any(_derived_from(s, x, var, depth + 1) for x in walk(d.init)
               if x.type == "identifier")


def _loop_var(lp: Node) -> str | None:
    init = lp.child_by_field_name("initializer")
    if init is not None and init.type == "declaration":
        ds = list(declarators(init))
        return ds[0][0] if len(ds) == 1 else None
    if init is not None and init.type == "assignment_expression":
        left = init.child_by_field_name("left")
        return left.text.decode() if left.type == "identifier" else None
    return None


def barrier_after(s: Source, st: Node, body: Node) -> tuple[Node, list[Node], list[Node]] | None:
    """(the barrier, the statements that may run between the copy and it, the loops the
    copy repeats in before it) or None when no plain `__syncthreads();` follows."""
    between: list[Node] = []
    loops: list[Node] = []
    node = st
    while node.start_byte != body.start_byte or node.end_byte != body.end_byte:
        parent = node.parent
        if parent is None:
            return None
        if parent.type == "compound_statement":
            for sib in parent.named_children:
                if sib.start_byte <= node.start_byte or sib.type == "comment":
                    continue
                if _is_sync(s, sib):
                    return sib, between, loops
                if _has_sync(s, sib):
                    return None  # a barrier in a branch or a loop: not followed here
                between.append(sib)
        elif parent.type in ("for_statement", "while_statement", "do_statement"):
            between.append(parent.child_by_field_name("body"))
            loops.append(parent)
        elif parent.type in ("switch_statement", "case_statement", "lambda_expression"):
            return None
        node = parent
    return None


def _legal(s: Source, fn: Node, st: Node, arr: str, dest: Node) -> Node | None:
    """The barrier the copy's wait goes before, when the copy may be asynchronous."""
    body = fn.child_by_field_name("body")
    got = barrier_after(s, st, body)
    if got is None:
        return None
    barrier, between, loops = got
    own_if = st.parent  # the if whose branch the copy is (through braces)
    while own_if is not None and own_if.type in ("compound_statement", "else_clause"):
        own_if = own_if.parent
    if own_if is not None and own_if.type != "if_statement":
        own_if = None
    exclusive = None
    if own_if is not None:
        branches = [own_if.child_by_field_name("consequence"),
                    own_if.child_by_field_name("alternative")]
        exclusive = [b for b in branches if b is not None and not
                     (b.start_byte <= st.start_byte < b.end_byte)]
    dest_text = re.sub(r"\s+", "", s.text_of(dest))
    for node in between:
        for n in walk(node):
            if n.start_byte >= st.start_byte and n.end_byte <= st.end_byte:
                continue  # the copy itself
            if n.type != "identifier" or n.text.decode() != arr:
                continue
            sub = n.parent
            while sub is not None and sub.type == "subscript_expression" and \
                    sub.parent is not None and sub.parent.type == "subscript_expression" and \
                    sub.parent.child_by_field_name("argument") == sub:
                sub = sub.parent
            a = sub.parent if sub is not None else None
            is_write = a is not None and a.type == "assignment_expression" and \
                a.child_by_field_name("left") == sub and \
                a.child_by_field_name("operator").type == "="
            in_other = exclusive and any(b.start_byte <= n.start_byte < b.end_byte
                                         for b in exclusive)
            if not (is_write and in_other and
                    re.sub(r"\s+", "", s.text_of(sub)) == dest_text):
                return None
    for lp in loops:
        var = _loop_var(lp)
        if var is None or not any(x.type == "identifier" and _derived_from(s, x, var)
                                  for x in walk(dest)):
            return None
    return barrier


def async_copy(src: str, kernel: str) -> str | None:
    """The kernel with its staging copies asynchronous (see the module docstring)."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None:
        return None
    shared = _shared_arrays(s, fn)
    if not shared:
        return None
    edits, waits = [], {}
    for st in walk(fn):
        got = _copy(s, fn, st, shared)
        if got is None:
            continue
        arr, dst, srcx = got
        if SIZES.get(shared[arr]) is None:
            continue
        dest = st.named_children[0].child_by_field_name("left")
        barrier = _legal(s, fn, st, arr, dest)
        if barrier is None:
            continue
        edits.append(Edit(st.start_byte, st.end_byte,
                          f"__pipeline_memcpy_async(&{dst}, &{srcx}, sizeof({shared[arr]}));"))
        waits[barrier.start_byte] = barrier
    if not edits:
        return None
    for b in waits.values():
        pad = s.indent_of(b)
        edits.append(Edit(b.start_byte, b.start_byte,
                          f"__pipeline_commit();  // kernelcrew async_copy: this thread's "
                          f"copies done\n{pad}__pipeline_wait_prior(0);\n{pad}"))
    out = apply_edits(s, edits)
    return None if Source(out).has_errors() else out


def why_not(kf: KernelFile) -> str:
    s = Source(kf.body)
    reasons = []
    for e in entries(kf):
        fn = find_function(s, e)
        if fn is None:
            continue
        shared = _shared_arrays(s, fn)
        if not shared:
            reasons.append(f"{e}(): no __shared__ array")
            continue
        sizes = [t for t in shared.values() if t not in SIZES]
        if sizes:
            reasons.append(f"{e}(): shared elements of type {sizes[0]}: cp.async copies 4, "
                           "8 or 16 bytes")
        else:
            reasons.append(f"{e}(): no plain copy from a read-only buffer into shared memory "
                           "followed by a barrier before the array is read")
    return "; ".join(reasons[:3]) or "no launched kernel"


# ---------------------------------------------------------------- on a kernel file

def async_copy_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, changed = kf.body, False
    for e in entries(kf):
        new = async_copy(body, e)
        if new is not None:
            body, changed = new, True
    if not changed:
        return None
    if not re.search(rf"#\s*include\s*<{re.escape(HEADER)}>", body):
        body = f"#include <{HEADER}>\n" + body
    return Outcome(body=body)
