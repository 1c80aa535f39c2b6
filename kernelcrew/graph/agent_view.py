"""What the agents see of a run: the `AgentContext` the graph builds for them.

Built from the run's state and the operator's spec: the contract (never the benchmark's
cases), the current best kernel, the catalogue's moves against it, the heuristic crew's
static evidence, the profile with case labels taken out, the last iterations from each
evaluation's prompt-safe `note`, the critic's last comparisons, and per specialist the
feedback that concerns it (its slower candidate, the crew's compile errors before a
re-plan). The measuring tools' own texts pass through `redact` on the way.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelcrew.agents.context import AgentContext, Feedback, IterationNote, MoveOption
from kernelcrew.agents.contract import contract_of, redact
from kernelcrew.agents.heuristic.evidence import static_facts
from kernelcrew.agents.llm.moves import SETTINGS, apply_moves, catalogue
from kernelcrew.agents.transforms import parse_any
from kernelcrew.errors import InputError
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState, Evaluation
from kernelcrew.kernels.kernelfile import text_digest
from kernelcrew.kernels.signature import entry_params
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import ProfileResult

RECENT = 5  # iterations shown in full; older ones are folded into the tried list

# which of the static facts each specialist's field reads
STATIC_FIELDS = {
    "memory_access": ("strided", "restrict", "threads", "loops"),
    "loop": ("threads", "reductions", "chains", "dot_nests", "row_tiles", "loops"),
    "compiler_flags": ("simd", "math", "restrict", "chains"),
}


def extent(shape: list[str | int]) -> str:
    """The element count of an array of this shape, as a C expression in the sizes."""
    dims = [str(d).strip() for d in shape] or ["1"]
    return " * ".join(d if re.fullmatch(r"\w+", d) else f"({d})" for d in dims)


def fold_history(evaluations: list[Evaluation], iteration: int
                 ) -> tuple[list[IterationNote], list[str]]:
    """Evaluations of the last RECENT iterations in full (with their prompt-safe notes),
    older ones as one line per (kind, author) attempt."""
    recent, tried = [], []
    for e in evaluations:
        note = IterationNote(iteration=e["iteration"], author=e["author"], kind=e["kind"],
                             outcome=e["outcome"], speedup=e.get("speedup"),
                             detail=(e.get("note") or "")[:200])
        if e["iteration"] > iteration - 1 - RECENT:
            recent.append(note)
        else:
            sp = f" {e['speedup']:.2f}x" if e.get("speedup") else ""
            tried.append(f"{e['kind']} by {e['author']}: {e['outcome']}{sp}")
    return recent, sorted(set(tried))


def static_lines(kernel_text: str) -> list[tuple[str, str]]:
    """(fact kind, one line) from the heuristic crew's static analysis of the source."""
    try:
        f = static_facts(parse_any(kernel_text))
    except (InputError, ValueError):
        return []
    out = [("loops", f"{f.loops} loop(s), {f.top_loops} outermost")]
    out.append(("threads", "threaded (an omp parallel/for pragma)" if f.threaded
                else "single-threaded (no omp parallel/for pragma)"))
    if f.simd:
        out.append(("simd", "an omp simd pragma is present"))
    out += [("strided", f"strided access {s}") for s in f.strided[:4]]
    out += [("reductions", f"reduction on {r}") for r in f.reductions[:4]]
    out += [("chains", f"a reduction that can take several accumulators {c}")
            for c in f.chains[:3]]
    out += [("dot_nests", f"a dot-product nest that can be unrolled and jammed: {d}")
            for d in f.dot_nests[:3]]
    out += [("row_tiles", f"a row loop around a dot-product nest (register tile): {t}")
            for t in f.row_tiles[:3]]
    if f.math_calls:
        out.append(("math", f"math calls in loops: {', '.join(f.math_calls)}"))
    if f.restrict_missing:
        out.append(("restrict", ("pointer parameters without restrict (aliasing blocks "
                                "vectorization)")))
    return out


def redacted_profile(prof: ProfileResult, spec: OpSpec) -> ProfileResult:
    """The profile without the benchmark's case labels and sizes in its texts."""
    metrics = {k: m.model_copy(update={"reason": redact(m.reason, spec)})
               for k, m in prof.metrics.items()}
    hot = [h.model_copy(update={"where": redact(h.where, spec)}) for h in prof.hot_regions]
    return prof.model_copy(update={
        "case": prof.case.split("[")[0].split(" ")[0], "summary": redact(prof.summary, spec),
        "bottleneck": prof.bottleneck.model_copy(update={
            "evidence": redact(prof.bottleneck.evidence, spec)}),
        "metrics": metrics, "hot_regions": hot,
        "compile_report": redact(prof.compile_report, spec)})


