"""restrict: `__restrict__` on every pointer parameter of the entry (every kernel and the
functions it calls on CUDA).

Legal because the harness passes each parameter its own buffer, and a helper is in reach
only when every call passes it distinct buffers (`analysis.scope`): no two restrict
pointers of one call can alias. A parameter the function assigns (buffers swapped between
time steps) may come to point at another's buffer, and is left as it is. The rewrite itself lives in `analysis.restrict`, since the
CUDA ldg move starts with it too.
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.restrict import add_restrict, reassigned
from kernelcrew.agents.transforms.kernel_files import entries
from kernelcrew.csource.syntax import Source, find_function, params
from kernelcrew.kernels.kernelfile import KernelFile

__all__ = ["add_restrict", "why_not"]


def why_not(kf: KernelFile) -> str:
    s = Source(kf.body)
    for name in entries(kf):
        fn = find_function(s, name)
        if fn is None:
            continue
        moved = reassigned(fn)
        if any(p.pointer is not None and not p.restrict and p.name not in moved
               for p in params(fn)):
            return f"{name}() still has pointers without restrict (the rewrite failed)"
    return "every pointer parameter in reach is restrict already, but for those the " \
        "function assigns (they may come to point at another's buffer)"
