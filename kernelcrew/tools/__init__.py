"""Measurement: everything that builds, runs, judges or observes a kernel.

Layer: above `kernelcrew.kernels`, `kernelcrew.results`, `kernelcrew.errors` (which it
may import); beside `kernelcrew.agents` (never imported from here, and never importing
this); below `report`, `graph`, `evals` and the CLI.

Inside, from the bottom up, each part importing only those before it:

- `config`, `locks`, `sandbox`: settings, the machine-wide benchmark lock, and the
  confined process every compiler and kernel runs in;
- `backends/`: how kernels are compiled and called on each kind of machine (CPU, CUDA),
  the runtimes the worker loads, the occupancy model and the machine's peaks;
- `judge/`: the worker process, verification against the reference, the timing
  harness, the regression gate and `kernelcrew check`;
- `observe/`: profilers and source analysis that turn a run into a bottleneck summary.
"""
