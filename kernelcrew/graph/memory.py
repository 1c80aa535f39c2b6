"""The run's view of the shared memory pool (Chroma), opened once per process.

A store that is unreachable or damaged costs the run its memory (with a warning),
never the run: every call goes through `SafeMemory`.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from kernelcrew.graph.context import RunContext
from kernelcrew.memory.reflection import Reflection
from kernelcrew.memory.store import MemoryConfigError, MemoryStore, MemoryUnavailable, NullMemory

RETRY_PAUSE_S = 1.0


class SafeMemory:
    def __init__(self, inner: MemoryStore | NullMemory) -> None:
        self.inner = inner

    def _guard(self, what: str, fn, default, tries: int = 1):
        for attempt in range(tries):
            try:
                return fn()
            except MemoryUnavailable as e:
                if attempt + 1 < tries and not isinstance(e, MemoryConfigError):
                    time.sleep(RETRY_PAUSE_S)  # a busy file or a slow disk: once more
                    continue
                warnings.warn(f"kernelcrew memory: {what} failed, continuing without: {e}",
                              stacklevel=3)
                self.inner = NullMemory(str(e))
        return default

    def add(self, r: Reflection) -> str:
        """Store `r`; '' when it is stored, else why not (the run goes on without memory).
        A write is tried twice: losing a reflection costs every later run its lesson."""
        self._guard("add", lambda: self.inner.add(r), None, tries=2)
        return getattr(self.inner, "reason", "") if not self.available else ""

    def search(self, situation: dict[str, Any], **kw: Any) -> list:
        return self._guard("search", lambda: self.inner.search(situation, **kw), [])

    def change_kind_stats(self, **kw: Any) -> dict:
        return self._guard("stats", lambda: self.inner.change_kind_stats(**kw), {})

    @property
    def available(self) -> bool:
        return bool(getattr(self.inner, "available", False))


_OPEN: dict[tuple, SafeMemory] = {}


def memory_for(ctx: RunContext) -> SafeMemory:
    if not ctx.use_memory:
        return SafeMemory(NullMemory("memory disabled for this run (--no-memory)"))
    key = (ctx.memory_dir, ctx.memory_url, ctx.memory_embedding)
    if key not in _OPEN:
        _OPEN[key] = SafeMemory(MemoryStore.open_or_none(
            path=ctx.memory_dir if not ctx.memory_url else None, url=ctx.memory_url,
            embedding=ctx.memory_embedding))
    return _OPEN[key]
