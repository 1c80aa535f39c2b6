"""Backends: compiling and calling kernels on one kind of machine.

Owns the `Backend` interface and its CPU (g++) and CUDA (nvcc, CuPy) implementations,
the compiler driver, the runtimes the worker loads (`buffers`, `cuda_runtime`), the
CUDA occupancy model and the measured machine peaks (`peaks`).

May import: `kernelcrew.errors`, `kernelcrew.results`, `kernelcrew.kernels`, and
`kernelcrew.tools.{config,locks,sandbox}`. Not `judge` or `observe`.
"""
