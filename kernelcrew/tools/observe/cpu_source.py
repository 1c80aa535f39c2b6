"""Light static analysis of a CPU kernel's source, and of g++'s vectorization report.

- loops (tree-sitter-cpp): each `for` with its index, trip count where it is a plain
  bound, nesting, and for the innermost loops the stride of every array subscript in
  the loop's index (`y[j * rows + i]` with `j` innermost has stride `rows`);
- `-fopt-info-vec-*` lines mapped to those loops: vectorized (and the vector width) or
  missed, and why in a word or two.

Subscripts and loop bounds are read by the same linearizer the moves use
(`kernelcrew.csource.affine.FunctionModel`), so the profile and the moves cannot disagree
about a stride. It says `unknown` where a subscript is not a linear expression of names and
integers (calls, divisions, data-dependent indices) or its base is not a buffer the model
can follow.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import tree_sitter
import tree_sitter_cpp

from kernelcrew.csource.affine import FunctionModel, Poly, p_add, p_derivative, p_plain
from kernelcrew.csource.syntax import Source, functions, lookup
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import OpSpec


@functools.cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cpp.language()))


@dataclass
class Access:
    """One array subscript in an innermost loop."""

    array: str  # the root pointer (a parameter) when it can be followed, else the name used
    via: str  # the name as written, when it is a local pointer into `array`
    line: int
    write: bool
    stride: str | None  # elements per step of the loop index, symbolic; None: unknown
    stride_elems: int | None  # the same evaluated for the profiled case
    text: str

    @property
    def kind(self) -> str:
        """invariant | unit | small | large | unknown."""
        s = self.stride_elems
        if self.stride is None:
            return "unknown"
        if s is None:
            return "large" if self.stride not in ("0", "1", "-1") else "unknown"
        s = abs(s)
        return "invariant" if s == 0 else "unit" if s == 1 else "small" if s <= 4 else "large"


@dataclass
class Loop:
    line: int  # 1-based line of the `for`, in the kernel file (front matter counted)
    end_line: int
    start: int  # first line of the loop with the `#pragma` lines right above it
    var: str | None
    depth: int  # 0 for an outermost loop
    parent: int | None  # line of the enclosing loop
    innermost: bool
    trip: str | None  # symbolic trip count when the bound is simple
    trip_value: int | None  # evaluated for the profiled case
    header: str  # `for (...)` text, one line
    accesses: list[Access] = field(default_factory=list)
    vectorized: bool | None = None  # from the compiler's report; None: no report line
    vector_bytes: int | None = None
    missed: str = ""  # why not vectorized, a word or two

    def vec_text(self) -> str:
        if self.vectorized:
            return f"vectorized {self.vector_bytes}B" if self.vector_bytes else "vectorized"
        if self.vectorized is False:
            return f"not vectorized ({self.missed or 'no reason given'})"
        return "no report"


# -- subscripts and bounds, through the moves' linearizer ------------------------
def _descendants(node: tree_sitter.Node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _declared_name(decl: tree_sitter.Node | None) -> str | None:
    while decl is not None and decl.type != "identifier":
        decl = decl.child_by_field_name("declarator")
    return decl.text.decode() if decl is not None else None


def _poly_text(p: Poly) -> str:
    if not p:
        return "0"
    parts = []
    for k, v in sorted(p.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        names = "*".join(k)
        if not names:
            parts.append(str(v))
        elif v == 1:
            parts.append(names)
        elif v == -1:
            parts.append("-" + names)
        else:
            parts.append(f"{v}*{names}")
    return " + ".join(parts).replace("+ -", "- ")


def _poly_eval(p: Poly, values: dict[str, int]) -> int | None:
    total = 0
    for k, v in p.items():
        term = v
        for name in k:
            if name not in values:
                return None
            term *= values[name]
        total += term
    return total


def _loop_var(node: tree_sitter.Node) -> str | None:
    init = node.child_by_field_name("initializer")
    upd = node.child_by_field_name("update")
    name = None
    if init is not None and init.type == "declaration":
        first = next((c for c in init.named_children if c.type == "init_declarator"), None)
        name = _declared_name(first.child_by_field_name("declarator")) if first else None
    elif init is not None and init.type == "assignment_expression":
        left = init.child_by_field_name("left")
        name = left.text.decode() if left is not None and left.type == "identifier" else None
    if upd is None:
        return None
    target = upd.child_by_field_name("argument") or upd.child_by_field_name("left")
    tname = target.text.decode() if target is not None else None
    return name if name == tname else tname


def _linear(m: FunctionModel, node: tree_sitter.Node | None, region: tree_sitter.Node
            ) -> Poly | None:
    """`node` as a polynomial over names, loop variables written by their names."""
    got = m.linear(node, region)
    return p_plain(got) if got is not None else None


def _alternatives(m: FunctionModel, node: tree_sitter.Node, region: tree_sitter.Node
                  ) -> list[Poly]:
    """Linear forms of a bound; both branches of a conditional (a min/max), also through a
    local that holds one (`i1 = i0 + TILE < rows ? i0 + TILE : rows`)."""
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    if node.type == "identifier":
        d = lookup(node.text.decode(), node)
        if d is not None and d.init is not None and not d.param and not m.is_written(d) \
                and d.init.type == "conditional_expression":
            node = d.init
    if node.type == "conditional_expression":
        return [p for branch in ("consequence", "alternative")
                for p in _alternatives(m, node.child_by_field_name(branch), region)]
    lin = _linear(m, node, region)
    return [lin] if lin is not None else []


def _trip(node: tree_sitter.Node, var: str | None, m: FunctionModel, values: dict[str, int]
          ) -> tuple[str | None, int | None]:
    """Trip count (text, value for the case) when the bound is simple. A bound `c ? a : b`
    (a tile loop's `min(i0 + TILE, rows)`) gives `<=` the branch that evaluates."""
    cond = node.child_by_field_name("condition")
    if var is None or cond is None or cond.type != "binary_expression":
        return None, None
    op = cond.child_by_field_name("operator").text.decode()
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if left.text.decode() != var or op not in ("<", "<=", "!="):
        return None, None
    init = node.child_by_field_name("initializer")
    start: Poly | None = {}
    if init is not None:
        val = None
        for n in _descendants(init):
            if n.type in ("init_declarator", "assignment_expression"):
                val = n.child_by_field_name("value") or n.child_by_field_name("right")
                break
        start = _linear(m, val, node) if val is not None else None
    if start is None:
        return None, None
    step: Poly = {(): 1}
    upd = node.child_by_field_name("update")
    if upd is not None and upd.type == "assignment_expression":
        if upd.child_by_field_name("operator").text.decode() != "+=":
            return None, None
        step = _linear(m, upd.child_by_field_name("right"), node) or {}
        if not step:
            return None, None
    step_v = _poly_eval(step, values)
    cands = []
    for bound in _alternatives(m, right, node):
        trip = p_add(bound, start, -1)
        if op == "<=":
            trip = p_add(trip, {(): 1})
        v = _poly_eval(trip, values)
        if v is not None and step_v:
            v = -(-v // step_v)
        elif step != {(): 1}:
            v = None
        text = _poly_text(trip)
        if step != {(): 1}:
            text = f"({text})/{_poly_text(step)}" if len(trip) > 1 else f"{text}/{_poly_text(step)}"
        cands.append((text, v))
    if len(cands) == 1:
        return cands[0]
    known = [(v, t) for t, v in cands if v is not None]
    if known:
        v, t = min(known)
        return f"<={t}", v
    return None, None


def _subscripts(body: tree_sitter.Node):
    """(base node, index node, whole node, is_write) for x[i] and *(x + i)."""
    writes = set()
    for n in _descendants(body):
        if n.type == "assignment_expression":
            writes.add(n.child_by_field_name("left").id)
        elif n.type == "update_expression":
            writes.add(n.child_by_field_name("argument").id)
    for n in _descendants(body):
        if n.type == "subscript_expression":
            idx = n.child_by_field_name("indices")
            inner = idx.named_children[0] if idx is not None and idx.named_children else None
            yield n.child_by_field_name("argument"), inner, n, n.id in writes
        elif n.type == "pointer_expression" and n.child_by_field_name(
                "operator").text.decode() == "*":
            yield n.child_by_field_name("argument"), None, n, n.id in writes


def analyze(text: str, *, entry: str | None = None, values: dict[str, int] | None = None
            ) -> list[Loop]:
    """Loops of the source in source order, with strides for the innermost ones."""
    src = Source(text)
    values = dict(values or {})
    loops: list[Loop] = []
    for fn in functions(src):
        if fn.child_by_field_name("body") is None:
            continue
        model = FunctionModel(src, fn, expand_locals=True)
        _walk_loops(fn, model, values, loops, text.splitlines(), depth=0, parent=None)
    loops.sort(key=lambda lp: lp.line)
    return loops


def _walk_loops(node: tree_sitter.Node, m: FunctionModel, values: dict[str, int],
                out: list[Loop], src_lines: list[str], depth: int, parent: int | None) -> None:
    for child in node.children:
        if child.type != "for_statement":
            _walk_loops(child, m, values, out, src_lines, depth, parent)
            continue
        var = _loop_var(child)
        body = child.child_by_field_name("body")
        inner = body is not None and any(
            n.type in ("for_statement", "while_statement", "do_statement")
            for n in _descendants(body))
        trip_text, trip_value = _trip(child, var, m, values)
        header = child.text.decode().split("{")[0].split("\n")[0].strip()
        start = child.start_point.row + 1
        while start > 1 and src_lines[start - 2].lstrip().startswith("#pragma"):
            start -= 1
        loop = Loop(line=child.start_point.row + 1, end_line=child.end_point.row + 1,
                    start=start, var=var,
                    depth=depth, parent=parent, innermost=not inner,
                    trip=trip_text, trip_value=trip_value,
                    header=header[:80])
        if loop.innermost and var is not None and body is not None:
            loop.accesses = _accesses(child, body, var, m, values)
        out.append(loop)
        if body is not None:
            _walk_loops(body, m, values, out, src_lines, depth + 1, loop.line)


def _loop_key(m: FunctionModel, node: tree_sitter.Node, var: str) -> str | None:
    """The symbol the linearizer gives the loop variable of the `for` at `node`."""
    return next((lp.key for lp in m.loops if lp.var == var and
                 lp.node.start_byte == node.start_byte and lp.node.end_byte == node.end_byte),
                None)


def _written_in(node: tree_sitter.Node, name: str, at: tree_sitter.Node) -> bool:
    """Whether the variable `name` seen at `at` is assigned or stepped inside `node`."""
    d = lookup(name, at)
    for n in _descendants(node):
        tgt = None
        if n.type == "assignment_expression":
            tgt = n.child_by_field_name("left")
        elif n.type == "update_expression":
            tgt = n.child_by_field_name("argument")
        if tgt is not None and tgt.type == "identifier" and tgt.text.decode() == name:
            e = lookup(name, tgt)
            if d is None or e is None or e.key == d.key:
                return True
    return False


def _offset(m: FunctionModel, loop: tree_sitter.Node, whole: tree_sitter.Node,
            base: tree_sitter.Node, index: tree_sitter.Node | None) -> Poly | None:
    """The element offset of an access in the loop: from the buffer it starts from, or,
    where the base pointer cannot be followed (a row pointer stepped once per row),
    from the base itself when the loop does not move it."""
    got = m.access(whole, loop)
    if got is not None and got[1] is not None:
        return got[1]
    if base.type != "identifier" or _written_in(loop, base.text.decode(), base):
        return None
    if whole.type == "pointer_expression":
        return {}  # `*p` with p fixed in the loop
    return m.linear(index, loop)


def _accesses(loop: tree_sitter.Node, body: tree_sitter.Node, var: str, m: FunctionModel,
              values: dict[str, int]) -> list[Access]:
    # a loop the model does not count (`for (; i < n; ++i)`) leaves its variable a plain
    # symbol of the offset, which its name then stands for
    key = _loop_key(m, loop, var) or var
    out = []
    for base, index, whole, write in _subscripts(body):
        if base is None:
            continue
        name = base.text.decode() if base.type == "identifier" else _first_identifier(base)
        if not name:
            continue
        got = m.access(whole, loop)
        root = got[0].split("@")[0] if got is not None else name
        off = _offset(m, loop, whole, base, index)
        # the stride: the offset's change per step of the loop's variable
        d = p_derivative(off, key) if off is not None else None
        d = p_plain(d) if d is not None else None
        out.append(Access(array=root, via=name if root != name else "",
                          line=whole.start_point.row + 1, write=write,
                          stride=_poly_text(d) if d is not None else None,
                          stride_elems=_poly_eval(d, values) if d is not None else None,
                          text=whole.text.decode()[:60]))
    return out


def _first_identifier(node: tree_sitter.Node) -> str | None:
    for n in _descendants(node):
        if n.type == "identifier":
            return n.text.decode()
    return None


def size_values(kf: KernelFile, spec: OpSpec, sizes: dict[str, int]) -> dict[str, int]:
    """Names in the kernel source -> values for the case: the entry's size parameters (by
    position: they come last, in op.yaml order), the op's size names, and the knobs."""
    values: dict[str, int] = {k: int(v) for k, v in kf.meta.knobs.items() if float(v).is_integer()}
    values.update(sizes)
    tree = _parser().parse(kf.text.encode())
    for fn in _descendants(tree.root_node):
        if fn.type != "function_definition":
            continue
        decl = fn.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        if decl is None:
            continue
        name = decl.child_by_field_name("declarator")
        if name is None or name.text.decode() != kf.meta.entry:
            continue
        params = [_declared_name(p.child_by_field_name("declarator"))
                  for p in decl.child_by_field_name("parameters").named_children
                  if p.type == "parameter_declaration"]
        for pname, sname in zip(params[len(params) - len(spec.sizes):], spec.sizes,
                                strict=False):
            if pname:
                values[pname] = sizes[sname]
    return values


# -- the compiler's vectorization report -------------------------------------------
_OPT = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>optimized|missed|note)"
                  r":\s*(?P<msg>.*)$")
