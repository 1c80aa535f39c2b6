"""Streaming stores: a row loop that only writes its output, with non-temporal stores.

An output written element by element and never read back in the kernel costs its bytes
twice on the way to memory: every store misses, the line is first read in (the
write-allocate), then written back when evicted. An embedding lookup, a row-wise map or a
copy whose output is larger than the last-level cache spends a third of its traffic on
reads that nobody uses. Non-temporal stores (`movnt*`) write whole lines past the caches:

    for (int i = 0; i < C; i++) out_bt[i] = wte_ix[i] + wpe_t[i];

becomes, inside a block,

    int kc_s = 0;
    for (; kc_s < (C) && <out_bt + kc_s not 64-byte aligned>; ++kc_s) { ... }   // peel
    for (; kc_s + 16 <= (C); kc_s += 16) {
        alignas(64) float kc_buf[16];
        #pragma omp simd
        for (int kc_k = 0; kc_k < 16; ++kc_k) { const int i = kc_s + kc_k; kc_buf[kc_k] = ...; }
        kc_stream64(out_bt + kc_s, kc_buf);       // one 64-byte line, past the caches
    }
    for (; kc_s < (C); ++kc_s) { ... }            // the rest

and one `kc_stream_fence()` (sfence) after the outermost loop around it, so the weakly
ordered stores are complete before anything after the loop (an OpenMP barrier's locked
instructions order them too). The same expression computes each element, in a 16-element
(8 for double) batch that g++ vectorizes; results are bit for bit those of the loop.

Legal where the store target is written only, in the whole function: its name appears
only as `X[...] = ...` or in the initializer of another such write-only pointer (`float*
out_bt = out + b*T*C + t*C;`), never read, passed to a call, or incremented. The loop is
an innermost unit-step counted loop with its counter declared in its header, inside
another loop (a flat loop is threaded first, and this form would keep it serial) that
runs threaded (the serial path of a versioned nest is for outputs small enough to stay in
cache, where writing past the cache loses), not itself an OpenMP worksharing loop, and its body is that single store of a float or double whose
right side has no side effects (calls only to math functions and kernelcrew's inline
helpers). Without SSE2 (not x86) kc_stream64 is a plain copy.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    fresh_name,
    helpers_at,
    in_small_path,
    innermost_reasons,
    model_of,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, each_entry
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.agents.transforms.registry import TRANSFORMS, apply_transform
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.csource.affine import FunctionModel, pointer_element_type
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    apply_edits,
    find_function,
    lead_start,
    lookup,
    pragma_text,
    pragmas_before,
    subscript_index,
    uncast,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

HELPER = """\
#if defined(__SSE2__)
#include <immintrin.h>
#endif
// kernelcrew: 64 bytes from an aligned buffer to 64-byte aligned memory with non-temporal
// stores (the line is written past the caches, not read in first); a plain copy without SSE2
static inline void kc_stream64(void* dst, const void* src) {
#if defined(__AVX512F__)
    _mm512_stream_si512((__m512i*)dst, _mm512_load_si512(src));
#elif defined(__AVX__)
    _mm256_stream_si256((__m256i*)dst, _mm256_load_si256((const __m256i*)src));
    _mm256_stream_si256((__m256i*)dst + 1, _mm256_load_si256((const __m256i*)src + 1));
#elif defined(__SSE2__)
    for (int k = 0; k < 4; ++k)
        _mm_stream_si128((__m128i*)dst + k, _mm_load_si128((const __m128i*)src + k));
#else
    __builtin_memcpy(dst, src, 64);
#endif
}

