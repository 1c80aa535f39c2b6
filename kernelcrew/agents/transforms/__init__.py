"""Named, re-appliable transformations of whole kernel files.

A transformation takes a kernel file's text and parameters and returns the new kernel file
text (front matter kept valid: flags such as -fopenmp follow the pragmas, knobs the macros
the source uses), or None when it does not apply to that text. Because they are named, a
proposal's change can be replayed on another base: `apply_change(change, text)`. The
coordinator relies on this to merge compatible proposals into one candidate.

Body-level functions (`str -> str | None`, on the source after the front matter) live in
`threads` (OpenMP parallel for), `vectorize` (restrict, omp simd, unroll), `nests`
(interchange, tiling), `regblock` (register blocking of i-k-j matmul nests), `fusion`,
`vecmath` / `vecmath_ext` (vectorizable exp/erf, tanh/log), `jam` (unroll-and-jam of
dot-product nests), `privatize` (private bins for histograms and scatter-adds), `scan`
(blocked two-pass parallel prefix sums), `vscan` (prefix sums a vector at a time), `keep` (a value recomputed by a later pass kept in a
buffer), `scope` (which helpers are in reach) and `cuda` (device-code specifics); `cst` holds the tree-sitter
layer; `affine` (subscripts as polynomials, bounds), `reductions` and `dependence` (may a
loop's iterations run in any order) the analysis; `common` the helpers they share.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from kernelcrew.agents.transforms import cuda as cuda_tf
from kernelcrew.agents.transforms.accum import accumulators
from kernelcrew.agents.transforms.cst import (
    EditConflict,
    Source,
    all_loops,
    find_function,
    function_name,
    functions,
    loops_in,
    params,
    walk,
)
from kernelcrew.agents.transforms.cuda import grid_stride, launch_bounds, ldg
from kernelcrew.agents.transforms.cuda_fuse import fuse_launches
from kernelcrew.agents.transforms.cuda_reduce import (
    block_per_row,
    bound_as_grid,
    tree_to_shuffle,
)
from kernelcrew.agents.transforms.cuda_tile import tile_transpose
from kernelcrew.agents.transforms.cuda_vector import vector_access
from kernelcrew.agents.transforms.fusion import fuse_loops
from kernelcrew.agents.transforms.inline import inline_calls
from kernelcrew.agents.transforms.jam import unroll_and_jam
from kernelcrew.agents.transforms.keep import keep_values
from kernelcrew.agents.transforms.nests import interchange, swap_loops, tile
from kernelcrew.agents.transforms.privatize import private_bins
from kernelcrew.agents.transforms.regblock import register_block
from kernelcrew.agents.transforms.regtile import register_tile
from kernelcrew.agents.transforms.rowacc import row_accumulate
from kernelcrew.agents.transforms.scan import DEFAULTS as SCAN_DEFAULTS
from kernelcrew.agents.transforms.scan import blocked_scan
from kernelcrew.agents.transforms.scope import scope_of
from kernelcrew.agents.transforms.stream import stream_stores
from kernelcrew.agents.transforms.strength import reciprocal
from kernelcrew.agents.transforms.threads import (
    DEFAULT_MIN_WORK,
    omp_parallel_outer,
    version_threaded,
)
from kernelcrew.agents.transforms.vecmath import vector_math
from kernelcrew.agents.transforms.vecmath_ext import vector_math_ext
from kernelcrew.agents.transforms.vectorize import add_restrict, omp_simd_inner, unroll
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.agents.transforms.vscan import vector_scan
from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import (
    FrontMatter,
    KernelFile,
    Launch,
    parse_kernel_text,
    render,
)

__all__ = [
    "TRANSFORMS",
    "Outcome",
    "Transform",
    "accumulators",
    "add_restrict",
    "apply_change",
    "apply_transform",
    "changed_regions",
    "edit_flags",
    "entries",
    "fuse_loops",
    "grid_stride",
    "inline_calls",
    "interchange",
    "launch_bounds",
    "ldg",
    "omp_parallel_outer",
    "omp_simd_inner",
    "parse_any",
    "register_block",
    "register_tile",
    "register_transform",
    "set_block",
    "tile",
    "transform_names",
    "unroll",
    "unroll_and_jam",
    "vector_math",
    "vector_math_ext",
]


@dataclass
class Outcome:
    """What a transformation changes in a kernel file; None fields stay as they were."""

    body: str | None = None
    flags: list[str] | None = None
    knobs: dict[str, int | float] | None = None
    launch: list[Launch] | None = None
    temps: dict[str, Any] | None = None  # CUDA scratch buffers (replaces the whole map)


@dataclass(frozen=True)
class Transform:
    name: str
    kind: str  # the Change.kind it produces
    backends: tuple[str, ...]
    run: Callable[[KernelFile, dict[str, Any]], Outcome | None]
    doc: str = ""
    params: dict[str, Any] = field(default_factory=dict)  # parameter -> default


TRANSFORMS: dict[str, Transform] = {}


def _register(name: str, kind: str, backends: tuple[str, ...], doc: str, **defaults: Any):
    def deco(fn: Callable[[KernelFile, dict[str, Any]], Outcome | None]):
        TRANSFORMS[name] = Transform(name, kind, backends, fn, doc, defaults)
        return fn

    return deco


def transform_names(backend: str | None = None) -> list[str]:
    return [n for n, t in TRANSFORMS.items() if backend is None or backend in t.backends]


# ---------------------------------------------------------------- kernel files

def parse_any(kernel_text: str) -> KernelFile:
    """Parse a kernel file whose backend is not known: a `launch:` list means CUDA."""
    m = re.match(r"\A\s*/\*\s*kernelcrew[ \t]*\n(?P<yaml>.*?)\*/", kernel_text, re.DOTALL)
    try:
        data = yaml.safe_load(m.group("yaml")) if m else None
    except yaml.YAMLError:
        data = None
    backend = "cuda" if isinstance(data, dict) and data.get("launch") else "cpu"
    return parse_kernel_text(kernel_text, backend)


def entries(kf: KernelFile) -> list[str]:
    """The functions a transformation works on: on the CPU the entry and the helpers it
    calls whose pointers cannot overlap (`scope`: an imported kernel's entry is a thin
    wrapper around the user's function and its helpers), on CUDA every launched kernel and
    the functions it calls."""
    if kf.backend == "cpu":
        return scope_of(Source(kf.body), kf.meta.entry).functions if kf.meta.entry else []
    kernels = list(dict.fromkeys(lc.kernel for lc in kf.meta.launch))
    return list(dict.fromkeys([*kernels, *(c for k in kernels for c in callees(kf.body, k))]))


def callees(body: str, entry: str) -> list[str]:
    """Functions defined in `body` that `entry` calls, directly or not, in call order."""
    s = Source(body)
    defs = {}
    for fn in functions(s):
        name = function_name(fn)
        if name and name not in defs:
            defs[name] = fn
    out: list[str] = []
    todo = [entry]
    while todo:
        fn = defs.get(todo.pop(0))
        if fn is None:
            continue
        for n in walk(fn):
            if n.type == "call_expression":
                name = s.text_of(n.child_by_field_name("function"))
                if name in defs and name != entry and name not in out:
                    out.append(name)
                    todo.append(name)
    return out


_OPT = re.compile(r"^-O(\d|s|fast)$")
_MAXRREG = re.compile(r"^--?maxrregcount=\d+$")


def edit_flags(flags: list[str], add: list[str] | tuple[str, ...] = (),
               remove: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Add and remove flags; an added -O level or -maxrregcount replaces the old one."""
    out = [f for f in flags if f not in remove]
    for f in add:
        if _OPT.match(f):
            out = [g for g in out if not _OPT.match(g)]
        if _MAXRREG.match(f):
            out = [g for g in out if not _MAXRREG.match(g)]
        if f not in out:
            out.append(f)
    return out


def _openmp_flags(body: str, flags: list[str]) -> list[str]:
    """-fopenmp when the source has OpenMP threading pragmas, -fopenmp-simd for simd only."""
    clean = Source(body)
    pragmas = [clean.text_of(n) for n in walk(clean.root) if n.type == "preproc_call"]
    threads = any(re.search(r"#\s*pragma\s+omp\s+(parallel|for|task|single|critical|atomic)",
                            p) for p in pragmas)
    simd = any(re.search(r"#\s*pragma\s+omp\b.*\bsimd\b", p) for p in pragmas)
    if threads:
        return edit_flags(flags, add=["-fopenmp"], remove=["-fopenmp-simd"])
    if simd and "-fopenmp" not in flags:
        return edit_flags(flags, add=["-fopenmp-simd"])
    return flags


def _render(kf: KernelFile, out: Outcome) -> str:
    meta: FrontMatter = kf.meta.model_copy(deep=True)
    body = kf.body if out.body is None else out.body
    flags = list(meta.flags) if out.flags is None else list(out.flags)
    if kf.backend == "cpu":
        flags = _openmp_flags(body, flags)
    meta.flags = flags
    if out.knobs:
        meta.knobs = {**meta.knobs, **out.knobs}
    if out.launch is not None:
        meta.launch = out.launch
    if out.temps is not None:
        meta.temps = out.temps
    return render(meta, body)


def apply_transform(name: str, kernel_text: str, params: dict[str, Any] | None = None
                    ) -> str | None:
    """Run a named transformation on a kernel file's text; None when it does not apply
    (or the result would not be a valid kernel file). `params["then"]`, a list of
    [name, params] pairs, runs further transformations on the result, each of which must
    apply: a move that only pays with its follow-up (threads over rows, then the rows
    jammed) is proposed and replayed as one."""
    params = dict(params or {})
    then = params.pop("then", None) or []
    text = _apply_one(name, kernel_text, params)
    for step, step_params in then:
        if text is None:
            break
        text = _apply_one(step, text, step_params)
    return text


def _apply_one(name: str, kernel_text: str, params: dict[str, Any]) -> str | None:
    t = TRANSFORMS.get(name)
    if t is None:
        raise KeyError(f"unknown transform {name!r}; known: {', '.join(TRANSFORMS)}")
    try:
        kf = parse_any(kernel_text)
    except InputError:
        return None
    if kf.backend not in t.backends:
        return None
    try:
        out = t.run(kf, {**t.params, **(params or {})})
    except EditConflict:
        return None  # the rewrite would garble the source: treat it as not applicable
    if out is None:
        return None
    text = _render(kf, out)
    try:
        new = parse_kernel_text(text, kf.backend)
    except InputError:
        return None
    return None if new.text == kf.text else new.text


def apply_change(change: Any, kernel_text: str) -> str | None:
    """Re-apply a proposal's change to another kernel file text (the coordinator's merge).
    Uses `change.transform`/`change.params` when set; flag and knob changes without a
    transform are replayed from `change.flags`/`change.knobs`. None: cannot be replayed
    on this text (a free-form rewrite, or the transformation no longer applies)."""
    name = getattr(change, "transform", None)
    params = getattr(change, "params", None) or {}
    if name:
        return apply_transform(name, kernel_text, params)
    if change.type == "flags" and change.flags is not None:
        return apply_transform("flags", kernel_text, {"set": list(change.flags)})
    if change.type == "knobs" and change.knobs:
        return apply_transform("knobs", kernel_text, {"values": dict(change.knobs)})
    return None


def set_block(kernel_text: str, block: int, knob: str = "BLOCK") -> str | None:
    """A CUDA kernel file with its block-size knob set to `block` (None: no such knob)."""
    try:
        if knob not in parse_any(kernel_text).meta.knobs:
            return None
    except InputError:
        return None
    return apply_transform("knobs", kernel_text, {"values": {knob: int(block)}})


def changed_regions(base_text: str, new_text: str) -> list[str]:
    """Which code regions a change touched, for the coordinator's conflict check:
    `loop@LINE` (LINE of the loop's `for` in the base file) for a loop whose lines changed or
    that got lines inserted before it (pragmas) or after its body (a versioned copy),
    `fn@LINE` for a function's other lines. Re-indentation alone is not a change."""
    try:
        base, new = parse_any(base_text), parse_any(new_text)
    except InputError:
        return []
    offset = base_text[: len(base_text) - len(base.body)].count("\n")
    a = [ln.strip() for ln in base.body.splitlines()]
    b = [ln.strip() for ln in new.body.splitlines()]
    s = Source(base.body)
    spans: list[tuple[str, int, int]] = []
    for fn in functions(s):
        body = fn.child_by_field_name("body")
        if body is not None:  # the declarator, up to the line with the body's `{`
            spans.append(("signature", fn.start_point.row, body.start_point.row))
        spans.append(("fn", fn.start_point.row, fn.end_point.row))
        if body is not None:
            for lp in all_loops(loops_in(body)):
                spans.append(("loop", lp.node.start_point.row, lp.node.end_point.row))

    def innermost(row: int) -> tuple[str, int, int] | None:
        best = None
        for sp in spans:
            if sp[1] <= row <= sp[2] and (best is None or sp[2] - sp[1] <= best[2] - best[1]):
                best = sp
        return best

    hits: list[tuple[str, int, int]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if all(ln in ("", "}", "{") for ln in a[i1:i2] + b[j1:j2]):
            continue  # braces moved around a rewritten block: not a region of its own
        if op == "insert":
            starting = [sp for sp in spans if sp[0] == "loop" and sp[1] == i1]
            if starting:  # lines put right before a loop: its pragmas or its versioning
                hits.append(max(starting, key=lambda sp: sp[2] - sp[1]))
                continue
            where = innermost(i1 - 1) if i1 > 0 else None
            if where is not None:
                hits.append(where)
            continue
        for row in range(i1, i2):
            where = innermost(row)
            if where is not None:
                hits.append(where)
    out: list[str] = []
    for kind, r0, _r1 in hits:
        tag = f"{kind}@{r0 + 1 + offset}"
        if tag not in out:
            out.append(tag)
    return out


# ---------------------------------------------------------------- the transformations

def _each_entry(kf: KernelFile, fn: Callable[[str, str], str | None]) -> Outcome | None:
    body, changed = kf.body, False
    for e in entries(kf):
        new = fn(body, e)
        if new is not None:
            body, changed = new, True
    return Outcome(body=body) if changed else None


def register_transform(name: str, backends: tuple[str, ...], doc: str,
                       body_fn: Callable[..., str | None], **defaults: Any) -> None:
    """Register a body-level transform: `body_fn(source_after_front_matter, entry_name)`
    returns the new source, or None where it does not apply. It is applied to every
    entry of the kernel file, becomes a proposal kind of its own name, and is replayable
    by `apply_change` like the built-in ones (README, "Adding a transform"). Keyword
    defaults make it take parameters: `body_fn(source, entry, **params)`, each parameter
    converted to its default's type (a replayed change may carry 4.0 or "4" for 4)."""
    if name in TRANSFORMS:
        raise ValueError(f"a transform named {name!r} is already registered")

    def run(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
        if not defaults:
            return _each_entry(kf, body_fn)
        args = {k: type(d)(p[k]) for k, d in defaults.items()}
        return _each_entry(kf, lambda s, e: body_fn(s, e, **args))

    TRANSFORMS[name] = Transform(name, name, backends, run, doc, dict(defaults))


register_transform("restrict", ("cpu", "cuda"),
                   "__restrict__ on the pointer parameters of the entry (every kernel on CUDA)",
                   add_restrict)


def _called_in_loops(body: str, names: list[str]) -> set[str]:
    """The functions of `names` that some function calls from inside a loop: threads go
    on the caller's loop (a parallel region inside it would run nested, on one thread)."""
    s = Source(body)
    out = set()
    for n in walk(s.root):
        if n.type != "call_expression":
            continue
        name = s.text_of(n.child_by_field_name("function")).strip()
        p = n.parent
        while name in names and p is not None and p.type != "function_definition":
            if p.type in ("for_statement", "while_statement", "do_statement"):
                out.add(name)
                break
            p = p.parent
    return out


def _threaded(kf: KernelFile, p: dict[str, Any], fn: Callable[..., str | None]
              ) -> Outcome | None:
    """omp_parallel / omp_version: `fn(src, entry, min_work=, knob=)` on every entry but
    the helpers called from inside a loop; the OMP_MIN_WORK knob's value goes to the front
    matter when the guard uses it."""
    knob = p.get("knob") or None
    value = int(kf.meta.knobs.get(knob, p["min_work"])) if knob else int(p["min_work"])
    inner = _called_in_loops(kf.body, entries(kf)[1:])
    out = _each_entry(kf, lambda s, e: None if e in inner else
                      fn(s, e, min_work=value, knob=knob))
    if out is not None and knob and f">= {knob}" in (out.body or ""):
        out.knobs = {knob: value}
    return out


@_register("omp_parallel", "omp_parallel", ("cpu",),
           "#pragma omp parallel for on independent outer loops; the serial copy runs below "
           "OMP_MIN_WORK inner iterations (a knob)",
           min_work=DEFAULT_MIN_WORK, knob="OMP_MIN_WORK")
def _t_parallel(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    return _threaded(kf, p, through_views(omp_parallel_outer))


@_register("omp_version", "omp_version", ("cpu",),
           "an `omp parallel for` already in the source gets a serial version below "
           "OMP_MIN_WORK (a knob) inner iterations", min_work=DEFAULT_MIN_WORK,
           knob="OMP_MIN_WORK")
def _t_omp_version(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    return _threaded(kf, p, version_threaded)


@_register("stream_stores", "stream_stores", ("cpu",),
           "a row loop that only writes its output (`out_row[i] = ...`, the array never read "
           "in the function) with non-temporal stores: a 64-byte batch computed under omp "
           "simd, then written past the caches; the row's unaligned head and tail kept; one "
           "sfence after the loop nest. Not while the nest could still be threaded (the "
           "streamed form would keep it serial): threading comes first")
def _t_stream(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    par = TRANSFORMS["omp_parallel"]
    if par.run(kf, dict(par.params)) is not None:
        return None
    return _each_entry(kf, through_views(stream_stores))


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


@_register("private_bins", "private_bins", ("cpu",),
           "thread a histogram / scatter-add loop (`counts[v[i]]++`, `+= w[i]`) with private "
           "bins per thread (`reduction(+ : counts[0:bins])`, the extent from the op's shape); "
           "the serial loop below OMP_MIN_WORK values or PRIVATE_PER_BIN values per bin; "
           "`copies` interleaved copies per thread break the store-to-load chain of runs of "
           "equal values", extents={}, min_work=DEFAULT_MIN_WORK, knob="OMP_MIN_WORK",
           copies=1)
def _t_private_bins(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    extents = {str(k): str(v) for k, v in dict(p.get("extents") or {}).items()}
    if not extents or not kf.meta.entry:
        return None
    knob = str(p.get("knob") or "OMP_MIN_WORK")
    value = int(kf.meta.knobs.get(knob, p["min_work"]))
    names = entries(kf)
    inner = _called_in_loops(kf.body, names[1:])
    entry = kf.meta.entry

    def one(src: str, e: str) -> str | None:
        if e in inner:
            return None
        ext = extents if e == entry else helper_extents(src, entry, e, extents)
        return through_views(private_bins)(src, e, extents=ext, knob=knob, min_work=value,
                                           copies=int(p.get("copies") or 1))

    out = _each_entry(kf, one)
    if out is not None and f">= {knob}" in (out.body or ""):
        out.knobs = {knob: value}
    return out


@_register("blocked_scan", "blocked_scan", ("cpu",),
           "blocked two-pass parallel prefix sums: blocks of a long scan (`acc += x[j]; "
           "y[j] = acc;`) scanned on threads, offset by the totals before them; many rows "
           "threaded whole instead (SCAN_MIN, SCAN_BLOCKS, SCAN_ROWS knobs)")
def _t_blocked_scan(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    # a helper called once per row is in reach too: a few long rows are its case (the
    # move never goes inside an OpenMP construct of the function it rewrites)
    out = _each_entry(kf, through_views(blocked_scan))
    if out is not None:
        out.knobs = {k: kf.meta.knobs.get(k, v) for k, v in SCAN_DEFAULTS.items()
                     if re.search(rf"\b{k}\b", out.body or "")}
    return out


register_transform("simd", ("cpu",), "#pragma omp simd (+ reductions) on innermost loops",
                   through_views(omp_simd_inner))


@_register("unroll", "unroll", ("cpu", "cuda"), "unroll pragmas on innermost loops", factor=4)
def _t_unroll(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    style = "gcc" if kf.backend == "cpu" else "nv"
    return _each_entry(kf, lambda s, e: unroll(s, int(p["factor"]), e, style=style))


register_transform("interchange", ("cpu",),
                   "i-j-k matmul nest (or a sum down columns) with a strided inner read -> "
                   "i-k-j; a nest split across a helper call or walked with *p++ is seen whole",
                   through_views(interchange))


@_register("register_block", "register_block", ("cpu",),
           "unroll-and-jam the rows of an i-k-j matmul nest: RB rows x JB columns of C "
           "accumulated in registers (RB, JB knobs), leftover rows and columns kept",
           rows="RB", cols="JB", rows_default=4, cols_default=16)
def _t_register_block(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    rows, cols = str(p["rows"]), str(p["cols"])
    rv = int(kf.meta.knobs.get(rows, p["rows_default"]))
    cv = int(kf.meta.knobs.get(cols, p["cols_default"]))
    out = _each_entry(kf, lambda s, e: through_views(register_block)(
        s, e, rows=rows, cols=cols, rows_default=rv, cols_default=cv))
    if out is not None:
        out.knobs = {rows: rv, cols: cv}
    return out


register_transform("unroll_and_jam", ("cpu",),
                   "register-tile dot-product nests: FACTOR outputs of the outer loop share one "
                   "pass of the inner reduction (FACTOR accumulators, omp simd reduction), the "
                   "rest kept; a nest split across a helper call or walked with *p++ is seen whole; "
                   "an omp parallel for on the outer loop stays on the jammed loop",
                   through_views(unroll_and_jam), factor=4)
register_transform("register_tile", ("cpu",),
                   "register-tile a dot-product nest and the row loop around it: ROWS rows x "
                   "COLS outputs share one pass of the inner reduction (ROWS*COLS "
                   "accumulators, omp simd reduction), so each element of either operand is "
                   "loaded once per tile; leftover rows and outputs kept; a parallel for or "
                   "collapse(2) on the rows kept",
                   through_views(register_tile), rows=4, cols=4)
register_transform("reciprocal", ("cpu",),
                   "a division by a float the loop does not change (`y[j] /= sum`) as a "
                   "multiply by its reciprocal, taken once before the loop",
                   through_views(reciprocal))
register_transform("vector_scan", ("cpu",),
                   "prefix sums (`acc += x[j]; y[j] = acc;`) a vector at a time: the prefix of "
                   "8 floats (4 doubles) taken in registers by shift-and-add steps, the running "
                   "total added as one broadcast",
                   through_views(vector_scan))
register_transform("accumulators", ("cpu",),
                   "WAYS accumulators for innermost reduction loops (WAYS contiguous parts "
                   "walked side by side under omp simd), the rest of the range kept",
                   through_views(accumulators), ways=4)


@_register("tile", "tile", ("cpu",),
           "cache-block a strided 2-deep nest (transpose) with a TILE knob",
           knob="TILE", default=32, inner="write")
def _t_tile(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = str(p["knob"])
    value = kf.meta.knobs.get(knob, int(p["default"]))
    out = _each_entry(kf, lambda s, e: tile(s, e, knob=knob, default=int(value),
                                            inner=str(p["inner"])))
    if out is not None:
        out.knobs = {knob: value}
    return out


register_transform("loop_order", ("cpu",),
                   "exchange a perfectly nested independent pair of loops whose inner loop "
                   "walks memory with a stride and the outer contiguously (column-order "
                   "code, convolutions with the time loop outside the channels)",
                   through_views(swap_loops))
register_transform("row_accumulate", ("cpu",),
                   "accumulate a strip of outputs at once: a per-output reduction nest with a "
                   "short constant inner loop (a convolution's taps, padding tested per tap) "
                   "runs once per strip of 256 outputs, each tap a unit-stride simd loop over "
                   "the strip with the padding tests as its bounds; each sum keeps its order",
                   through_views(row_accumulate))
register_transform("keep_values", ("cpu",),
                   "a pure call (a helper, exp/log/tanh...) that a later loop over the same "
                   "range recomputes is kept in a row buffer by the first loop and read back; "
                   "a math function of it that opens the later loop runs first as its own "
                   "simd loop over the buffer",
                   through_views(keep_values))
register_transform("fusion", ("cpu",),
                   "fuse consecutive loops over the same range that touch the same elements",
                   fuse_loops)
register_transform("vector_math", ("cpu",),
                   "float exp/erf calls in loops -> inline vectorizable kc_expf/kc_erff",
                   vector_math)
register_transform("vector_math_ext", ("cpu",),
                   "float tanh/log calls in loops -> inline vectorizable kc_tanhf/kc_logf",
                   vector_math_ext)


@_register("flags", "flags", ("cpu", "cuda"),
           "edit the flag list: add / remove, or set it outright (OpenMP flags follow pragmas)",
           add=(), remove=(), set=None)
def _t_flags(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    if p.get("set") is not None:
        flags = list(p["set"])
        keep = [f for f in kf.meta.flags if f in ("-fopenmp", "-fopenmp-simd")]
        flags = edit_flags(flags, add=keep)
    else:
        flags = edit_flags(list(kf.meta.flags), list(p.get("add") or ()),
                           list(p.get("remove") or ()))
    return Outcome(flags=flags)


@_register("knobs", "knobs", ("cpu", "cuda"), "set knob values", values={})
def _t_knobs(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    values = dict(p.get("values") or {})
    if not values or all(kf.meta.knobs.get(k) == v for k, v in values.items()):
        return None
    return Outcome(knobs=values)


@_register("ldg", "ldg", ("cuda",),
           "__restrict__ + __ldg on read-only global loads of every kernel")
def _t_ldg(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, changed = kf.body, False
    for e in entries(kf):
        for fn in (add_restrict, cuda_tf.ldg):
            new = fn(body, e)
            if new is not None:
                body, changed = new, True
    return Outcome(body=body) if changed else None


@_register("launch_bounds", "launch_bounds", ("cuda",),
           "__launch_bounds__(BLOCK) on kernels launched with block [BLOCK]; with min_blocks, "
           "__launch_bounds__(BLOCK, min_blocks)", knob="BLOCK", min_blocks=None)
def _t_launch_bounds(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = str(p["knob"])
    if knob not in kf.meta.knobs:
        return None
    names = [lc.kernel for lc in kf.meta.launch if [str(b) for b in lc.block] == [knob]]
    body, changed = kf.body, False
    for e in dict.fromkeys(names):
        new = cuda_tf.launch_bounds(body, e, knob, p.get("min_blocks"))
        if new is not None:
            body, changed = new, True
    return Outcome(body=body) if changed else None


@_register("grid_stride", "grid_stride", ("cuda",),
           "one-element-per-thread kernels -> grid-stride loops; the grid is capped by a "
           "GRID_CAP knob", knob="GRID_CAP", default=1056)
def _t_grid_stride(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = str(p["knob"])
    body, changed = kf.body, set()
    for e in entries(kf):
        new = cuda_tf.grid_stride(body, e)
        if new is not None:
            body = new
            changed.add(e)
    if not changed:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in changed and len(lc.grid) == 1 and knob not in str(lc.grid[0]):
            lc.grid = [f"min({lc.grid[0]}, {knob})"]
        launch.append(lc)
    value = kf.meta.knobs.get(knob, int(p["default"]))
    return Outcome(body=body, launch=launch, knobs={knob: value})


@_register("sequence", "sequence", ("cpu", "cuda"),
           "several transformations in order; steps that no longer apply are skipped",
           steps=[])
def _t_sequence(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    text = kf.text
    for step in p.get("steps") or []:
        new = apply_transform(step["transform"], text, step.get("params") or {})
        if new is not None:
            text = new
    if text == kf.text:
        return None
    done = parse_kernel_text(text, kf.backend)
    return Outcome(body=done.body, flags=list(done.meta.flags), knobs=dict(done.meta.knobs),
                   launch=list(done.meta.launch))


# ---------------------------------------------------------------- CUDA launch-level rewrites

@_register("launch_fusion", "launch_fusion", ("cuda",),
           "consecutive launches that each handle one index per thread over the same index "
           "space -> one kernel; temps only they use become registers")
def _t_launch_fusion(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    out, changed = kf, None
    for _ in range(8):  # fuse runs until none is left
        got = fuse_launches(out)
        if got is None:
            break
        changed = got
        meta = out.meta.model_copy(deep=True)
        meta.launch, meta.temps = got.launch, got.temps
        out = parse_kernel_text(render(meta, got.body), "cuda")
    if changed is None:
        return None
    return Outcome(body=out.body, launch=list(out.meta.launch), temps=dict(out.meta.temps))


@_register("vector_access", "vector_access", ("cuda",),
           "VEC elements per thread, loaded and stored as float4/double2 (alignment checked at "
           "run time, scalar tail); the grid divided by VEC", knob="VEC", default=4)
def _t_vector_access(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = str(p["knob"])
    body, changed = kf.body, set()
    for e in entries(kf):
        new = vector_access(body, e, knob)
        if new is not None:
            body = new
            changed.add(e)
    if not changed:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in changed:
            if len(lc.grid) != 1:
                return None
            lc.grid = [f"ceil_div({lc.grid[0]}, {knob})"]
        launch.append(lc)
    value = kf.meta.knobs.get(knob, int(p["default"]))
    return Outcome(body=body, launch=launch, knobs={knob: value})


@_register("block_reduce", "block_reduce", ("cuda",),
           "one thread per row -> one block per row: loops stride over the block, reductions "
           "combined with warp shuffles and one shared-memory stage; the grid becomes the rows")
def _t_block_reduce(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, grids = kf.body, {}
    sizes = set()
    for e in entries(kf):
        got = block_per_row(body, e)
        if got is None:
            continue
        new, bound = got
        for lc in kf.meta.launch:
            if lc.kernel != e or len(lc.grid) != 1 or len(lc.block) != 1:
                continue
            fn = find_function(Source(body), e)
            names = {prm.name: a for prm, a in zip(params(fn), lc.args, strict=False)}
            sizes = {a for a in lc.args if a not in kf.meta.temps and not _is_array(kf, a, fn,
                                                                                    lc)}
            grid = bound_as_grid(bound, names, sizes)
            if grid is None:
                break
            grids[e] = grid
        if e in grids:
            body = new
    # shared-memory trees in kernels launched with 1-D blocks only (the tree's threadIdx.x
    # is then the thread's place in the block)
    trees = False
    for e in entries(kf):
        if e in grids or any(lc.kernel == e and len(lc.block) != 1 for lc in kf.meta.launch):
            continue
        new = tree_to_shuffle(body, e)
        if new is not None:
            body, trees = new, True
    if not grids and not trees:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in grids:
            lc.grid = [grids[lc.kernel]]
        launch.append(lc)
    return Outcome(body=body, launch=launch)


def _is_array(kf: KernelFile, arg: str, fn, lc) -> bool:
    """An argument passed to a pointer parameter."""
    for prm, a in zip(params(fn), lc.args, strict=False):
        if a == arg:
            return prm.pointer is not None
    return False


@_register("smem_tile", "smem_tile", ("cuda",),
           "transposing copies through a padded TILE x (TILE+1) shared-memory tile: reads and "
           "writes both coalesced; 2-D grid of tiles, block [TILE, TILE_ROWS]",
           tile=32, tile_rows=8)
def _t_smem_tile(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, launch_of = kf.body, {}
    for e in entries(kf):
        got = tile_transpose(body, e)
        if got is None:
            continue
        new, rdim, cdim, x_walks_c = got
        fn = find_function(Source(body), e)
        for lc in kf.meta.launch:
            if lc.kernel != e:
                continue
            names = {prm.name: a for prm, a in zip(params(fn), lc.args, strict=False)}
            r, c = names.get(rdim), names.get(cdim)
            if r is None or c is None:
                break
            gx, gy = (c, r) if x_walks_c else (r, c)
            launch_of[e] = [f"ceil_div({gx}, TILE)", f"ceil_div({gy}, TILE)"]
        if e in launch_of:
            body = new
    if not launch_of:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in launch_of:
            lc.grid = launch_of[lc.kernel]
            lc.block = ["TILE", "TILE_ROWS"]
            lc.shared_bytes = 0
        launch.append(lc)
    knobs = {"TILE": kf.meta.knobs.get("TILE", int(p["tile"])),
             "TILE_ROWS": kf.meta.knobs.get("TILE_ROWS", int(p["tile_rows"]))}
    return Outcome(body=body, launch=launch, knobs=knobs)