_WIDTH = re.compile(r"loop vectorized using (\d+) byte vectors")
_REASONS = [  # (substring of g++'s message, what we say)
    ("not suitable for strided", "strided access"),
    ("complicated access pattern", "complex access"),
    ("no vectype", "no vectype"),  # at -O2: the very-cheap cost model (see cpu_profile)
    ("possible dependence", "possible aliasing"),
    ("can't determine dependence", "possible aliasing"),
    ("possible alias", "possible aliasing"),
    ("not profitable", "not profitable"),
    ("number of iterations cannot be computed", "unknown trip count"),
    ("statement clobbers memory", "function call"),
    ("function call", "function call"),
    ("control flow in loop", "control flow"),
    ("multiple nested loops", "outer loop"),
    ("two or more consecutive inner loops", "outer loop"),
    ("reduction", "reduction order"),
    ("unsupported use in stmt", "reduction/use outside loop"),
    ("data ref analysis", "data-ref analysis"),
    ("unsupported data-type", "data type"),
]


@dataclass
class VecLine:
    line: int
    vectorized: bool
    vector_bytes: int | None
    reason: str


def short_reason(msg: str) -> str:
    low = msg.lower()
    for needle, say in _REASONS:
        if needle in low:
            return say
    words = re.sub(r"^not vectorized:\s*", "", msg).split()
    return " ".join(words[:3]).rstrip(".:")


