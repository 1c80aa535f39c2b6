"""Named, re-appliable transformations of whole kernel files: the moves.

    apply_transform(name, kernel_text, params)   # the new kernel file text, or None
    apply_change(change, kernel_text)            # replay a proposal's change on another base
    register_transform(name, backends, doc, fn)  # a move of your own (docs/moves.md)
    catalogue.not_applicable(kernel_text)        # why each move does not apply

The package in layers, each importing only those above it in this list:

- `kernelcrew.csource` (outside the package, shared with the profiler): the tree-sitter
  syntax layer and affine subscripts;
- `analysis/`: what the moves read (dependence, reductions, which helpers are in reach,
  OpenMP pragmas, dot-product nests, prefix sums) and the helpers they share;
- `views/`: the same function written the way the moves read best (counters scoped,
  macros expanded, helpers inlined, pointer walks indexed...);
- `kernel_files`, `registry`, `reasons`, `regions`: kernel files, the registry of moves,
  what a move's `why_not` reads, which code regions a change touched;
- the moves, one module each (or a few close ones): `cpu/`, `cuda/`, `any_backend/`; a
  move never imports another (`kernelcrew.layers` checks it);
- `catalogue`: every built-in move's registration line, and `not_applicable`.
"""

from __future__ import annotations

# importing the catalogue registers the built-in moves
from kernelcrew.agents.transforms.analysis.restrict import add_restrict
from kernelcrew.agents.transforms.any_backend.unroll import unroll
from kernelcrew.agents.transforms.catalogue import describe, not_applicable
from kernelcrew.agents.transforms.cpu.accumulators import accumulators
from kernelcrew.agents.transforms.cpu.fusion import fuse_loops
from kernelcrew.agents.transforms.cpu.loop_nests import interchange, swap_loops, tile
from kernelcrew.agents.transforms.cpu.omp_parallel import omp_parallel_outer
from kernelcrew.agents.transforms.cpu.private_bins import helper_extents
from kernelcrew.agents.transforms.cpu.register_block import register_block
from kernelcrew.agents.transforms.cpu.register_tile import register_tile
from kernelcrew.agents.transforms.cpu.simd import omp_simd_inner
from kernelcrew.agents.transforms.cpu.unroll_and_jam import unroll_and_jam
from kernelcrew.agents.transforms.cpu.vector_exp_erf import vector_math
from kernelcrew.agents.transforms.cpu.vector_tanh_log import vector_math_ext
from kernelcrew.agents.transforms.cuda.kernel_attributes import grid_stride, launch_bounds, ldg
from kernelcrew.agents.transforms.kernel_files import Outcome, edit_flags, entries, parse_any
from kernelcrew.agents.transforms.regions import changed_regions
from kernelcrew.agents.transforms.registry import (
    TRANSFORMS,
    Transform,
    apply_change,
    apply_transform,
    register_transform,
    set_block,
    transform_names,
)
from kernelcrew.agents.transforms.views.inline_helpers import inline_calls

__all__ = [
    "TRANSFORMS",
    "Outcome",
    "Transform",
    "accumulators",
    "add_restrict",
    "apply_change",
    "apply_transform",
    "changed_regions",
    "describe",
    "edit_flags",
    "entries",
    "fuse_loops",
    "grid_stride",
    "helper_extents",
    "inline_calls",
    "interchange",
    "launch_bounds",
    "ldg",
    "not_applicable",
    "omp_parallel_outer",
    "omp_simd_inner",
    "parse_any",
    "register_block",
    "register_tile",
    "register_transform",
    "set_block",
    "swap_loops",
    "tile",
    "transform_names",
    "unroll",
    "unroll_and_jam",
    "vector_math",
    "vector_math_ext",
]
