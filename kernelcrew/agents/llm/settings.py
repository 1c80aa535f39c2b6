"""LLM settings: one typed object built from `RunContext.llm` with environment fallbacks.

The API key is read from the settings or `OPENAI_API_KEY` and is never written anywhere:
it is excluded from `repr`, from `public()` and from every file this package writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal
from urllib.parse import urlparse

from kernelcrew.errors import InputError

Method = Literal["json_schema", "function_calling", "json_mode", "text"]
# "text": a plain completion with the schema in the prompt, parsed by us; nothing for the
# server to constrain (grammar-constrained sampling is slow on small local servers)
METHODS: tuple[Method, ...] = ("json_schema", "function_calling", "json_mode", "text")
CapParam = Literal["both", "max_tokens", "max_completion_tokens"]
CAP_PARAMS: tuple[CapParam, ...] = ("both", "max_tokens", "max_completion_tokens")
ReplayMissing = Literal["stop", "live"]
LOCAL_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any non-empty key


def _env_float(name: str) -> float | None:
    v = os.environ.get(name)
    if v in (None, ""):
        return None
    try:
        return float(v)
    except ValueError:
        raise InputError(f"{name}={v!r} is not a number", field=name) from None


def _flag(value: Any, env_value: str) -> bool:
    if value is not None:
        return bool(value)
    return env_value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(kw_only=True)
class LLMSettings:
    model: str = field(metadata={"description": "model name (--model, KERNELCREW_LLM_MODEL)"})
    base_url: str | None = field(default=None, metadata={
        "description": "OpenAI-compatible endpoint ending in /v1 (--base-url, OPENAI_BASE_URL); "
                       "None: api.openai.com"})
    api_key: str = field(default="", repr=False, metadata={
        "description": "OPENAI_API_KEY; never written to disk or the trace"})
    temperature: float | None = field(default=None, metadata={
        "description": "sampling temperature (--temperature); None: the server's default"})
    timeout: float = field(default=120.0, metadata={
        "description": "seconds per request (--llm-timeout, KERNELCREW_LLM_TIMEOUT)"})
    structured_output: Method = field(default="json_schema", metadata={
        "description": "first structured-output method to try (--structured-output, "
                       "KERNELCREW_LLM_STRUCTURED_OUTPUT); a server that refuses it falls back "
                       "to function_calling, then json_mode"})
    retries: int = field(default=3, metadata={
        "description": "retries of a request after a timeout, 429 or 5xx "
                       "(KERNELCREW_LLM_RETRIES)"})
    backoff_s: float = field(default=2.0, metadata={
        "description": "first backoff delay, doubled each retry, capped at 30 s "
                       "(KERNELCREW_LLM_BACKOFF)"})
    context_budget: int = field(default=6000, metadata={
        "description": "tokens of context per prompt (KERNELCREW_LLM_CONTEXT_TOKENS)"})
    max_tokens: int | None = field(default=None, metadata={
        "description": "cap on output tokens per call (KERNELCREW_LLM_MAX_TOKENS)"})
    price_input: float | None = field(default=None, metadata={
        "description": "$ per 1M input tokens (KERNELCREW_LLM_PRICE_IN)"})
    price_output: float | None = field(default=None, metadata={
        "description": "$ per 1M output tokens (KERNELCREW_LLM_PRICE_OUT)"})
    methods: tuple[Method, ...] = field(default=METHODS, metadata={
        "description": "the fallback chain of structured-output methods "
                       "(KERNELCREW_LLM_METHODS, comma-separated), e.g. json_schema,text to "
                       "skip the grammar-constrained ones on a slow local server"})
    max_tokens_param: CapParam = field(default="both", metadata={
        "description": "how the output cap is sent (KERNELCREW_LLM_MAX_TOKENS_PARAM): both "
                       "max_tokens and max_completion_tokens (servers read one or the other), "
                       "or only one of them"})
    concurrency: int | None = field(default=None, metadata={
        "description": "requests in flight per endpoint (--llm-concurrency, "
                       "KERNELCREW_LLM_CONCURRENCY); None: the server's slot count when it "
                       "reports one (llama.cpp /props), else unlimited"})
    context_window: int | None = field(default=None, metadata={
        "description": "the model's context in tokens (KERNELCREW_LLM_CONTEXT_WINDOW); None: "
                       "learned from the server (/v1/models, /props, or its 400 message)"})
    probe: bool = field(default=True, metadata={
        "description": "before the first call, ask a local server for its context size, "
                       "tokenizer and slots, and whether its chat template keeps system "
                       "messages (KERNELCREW_LLM_PROBE=0 turns it off)"})
    token_budget: int | None = field(default=None, metadata={
        "description": "the run's token budget (RunContext.token_budget): a call that could "
                       "take the run's LLM calls over it is not made"})
    cost_budget: float | None = field(default=None, metadata={
        "description": "the run's budget in dollars at the price settings "
                       "(RunContext.cost_budget): a call that could go over it is not made"})
    one_call: bool = field(default=False, metadata={
        "description": "plan and code in one call instead of two (KERNELCREW_LLM_ONE_CALL=1): "
                       "for small or slow models, where each call costs most"})
    compact: bool = field(default=False, metadata={
        "description": "short prompts for small models (KERNELCREW_LLM_COMPACT=1): a "
                       "few lines of rules instead of the full rules and format, the plain-"
                       "text answer in one line (MOVE: name) or a code block; the context is "
                       "held to context_budget as usual"})
    replay: str | None = field(default=None, metadata={
        "description": "a run directory whose recorded answers are replayed (--replay)"})
    replay_missing: ReplayMissing = field(default="stop", metadata={
        "description": "a request with no recorded answer: stop the run, or ask the live "
                       "endpoint (--replay-missing)"})

    @classmethod
    def resolve(cls, settings: dict[str, Any] | None = None) -> LLMSettings:
        """Settings (e.g. `RunContext.llm`) over the environment over the defaults."""
        s = {k: v for k, v in (settings or {}).items() if v is not None}
        env = os.environ
        model = s.get("model") or env.get("KERNELCREW_LLM_MODEL")
        if not model:
            raise InputError("no LLM model: pass --model NAME or set KERNELCREW_LLM_MODEL",
                             field="model")
        base_url = s.get("base_url") or env.get("OPENAI_BASE_URL") or None
        key = s.get("api_key") or env.get("OPENAI_API_KEY") or ""
        if not key:
            if s.get("replay") and s.get("replay_missing", "stop") == "stop":
                key = LOCAL_KEY  # answered from the recording: no endpoint is asked
            elif base_url is None or "api.openai.com" in base_url:
                raise InputError("no API key for api.openai.com: set OPENAI_API_KEY (or point "
                                 "--base-url at a local server)", field="api_key")
            key = LOCAL_KEY
        method = s.get("structured_output") or env.get("KERNELCREW_LLM_STRUCTURED_OUTPUT") \
            or "json_schema"
        if method not in METHODS:
            raise InputError(f"structured output method {method!r} is not one of "
                             f"{', '.join(METHODS)}", field="structured_output")
        price = s.get("price") or {}

        def pick(key: str, env_name: str, default: Any, conv: Any = float) -> Any:
            v = s.get(key)
            if v is None:
                v = _env_float(env_name)
            return default if v is None else conv(v)

        cap = s.get("max_tokens_param") or env.get("KERNELCREW_LLM_MAX_TOKENS_PARAM") or "both"
        if cap not in CAP_PARAMS:
            raise InputError(f"max tokens parameter {cap!r} is not one of {', '.join(CAP_PARAMS)}",
                             field="max_tokens_param")
        chain = s.get("methods") or env.get("KERNELCREW_LLM_METHODS") or METHODS
        if isinstance(chain, str):
            chain = tuple(m.strip() for m in chain.split(",") if m.strip())
        bad = [m for m in chain if m not in METHODS]
        if bad or not chain:
            raise InputError(f"structured output methods {bad or chain!r}: use some of "
                             f"{', '.join(METHODS)}", field="methods")
        if method not in chain:
            chain = (method, *chain)
        missing = s.get("replay_missing") or "stop"
        if missing not in ("stop", "live"):
            raise InputError(f"replay_missing {missing!r}: use stop or live",
                             field="replay_missing")
        probe_env = env.get("KERNELCREW_LLM_PROBE", "1").strip().lower()
        out = cls(
            model=model, base_url=base_url, api_key=key,
            temperature=pick("temperature", "KERNELCREW_LLM_TEMPERATURE", None),
            timeout=pick("timeout", "KERNELCREW_LLM_TIMEOUT", 120.0),
            structured_output=method,
            retries=pick("retries", "KERNELCREW_LLM_RETRIES", 3, int),
            backoff_s=pick("backoff_s", "KERNELCREW_LLM_BACKOFF", 2.0),
            context_budget=pick("context_budget", "KERNELCREW_LLM_CONTEXT_TOKENS", 6000, int),
            max_tokens=pick("max_tokens", "KERNELCREW_LLM_MAX_TOKENS", None, int),
            price_input=pick("price_input", "KERNELCREW_LLM_PRICE_IN", price.get("input")),
            price_output=pick("price_output", "KERNELCREW_LLM_PRICE_OUT", price.get("output")),
            max_tokens_param=cap, methods=tuple(chain),
            concurrency=pick("concurrency", "KERNELCREW_LLM_CONCURRENCY", None, int),
            context_window=pick("context_window", "KERNELCREW_LLM_CONTEXT_WINDOW", None, int),
            probe=bool(s.get("probe", probe_env not in ("0", "false", "no", "off"))),
            replay=s.get("replay"), replay_missing=missing,
            token_budget=pick("token_budget", "KERNELCREW_LLM_TOKEN_BUDGET", None, int),
            cost_budget=pick("cost_budget", "KERNELCREW_LLM_COST_BUDGET", None),
            one_call=_flag(s.get("one_call"), env.get("KERNELCREW_LLM_ONE_CALL", "0")),
            compact=_flag(s.get("compact"), env.get("KERNELCREW_LLM_COMPACT", "0")),
        )
        for name in ("concurrency", "context_window", "max_tokens"):
            v = getattr(out, name)
            if v is not None and v < 1:
                raise InputError(f"LLM setting {name}={v} must be at least 1", field=name)
        if out.base_url and not urlparse(out.base_url).scheme.startswith("http"):
            raise InputError(f"base URL {out.base_url!r} must start with http:// or https://",
                             field="base_url")
        return out

    def public(self) -> dict[str, Any]:
        """Everything but the key: safe for the trace and the prompt files."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "api_key"}

    @property
    def endpoint(self) -> str:
        return self.base_url or "https://api.openai.com/v1"

    def cap_kwargs(self, n: int | None, param: CapParam | None = None) -> dict[str, Any]:
        """`ChatOpenAI` arguments that send an output cap of `n` tokens in the form the
        server reads: langchain-openai sends `max_tokens` as `max_completion_tokens`, which
        llama-cpp-python ignores; `max_tokens` itself travels in the request body."""
        if not n:
            return {}
        param = param or self.max_tokens_param
        out: dict[str, Any] = {}
        if param in ("both", "max_completion_tokens"):
            out["max_tokens"] = n
        if param in ("both", "max_tokens"):
            out["extra_body"] = {"max_tokens": n}
        return out

    def cost_usd(self, usage: dict[str, int]) -> float | None:
        """Money for a usage dict, when a price table is set."""
        if self.price_input is None and self.price_output is None:
            return None
        return (usage.get("input_tokens", 0) * (self.price_input or 0.0)
                + usage.get("output_tokens", 0) * (self.price_output or 0.0)) / 1e6

