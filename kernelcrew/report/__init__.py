"""Run reports: read a run directory (context.json, trace.jsonl, result.json, kernel
files) and render what happened, as text, Markdown and HTML.

Layer: above `kernelcrew.tools` (it reads the cached machine peaks) and the bottom
layer (`kernels`, `results`, `trace`, `errors`); below `kernelcrew.graph`, whose
finalize step writes the reports, and `evals`/CLI. It never imports `graph`: a run is
read from its files only, so a run that was killed can still be reported.
"""
