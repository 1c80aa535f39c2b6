"""The whole catalogue of moves against one kernel file: which apply, and why each of the
others does not. A run that stops with nothing left to try lists this, so a user sees every
move that was considered and the reason it was not made (the legality check that failed,
the loop form that is missing, a helper out of reach)."""

from __future__ import annotations

import re

from kernelcrew.agents.transforms import TRANSFORMS, apply_transform, entries, parse_any
from kernelcrew.agents.transforms.accum import accum_reasons
from kernelcrew.agents.transforms.affine import FunctionModel
from kernelcrew.agents.transforms.common import has_pragma, model_of, short_constant_loop
from kernelcrew.agents.transforms.counters import scope_counters
from kernelcrew.agents.transforms.cst import Source, find_function, params, pragma_text, walk
from kernelcrew.agents.transforms.dependence import check_loop
from kernelcrew.agents.transforms.jam import jam_reasons
from kernelcrew.agents.transforms.keep import keep_reasons
from kernelcrew.agents.transforms.privatize import private_bins_reasons
from kernelcrew.agents.transforms.regtile import tile_reasons
from kernelcrew.agents.transforms.rowacc import row_reasons
from kernelcrew.agents.transforms.scan import scan_reasons
from kernelcrew.agents.transforms.scope import scope_of
from kernelcrew.agents.transforms.stream import stream_reasons
from kernelcrew.agents.transforms.threads import parallel_verdict
from kernelcrew.agents.transforms.vscan import vector_scan_reasons
from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile

# moves that are settings, not rewrites: never "not applicable"
SETTINGS = {"flags", "knobs", "sequence"}

_FORM = {
    "vector_math": "no float exp/erf call inside a loop",
    "vector_math_ext": "no float tanh/log call inside a loop",
    "interchange": "no i-j-k product nest whose innermost loop reads an operand with a stride",
    "tile": "no 2-deep nest with a strided access for cache blocking to fix",
    "loop_order": "no perfectly nested independent pair whose inner loop is the strided one",
    "fusion": "no consecutive loops over the same range that touch the same elements",
    "register_block": "no i-k-j product nest (interchanged) to block in registers",
    "ldg": "no read-only global load left without __ldg",
    "launch_bounds": "no kernel launched with block [BLOCK]",
    "grid_stride": "no one-element-per-thread kernel",
    "reciprocal": "no division by a float variable that a loop does not change",
}


def _read_as(kf: KernelFile, name: str) -> str:
    """The body the reasons are given for: `name`'s top-declared counters moved into
    their loops (the view every move is tried on; it keeps the lines where they are), so
    a reason is not a dependence the move never saw."""
    return scope_counters(kf.body, name) or kf.body


def _models(kf: KernelFile) -> list[tuple[str, Source, FunctionModel]]:
    out = []
    for name in entries(kf):
        got = model_of(_read_as(kf, name), name)
        if got is not None:
            out.append((name, *got))
    return out


def _threads_why(kf: KernelFile) -> str:
    reasons = []
    for name, s, m in _models(kf):
        if any(re.match(r"omp\s+(parallel|for)\b", pragma_text(s, n))
               for n in walk(m.body) if n.type == "preproc_call"):
            reasons.append(f"{name}() is threaded already (its pragma is kept, never stacked)")
            continue
        for top in m.forest:
            v = parallel_verdict(m, top, reductions=True)
            if not v.ok:
                reasons.append(f"{name}(): {v.reason}")
    return "; ".join(reasons[:3]) or "no loop to thread"


def _simd_why(kf: KernelFile) -> str:
    reasons = []
    for name, s, m in _models(kf):
        for lp in m.loops:
            if lp.children:
                continue
            if has_pragma(s, lp, r"^omp\b.*\bsimd\b"):
                reasons.append(f"{name}(): the loop at line {s.line_of(lp.node)} has omp simd")
                continue
            if (short := short_constant_loop(s, m, lp)) is not None:
                reasons.append(f"{name}(): {short}")
                continue
            v = check_loop(m, lp, allow_reductions=True)
            if not v.ok:
                reasons.append(f"{name}(): {v.reason}")
    return "; ".join(reasons[:3]) or "no innermost loop"


