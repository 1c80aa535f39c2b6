"""Argument types, and the settings the parsed flags make (timing, the run's context, the
LLM's). Flags left out leave the library's defaults in place."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# kernelcrew.memory.EMBEDDING_CHOICES, spelled out: importing it would load chromadb for
# every command (a test checks that the two agree).
EMBEDDING_CHOICES = ("auto", "hashed", "minilm")
CACHE_CHOICES = ("cold", "warm", "auto")


def positive(kind: type) -> Callable[[str], Any]:
    """An argparse type: a number above zero (argparse turns the ValueError into a one-line
    `error: argument --reps: ...` and exit code 2)."""
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return v
    parse.__name__ = f"positive {kind.__name__}"
    return parse


POS_INT, POS_FLOAT = positive(int), positive(float)


def fraction(text: str) -> float:
    """An argparse type for --min-speedup and --roofline-done: 0.05 or 5% (at least 0,
    below 10)."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 0.05 or 5%)") from None
    if not 0 <= v < 10:
        raise argparse.ArgumentTypeError(f"must be at least 0 (a fraction: 0.05 is 5%), got {text}")
    return v


fraction.__name__ = "fraction"


def comma_list(items: list[str] | None) -> list[str]:
    """`--ops a,b --ops c` or `--inputs x,y`: the names, in order."""
    return [n.strip() for item in items or [] for n in item.split(",") if n.strip()]


def kernel_backend(args: argparse.Namespace) -> str:
    """--backend, else the backend whose kernel files end like the kernel file given (a
    .cu file is a CUDA kernel), else cpu."""
    if args.backend:
        return args.backend
    if args.kernel:
        from kernelcrew.kernels.formats import format_of_name

        fmt = format_of_name(str(args.kernel))
        if fmt is not None:
            return fmt.backend
    return "cpu"


def bench_from_args(args: argparse.Namespace) -> Any:
    """--reps, --min-speedup and --cache as the judge's BenchSettings."""
    from kernelcrew.tools.config import BenchSettings

    kw: dict[str, Any] = {}
    if getattr(args, "reps", None):
        kw["reps"] = args.reps
    if getattr(args, "min_speedup", None) is not None:
        kw["min_speedup"] = args.min_speedup
    if getattr(args, "cache", None):
        kw["cache"] = args.cache
    return BenchSettings(**kw)


def limits_from_args(args: argparse.Namespace) -> Any:
    from kernelcrew.tools.config import Limits

    return Limits(**({"timeout_s": args.timeout} if args.timeout else {}))


# flags of `optimize` copied onto RunContext fields of the same name when given
_CONTEXT_FIELDS = ("backend", "agents", "max_iters", "patience", "reps", "seed", "memory_dir",
                   "memory_url", "memory_embedding", "approve", "candidates_per_iter",
                   "min_speedup", "cache", "executor", "ray_address", "roofline_done")


def context_from_args(args: argparse.Namespace) -> Any:
    """`optimize`'s flags as the run's RunContext."""
    from kernelcrew.graph.context import RunContext

    ctx = RunContext()
    for name in _CONTEXT_FIELDS:
        v = getattr(args, name, None)
        if v is not None and v is not False:
            setattr(ctx, name, v)
    if args.timeout:
        ctx.timeout_s = args.timeout
    if args.budget_s:
        ctx.wall_budget_s = args.budget_s
    if getattr(args, "token_budget", None):
        ctx.token_budget = args.token_budget
    if getattr(args, "cost_budget", None):
        ctx.cost_budget = args.cost_budget
    if args.no_memory:
        ctx.use_memory = False
    if args.specialists:
        ctx.specialists = comma_list([args.specialists])
    if args.run_dir:
        ctx.run_dir = str(args.run_dir)
    ctx.llm = llm_settings(args)
    return ctx


def llm_settings(args: argparse.Namespace) -> dict:
    """LLM options from flags, falling back to the environment (docs/llm.md)."""
    out = {
        "model": getattr(args, "model", None) or os.environ.get("KERNELCREW_LLM_MODEL"),
        "base_url": getattr(args, "base_url", None) or os.environ.get("OPENAI_BASE_URL"),
        "temperature": getattr(args, "temperature", None),
        "timeout": getattr(args, "llm_timeout", None),
        "structured_output": getattr(args, "structured_output", None),
        "concurrency": getattr(args, "llm_concurrency", None),
        "max_tokens": getattr(args, "max_tokens", None),
        "price_input": getattr(args, "price_in", None),
        "price_output": getattr(args, "price_out", None),
        "replay_missing": getattr(args, "replay_missing", None),
    }
    return {k: v for k, v in out.items() if v is not None}


def replay_overrides(args: argparse.Namespace) -> dict:
    """Settings given with --replay that replace the recorded run's."""
    out: dict = {}
    for name in ("max_iters", "reps", "seed", "memory_dir"):
        v = getattr(args, name, None)
        if v is not None:
            out[name] = v
    if args.no_memory:
        out["use_memory"] = False
    if args.run_dir:
        out["run_dir"] = str(args.run_dir)
    llm = {k: v for k, v in llm_settings(args).items() if k in ("base_url", "model") and v}
    if llm:
        out["llm"] = llm
    return out


def optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None
