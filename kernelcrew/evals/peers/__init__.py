"""Peers the crew is measured against, on the same machine in the same run.

- `kernel_tuner`: Kernel Tuner (its C backend) on the knob space of a tunable kernel file;
- `numpy_peer`: NumPy's idiomatic expression of each operator, timed in its own process;
- `side_by_side`: the baseline, the compiler alone (the baseline at -O3 -march=native), the
  hand-written fast kernel and the crew's best, timed in one harness in alternating rounds;
- `roofline`: the physical bound, with the bandwidth peak measured in the kernels' cache
  state (`cache_peak`).

The names below are the package's interface; the modules hold one concern each.
"""

from kernelcrew.evals.peers.common import (
                                           close_enough,
                                           make_inputs,
                                           peer_env,
                                           reference_outputs,
                                           run_child,
                                           typical_cases,
)
from kernelcrew.evals.peers.kernel_tuner import (
                                           PEER_TIMEOUT_S,
                                           STRATEGIES,
                                           TUNABLE_DIR,
                                           WITHIN,
                                           KernelTunerResult,
                                           StrategyResult,
                                           evals_to_target,
                                           kernel_tuner_peer,
                                           knob_space,
                                           space_size,
                                           strategy_options,
                                           timing_wrapper,
                                           tunable_op_folder,
                                           tunable_path,
                                           tuning_case,
)
from kernelcrew.evals.peers.numpy_expressions import NUMPY_EXPRESSIONS
from kernelcrew.evals.peers.numpy_peer import NumpyCase, NumpyResult, numpy_peer
from kernelcrew.evals.peers.roofline import Bound, Peaks, bound_for, machine_peaks

__all__ = [
    "NUMPY_EXPRESSIONS", "PEER_TIMEOUT_S", "STRATEGIES", "TUNABLE_DIR", "WITHIN", "Bound",
    "KernelTunerResult", "NumpyCase", "NumpyResult", "Peaks", "StrategyResult", "bound_for",
    "close_enough", "evals_to_target", "kernel_tuner_peer", "knob_space", "machine_peaks",
    "make_inputs", "numpy_peer", "peer_env", "reference_outputs", "run_child", "space_size",
    "strategy_options", "timing_wrapper", "tunable_op_folder", "tunable_path", "tuning_case",
    "typical_cases",
]