def _jam_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in jam_reasons(_read_as(kf, name), name)]
    return "; ".join(reasons[:3]) or "no 2-deep nest with an inner reduction"


def _tile_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in tile_reasons(_read_as(kf, name), name)]
    return "; ".join(reasons[:3]) or "no dot-product nest inside a loop over rows"


def _accum_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in accum_reasons(_read_as(kf, name), name)]
    return "; ".join(reasons[:3]) or "no innermost reduction loop"


def _bins_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in private_bins_reasons(kf.body, name)]
    return "; ".join(reasons[:3]) or "no loop accumulates into an array of bins"


def _scan_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in scan_reasons(kf.body, name)
               if "carries no running sum" not in r and "not an innermost" not in r]
    return "; ".join(reasons[:3]) or "no prefix-sum loop (`acc += x[i]; y[i] = acc;`)"


def _vscan_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in vector_scan_reasons(kf.body, name)
               if "carries no running sum" not in r and "not an innermost" not in r]
    return "; ".join(reasons[:3]) or "no float or double prefix-sum loop (`acc += x[i]; " \
        "y[i] = acc;`)"


def _stream_why(kf: KernelFile) -> str:
    if apply_transform("omp_parallel", kf.text) is not None:
        return "the loop nest can still be threaded, and threading comes first"
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in stream_reasons(_read_as(kf, name), name)
               if "is not one store" not in r]
    return "; ".join(reasons[:3]) or "no innermost loop whose body is one store to an " \
        "output row (`out_row[i] = ...`)"


def _row_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in row_reasons(_read_as(kf, name), name)]
    return "; ".join(reasons[:3]) or "no per-output reduction nest in a loop"


def _keep_why(kf: KernelFile) -> str:
    reasons = [f"{name}(): {r}" for name, _, _ in _models(kf)
               for r in keep_reasons(_read_as(kf, name), name)]
    return "; ".join(reasons[:3]) or "no pure call (a helper, exp/log/tanh...) that a later " \
        "loop over the same range computes again"


def _restrict_why(kf: KernelFile) -> str:
    s = Source(kf.body)
    for name in entries(kf):
        fn = find_function(s, name)
        if fn is not None and any(p.pointer is not None and not p.restrict for p in params(fn)):
            return f"{name}() still has pointers without restrict (the rewrite failed)"
    return "every pointer parameter in reach is restrict already"


_WHY = {"omp_parallel": _threads_why, "accumulators": _accum_why, "simd": _simd_why,
        "unroll_and_jam": _jam_why, "register_tile": _tile_why, "restrict": _restrict_why,
        "row_accumulate": _row_why, "stream_stores": _stream_why,
        "keep_values": _keep_why,
        "private_bins": _bins_why, "blocked_scan": _scan_why, "vector_scan": _vscan_why,
        "unroll": lambda kf: "every innermost loop carries an unroll or OpenMP pragma"}


def not_applicable(kernel_text: str) -> dict[str, str]:
    """Transformation name -> why it does not apply to this kernel file (transformations
    that do apply are left out). Helpers out of reach come first, as `scope`."""
    try:
        kf = parse_any(kernel_text)
    except InputError as e:
        return {"all": f"the kernel file does not parse: {e}"}
    out: dict[str, str] = {}
    if kf.backend == "cpu" and kf.meta.entry:
        sc = scope_of(Source(kf.body), kf.meta.entry)
        if sc.excluded:
            out["scope"] = "; ".join(f"helper {h}() is out of reach: {why}"
                                     for h, why in sc.excluded.items())
    for name, t in TRANSFORMS.items():
        if name in SETTINGS or kf.backend not in t.backends:
            continue
        if apply_transform(name, kernel_text) is not None:
            continue
        why = _WHY.get(name)
        out[name] = why(kf) if why is not None else _FORM.get(
            name, "the source has no loop of the form it rewrites")
    # the analysis counts lines of the source; the user reads lines of the kernel file
    off = kf.text[: len(kf.text) - len(kf.body)].count("\n")
    return {k: re.sub(r"\bline (\d+)", lambda m: f"line {int(m[1]) + off}", v)
            for k, v in out.items()}
