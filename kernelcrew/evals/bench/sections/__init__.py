"""The parts of `make bench`, in the order they run and appear in docs/results.md.

Add a part by writing a module with a `SECTION` (see kernelcrew/evals/bench/section.py) and
listing it here.
"""

from kernelcrew.evals.bench.section import Section
from kernelcrew.evals.bench.sections import (
                                             baseline_only,
                                             codebases,
                                             cuda,
                                             executors,
                                             knobs,
                                             library,
                                             memory,
                                             numpy,
                                             overhead,
                                             roofline,
                                             suite,
)

SECTIONS: list[Section] = [
    suite.SECTION,  # 1: the crew on the library (NumPy timed after each op)
    baseline_only.SECTION,  # 2
    memory.SECTION,  # 3
    overhead.SECTION,  # 4: reads the crew runs of the parts before it
    numpy.SECTION,  # 5a
    knobs.SECTION,  # 5b: Kernel Tuner
    roofline.SECTION,  # 5c
    library.SECTION,  # 6: every op with its peers side by side
    executors.SECTION,  # 7: local against Ray with two local nodes
    codebases.SECTION,  # 8: functions imported from public C code bases, with their peers
    cuda.SECTION,  # 9: the CUDA kernels and their peers (a device only)
]
