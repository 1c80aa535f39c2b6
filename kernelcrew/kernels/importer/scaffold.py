"""`kernelcrew new NAME`: an operator folder to fill in by hand, every field commented.

The scaffold is a working operator (y = 2 * x) so `kernelcrew check NAME NAME/baseline.cpp`
passes before anything is edited; replace the parts one by one.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelcrew.errors import InputError

OP_YAML = """\
# {name}: an operator folder written by `kernelcrew new`. Every field is explained; the
# values are a working example (y = 2 * x) to replace with your operator.
name: {name}                 # lowercase letters, digits and _ (the folder's name is usual)
description: y = 2 * x       # one line, shown in `kernelcrew ops` and in reports
family: elementwise          # tag that groups experience in memory: elementwise,
                             # reduction, matmul, transpose, stencil, ...
sizes: [n]                   # the integer size symbols, in the entry's argument order
inputs:                      # arrays the kernel reads, in argument order (const T*)
  x: {{dtype: float32, shape: [n]}}   # dtype: float32 float64 float16 int32 int64
                                     # uint8 int8 uint16 int16 uint32;
                                     # shape: expressions in the sizes, outermost first
outputs:                     # arrays the kernel writes, after the inputs (T*)
  y: {{dtype: float32, shape: [n]}}
# scalars:                   # optional, passed by value after the outputs
#   alpha: {{dtype: float32, value: 2.0}}
cost: {{bytes: 8*n, flops: n}}      # the least work any version must do: bytes moved and
                                   # floating-point operations (for the roofline)
tolerance: {{rtol: 1.0e-5, atol: 1.0e-6}}   # |got - ref| <= atol + rtol * |ref| per element
shapes:                      # groups of cases; weight = importance in the overall speedup
  typical:   {{weight: 1.0,  cases: [{{n: 4194304}}, {{n: 1048576}}]}}   # the sizes you run
  boundary:  {{weight: 0.25, cases: [{{n: 1}}, {{n: 31}}]}}              # edges: 1, tiny, odd
  unaligned: {{weight: 0.5,  cases: [{{n: 1000003}}]}}                 # not a multiple of
                                                                   # any vector width
baselines: {{cpu: baseline.cpp}}   # add `cuda: baseline.cu` for a CUDA baseline; with the LLM
                                 # crew (--agents llm) a folder with no baseline gets one
                                 # written from reference.py
"""

REFERENCE = '''\
"""Reference for {name}: called with every input as float64 (ints stay ints), every
scalar and every size as keyword arguments; returns every output by name."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    return {{"y": 2.0 * x}}
'''

BASELINE = """\
/* kernelcrew
entry: {name}
flags: [-O2]
*/
// The front matter above: `entry` is the exported function, `flags` the compiler flags
// (checked against an allow-list), optional `knobs: {{UNROLL: 4}}` become -DUNROLL=4.
// Parameters, in op.yaml order: inputs (const T*), outputs (T*), scalars, sizes (int64_t).
#include <cstdint>

extern "C" void {name}(const float* x, float* y, int64_t n) {{
  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}}
"""

INPUTS = '''\
"""Optional: inputs for {name}. Without this file inputs are seeded standard normal
(ints: small uniform). Delete it or make the values your operator needs (e.g. positive
values for a log)."""

import numpy as np


def make_inputs(rng: np.random.Generator, **sizes) -> dict[str, np.ndarray]:
    return {{"x": rng.standard_normal(sizes["n"]).astype(np.float32)}}
'''


def scaffold(name: str, dest: Path | None = None, *, force: bool = False) -> Path:
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise InputError(f"operator name {name!r}: use lowercase letters, digits and _",
                         field="NAME")
    folder = Path(dest) if dest else Path.cwd() / name
    if folder.exists() and any(folder.iterdir()) and not force:
        raise InputError("the folder exists and is not empty; choose another --dir or pass "
                         "--force", path=folder)
    folder.mkdir(parents=True, exist_ok=True)
    for fname, template in (("op.yaml", OP_YAML), ("reference.py", REFERENCE),
                            ("baseline.cpp", BASELINE), ("inputs.py", INPUTS)):
        (folder / fname).write_text(template.format(name=name))
    return folder