def parse_vec_report(report: str, source_name: str) -> dict[int, VecLine]:
    """g++ -fopt-info-vec-all output -> per loop line: vectorized (width) or missed (why)."""
    out: dict[int, VecLine] = {}
    current: int | None = None
    for raw in report.splitlines():
        m = _OPT.match(raw.strip())
        if not m or m.group("file").split("/")[-1] != source_name:
            continue
        line, kind, msg = int(m.group("line")), m.group("kind"), m.group("msg").strip()
        if kind == "optimized":
            w = _WIDTH.search(msg)
            if w:
                prev = out.get(line)
                width = int(w.group(1))
                if prev is not None and prev.vectorized and prev.vector_bytes:
                    width = max(width, prev.vector_bytes)  # main loop and epilogue
                out[line] = VecLine(line, True, width, "")
            current = None
        elif kind == "missed" and msg.startswith("couldn't vectorize loop"):
            current = line
            if line not in out:
                out[line] = VecLine(line, False, None, "")
        elif kind == "missed" and msg.startswith("not vectorized") and current is not None:
            # the reason for the loop named just before; one with no loop before it is
            # about straight-line (SLP) code, not a loop
            v = out[current]
            if not v.vectorized and not v.reason:
                v.reason = short_reason(msg)
            current = None
    return out


def apply_vec_report(loops: list[Loop], report: dict[int, VecLine]) -> None:
    """Give each loop its report lines. g++ places a loop's messages on the `for` line, on
    an `omp simd` pragma just above it or on a statement of its body, so each message goes
    to the innermost loop whose range (pragmas included) holds its line; any `vectorized`
    wins over `missed` for the same loop."""
    for v in sorted(report.values(), key=lambda v: v.line):
        lp = loop_at(loops, v.line)
        if lp is None:
            continue
        if v.vectorized:
            lp.vectorized = True
            lp.vector_bytes = max(lp.vector_bytes or 0, v.vector_bytes or 0) or None
            lp.missed = ""
        elif lp.vectorized is None:
            lp.vectorized, lp.missed = False, v.reason
        elif lp.vectorized is False and not lp.missed:
            lp.missed = v.reason


def loop_at(loops: list[Loop], line: int) -> Loop | None:
    """The innermost loop whose source range (with its pragmas) holds `line`."""
    best = None
    for lp in loops:
        if lp.start <= line <= lp.end_line and (best is None or lp.depth >= best.depth):
            best = lp
    return best
