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

Method = Literal["json_schema", "function_calling", "json_mode"]
METHODS: tuple[Method, ...] = ("json_schema", "function_calling", "json_mode")
LOCAL_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any non-empty key


def _env_float(name: str) -> float | None:
    v = os.environ.get(name)
    if v in (None, ""):
        return None
    try:
        return float(v)
    except ValueError:
        raise InputError(f"{name}={v!r} is not a number", field=name) from None


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
            if base_url is None or "api.openai.com" in base_url:
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
        )
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

    def cost_usd(self, usage: dict[str, int]) -> float | None:
        """Money for a usage dict, when a price table is set."""
        if self.price_input is None and self.price_output is None:
            return None
        return (usage.get("input_tokens", 0) * (self.price_input or 0.0)
                + usage.get("output_tokens", 0) * (self.price_output or 0.0)) / 1e6

