"""The local executor: every evaluation here, one after another (the default)."""

from __future__ import annotations

import socket
import time

from kernelcrew.tools.executor.base import EvalResult, Evaluation, OnResult
from kernelcrew.tools.executor.workbench import Workbench


class LocalExecutor:
    name = "local"

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.host = socket.gethostname()

    def evaluate(self, batch: list[Evaluation], on_result: OnResult | None = None
                 ) -> list[EvalResult]:
        out = []
        for e in batch:
            t0 = time.time()
            r = self.bench.run(e)
            r.executor, r.node, r.host = self.name, "local", self.host
            r.started, r.finished = t0, time.time()
            if on_result is not None:
                on_result(r)
            out.append(r)
        return out

    def candidate_slots(self, requested: int) -> int:
        return requested

    def close(self) -> None:
        pass