def move_options(kernel_text: str, backend: str,
                 evaluated: dict[str, str] | None = None) -> list[MoveOption]:
    """The catalogue against the best kernel. `evaluated`: digest -> outcome of the
    kernels already evaluated; a move whose result (at its defaults) is one of them is
    marked with that outcome and not offered again."""
    out = []
    for d in catalogue(kernel_text, backend):
        tried = ""
        if d.applies and evaluated and d.name not in SETTINGS:
            got = apply_moves(kernel_text, [(d.name, {})], backend)
            if got.kernel is not None:
                tried = evaluated.get(text_digest(got.kernel), "")
        out.append(MoveOption(name=d.name, doc=d.doc, params=d.params, applies=d.applies,
                              why_not=d.why_not, tried=tried))
    return out


def agent_context(state: CrewState, ctx: RunContext) -> AgentContext:
    tools = tools_for(state, ctx)
    spec = tools.spec
    recent, tried = fold_history(state.get("evaluations", []), state["iteration"])
    sig = ", ".join(f"{n} ({k})" for n, k in spec.signature())
    best_text = Path(state["best"]["path"]).read_text()
    prof = ProfileResult.model_validate(state["profile"]) if state.get("profile") else None
    if prof is not None:
        prof = redacted_profile(prof, spec)
    last = state["iteration"] - 1
    critiques = [c["text"] for c in state.get("critiques", []) if c["iteration"] == last]
    return AgentContext(
        op=spec.name, family=spec.family, description=spec.description,
        backend=state["backend"], signature=sig,
        tolerance=f"rtol={spec.tolerance.rtol:g}, atol={spec.tolerance.atol:g}",
        kernel=best_text, kernel_is_baseline=state["best"]["author"] == "baseline",
        profile=prof, recent=recent, tried=tried,
        reflections=[redact(r, spec) for r in state.get("reflections", [])],
        change_stats=state.get("change_stats", {}), iteration=state["iteration"],
        entry_params=entry_params(spec) if state["backend"] != "cuda" else [],
        extents={name: extent(ts.shape) for name, ts in {**spec.inputs, **spec.outputs}.items()},
        compile_report=prof.compile_report if prof is not None else "",
        contract=contract_of(spec), moves=move_options(best_text, state["backend"], {
            e["digest"]: e["outcome"] for e in state.get("evaluations", [])
            if e.get("digest")}),
        static_evidence=[line for _, line in static_lines(best_text)]
        if state["backend"] != "cuda" else [],
        critiques=critiques)


def for_specialist(actx: AgentContext, name: str, state: CrewState, crew_errors: str = ""
                   ) -> AgentContext:
    """One specialist's copy: the static facts of its field, the feedback that concerns
    it (its own candidate that was rejected or not faster, the crew's compile errors to
    plan from)."""
    kinds = STATIC_FIELDS.get(name)
    out = actx.model_copy(deep=True)
    if kinds is not None and actx.backend != "cuda":
        out.static_evidence = [ln for k, ln in static_lines(actx.kernel) if k in kinds]
    last = state["iteration"] - 1
    mine = [c for c in state.get("critiques", []) if c["iteration"] == last
            and name in c["author"].split("+") and c["outcome"] in ("slower", "same")]
    rejected = [e for e in state.get("evaluations", []) if e["iteration"] == last
                and name in e["author"].split("+") and e["outcome"] == "rejected"]
    if crew_errors:
        out.feedback = Feedback(kind="crew-compile-errors", message=crew_errors, replan=True)
    elif rejected:  # what was wrong, from the rows' data (graph.feedback), never how found
        out.feedback = Feedback(kind="incorrect", message="\n".join(
            f"{e['kind']}: {e.get('note') or 'rejected'}" for e in rejected))
    elif mine:
        out.feedback = Feedback(kind="slower", message="\n".join(
            f"{c['kind']}: {c['text']}" for c in mine))
    return out


def crew_compile_errors(state: CrewState) -> str:
    """The latest compile errors of the crew's candidates (for a crew-wide re-plan)."""
    out = []
    for c in state.get("candidates", []):
        fb = c.get("feedback")
        if fb and c.get("status") in ("abandoned", "compile-error") and Path(fb).exists() \
                and not c.get("wrong"):
            text = Path(fb).read_text()
            out.append(f"{c['author']}/{c['kind']}:\n" + "\n".join(text.splitlines()[:12]))
    return "\n\n".join(out[-3:])
