"""`make bench`: the crew and its peers side by side, written to docs/results.md; the
parts and the command line are in kernelcrew/evals/bench/main.py."""


from kernelcrew.evals.bench.main import main
from kernelcrew.evals.bench.report import goal_rows, render
from kernelcrew.evals.bench.section import BenchRun, Progress, Section
from kernelcrew.evals.bench.sections.knobs import KnobSearch, knob_search, retime, same_kernel
from kernelcrew.evals.bench.sections.memory import MEMORY_PAIR, MemoryRun, memory_benefit
from kernelcrew.evals.bench.sections.suite import gate_noise

__all__ = ["MEMORY_PAIR", "BenchRun", "KnobSearch", "MemoryRun", "Progress", "Section",
           "gate_noise", "goal_rows", "knob_search", "main", "memory_benefit", "render",
           "retime", "same_kernel"]