// kernelcrew: non-temporal stores are weakly ordered; an sfence completes them
static inline void kc_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
"""

STREAM_MARK = "// kernelcrew: streaming stores"
_WIDTH = {"float": 16, "double": 8}  # elements per 64-byte line
_HINT = re.compile(r"^\s*(omp\s+simd\b|GCC\s+(ivdep|unroll)\b|unroll\b|ivdep\b)")
_WORKSHARE = re.compile(r"\bomp\b.*\b(for|parallel|distribute|taskloop|loop)\b")
_MATH = re.compile(r"(std::)?(exp|exp2|expm1|log|log2|log10|log1p|sqrt|cbrt|rsqrt|erf|erfc|"
                   r"tanh|sinh|cosh|sin|cos|tan|fabs|fmin|fmax|fma|pow|floor|ceil|round|"
                   r"trunc|copysign|abs)f?|kc_\w+")


def _declares(x: Node) -> bool:
    """`x` is the name a declaration or parameter introduces."""
    n = x
    while n.parent is not None and n.parent.type in (
            "pointer_declarator", "array_declarator", "reference_declarator", "init_declarator",
            "parameter_declaration", "declaration"):
        d = n.parent.child_by_field_name("declarator")
        if d is None or d.start_byte != n.start_byte or d.end_byte != n.end_byte:
            return False
        n = n.parent
        if n.type in ("parameter_declaration", "declaration"):
            return True
    return False


def _derived(x: Node) -> str | None:
    """The pointer `Y` when `x` is the base of `Y`'s initializer or assignment: `T* Y = x +
    e`, `Y = x`, `T* Y = &x[e]` (through parentheses and casts); else None."""
    n = x
    while n.parent is not None:
        p = n.parent
        if p.type in ("parenthesized_expression", "cast_expression"):
            n = p
            continue
        if p.type == "binary_expression" and p.child_by_field_name("operator").type in "+-" \
                and p.child_by_field_name("left").start_byte == n.start_byte:
            n = p
            continue
        if p.type == "binary_expression" and p.child_by_field_name("operator").type == "+" \
                and p.child_by_field_name("right").start_byte == n.start_byte:
            n = p
            continue
        if p.type == "subscript_expression" and p.child_by_field_name("argument") is not None \
                and p.child_by_field_name("argument").start_byte == n.start_byte and \
                p.parent is not None and p.parent.type == "pointer_expression" and \
                p.parent.child_by_field_name("operator").type == "&":
            n = p.parent
            continue
        break
    p = n.parent
    if p is None:
        return None
    if p.type == "init_declarator" and p.child_by_field_name("value") is not None and \
            p.child_by_field_name("value").start_byte == n.start_byte:
        d = p.child_by_field_name("declarator")
        if d is not None and d.type == "pointer_declarator":
            name = d.child_by_field_name("declarator")
            return name.text.decode() if name is not None and name.type == "identifier" \
                else None
    if p.type == "assignment_expression" and p.child_by_field_name("operator").type == "=" \
            and p.child_by_field_name("right").start_byte == n.start_byte:
        left = p.child_by_field_name("left")
        return left.text.decode() if left.type == "identifier" else None
    return None


def write_only(fn: Node, name: str, _seen: frozenset[str] = frozenset()) -> bool:
    """Every use of pointer `name` in `fn` stores through it (`name[e] = v`) or derives
    another write-only pointer from it; it is never read, passed on or moved."""
    if name in _seen:
        return True
    seen = _seen | {name}
    body = fn.child_by_field_name("body")
    for x in walk(body):
        if x.type != "identifier" or x.text.decode() != name or _declares(x):
            continue
        p = x.parent
        if p.type == "subscript_expression" and \
                p.child_by_field_name("argument").start_byte == x.start_byte:
            a = p.parent
            if a is not None and a.type == "assignment_expression" and \
                    a.child_by_field_name("operator").type == "=" and \
                    a.child_by_field_name("left").start_byte == p.start_byte:
                continue
        y = _derived(x)
        if y is None or not write_only(fn, y, seen):
            return False
    return True


def _pure(s: Source, rhs: Node) -> bool:
    for n in walk(rhs):
        if n.type in ("assignment_expression", "update_expression", "comma_expression"):
            return False
        if n.type == "call_expression" and \
                not _MATH.fullmatch(s.text_of(n.child_by_field_name("function")).strip()):
            return False
    return True


def _threaded(s: Source, node: Node) -> bool:
    """`node` runs inside an OpenMP parallel loop or region."""
    n = node.parent
    while n is not None and n.type != "function_definition":
        if any(re.search(r"\bomp\b.*\b(parallel|for)\b", pragma_text(s, p))
               for p in pragmas_before(n)):
            return True
        n = n.parent
    return False


def _site(s: Source, m: FunctionModel, lp: Loop) -> str | tuple[Node, str, Node, str]:
    """(the store, the target's name, the right side, the element type) of a loop this
    move takes, or why not."""
    if not lp.canonical or lp.step is not None or lp.inclusive:
        return "not a unit-step counted loop"
    stmts = [c for c in lp.body.named_children if c.type != "comment"] \
        if lp.body.type == "compound_statement" else [lp.body]
    if len(stmts) != 1 or stmts[0].type != "expression_statement" or \
            not stmts[0].named_children:
        return "its body is not one store"
    st = stmts[0].named_children[0]
    if st.type != "assignment_expression" or st.child_by_field_name("operator").type != "=":
        return "its body is not one store"
    left = st.child_by_field_name("left")
    base = left.child_by_field_name("argument") if left.type == "subscript_expression" \
        else None
    idx = subscript_index(left) if base is not None else None
    if base is None or base.type != "identifier" or idx is None or \
            s.text_of(idx).strip() != lp.var:
        return f"its store is not to X[{lp.var}]"
    ty = pointer_element_type(s, base)
    if ty not in _WIDTH:
        return f"{base.text.decode()} is not a float or double array"
    if lp.decl is None or lp.decl.parent is None or \
            lp.decl.parent.start_byte != lp.node.start_byte:
        return f"{lp.var} is declared outside the loop (its value after it may be used)"
    if lp.parent is None:
        return "a flat loop (threading it comes first)"
    if any(_WORKSHARE.search(pragma_text(s, p)) and not _HINT.match(pragma_text(s, p))
           for p in pragmas_before(lp.node)) or collapsed(s, lp):
        return "an OpenMP worksharing loop"
    if in_small_path(lp.node) or not _threaded(s, lp.node):
        return "not in a threaded loop nest (the serial path is for outputs small enough to " \
            "stay in cache, where streaming past it loses)"
    rhs = st.child_by_field_name("right")
    if not _pure(s, rhs):
        return "its right side has a side effect or calls a function"
    if not write_only(m.fn, base.text.decode()):
        return f"{base.text.decode()} is read, passed on or moved in the function"
    up = _read_above(m.fn, base)
    if up is not None:
        return up
    return st, base.text.decode(), rhs, ty


def _base_of(init: Node) -> Node | None:
    """The pointer a row pointer's initializer starts from: `x` in `x + e`, `e + x`,
    `&x[e]`, through parentheses and casts."""
    n = uncast(init)
    if n is None:
        return None
    if n.type == "identifier":
        return n
    if n.type == "pointer_expression" and n.child_by_field_name("operator").type == "&":
        sub = uncast(n.child_by_field_name("argument"))
        return uncast(sub.child_by_field_name("argument")) \
            if sub is not None and sub.type == "subscript_expression" else None
    if n.type == "binary_expression" and n.child_by_field_name("operator").type in ("+", "-"):
        for side in ("left", "right"):
            x = uncast(n.child_by_field_name(side))
            if x is not None and x.type == "identifier":
                d = lookup(x.text.decode(), x)
                if d is not None and (d.pointer or d.array):
                    return x
            if x is not None and x.type in ("binary_expression", "pointer_expression"):
                got = _base_of(x)
                if got is not None:
                    return got
    return None


def _read_above(fn: Node, target: Node) -> str | None:
    """Why the buffer a row pointer comes from is not write-only: its initializers are
    followed up to the buffer it points into (`out_bt` from `out`), and that buffer, with
    every pointer derived from it, must be write-only; None when it is."""
    d = lookup(target.text.decode(), target)
    root, seen = target, set()
    while d is not None and not d.param and d.name not in seen:
        seen.add(d.name)
        if d.init is None:
            return f"{d.name} has no initializer to follow"
        root = _base_of(d.init)
        if root is None:
            return f"{d.name} does not point into a buffer the function can see whole"
        d = lookup(root.text.decode(), root)
    name = root.text.decode()
    if name != target.text.decode() and not write_only(fn, name):
        return f"{name} (which {target.text.decode()} points into) is read, passed on or " \
            "moved in the function"
    return None


def stream_reasons(src: str, entry: str) -> list[str]:
    """Why each innermost loop of `entry` does not take streaming stores."""
    def plan(m: FunctionModel, lp: Loop):
        r = _site(m.src, m, lp)
        return f"loop at line {lp.node.start_point.row + 1}: {r}" if isinstance(r, str) else r
    return innermost_reasons(src, entry, plan)


def stream_stores(src: str, entry: str) -> str | None:
    """Streaming stores for the write-only row loops of `entry` (see the module doc)."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    edits: list[Edit] = []
    roots: dict[int, Node] = {}
    for lp in m.loops:
        if lp.children:
            continue
        site = _site(s, m, lp)
        if isinstance(site, str):
            continue
        st, target, rhs, ty = site
        w = _WIDTH[ty]
        ind = s.indent_of(lp.node)
        var = lp.var
        vty = s.text_of(lp.decl.child_by_field_name("type")).strip()
        pos, buf, k = (fresh_name(m, "kc_s"), fresh_name(m, "kc_buf"), fresh_name(m, "kc_k"))
        start, end = s.text_of(lp.start).strip(), s.text_of(lp.end).strip()
        store = s.text_of(st)
        value = s.text_of(rhs)
        i1, i2, i3 = ind + "    ", ind + "        ", ind + "            "
        text = (f"{{  {STREAM_MARK} (write-only {target}, past the caches)\n"
                f"{i1}{vty} {pos} = {start};\n"
                f"{i1}for (; {pos} < ({end}) && ((__UINTPTR_TYPE__)({target} + {pos}) & 63) "
                f"!= 0; ++{pos}) {{\n"
                f"{i2}const {vty} {var} = {pos};\n{i2}{store};\n{i1}}}\n"
                f"{i1}for (; {pos} + {w} <= ({end}); {pos} += {w}) {{\n"
                f"{i2}alignas(64) {ty} {buf}[{w}];\n"
                f"#pragma omp simd\n"
                f"{i2}for (int {k} = 0; {k} < {w}; ++{k}) {{\n"
                f"{i3}const {vty} {var} = {pos} + {k};\n{i3}{buf}[{k}] = {value};\n{i2}}}\n"
                f"{i2}kc_stream64({target} + {pos}, {buf});\n{i1}}}\n"
                f"{i1}for (; {pos} < ({end}); ++{pos}) {{\n"
                f"{i2}const {vty} {var} = {pos};\n{i2}{store};\n{i1}}}\n{ind}}}")
        edits.append(Edit(lead_start(s, lp.node), lp.node.end_byte, ind + text))
        root = lp
        while root.parent is not None:
            root = root.parent
        roots[root.node.start_byte] = root.node
    if not edits:
        return None
    for node in roots.values():
        ind = s.indent_of(node)
        if node.parent is not None and node.parent.type == "compound_statement":
            edits.append(Edit(node.end_byte, node.end_byte, f"\n{ind}kc_stream_fence();"))
        else:  # the loop is the body of a statement: a block holds both
            at = lead_start(s, node)
            edits.append(Edit(at, at, f"{ind}{{\n"))
            edits.append(Edit(node.end_byte, node.end_byte, f"\n{ind}kc_stream_fence();\n"
                                                            f"{ind}}}"))
    if find_function(s, "kc_stream64") is None:
        pos = helpers_at(s, m.fn)
        edits.append(Edit(pos, pos, HELPER + "\n"))
    out = apply_edits(s, edits)
    return None if Source(out).has_errors() and not s.has_errors() else out


# ---------------------------------------------------------------- on a kernel file

def stream_stores_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The stream_stores move on a kernel file: not while omp_parallel still applies (the
    streamed form would keep the nest serial: threading comes first)."""
    par = TRANSFORMS["omp_parallel"]  # looked up by name: a move never imports another
    if par.run(kf, dict(par.params)) is not None:
        return None
    return each_entry(kf, through_views(stream_stores))


def why_not(kf: KernelFile) -> str:
    if apply_transform("omp_parallel", kf.text) is not None:
        return "the loop nest can still be threaded, and threading comes first"
    return per_entry(kf, stream_reasons, "no innermost loop whose body is one store to an "
                     "output row (`out_row[i] = ...`)", skip=("is not one store",))
