"""A specialist's prompt context: focused on its field and held to a token budget.

Every specialist sees the operator's contract (arrays with dtypes and shapes, each shape
group with its weight and the sizes it spans as ranges, the tolerance), the current best
kernel, the moves of the catalogue that apply to it (and, further down, why the others do
not), the critic's comparison of the last race, the latest profile summary, what the
source shows (the heuristic crew's static analysis) and what the rule-based specialist of
the same field would do, the last 3-5 iterations (each with all its candidates), the
relevant reflections and the folded list of what was tried before. On top of that
memory_access gets the memory metrics, loop the occupancy, stall and instruction metrics,
compiler_flags the vectorization/ptxas report, the current flags and the allow-list.
Sections are trimmed lowest priority first (track record, tried list, reflections, the
moves that do not apply, then the oldest recent iterations are folded, then hot regions,
suggestions and metrics) until the context fits the budget; what was trimmed is reported.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelcrew.agents.context import AgentContext, Feedback, IterationNote
from kernelcrew.agents.proposal import Proposal
from kernelcrew.kernels.flags import allowed_flags

KEEP_RECENT = 5  # iterations shown in full when the budget allows
MIN_RECENT = 3  # ... and never fewer (older ones are folded into the tried list)
FEEDBACK_CHARS = 3000  # compile errors / failing cases / the critic's comparison
TIKTOKEN_ENCODING = "o200k_base"

# metric-name fragments per field (CPU profile names and ncu summary names)
FOCUS: dict[str, tuple[str, ...]] = {
    "memory_access": ("bandwidth", "dram", "l1", "l2", "llc", "lts", "cache", "stride",
                      "sector", "bytes", "hit", "coalesc", "load", "store", "intensity",
                      "bound_ms", "time_ms"),
    "loop": ("occupancy", "stall", "warp", "thread", "instruction", "ipc", "cycle", "issue",
             "branch", "register", "block", "grid", "sm_", "flops", "compute", "samples",
             "vector", "time_ms"),
    "compiler_flags": ("vector", "vec", "regist", "spill", "stack", "shared", "smem",
                       "ptxas", "fma", "ipc", "compute", "time_ms"),
}
FIELD_TITLES = {
    "memory_access": "Memory metrics",
    "loop": "Occupancy, stall and instruction metrics",
    "compiler_flags": "Vectorization / ptxas report",
}


# -- token counting ------------------------------------------------------------------------
def _tiktoken_cached() -> bool:
    """Whether tiktoken's encoding file is already in its cache (it is never downloaded)."""
    url = f"https://openaipublic.blob.core.windows.net/encodings/{TIKTOKEN_ENCODING}.tiktoken"
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or \
        str(Path(tempfile.gettempdir()) / "data-gym-cache")
    return bool(cache) and (Path(cache) / hashlib.sha1(url.encode()).hexdigest()).is_file()


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    if not _tiktoken_cached():
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding(TIKTOKEN_ENCODING)
    except Exception:  # noqa: BLE001 - a broken cache file: fall back to the estimate
        return None


def count_tokens(text: str) -> int:
    """Tokens of `text`: tiktoken when its encoding is cached offline, else chars / 4."""
    enc = _tokenizer()
    if enc is not None:
        return len(enc.encode(text, disallowed_special=()))
    return math.ceil(len(text) / 4)


def token_method() -> str:
    return f"tiktoken {TIKTOKEN_ENCODING}" if _tokenizer() is not None else "chars/4"


# -- sections --------------------------------------------------------------------------------
@dataclass
class Section:
    name: str
    title: str
    items: list[str]
    priority: int  # 0: never trimmed; higher numbers are trimmed first
    min_items: int = 0
    bullet: bool = True
    dropped: int = 0

    def render(self) -> str:
        if not self.items:  # nothing left to show: a bare heading is noise to a model
            return ""
        lines = [f"## {self.title}"]
        lines += [f"- {i}" if self.bullet else i for i in self.items]
        if self.dropped:
            lines.append(f"- ({self.dropped} more omitted for the context budget)")
        return "\n".join(lines)


@dataclass
class FocusedContext:
    """The rendered context and its budget report (`report()` goes to the trace)."""

    text: str
    tokens: int
    budget: int
    trimmed: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "budget": self.budget, "trimmed": list(self.trimmed),
                "sections": list(self.sections), "over_budget": self.tokens > self.budget,
                "counted_with": token_method()}


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v == int(v) and abs(v) < 1e12:
        return str(int(v))
    return f"{v:.4g}"


