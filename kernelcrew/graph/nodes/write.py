"""The first kernel of an operator that has a reference and no baseline (`--agents llm`):
the writer plans and writes it, the baseline node compiles and verifies each attempt here
and hands errors back, and the first correct kernel becomes the run's baseline."""

from __future__ import annotations

import time
from pathlib import Path

from kernelcrew.agents.contract import contract_of
from kernelcrew.errors import AgentUnavailable, InputError
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.feedback import compile_feedback, wrong_result_feedback
from kernelcrew.graph.nodes.common import llm_settings
from kernelcrew.graph.services import RunTools
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.trace import emit

C_TYPES = {"float32": "float", "float64": "double", "float16": "_Float16", "int32": "int32_t",
           "int64": "int64_t", "uint8": "uint8_t", "int8": "int8_t", "uint16": "uint16_t",
           "int16": "int16_t", "uint32": "uint32_t"}


def entry_signature(spec: OpSpec, backend: str) -> str:
    """The C parameter list of the entry, in op.yaml order."""
    size_t = "long long" if backend == "cuda" else "int64_t"
    parts = [f"const {C_TYPES[t.dtype]}* {n}" for n, t in spec.inputs.items()]
    parts += [f"{C_TYPES[t.dtype]}* {n}" for n, t in spec.outputs.items()]
    parts += [f"{C_TYPES[s.dtype]} {n}" for n, s in spec.scalars.items()]
    parts += [f"{size_t} {n}" for n in spec.sizes]
    return ", ".join(parts)


def missing_baseline(spec: OpSpec, backend: str) -> InputError:
    return InputError(
        f"operator {spec.name} has no {backend} baseline: add one (baseline.cpp and "
        f"`baselines: {{{backend}: baseline.cpp}}`), or let the LLM writer write it from "
        "reference.py with --agents llm", path=spec.folder / "op.yaml", field="baselines")


def write_baseline(spec: OpSpec, ctx: RunContext, run_dir: Path, tools: RunTools) -> Path:
    """Plan, write, compile, verify, repair; the path of the first correct kernel."""
    from kernelcrew.agents.llm.writer import MAX_ATTEMPTS, LLMWriter, WriterTask

    backend = tools.backend.name
    folder = spec.folder
    inputs = folder / "inputs.py"
    tol = f"rtol={spec.tolerance.rtol:g}, atol={spec.tolerance.atol:g}"
    task = WriterTask(
        op=spec.name, backend=backend, entry=spec.name, signature=entry_signature(spec, backend),
        tolerance=tol, contract="\n".join(contract_of(spec).lines()),
        reference=(folder / "reference.py").read_text(), description=spec.description,
        inputs=inputs.read_text() if inputs.exists() else "")
    writer = LLMWriter(llm_settings(ctx), run_dir=str(run_dir))
    t0 = time.monotonic()
    plan = writer.plan(task)
    emit(run_dir, "write", f"writer plan: {plan.plan[:160] if plan else 'no usable plan'}",
         t0=t0, iteration=0, agent="writer", tokens=writer.last_usage,
         prompt_file=writer.last_prompt_file, ok=plan is not None)
    if plan is None:
        raise AgentUnavailable(f"the writer gave no usable plan for {spec.name}: "
                               f"{writer.last_error or 'unusable answer'}")
    suffix = ".cu" if backend == "cuda" else ".cpp"
    kernel = writer.code(task, plan)
    last = "no usable kernel"
    for attempt in range(1, MAX_ATTEMPTS + 1):
        t0 = time.monotonic()
        if kernel is None:
            last = writer.last_error or "no usable kernel"
            emit(run_dir, "write", f"writer attempt {attempt}: {last}", t0=t0, iteration=0,
                 agent="writer", tokens=writer.last_usage, ok=False)
            break
        path = run_dir / "candidates" / f"written-{attempt}{suffix}"
        path.write_text(kernel)
        kf = parse_kernel_text(kernel, backend, path=path)
        comp = tools.compile(kf)
        if not comp.ok:
            feedback = f"Compile errors:\n{compile_feedback(comp)}"
            outcome = f"does not compile: {comp.reason}"
        else:
            run = tools.harness.run(comp, kf, mode="verify")
            if run.correct:
                emit(run_dir, "write", f"writer attempt {attempt}: correct on every shape "
                     "group; it is the baseline", t0=t0, iteration=0, agent="writer",
                     tokens=writer.last_usage, refs={"kernel": str(path)}, ok=True,
                     correct=True)
                return path
            # what the writer reads: the rows' data fields, never the judge's words
            feedback = f"Wrong results:\n{wrong_result_feedback(run.rows, tol)}"
            outcome = f"not correct: {run.first_failure()}"
        emit(run_dir, "write", f"writer attempt {attempt}: {outcome}"[:300], t0=t0,
             iteration=0, agent="writer", tokens=writer.last_usage, refs={"kernel": str(path)},
             ok=False)
        last = outcome
        if attempt < MAX_ATTEMPTS:
            kernel = writer.fix(task, plan, kernel, feedback, attempt)
    raise AgentUnavailable(f"the writer wrote no correct first kernel for {spec.name} in "
                           f"{MAX_ATTEMPTS} attempts; last: {last}"[:400])
