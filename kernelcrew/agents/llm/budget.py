"""Hard token and cost budgets: a call that would take the run over a budget is not made.

One `Ledger` per run directory and process, shared by every agent of the run (the
specialists in parallel, the coordinator, the critic, the reflector and the writer). It
starts from the calls already recorded under `<run_dir>/llm/` (a resumed run counts what
it spent before), reserves each call's worst case before it is sent (its counted prompt
plus the output cap, or the reserve kept for the answer) and settles the reservation with
the usage the server reports.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import AgentUnavailable


class BudgetSpent(AgentUnavailable):
    """The next call would take the run over its token or cost budget; it was not made."""


@dataclass
class Ledger:
    tokens: int = 0  # reported by the server, all calls so far
    cost_usd: float = 0.0
    reserved_tokens: int = 0  # calls in flight, at their worst case
    reserved_usd: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reserve(self, *, tokens: int, usd: float | None, token_budget: int | None,
                cost_budget: float | None, who: str) -> None:
        """Book a call's worst case, or raise `BudgetSpent` (nothing booked)."""
        with self.lock:
            if token_budget is not None:
                after = self.tokens + self.reserved_tokens + tokens
                if after > token_budget:
                    raise BudgetSpent(
                        f"token budget of {token_budget} reached: {self.tokens} tokens used, "
                        f"the next call ({who}) could take up to {tokens} more; it was not "
                        "made")
            if cost_budget is not None and usd is not None:
                after_usd = self.cost_usd + self.reserved_usd + usd
                if after_usd > cost_budget:
                    raise BudgetSpent(
                        f"cost budget of ${cost_budget:g} reached: ${self.cost_usd:.4f} spent, "
                        f"the next call ({who}) could cost up to ${usd:.4f} more; it was not "
                        "made")
            self.reserved_tokens += tokens
            self.reserved_usd += usd or 0.0

    def settle(self, *, reserved_tokens: int, reserved_usd: float | None, tokens: int,
               usd: float | None) -> None:
        with self.lock:
            self.reserved_tokens = max(0, self.reserved_tokens - reserved_tokens)
            self.reserved_usd = max(0.0, self.reserved_usd - (reserved_usd or 0.0))
            self.tokens += tokens
            self.cost_usd += usd or 0.0


_LEDGERS: dict[str, Ledger] = {}
_LOCK = threading.Lock()


def recorded_spending(run_dir: str | Path) -> tuple[int, float]:
    """Tokens and dollars of every call recorded under `<run_dir>/llm/`."""
    tokens, usd = 0, 0.0
    folder = Path(run_dir) / "llm"
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            r = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        tokens += int((r.get("usage") or {}).get("total_tokens", 0) or 0)
        usd += float(r.get("cost_usd") or 0.0)
    return tokens, usd


def ledger_for(run_dir: str | None) -> Ledger | None:
    if not run_dir:
        return None
    key = str(Path(run_dir).resolve())
    with _LOCK:
        if key not in _LEDGERS:
            tokens, usd = recorded_spending(run_dir)
            _LEDGERS[key] = Ledger(tokens=tokens, cost_usd=usd)
        return _LEDGERS[key]


def forget_ledgers() -> None:
    """Tests and a finished run: the next use reads the records again."""
    with _LOCK:
        _LEDGERS.clear()
