"""Graph state. Large artifacts (kernel sources, profiles, proposals) live in the run
directory; state carries their paths and short summaries.

The nested parts are typed the way LangGraph's templates type theirs: one TypedDict per
record, each field with a comment. A field with a reducer says so; every other field is
replaced by the node that returns it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict


class CrewInput(TypedDict, total=False):
    """What a caller gives `graph.invoke` (the narrow input schema)."""

    operator: Any  # library name, folder path, or a loaded OpSpec
    run_id: str  # optional: name the run


class BaselineInfo(TypedDict, total=False):
    """The operator's baseline as measured once by the baseline node."""

    path: str  # the copy in the run directory
    medians: dict[str, float]  # case key -> median ms
    typical_ms: float | None  # total of the typical group; None when nothing ran
    written: bool  # written by the LLM writer (the op had no baseline)
    reference_ms: dict[str, float]  # the op's reference.py timed (written baselines only)


class BestKernel(TypedDict):
    """The best kernel so far. `path` is always the run's best.<suffix> file; `source`
    is the candidate (or baseline) file it was copied from."""

    path: str
    source: str
    digest: str
    speedup: float  # vs the baseline, chained through the races that made it the best
    iteration: int  # when it was accepted (0: the baseline)
    author: str
    kind: str


CandidateStatus = Literal[
    "pending",  # written, not compiled yet
    "compiled", "compile-error", "abandoned", "incorrect", "verified", "rejected",
    "infra-error", "not-evaluated", "not-run",
    # after the race
    "accepted", "faster-not-best", "declined", "same", "slower"]


class Candidate(TypedDict, total=False):
    """One candidate kernel of this iteration, from the coordinator to its verdict."""

    path: str  # the kernel file (a revision gets a new one)
    author: str  # "a" or "a+b" for a merge
    kind: str
    proposal: str  # the Proposal's JSON file
    tries: int  # compiles so far (all plans)
    replans: int  # times its author re-planned it after repeated compile errors
    replan: bool  # the next revision must re-plan first
    status: CandidateStatus
    digest: str
    feedback: str  # file with the errors or the wrong result sent to the author
    wrong: str | None  # a wrong result whose fix is pending (the judge's words, for people)
    wrong_note: str  # the same for agents (graph.feedback.rejection_note)
    fixed_once: bool  # a wrong result went back to the author once already
    recorded: bool  # its evaluation record was written
    infra_error: str
    declined: bool  # a human declined it (--approve)
    static: dict  # compile-only: what the compiler says of it


class Evaluation(TypedDict, total=False):
    """One candidate's fate. Appended once, when its evaluation finished."""

    iteration: int
    author: str
    kind: str
    path: str  # candidate kernel file
    digest: str
    # accepted | faster-not-best | same | slower | rejected | compile-error | declined |
    # infra-error (the executor's cluster lost every attempt: no verdict on the kernel) |
    # not-run (compiled, with static evidence; no device to run it on) | demoted |
    # not-evaluated (the wall-clock budget was spent first)
    outcome: str
    speedup: float | None  # vs the baseline (chained through the best it was timed against)
    vs_best: float | None  # vs the best at that time, side by side
    detail: str  # for people (trace, report): the judge's or compiler's own words
    note: str  # for agents: what happened, built from structured fields only (no judge
    # wording, no case sizes, no band or threshold); see graph.feedback
    groups: dict[str, float]  # per shape group speedup vs the best it raced
    compile_tries: int
    ran_on: dict  # where it was judged: executor, node, host


class ProposalRecord(TypedDict):
    """A specialist's proposal, kept as a file; appended by each specialist."""

    iteration: int
    author: str
    file: str
    kind: str
    expected_gain: float  # the author's own estimate: shown, never ranked on
    confidence: float


class AnswerRecord(TypedDict):
    """One LLM answer, usable or not (the trace holds the full event)."""

    agent: str
    step: str
    kind: str  # usable | malformed | truncated | schema | wrong_signature | invalid |
    # filtered | refused
    iteration: int
    reason: str


class DecisionRecord(TypedDict):
    reason: str
    rejected: list[str]
    merged_from: list[list[str]]


class Critique(TypedDict, total=False):
    """Why a raced candidate won or lost, after its race (the critic step)."""

    iteration: int
    author: str
    kind: str
    path: str
    outcome: str
    vs_best: float | None
    text: str  # a few sentences with numbers, safe for prompts
    by: str  # heuristic | llm


class SitOut(TypedDict):
    """A specialist that could not take part in one iteration (its prompt cannot fit)."""

    iteration: int
    agent: str
    reason: str


class CrewState(TypedDict, total=False):
    # input
    operator: Any
    run_id: str
    # set up once by the baseline node
    op_path: str
    op_name: str
    family: str
    backend: str
    run_dir: str
    seed: int
    baseline: BaselineInfo
    started: float  # time.time() at start, for the wall-clock budget
    # progress
    iteration: int
    best: BestKernel
    profile: dict  # ProfileResult of the best (JSON), refreshed by observe
    reflections: list[str]  # retrieved for this iteration
    change_stats: dict[str, dict]  # kind -> {tried, helped, failed, ...} from memory
    # proposals from the parallel specialists; the coordinator reads this iteration's
    proposals: Annotated[list[ProposalRecord], operator.add]  # reducer: append
    decision: DecisionRecord  # the coordinator's choice (without kernel texts)
    candidates: list[Candidate]  # this iteration's candidates
    evaluations: Annotated[list[Evaluation], operator.add]  # reducer: append (history)
    critiques: Annotated[list[Critique], operator.add]  # reducer: append (history)
    compile_failures: int  # consecutive compile failures across the crew
    plan_first: bool  # set after that many failures; reset once a candidate compiles
    since_improvement: int
    halts: Annotated[list[str], operator.add]  # reducer: append; an agent that cannot go on
    budget_stops: Annotated[list[str], operator.add]  # reducer: append; a call not made
    # because it could have taken the run over its token or cost budget (a clean stop)
    sat_out: Annotated[list[SitOut], operator.add]  # reducer: append
    answers: Annotated[list[AnswerRecord], operator.add]  # reducer: append
    stop_reason: str
    compile_only: str  # why nothing runs (no device): candidates are compiled, never timed
    result: dict  # the final result (also result.json)


class SpecialistInput(TypedDict):
    """What the fan-out sends to one specialist (not the whole state)."""

    name: str
    policy: str
    context: dict  # AgentContext as JSON, with this specialist's own feedback
    iteration: int
    plan_first: bool
    run_dir: str