def _code_block(text: str, backend: str) -> str:
    lang = "cuda" if backend == "cuda" else "cpp"
    return f"```{lang}\n{text.rstrip()}\n```"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    out, size = [], 0
    for ln in lines:
        if size + len(ln) + 1 > limit:
            break
        out.append(ln)
        size += len(ln) + 1
    return "\n".join(out) + f"\n... {len(lines) - len(out)} lines omitted"


def fold_note(n: IterationNote) -> str:
    sp = f" {n.speedup:.2f}x" if n.speedup else ""
    return f"{n.kind} by {n.author}: {n.outcome}{sp} (iteration {n.iteration})"


def recent_line(n: IterationNote) -> str:
    sp = f", {n.speedup:.2f}x vs baseline" if n.speedup else ""
    detail = f" - {n.detail}" if n.detail else ""
    return f"{n.author}/{n.kind}: {n.outcome}{sp}{detail}"


def iteration_block(it: int, notes: list[IterationNote]) -> str:
    """One iteration with each of its candidates."""
    if len(notes) == 1:
        return f"iteration {it}: {recent_line(notes[0])}"
    return f"iteration {it}:\n" + "\n".join(f"  - {recent_line(n)}" for n in notes)


def _current_flags(kernel: str) -> str:
    m = re.search(r"^\s*flags:\s*(.*)$", kernel, re.MULTILINE)
    return m.group(1).strip() if m else "[] (none)"


def metric_lines(ctx: AgentContext, fld: str) -> list[str]:
    if ctx.profile is None:
        return []
    keys = FOCUS.get(fld)
    out = []
    for name, m in ctx.profile.metrics.items():
        if name == "device":
            continue
        if keys is not None and not any(k in name.lower() for k in keys):
            continue
        why = f" ({m.reason})" if m.reason else ""
        out.append(f"{name}: {_fmt(m.value)} {m.unit}{why}".replace("  ", " "))
    return out


def feedback_text(fb: Feedback, max_attempts: int = 3) -> tuple[str, str]:
    """(title, body) of the feedback on the agent's last candidate."""
    body = _cut(fb.message.strip(), FEEDBACK_CHARS)
    if fb.kind == "compile-error":
        title = f"Compile errors of your last candidate (attempt {fb.attempt} of {max_attempts})"
        return title, f"```\n{body}\n```"
    if fb.kind == "crew-compile-errors":
        return "The crew's last candidates did not compile (plan again)", f"```\n{body}\n```"
    if fb.kind == "incorrect":
        title = ("Your last candidate was incorrect (failing group/case, output, index, what "
                 "it wrote, what the reference says)")
        return title, body
    if fb.kind == "slower":
        return "Your last candidate was not faster than the best: the critic's comparison", body
    return f"Feedback on your last candidate ({fb.kind})", body


def _operator_section(ctx: AgentContext, fld: str) -> Section:
    op = [f"{ctx.op}: {ctx.description} (family {ctx.family}, backend {ctx.backend})",
          f"Kernel arguments in order: {ctx.signature}"]
    if ctx.contract is not None:
        op += ctx.contract.lines()
    else:
        op.append(f"Tolerance: {ctx.tolerance}")
    if fld != "compiler_flags":
        op.append(f"Current flags: {_current_flags(ctx.kernel)}")
    return Section("operator", "Operator", op, 0)


def _profile_sections(ctx: AgentContext, fld: str) -> list[Section]:
    prof = ctx.profile
    if prof is None:
        return []
    summary = [(f"Measured by {prof.source} on one {prof.case.split('[')[0]} case: "
               f"{prof.summary}"),
               f"Diagnosis: {prof.bottleneck.kind}: {prof.bottleneck.evidence}"]
    if prof.roofline is not None:
        r = prof.roofline
        share = f" ({r.bandwidth_share:.0%} of peak)" if r.bandwidth_share else ""
        summary.append(f"Share of the machine's peaks: {r.achieved_gbps:.3g} GB/s{share}, "
                       f"{r.achieved_gflops:.3g} GFLOP/s, intensity {r.intensity:.3g} "
                       f"FLOP/byte, least time {_fmt(r.bound_ms)} ms vs {r.time_ms:.4g} ms")
    out = [Section("profile", "Latest profile summary", summary, 1)]
    metrics = metric_lines(ctx, fld)
    if metrics:
        out.append(Section("metrics", FIELD_TITLES.get(fld, "Metrics"), metrics, 2))
    if prof.hot_regions:
        hot = [f"{h.where}" + (f" {h.share:.0%}" if h.share is not None else "")
               + (f": {h.what}" if h.what else "") for h in prof.hot_regions]
        out.append(Section("hot", "Hot regions", hot, 3))
    return out


