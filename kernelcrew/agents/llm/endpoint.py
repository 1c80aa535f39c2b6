"""What kernelcrew learns about one endpoint and model, once per process.

Servers differ in ways a request cannot see: how large the model's context is, which
tokenizer counts the prompt, how many requests it serves at once, and whether its chat
template keeps system messages. `Endpoint` holds what was learned, shared by every agent
that talks to the same endpoint and model:

- context size: the settings (`context_window`), else `/v1/models` (vLLM `max_model_len`,
  `context_length`, llama.cpp `meta.n_ctx_train`), `/props` (llama.cpp
  `default_generation_settings.n_ctx`), else the first 400 that names it;
- prompt tokens: the server's tokenizer (llama.cpp `/tokenize`, llama-cpp-python
  `/extras/tokenize`) where offered, else a conservative estimate (chars / 3 plus a few
  tokens per message for the template);
- slots: `/props` `total_slots`, used as the concurrency limit unless one is set;
- system messages: a preflight probe sends the same tiny request with and without a system
  message (output capped at one token) and compares the prompt tokens the server reports;
  a template that drops system messages is then worked around by carrying the rules and
  the schema in the user message.

Probing is skipped for api.openai.com and when `settings.probe` is off; a probe that fails
leaves the fact unknown and never stops a run.
"""

from __future__ import annotations

import json
import math
import re
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kernelcrew.agents.llm.settings import LLMSettings

PROBE_TIMEOUT_S = 10.0
PROBE_MARK = "kernelcrew-probe"
PROBE_SYSTEM = (f"[{PROBE_MARK}] You are a probe. These words only check whether the chat "
                "template keeps system messages: rules, schema and role all travel here, so "
                "a template that drops this message drops every instruction written in it.")
PROBE_USER = f"[{PROBE_MARK}] Reply with one word."
TEMPLATE_TOKENS_PER_MESSAGE = 8  # role markers and separators the chat template adds

# "Requested tokens (2050) exceed context window of 2048" (llama-cpp-python), "maximum
# context length is 4096 tokens" (OpenAI, vLLM), "the request exceeds the available context
# size (2048 tokens)" / "n_ctx: 2048" (llama.cpp)
_CTX_PATTERNS = (
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"context size \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"n_ctx(?:_slot)?\s*[:=]\s*(\d+)", re.IGNORECASE),
    re.compile(r"context length (?:of|is) (\d+)", re.IGNORECASE),
)
_PROMPT_PATTERNS = (
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),
    re.compile(r"requested tokens \((\d+)\)", re.IGNORECASE),
    re.compile(r"(\d+) tokens? in the messages", re.IGNORECASE),
    re.compile(r"requested (\d+) tokens", re.IGNORECASE),
    re.compile(r"n_prompt_tokens\s*[:=]\s*(\d+)", re.IGNORECASE),
)


def context_from_error(text: str) -> tuple[int | None, int | None]:
    """(context size, prompt tokens) named in a server's error message, when it names them."""
    ctx = next((int(m.group(1)) for p in _CTX_PATTERNS if (m := p.search(text))), None)
    prompt = next((int(m.group(1)) for p in _PROMPT_PATTERNS if (m := p.search(text))), None)
    return ctx, prompt


def is_context_error(text: str) -> bool:
    t = text.lower()
    return any(w in t for w in ("context length", "context_length", "too long",
                                "maximum context", "context window", "context size",
                                "exceed_context", "exceeds the available context"))


def estimate_tokens(text: str) -> int:
    """A conservative count when the server's tokenizer is not available: real tokenizers
    give 3.5-4.5 characters per token on prose and code; 3 over-counts on purpose."""
    return math.ceil(len(text) / 3)


@dataclass
class Endpoint:
    key: tuple[str, str]
    root: str  # base URL without the trailing /v1
    context: int | None = None
    context_source: str = ""
    slots: int | None = None
    tokenize_path: str | None = None  # "/tokenize" or "/extras/tokenize"
    system_dropped: bool | None = None
    system_probe: str = ""
    probed: bool = False
    ratio: float | None = None  # server tokens / estimate, from the last tokenizer answer
    scale: float = 1.0  # learned from a 400 that counted more prompt tokens than we did
    cap_param: str | None = None  # learned from a 400 that refused one form of the cap
    no_temperature: bool = False  # learned from a 400 that refused the temperature
    notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    probe_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    gate: threading.BoundedSemaphore | None = field(default=None, repr=False)
    gate_size: int | None = None

    # -- facts -----------------------------------------------------------------------------
    def public(self) -> dict[str, Any]:
        return {"context": self.context, "context_source": self.context_source,
                "slots": self.slots, "tokenizer": self.tokenize_path or "estimate (chars/3)",
                "system_dropped": self.system_dropped, "system_probe": self.system_probe,
                "concurrency": self.gate_size, "learned": list(self.notes)}

    def learn_context(self, n: int, source: str) -> None:
        if n and n > 0 and (self.context is None or self.context_source.startswith("400")
                            or source.startswith("settings")):
            self.context, self.context_source = int(n), source

    def count(self, text: str, n_messages: int = 1) -> tuple[int, str]:
        """Tokens of a prompt (its messages' text joined), with how they were counted."""
        overhead = TEMPLATE_TOKENS_PER_MESSAGE * max(1, n_messages)
        est = estimate_tokens(text)
        if self.tokenize_path:
            n = self._tokenize(text)
            if n is not None:
                if est:  # how the estimate compares with this server's tokenizer
                    self.ratio = n / est
                return math.ceil((n + overhead) * self.scale), "server tokenizer"
        if self.ratio is not None:  # the tokenizer was busy: the estimate as calibrated, +10%
            return math.ceil((est * self.ratio * 1.1 + overhead) * self.scale), \
                "estimate calibrated on the server tokenizer"
        return math.ceil((est + overhead) * self.scale), "estimate"

    def _tokenize(self, text: str) -> int | None:
        body = {"content": text} if self.tokenize_path == "/tokenize" else {"input": text}
        data = _http_json(self.root + (self.tokenize_path or ""), body, timeout=30.0)
        if isinstance(data, dict):
            if isinstance(data.get("count"), int):
                return data["count"]
            if isinstance(data.get("tokens"), list):
                return len(data["tokens"])
        return None

    # -- concurrency -----------------------------------------------------------------------
    def semaphore(self, settings: LLMSettings) -> threading.BoundedSemaphore | None:
        with self.lock:
            want = settings.concurrency or self.slots
            if want != self.gate_size:
                self.gate_size = want
                self.gate = threading.BoundedSemaphore(want) if want else None
            return self.gate


