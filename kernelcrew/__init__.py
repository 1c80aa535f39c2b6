"""kernelcrew: LLM agents in the kernel tuning loop (observe, plan, execute, verify, reflect)."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "build_graph"]


def build_graph(*args: Any, **kwargs: Any) -> Any:
    """The compiled LangGraph graph of the crew (see kernelcrew.graph.build)."""
    from kernelcrew.graph.build import build_graph as _build

    return _build(*args, **kwargs)
