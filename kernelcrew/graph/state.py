"""Graph state. Large artifacts (kernel sources, profiles) live in the run directory;
state carries their paths and short summaries."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


class CrewInput(TypedDict, total=False):
    operator: Any  # library name, folder path, or a loaded OpSpec
    run_id: str  # optional: name the run


class Evaluation(TypedDict, total=False):
    """One candidate's fate. Appended once, when its evaluation finished."""

    iteration: int
    author: str
    kind: str
    path: str  # candidate kernel file
    digest: str
    # accepted | faster-not-best | same | slower | rejected | compile-error | declined |
    # infra-error (the executor's cluster lost every attempt: no verdict on the kernel) |
    # not-run (compiled, with static evidence; no device to run it on)
    outcome: str
    speedup: float | None  # vs the baseline (chained through the best it was timed against)
    vs_best: float | None  # vs the best at that time, side by side
    detail: str
    compile_tries: int
    ran_on: dict  # where it was judged: executor, node, host


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
    baseline: dict  # path, case medians (ms), summary
    started: float  # time.time() at start, for the wall-clock budget
    # progress
    iteration: int
    best: dict  # path, digest, speedup vs baseline, iteration, author
    profile: dict  # ProfileResult of the best (JSON), refreshed by observe
    reflections: list[str]  # retrieved for this iteration
    change_stats: dict  # kind -> {tried, accepted, mean_speedup} from memory
    # proposals from the parallel specialists, appended; coordinator reads this iteration's
    proposals: Annotated[list[dict], operator.add]  # reducer: append
    decision: dict  # coordinator's Decision (JSON, without kernel texts)
    candidates: list[dict]  # this iteration's candidates: path, author, kind, tries, status
    evaluations: Annotated[list[Evaluation], operator.add]  # reducer: append (history)
    compile_failures: int  # consecutive compile failures across the crew
    plan_first: bool  # after 3 failures in a row the crew plans before it codes
    since_improvement: int
    halts: Annotated[list[str], operator.add]  # reducer: append; an agent that cannot go on
    answers: Annotated[list[dict], operator.add]  # every LLM answer: agent, step, kind, reason
    spent: dict  # tokens and cost spent so far (for the budgets)
    stop_reason: str
    compile_only: str  # why nothing runs (no device): candidates are compiled, never timed
    result: dict  # the final result (also result.json)


class SpecialistInput(TypedDict):
    """What the fan-out sends to one specialist (not the whole state)."""

    name: str
    policy: str
    context: dict  # AgentContext as JSON
    iteration: int
    plan_first: bool
    run_dir: str