_ENDPOINTS: dict[tuple[str, str], Endpoint] = {}
_REG_LOCK = threading.Lock()


def endpoint_for(settings: LLMSettings) -> Endpoint:
    key = (settings.endpoint, settings.model)
    with _REG_LOCK:
        ep = _ENDPOINTS.get(key)
        if ep is None:
            root = re.sub(r"/v\d+/?$", "", settings.endpoint.rstrip("/"))
            ep = _ENDPOINTS[key] = Endpoint(key=key, root=root)
        if settings.context_window:
            ep.learn_context(settings.context_window, "settings (KERNELCREW_LLM_CONTEXT_WINDOW)")
        return ep


def forget_endpoints() -> None:
    """Forget what was learned (tests start each case from nothing)."""
    with _REG_LOCK:
        _ENDPOINTS.clear()


def _http_json(url: str, body: dict | None = None, timeout: float = PROBE_TIMEOUT_S) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            if r.status != 200:
                return None
            return json.loads(r.read() or b"null")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _find_context(models: Any, model: str) -> int | None:
    items = models.get("data") if isinstance(models, dict) else None
    if not isinstance(items, list):
        return None
    chosen = [m for m in items if isinstance(m, dict) and m.get("id") == model] or \
        [m for m in items if isinstance(m, dict)]
    for m in chosen[:1]:
        for k in ("max_model_len", "context_length", "context_window", "n_ctx",
                  "max_context_length"):
            if isinstance(m.get(k), int):
                return m[k]
        meta = m.get("meta") or {}
        for k in ("n_ctx", "n_ctx_train"):
            if isinstance(meta.get(k), int):
                return meta[k]
    return None


def probe(settings: LLMSettings, chat: Any | None = None) -> Endpoint:
    """Learn what the server tells (once per process and endpoint); `chat` (a ChatOpenAI)
    also runs the system-message probe. Never raises."""
    ep = endpoint_for(settings)
    with ep.probe_lock:  # the other agents wait: no request goes out before the facts are in
        if not ep.probed:
            try:
                _probe(ep, settings, chat)
            finally:
                ep.probed = True
    return ep


def _probe(ep: Endpoint, settings: LLMSettings, chat: Any | None) -> None:
    if not settings.probe or settings.base_url is None or "api.openai.com" in settings.endpoint:
        return
    models = _http_json(settings.endpoint.rstrip("/") + "/models")
    n = _find_context(models, settings.model)
    if n:
        ep.learn_context(n, "/v1/models")
    props = _http_json(ep.root + "/props")
    if isinstance(props, dict):
        gen = props.get("default_generation_settings") or {}
        n = gen.get("n_ctx") or props.get("n_ctx")
        if isinstance(n, int):
            ep.learn_context(n, "/props")
        if isinstance(props.get("total_slots"), int) and props["total_slots"] > 0:
            ep.slots = props["total_slots"]
    for path, body in (("/tokenize", {"content": "kernel"}),
                       ("/extras/tokenize", {"input": "kernel"})):
        data = _http_json(ep.root + path, body)
        if isinstance(data, dict) and isinstance(data.get("tokens"), list):
            ep.tokenize_path = path
            break
    if chat is not None:
        _probe_system(ep, settings, chat)


def _prompt_tokens(chat: Any, messages: list[Any]) -> int | None:
    out = chat.invoke(messages)
    um = getattr(out, "usage_metadata", None) or {}
    n = um.get("input_tokens")
    return int(n) if n else None


def _probe_system(ep: Endpoint, settings: LLMSettings, chat: Any) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    try:
        probe_chat = chat.bind(**settings.cap_kwargs(1, ep.cap_param))
        with_sys = _prompt_tokens(probe_chat, [SystemMessage(PROBE_SYSTEM),
                                               HumanMessage(PROBE_USER)])
        without = _prompt_tokens(probe_chat, [HumanMessage(PROBE_USER)])
    except Exception as e:  # noqa: BLE001 - the probe is advice; the real call decides
        ep.system_probe = f"probe failed ({type(e).__name__}); system messages kept as sent"
        return
    if with_sys is None or without is None:
        ep.system_probe = "the server reports no prompt tokens; system messages kept as sent"
        return
    sys_tokens = estimate_tokens(PROBE_SYSTEM) // 2  # at least this many if it was kept
    ep.system_dropped = (with_sys - without) < sys_tokens // 2
    ep.system_probe = (f"prompt tokens {with_sys} with a system message, {without} without: "
                       + ("the chat template drops system messages; rules and schema go in "
                          "the user message" if ep.system_dropped else "system messages kept"))
