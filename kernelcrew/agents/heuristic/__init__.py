"""The offline, rule-based specialists: decisions from profile evidence (or the source
when there is no profile), changes made by the named transformations in
`kernelcrew.agents.transforms`."""

from kernelcrew.agents.heuristic.base import HeuristicSpecialist, Move
from kernelcrew.agents.heuristic.compiler_flags import CompilerFlags
from kernelcrew.agents.heuristic.loop import Loop
from kernelcrew.agents.heuristic.memory_access import MemoryAccess

# read by kernelcrew.agents.specialist when the "heuristic" policy is first used
SPECIALISTS = {
    "memory_access": MemoryAccess,
    "loop": Loop,
    "compiler_flags": CompilerFlags,
}

__all__ = ["SPECIALISTS", "CompilerFlags", "HeuristicSpecialist", "Loop", "MemoryAccess", "Move"]
