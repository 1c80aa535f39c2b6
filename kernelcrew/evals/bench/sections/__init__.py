"""The parts of `make bench`, in the order they run and appear in docs/results.md.

Add a part by writing a module with a `SECTION` (see kernelcrew/evals/bench/section.py) and
naming it in PARTS where it belongs in the order (docs/peers.md).
"""

from importlib import import_module

from kernelcrew.evals.bench.section import Section

PARTS = (
    "suite",  # 1: the crew on the library (NumPy timed after each op)
    "baseline_only",  # 2
    "memory",  # 3
    "overhead",  # 4: reads the crew runs of the parts before it
    "numpy",  # 5a
    "knobs",  # 5b: Kernel Tuner
    "roofline",  # 5c
    "library",  # 6: every op with its peers side by side
    "executors",  # 7: local against Ray with two local nodes
    "codebases",  # 8: functions imported from public C code bases, with their peers
    "cuda",  # 9: the CUDA kernels and their peers (a device only)
)

SECTIONS: list[Section] = [import_module(f"{__name__}.{name}").SECTION for name in PARTS]
