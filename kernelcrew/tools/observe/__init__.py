"""Observers: profile a kernel and summarize its bottleneck.

Owns the summary template and bottleneck rules (`summary`), the entry point
(`profile`), the CPU profiler (`cpu_profile`: timing, perf counters and samples,
vectorization report), the source analysis it reads (`cpu_source`), the CUDA profiler
(`cuda_profile`) and the Nsight Compute parsers (`ncu`).

May import: everything `judge` may, and `kernelcrew.tools.judge`.
"""