def _move_sections(ctx: AgentContext) -> list[Section]:
    if not ctx.moves:
        return []
    yes = [m.line() for m in ctx.moves if m.applies]
    no = [m.line() for m in ctx.moves if not m.applies]
    out = [Section("moves", "Moves of the catalogue that apply to the current best (name them "
                            "to have the crew apply them, legality checked)",
                   yes or ["(none applies as the kernel is now)"], 0)]
    if no:
        out.append(Section("moves_not", "Moves that do not apply here, and why", no, 5))
    return out


def build_context(ctx: AgentContext, fld: str, *, budget: int,
                  failed: Proposal | None = None) -> FocusedContext:
    """The focused context of one specialist (field `fld`), trimmed to `budget` tokens."""
    be = ctx.backend
    sections = [_operator_section(ctx, fld)]
    if ctx.feedback is not None:
        title, body = feedback_text(ctx.feedback)
        sections.append(Section("feedback", title, [body], 0, bullet=False))
    if failed is not None:
        sections.append(Section("failed", "Your failed candidate", [
            f"Plan: {failed.plan}", _code_block(failed.change.kernel, be)], 0, bullet=False))
    best = "baseline" if ctx.kernel_is_baseline else "best so far"
    sections.append(Section("kernel", f"Current best kernel ({best})",
                            [_code_block(ctx.kernel, be)], 0, bullet=False))
    if fld == "compiler_flags":
        flags = [f"Current flags: {_current_flags(ctx.kernel)}",
                 f"Allowed flags ({be}): {' '.join(allowed_flags(be))}"]
        if ctx.compile_report:
            flags.append("Compiler report:\n" + _cut(ctx.compile_report, 1500))
        sections.append(Section("flags", "Flags", flags, 0))
    sections += _move_sections(ctx)
    if ctx.critiques:
        sections.append(Section("critique", "The critic on the last race", ctx.critiques, 1))
    sections += _profile_sections(ctx, fld)
    if ctx.static_evidence:
        sections.append(Section("static", "What the source shows (static analysis)",
                                list(ctx.static_evidence), 2))
    if ctx.suggestions:
        sections.append(Section("suggestions", "What the rule-based specialist of this field "
                                               "would do", list(ctx.suggestions), 3))
    return _fit(sections, ctx, budget)


def _fit(sections: list[Section], ctx: AgentContext, budget: int) -> FocusedContext:
    """Add history, memory and track record, then trim lowest priority first."""
    by_it: dict[int, list[IterationNote]] = {}
    for n in sorted(ctx.recent, key=lambda n: n.iteration):
        by_it.setdefault(n.iteration, []).append(n)
    its = sorted(by_it)
    folded = [fold_note(n) for it in its[:-KEEP_RECENT] for n in by_it[it]]
    its = its[-KEEP_RECENT:]
    rec = Section("recent", "Recent iterations", [iteration_block(i, by_it[i]) for i in its],
                  4, min_items=min(MIN_RECENT, len(its)), bullet=False)
    sections.append(rec)
    sections.append(Section("reflections", "Relevant reflections (from memory)",
                            list(ctx.reflections), 5))
    tried = Section("tried", "Already tried (older iterations, folded)",
                    folded + list(ctx.tried), 6)
    sections.append(tried)
    stats = [f"{k}: tried {v.get('tried', 0)}, accepted {v.get('accepted', 0)}"
             + (f", mean {v['mean_speedup']:.2f}x" if v.get("mean_speedup") else "")
             for k, v in sorted(ctx.change_stats.items())]
    sections.append(Section("change_stats", "Track record of kinds of change", stats, 7))

    def text() -> str:
        return "\n\n".join(s for s in (x.render() for x in sections) if s)

    trimmed: dict[str, int] = {}
    folded_n = 0
    tokens = count_tokens(text())
    while tokens > budget:
        cands = [s for s in sections if s.priority > 0 and len(s.items) > s.min_items]
        if not cands:
            break  # only what must stay is left: reported as over budget
        s = max(cands, key=lambda x: x.priority)
        if s is rec:  # fold the oldest recent iteration into the tried list
            old = its.pop(0)
            rec.items.pop(0)
            tried.items[:0] = [fold_note(n) for n in by_it[old]]
            folded_n += 1
        else:
            s.items.pop()
            s.dropped += 1
            trimmed[s.name] = trimmed.get(s.name, 0) + 1
        tokens = count_tokens(text())
    report = [f"{name}: {n} dropped" for name, n in trimmed.items()]
    if folded_n:
        report.append(f"recent: {folded_n} oldest folded into tried")
    return FocusedContext(text=text(), tokens=tokens, budget=budget, trimmed=report,
                          sections=[s.name for s in sections if s.items or s.dropped])
