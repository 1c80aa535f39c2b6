"""Recognizers the CUDA rewrites share: the one-thread-per-index kernel
(`T i = blockIdx.x * blockDim.x + threadIdx.x;` + a guard on i, then straight code), the
renaming of a kernel's identifiers, and the tests that make a rewrite illegal (block
synchronization, shared memory, warp operations, early returns)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelcrew.csource.syntax import (
    Node,
    Param,
    Source,
    declarators,
    find_function,
    lookup,
    params,
    walk,
)

# built-ins whose value differs between threads or that order threads
THREAD_WORDS = ("threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize")
_SYNC = re.compile(r"^(__syncthreads\w*|__syncwarp|__shfl\w*|__ballot\w*|__any\w*|__all\w*"
                   r"|__activemask|__reduce\w*|atomic\w+|__threadfence\w*|cooperative_groups"
                   r"|this_grid|this_thread_block|grid\.sync)$")
_CAST = re.compile(r"\(\s*(?:long\s+long|unsigned\s+long\s+long|size_t|int64_t|uint64_t|int|"
                   r"unsigned|unsigned\s+int|long|ptrdiff_t)\s*\)")
_TID_FORMS = {"blockIdx.x*blockDim.x+threadIdx.x", "blockDim.x*blockIdx.x+threadIdx.x",
              "threadIdx.x+blockIdx.x*blockDim.x", "threadIdx.x+blockDim.x*blockIdx.x"}


def norm(text: str) -> str:
    """An expression without spaces and integer casts, for comparing forms."""
    return re.sub(r"\s+", "", _CAST.sub("", text))


@dataclass
class PerIndex:
    """A kernel in which each thread handles one index `var` of [0, bound)."""

    fn: Node
    name: str
    ty: str  # the index type as written
    var: str
    init: str  # the index expression as written
    bound: str  # the guard's bound, as written
    decl: Node  # the index declaration
    guard: Node  # the if statement
    stmts: list[Node]  # the per-index work, in order
    params: list[Param]

    def work_text(self, s: Source) -> str:
        """The statements of the per-index work, as one block of text (first line
        unindented)."""
        if not self.stmts:
            return ""
        return s.data[self.stmts[0].start_byte:self.stmts[-1].end_byte].decode()


def _code_children(node: Node) -> list[Node]:
    return [c for c in node.named_children if c.type != "comment"]


def per_index(s: Source, kernel: str) -> PerIndex | None:
    """The one-index-per-thread form of `kernel`, None when it has another shape:
    `T i = <blockIdx.x*blockDim.x+threadIdx.x>; if (i >= N) return; work...` or
    `T i = ...; if (i < N) { work }`, nothing before the index but comments."""
    fn = find_function(s, kernel)
    if fn is None:
        return None
    body = fn.child_by_field_name("body")
    stmts = _code_children(body)
    if len(stmts) < 2 or stmts[0].type != "declaration":
        return None
    ds = list(declarators(stmts[0]))
    if len(ds) != 1 or ds[0][1] is None or ds[0][2] or ds[0][3]:
        return None
    var, init_node = ds[0][0], ds[0][1]
    if norm(s.text_of(init_node)) not in _TID_FORMS:
        return None
    ty = s.text_of(stmts[0].child_by_field_name("type")).strip()
    g = stmts[1]
    if g.type != "if_statement" or g.child_by_field_name("alternative") is not None:
        return None
    cond = g.child_by_field_name("condition")
    c = cond.named_children[0] if cond is not None and cond.named_children else None
    if c is None or c.type != "binary_expression":
        return None
    op = c.child_by_field_name("operator").type
    lt, rt = (s.text_of(c.child_by_field_name(k)).strip() for k in ("left", "right"))
    cons = g.child_by_field_name("consequence")
    is_return = cons.type == "return_statement" and not cons.named_children
    if is_return and ((op == ">=" and lt == var) or (op == "<=" and rt == var)):
        bound = rt if lt == var else lt
        work = stmts[2:]
    elif not is_return and len(stmts) == 2 and ((op == "<" and lt == var) or
                                                 (op == ">" and rt == var)):
        bound = rt if lt == var else lt
        work = _code_children(cons) if cons.type == "compound_statement" else [cons]
    else:
        return None
    if not work:
        return None
    return PerIndex(fn, kernel, ty, var, s.text_of(init_node), bound, stmts[0], g, work,
                    params(fn))


def blocker(s: Source, nodes: list[Node], var: str | None = None,
            allowed: frozenset[int] = frozenset()) -> str | None:
    """Why code cannot be regrouped across threads: synchronization, shared memory, warp
    operations, atomics, thread built-ins, early returns or a write to the index. Calls
    that start at a byte in `allowed` are the caller's business (atomics it rewrites)."""
    for st in nodes:
        for n in walk(st):
            if n.type in ("return_statement", "goto_statement"):
                return f"returns early at line {s.line_of(n)}"
            if n.type == "call_expression" and n.start_byte not in allowed:
                name = s.text_of(n.child_by_field_name("function")).strip()
                if _SYNC.match(name):
                    return f"calls {name} at line {s.line_of(n)}"
            if n.type == "identifier" and n.text.decode() in THREAD_WORDS:
                return f"uses {n.text.decode()} at line {s.line_of(n)}"
            if n.type == "field_expression" and s.text_of(n).split(".")[0].strip() in \
                    THREAD_WORDS:
                return f"uses {s.text_of(n)} at line {s.line_of(n)}"
            if var is not None:
                t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
                    n.child_by_field_name("argument") if n.type == "update_expression" else None
                if t is not None and t.type == "identifier" and t.text.decode() == var:
                    return f"changes the index {var} at line {s.line_of(n)}"
        if "__shared__" in s.text_of(st) or any(is_shared_decl(s, n) for n in walk(st)):
            return "uses shared memory"
    return None


def is_shared_decl(s: Source, node: Node) -> bool:
    """A `__shared__` declaration (the parser sees CUDA's words blanked, so the word may
    sit before the declaration node on its line)."""
    if node.type != "declaration":
        return False
    return "__shared__" in s.data[s.line_start(node):node.end_byte].decode()


def renamed_text(s: Source, start: int, end: int, names: dict[str, str],
                 scope_ok=None) -> str:
    """Text of bytes [start, end) with identifiers renamed (`scope_ok(node)` decides which
    occurrences are the renamed symbol; all of them when None)."""
    edits = []
    for n in walk(s.root):
        if n.start_byte >= end or n.end_byte <= start:
            continue
        if n.type == "identifier" and start <= n.start_byte and n.end_byte <= end:
            new = names.get(n.text.decode())
            if new is not None and (scope_ok is None or scope_ok(n)):
                edits.append((n.start_byte, n.end_byte, new))
    data = s.data[start:end]
    for a, b, t in sorted(edits, reverse=True):
        data = data[:a - start] + t.encode() + data[b - start:]
    return data.decode()


def param_ref(fn: Node, ident: Node) -> str | None:
    """The parameter of `fn` an identifier refers to (None: a local, a global or a macro)."""
    d = lookup(ident.text.decode(), ident)
    if d is None or not d.param:
        return None
    if not (fn.start_byte <= d.node.start_byte < fn.end_byte):
        return None
    return d.name


def top_node(n: Node) -> Node:
    """The translation-unit child holding n (a function, or the extern "C" around it)."""
    while n.parent is not None and n.parent.type != "translation_unit":
        n = n.parent
    return n


def element_type(p: Param, s: Source) -> str | None:
    """`float` for `const float* __restrict__ x` (None: not a plain pointer parameter)."""
    if p.pointer is None:
        return None
    ty = p.node.child_by_field_name("type")
    if ty is None:
        return None
    words = s.text_of(ty).split()
    text = s.text_of(p.node)
    if text.count("*") != 1:
        return None
    return words[-1] if words else None


def indent(text: str, pad: str) -> str:
    return "\n".join(pad + ln if ln.strip() else "" for ln in text.split("\n"))


def dedent_block(s: Source, nodes: list[Node]) -> str:
    """The lines of consecutive statements, re-indented to column 0 (relative indentation
    kept)."""
    if not nodes:
        return ""
    base = s.indent_of(nodes[0])
    text = base + s.data[nodes[0].start_byte:nodes[-1].end_byte].decode()
    out = []
    for ln in text.split("\n"):
        out.append(ln[len(base):] if ln.startswith(base) else ln.lstrip())
    return "\n".join(out)
