"""The one place kernelcrew talks to an LLM: `ChatOpenAI` against any OpenAI-compatible
endpoint, structured output with a fallback chain, retries with backoff, usage and a
record of every call.

- Structured output: `with_structured_output(schema, method=..., include_raw=True)`; the
  method starts at `settings.structured_output` (default json_schema, which OpenAI, vLLM,
  Ollama and llama.cpp accept). A server that refuses it with a 4xx (DeepSeek refuses
  json_schema, llama.cpp without --jinja refuses tools) moves the client down the chain
  json_schema -> function_calling -> json_mode; the method that worked is remembered
  per endpoint and model for the rest of the process.
- Transient failures (timeouts, connection errors, 429, 5xx) are retried with
  exponential backoff; after `settings.retries` retries `LLMUnavailable` is raised, which
  the graph turns into a clean stop with the best kernel kept.
- Malformed or incomplete output (bad JSON, a missing field, a kernel that fails its own
  checks, an answer cut off at the token limit) is asked for again once, with the error.
- A refusal of a structured-output method is recognized by what it says (any 4xx or 5xx
  naming response_format, tools, tool_choice, json_schema or grammar) and moves down the
  chain at once, without backoff.
- The output cap goes out as `max_tokens` and `max_completion_tokens` (servers read one or
  the other); a server that refuses one form gets the other from then on.
- Before a request is sent its prompt is counted (the server's tokenizer where offered,
  else a conservative estimate) against the model's context (see `endpoint`): a prompt
  that cannot fit raises `PromptTooLarge`, before any request, naming both sizes.
- System messages are merged into one; where the probe found that the chat template drops
  them, their text travels at the top of the user message instead.
- Requests per endpoint are limited (`settings.concurrency`, or the server's slots).
- Every answer is classified (usable, malformed, truncated, schema, wrong_signature,
  invalid, filtered) in `answers`, for the trace and the run's totals.
- With `settings.replay` the answers come from a recorded run (`replay`).
- Every call's messages, response, usage and errors go to `<run_dir>/llm/`; the API key
  never does.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import openai
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from kernelcrew.agents.llm.endpoint import (
    Endpoint,
    context_from_error,
    endpoint_for,
    is_context_error,
    probe,
)
from kernelcrew.agents.llm.prompts import render
from kernelcrew.agents.llm.replay import Recording, prompt_text
from kernelcrew.agents.llm.settings import METHODS, LLMSettings, Method
from kernelcrew.errors import AgentUnavailable

MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 60.0
RAW_IN_REPAIR = 4000  # characters of the bad answer quoted back to the model

# parsed answer -> None if usable, else the error text, or (kind, error text)
Validator = Callable[[BaseModel], "str | tuple[str, str] | None"]
OUTPUT_RESERVE = 1024  # tokens kept free for the answer when no output cap is set
ANSWER_KINDS = ("usable", "malformed", "truncated", "schema", "wrong_signature", "invalid",
                "filtered")


class LLMUnavailable(AgentUnavailable):
    """The LLM endpoint cannot be used: unreachable, not answering after retries, refusing
    every structured-output method, or rejecting the credentials/model. One line."""


class PromptTooLarge(LLMUnavailable):
    """The prompt and the output cap do not fit the model's context; nothing was sent."""

    def __init__(self, message: str, *, prompt_tokens: int, context: int, reserve: int) -> None:
        super().__init__(message)
        self.prompt_tokens, self.context, self.reserve = prompt_tokens, context, reserve

    @property
    def overflow(self) -> int:
        return self.prompt_tokens + self.reserve - self.context


# (endpoint, model) -> the structured-output method the server accepted
_WORKING_METHOD: dict[tuple[str, str], Method] = {}
_WM_LOCK = threading.Lock()


def new_usage() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "calls": 0}


def add_usage(total: dict[str, int], usage: dict[str, int]) -> None:
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        total[k] = total.get(k, 0) + int(usage.get(k, 0) or 0)
    total["calls"] = total.get("calls", 0) + 1


def one_line(text: str, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def build_chat_model(settings: LLMSettings, cap_param: str | None = None) -> Any:
    """The `ChatOpenAI` for these settings; our own loop does the retries (max_retries=0)."""
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {
        "model": settings.model, "base_url": settings.base_url, "api_key": settings.api_key,
        "temperature": settings.temperature, "timeout": settings.timeout, "max_retries": 0,
        "use_responses_api": False}
    kwargs.update(settings.cap_kwargs(settings.max_tokens, cap_param))  # type: ignore[arg-type]
    return ChatOpenAI(**kwargs)


def check_reachable(settings: LLMSettings, timeout: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at the endpoint.

    Only a TCP connect: a server that accepts and then hangs is left to the request
    timeouts, so that run still starts and stops cleanly with its best kernel.
    """
    url = urlparse(settings.endpoint)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    if urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return  # requests go through a proxy: a direct connect says nothing
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise LLMUnavailable(f"LLM endpoint {settings.endpoint} is unreachable ({why}); start "
                             "the server or fix --base-url / OPENAI_BASE_URL") from None


def _status(e: Exception) -> int | None:
    return getattr(e, "status_code", None)


def _is_transient(e: Exception) -> bool:
    if isinstance(e, openai.APIConnectionError | openai.RateLimitError |
                  openai.InternalServerError):  # APITimeoutError is an APIConnectionError
        return True
    s = _status(e)
    return s is not None and (s >= 500 or s in (408, 409, 425, 429))


_METHOD_WORDS = ("response_format", "json_schema", "tool_choice", "tools", "tool call",
                 "function call", "functions", "grammar", "json_object", "--jinja")


def _is_method_refusal(e: Exception) -> bool:
    """The server refuses the structured-output method: a 400/422 that is not about the
    prompt's length, or any 4xx/5xx whose message names the method's parameters (llama-cpp-
    python answers a json_schema it cannot compile with HTTP 500)."""
    msg = str(getattr(e, "body", None) or "") + " " + str(e)
    low = msg.lower()
    if is_context_error(low) or _cap_refused(e):
        return False
    if isinstance(e, openai.BadRequestError | openai.UnprocessableEntityError):
        return True
    s = _status(e)
    return s is not None and s >= 400 and s not in (401, 403, 404, 408, 429) and any(
        w in low for w in _METHOD_WORDS)


def _cap_refused(e: Exception) -> str | None:
    """The form of the output cap a 4xx refuses ("max_tokens" or "max_completion_tokens")."""
    s = _status(e)
    if s is None or not 400 <= s < 500:
        return None
    low = str(e).lower()
    if "unsupported parameter" in low or "not supported" in low or "unrecognized" in low \
            or "extra inputs" in low or "unknown" in low:
        if "max_completion_tokens" in low:
            return "max_completion_tokens"
        if "max_tokens" in low:
            return "max_tokens"
    return None


def _retry_after(e: Exception) -> float | None:
    resp = getattr(e, "response", None)
    try:
        v = resp.headers.get("retry-after") if resp is not None else None
        return min(float(v), MAX_RETRY_AFTER_S) if v else None
    except (TypeError, ValueError):
        return None


def _error_text(e: Exception) -> str:
    s = _status(e)
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and body.get("message"):
        body = str(body["message"])
    else:
        body = getattr(e, "message", None) or str(e) or type(e).__name__
        body = re.sub(r"^Error code: \d+ - ", "", body)
    if isinstance(e, openai.APITimeoutError):
        return "request timed out"
    if isinstance(e, openai.APIConnectionError):
        cause = e.__cause__ or e.__context__
        return f"connection error ({one_line(cause or body, 120)})"
    return f"HTTP {s}: {one_line(body, 200)}" if s else one_line(body, 200)


def _raw_text(raw: Any) -> str:
    """The model's answer as text, whatever the method (content or tool-call arguments)."""
    if raw is None:
        return ""
    calls = getattr(raw, "tool_calls", None) or []
    if calls:
        return json.dumps(calls[0].get("args", {}))
    bad = getattr(raw, "invalid_tool_calls", None) or []
    if bad:
        return str(bad[0].get("args") or "")
    content = getattr(raw, "content", "")
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_JSON_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)


def json_text(text: str) -> str:
    """The JSON in an answer: without <think> blocks, Markdown fences or prose around it."""
    t = _THINK.sub("", text).strip()
    if t.startswith("{"):
        return t
    m = _JSON_FENCE.search(t)
    if m:
        return m.group(1).strip()
    if "{" in t and "}" in t:
        return t[t.index("{"): t.rindex("}") + 1]
    return t


def _stopped_text(finish: str | None, text: str) -> str:
    if finish == "content_filter":
        return "The answer was stopped by the server's content filter."
    valid = ""
    try:
        json.loads(json_text(text))
    except json.JSONDecodeError:
        valid = " and is not valid JSON"
    return ("The answer was cut off at the output token limit (finish_reason=length)"
            f"{valid}: keep the plan short and send the whole kernel file.")


def _usage(raw: Any) -> dict[str, int]:
    um = getattr(raw, "usage_metadata", None) or {}
    return {k: int(um.get(k, 0) or 0) for k in ("input_tokens", "output_tokens", "total_tokens")}


def _validation_text(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:4]:
        loc = ".".join(str(p) for p in err["loc"]) or "answer"
        parts.append(f"field '{loc}': {err['msg']}")
    return "; ".join(parts)


def schema_dict(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to the server (a dict, so parsing stays ours for all methods)."""
    d = schema.model_json_schema()
    d["title"] = schema.__name__
    d.setdefault("description", (schema.__doc__ or schema.__name__).strip().splitlines()[0])
    return d


def _kind_of(error: str | tuple[str, str] | None, default: str) -> tuple[str, str]:
    if isinstance(error, tuple):
        return error
    return default, error or "unusable answer"


def _parse_kind(error: str) -> str:
    """The kind of an unusable answer from the parse step's error text."""
    if "cut off at the output token limit" in error:
        return "truncated"
    if "content filter" in error:
        return "filtered"
    if "does not match the schema" in error:
        return "schema"
    return "malformed"


class LLMClient:
    """Structured calls for one agent, with usage, retries, fallbacks and call records."""

    def __init__(self, settings: LLMSettings, *, agent: str, run_dir: str | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.agent = agent
        self.run_dir = run_dir
        self.endpoint: Endpoint = endpoint_for(settings)
        self._cap_param = self.endpoint.cap_param
        self.model = build_chat_model(settings, self._cap_param)
        self.sleep = sleep
        self.usage = new_usage()
        self.files: list[str] = []
        self.answers: list[dict[str, Any]] = []  # one per answer: kind, step, reason, ...
        self.last_error: str | None = None
        self.recording = Recording.open(settings.replay) if settings.replay else None

    def spent(self) -> dict[str, int]:
        """Tokens since the last reset, with `cost_microusd` when prices are set."""
        usage = dict(self.usage)
        cost = self.settings.cost_usd(usage)
        if cost is not None:
            usage["cost_microusd"] = round(cost * 1e6)
        return usage

    def reset(self, run_dir: str | None = None) -> None:
        """Start a new propose/revise: usage, answers and call records from zero."""
        self.usage = new_usage()
        self.files = []
        self.answers = []
        self.last_error = None
        if run_dir is not None:
            self.run_dir = run_dir

    # -- public -----------------------------------------------------------------------
    def ask(self, messages: list[BaseMessage], schema: type[BaseModel], *, step: str,
            iteration: int = 0, validate: Validator | None = None) -> BaseModel | None:
        """One structured answer, or None when it is still unusable after one repair.
        Raises `PromptTooLarge` (nothing sent) when the prompt cannot fit the context."""
        self._prepare()
        parsed, error, raw = self._call(messages, schema, step=step, iteration=iteration,
                                        validate=validate)
        if parsed is not None:
            return parsed
        repair = HumanMessage(render("repair.md", step=step, error=error or "unusable answer",
                                     previous=raw[:RAW_IN_REPAIR] or "(empty)"))
        try:
            parsed, error, _ = self._call([*messages, repair], schema, step=step,
                                          iteration=iteration, repair_of=error,
                                          validate=validate)
        except PromptTooLarge as e:  # the repair itself does not fit: the first answer stands
            parsed, error = None, f"the repair request does not fit the context ({e})"
        if parsed is None:
            self.last_error = f"{step}: unusable answer after one repair: {error}"
        return parsed

    def check_fit(self, messages: list[BaseMessage], schema: type[BaseModel], step: str
                  ) -> dict[str, Any]:
        """The prompt's size against the context, as it would be sent now; raises
        `PromptTooLarge` (nothing is sent) when it cannot fit."""
        self._prepare()
        if self.recording is not None and self.settings.replay_missing == "stop":
            return {}
        return self._check_fit(self._shape(messages, schema, self._method_chain()[0]), step)

    # -- the endpoint ---------------------------------------------------------------------
    def _prepare(self) -> None:
        """Learn the endpoint once (context, tokenizer, slots, template) before the first
        request; a replay that never goes live asks nothing."""
        if self.recording is not None and self.settings.replay_missing == "stop":
            return
        if not self.endpoint.probed:
            probe(self.settings, self.model)

    def _reserve(self) -> int:
        if self.settings.max_tokens:
            return self.settings.max_tokens
        ctx = self.endpoint.context
        return min(OUTPUT_RESERVE, ctx // 4) if ctx else OUTPUT_RESERVE

    def _check_fit(self, msgs: list[BaseMessage], step: str) -> dict[str, Any]:
        text = "\n".join(str(m.content) for m in msgs)
        n, how = self.endpoint.count(text, len(msgs))
        ctx, reserve = self.endpoint.context, self._reserve()
        info = {"prompt_tokens": n, "counted_by": how, "context": ctx, "reserve": reserve}
        if ctx and n + reserve > ctx:
            raise PromptTooLarge(
                f"the {self.agent} {step} prompt needs {n} tokens ({how}) plus {reserve} for "
                f"the answer, but the model's context is {ctx} tokens "
                f"({self.endpoint.context_source}); serve the model with a larger context, "
                "lower KERNELCREW_LLM_MAX_TOKENS or KERNELCREW_LLM_CONTEXT_TOKENS",
                prompt_tokens=n, context=ctx, reserve=reserve)
        return info

    def _shape(self, messages: list[BaseMessage], schema: type[BaseModel] | None,
               method: Method) -> list[BaseMessage]:
        """The messages as sent: one system message first (with the JSON-mode schema in it),
        or none when the chat template drops system messages (then it leads the user text)."""
        system = [str(m.content) for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        if method in ("json_mode", "text") and schema is not None:
            system.append(render("json_mode.md", schema=json.dumps(
                schema_dict(schema), separators=(",", ":"))))
        sys_text = "\n\n".join(t for t in system if t.strip())
        if not sys_text:
            return rest
        if self.endpoint.system_dropped:
            first = next((i for i, m in enumerate(rest) if isinstance(m, HumanMessage)), None)
            if first is None:
                return [HumanMessage(sys_text), *rest]
            lead = f"{sys_text}\n\n---\n\n{rest[first].content}"
            return [*rest[:first], HumanMessage(lead), *rest[first + 1:]]
        return [SystemMessage(sys_text), *rest]

    # -- one logical call: method fallbacks and transport retries ------------------------
    def _method_chain(self) -> list[Method]:
        key = (self.settings.endpoint, self.settings.model)
        chain = list(self.settings.methods or METHODS)
        with _WM_LOCK:
            first = _WORKING_METHOD.get(key, self.settings.structured_output)
        return chain[chain.index(first):] if first in chain else chain

    def _finish(self, record: dict[str, Any], parsed: BaseModel | None, error: Any,
                validate: Validator | None) -> tuple[BaseModel | None, str | None]:
        """Validate a parsed answer and classify the answer; both go into the record."""
        kind = "usable"
        if parsed is not None and validate is not None:
            verdict = validate(parsed)
            if verdict:
                kind, error = _kind_of(verdict, "invalid")
                parsed = None
        elif parsed is None:
            kind = _parse_kind(error or "")
            error = error or "unusable answer"
        record["parsed"] = parsed.model_dump() if parsed is not None else None
        record["error"] = error
        record["answer"] = kind
        self.answers.append({"agent": self.agent, "step": record["step"],
                             "iteration": record["iteration"], "kind": kind,
                             "reason": one_line(error or "", 240) if error else "",
                             "repair": record["repair_of"] is not None,
                             "seconds": record.get("seconds_server"),
                             "usage": record.get("usage"), "replayed": record.get("replayed",
                                                                                  False)})
        return parsed, error

    def _call(self, messages: list[BaseMessage], schema: type[BaseModel], *, step: str,
              iteration: int, repair_of: str | None = None, validate: Validator | None = None
              ) -> tuple[BaseModel | None, str | None, str]:
        record: dict[str, Any] = {
            "agent": self.agent, "iteration": iteration, "step": step,
            "model": self.settings.model, "endpoint": self.settings.endpoint,
            "repair_of": repair_of, "attempts": [], "messages": None, "response": None,
            "parsed": None, "error": None, "usage": None,
            "prompt": prompt_text(messages)}
        t_start = time.monotonic()
        chain = self._method_chain()
        m_idx, retries = 0, 0
        try:
            if self.recording is not None:
                hit = self.recording.take(self.agent, step, record["prompt"])
                if hit is not None:
                    return self._replayed(record, hit, schema, validate)
                miss = self.recording.miss(self.agent, step, iteration, record["prompt"])
                record["replay_miss"] = miss.report
                if self.settings.replay_missing == "stop":
                    raise miss
                self._prepare()
            while True:
                method = chain[m_idx]
                msgs = self._shape(messages, schema, method)
                record["method"] = method
                record["messages"] = [{"role": m.type, "content": str(m.content)} for m in msgs]
                record["fit"] = self._check_fit(msgs, step)
                t0 = time.monotonic()
                gate = self.endpoint.semaphore(self.settings)
                waited = 0.0
                try:
                    runnable = self.model.with_structured_output(
                        schema_dict(schema), method=method, include_raw=True) \
                        if method != "text" else self.model
                    if gate is not None:
                        gate.acquire()
                        waited = time.monotonic() - t0
                    try:
                        out = runnable.invoke(msgs, config={
                            "run_name": f"kernelcrew.{self.agent}.{step}",
                            "tags": ["kernelcrew", self.agent, step],
                            "metadata": {"agent": self.agent, "step": step,
                                         "iteration": iteration, "method": method}})
                    finally:
                        if gate is not None:
                            gate.release()
                    if method == "text":  # a plain completion: we parse it ourselves
                        out = {"raw": out, "parsed": None, "parsing_error": None}
                except openai.APIError as e:
                    why = _error_text(e)
                    record["attempts"].append({"method": method, "error": why,
                                               "seconds": round(time.monotonic() - t0, 3)})
                    cap = _cap_refused(e)
                    if cap and self._cap_param is None and self.settings.max_tokens:
                        # the server refuses one form of the cap: send only the other one
                        other = "max_tokens" if cap == "max_completion_tokens" \
                            else "max_completion_tokens"
                        self._cap_param = self.endpoint.cap_param = other
                        self.model = build_chat_model(self.settings, other)
                        continue
                    if is_context_error(why):
                        n_ctx, n_prompt = context_from_error(why)
                        if n_ctx:
                            self.endpoint.learn_context(n_ctx, "400 message")
                            ours = record["fit"]["prompt_tokens"]
                            if n_prompt and n_prompt > ours:  # our count was low: learn by how much
                                self.endpoint.scale = max(self.endpoint.scale, n_prompt / ours)
                            n = max(n_prompt or 0, ours)
                            raise PromptTooLarge(
                                f"the {self.agent} {step} prompt needs {n} tokens plus "
                                f"{self._reserve()} for the answer, but the model's context is "
                                f"{n_ctx} tokens (the server's 400: {one_line(why, 120)})",
                                prompt_tokens=n, context=n_ctx, reserve=self._reserve())
                        raise LLMUnavailable(
                            f"LLM endpoint {self.settings.endpoint} refused the {self.agent} "
                            f"{step} prompt as too long ({why}); serve the model with a larger "
                            "context or set KERNELCREW_LLM_CONTEXT_WINDOW") from None
                    if _is_method_refusal(e) and m_idx + 1 < len(chain):
                        m_idx += 1  # the server refuses this method: next one, no backoff
                        with _WM_LOCK:  # ... and for every later call, whatever happens next
                            _WORKING_METHOD[(self.settings.endpoint,
                                             self.settings.model)] = chain[m_idx]
                        continue
                    if _is_method_refusal(e):
                        raise LLMUnavailable(
                            f"LLM endpoint {self.settings.endpoint} refuses structured output "
                            f"({', '.join(chain)}); last answer {why}") from None
                    if _is_transient(e) and retries < self.settings.retries:
                        delay = min(MAX_BACKOFF_S, self.settings.backoff_s * 2 ** retries)
                        delay = max(delay, _retry_after(e) or 0.0)
                        retries += 1
                        self.sleep(delay)
                        continue
                    tries = f" after {retries + 1} attempts" if _is_transient(e) else ""
                    raise LLMUnavailable(
                        f"LLM endpoint {self.settings.endpoint} (model {self.settings.model}) "
                        f"failed{tries}: {why}") from None
                except (openai.LengthFinishReasonError,
                        openai.ContentFilterFinishReasonError) as e:
                    # the SDK's json_schema parsing refuses a cut-off answer: it still is an
                    # answer (usage counted) that goes back to the model once
                    out = {"stopped": e}
                except Exception as e:  # noqa: BLE001 - a 200 that is no chat completion
                    # (a proxy's HTML page, a server speaking another API): a clean stop
                    raise LLMUnavailable(
                        f"LLM endpoint {self.settings.endpoint} sent a response that is not an "
                        f"OpenAI chat completion ({type(e).__name__}: {one_line(e, 120)}); "
                        "check --base-url (it usually ends in /v1)") from None
                seconds = time.monotonic() - t0
                record["attempts"].append({"method": method, "error": None,
                                           "seconds": round(seconds, 3),
                                           "waited_s": round(waited, 3)})
                record["seconds_server"] = round(seconds - waited, 3)
                break
            with _WM_LOCK:
                _WORKING_METHOD[(self.settings.endpoint, self.settings.model)] = method
            if "stopped" in out:
                comp = out["stopped"].completion
                u = comp.usage
                usage = {"input_tokens": u.prompt_tokens if u else 0,
                         "output_tokens": u.completion_tokens if u else 0,
                         "total_tokens": u.total_tokens if u else 0}
                text = comp.choices[0].message.content or "" if comp.choices else ""
                finish = comp.choices[0].finish_reason if comp.choices else "length"
                parsed, error = None, _stopped_text(finish, text)
            else:
                raw = out.get("raw")
                if out.get("parsing_error") is not None:  # langchain's view, for the record
                    record["parsing_error"] = one_line(out["parsing_error"])
                usage = _usage(raw)
                text = _raw_text(raw)
                finish = (getattr(raw, "response_metadata", None) or {}).get("finish_reason")
                parsed, error = self._parse(schema, text, finish)
            add_usage(self.usage, usage)
            record["response"] = text
            record["finish_reason"] = finish
            record["usage"] = usage
            record["cost_usd"] = self.settings.cost_usd(usage)
            parsed, error = self._finish(record, parsed, error, validate)
            return parsed, error, text
        except LLMUnavailable as e:
            record["error"] = str(e)
            record["answer"] = None
            raise
        finally:
            record["seconds"] = round(time.monotonic() - t_start, 3)
            self._write(record)

    def _replayed(self, record: dict[str, Any], hit: dict[str, Any], schema: type[BaseModel],
                  validate: Validator | None) -> tuple[BaseModel | None, str | None, str]:
        """The recorded answer, parsed and judged as it was live (same parse, same checks)."""
        text = hit.get("response") or ""
        usage = {k: int((hit.get("usage") or {}).get(k, 0) or 0)
                 for k in ("input_tokens", "output_tokens", "total_tokens")}
        record.update(replayed=True, replay_of=hit.get("file"), method=hit.get("method"),
                      messages=hit.get("messages"), response=text,
                      finish_reason=hit.get("finish_reason"), usage=usage,
                      cost_usd=self.settings.cost_usd(usage))
        add_usage(self.usage, usage)
        if hit.get("response") is None:
            parsed, error = None, hit.get("error") or "no answer was recorded"
        else:
            parsed, error = self._parse(schema, text, hit.get("finish_reason"))
        parsed, error = self._finish(record, parsed, error, validate)
        return parsed, error, text

    @staticmethod
    def _parse(schema: type[BaseModel], text: str, finish: str | None
               ) -> tuple[BaseModel | None, str | None]:
        """Strict JSON (langchain's parser accepts partial JSON: a cut-off answer would
        pass), after removing what local models wrap around it (think tags, fences)."""
        cut = " " + _stopped_text(finish, text) if finish in ("length", "content_filter") else ""
        try:
            data = json.loads(json_text(text))
        except json.JSONDecodeError as e:
            return None, (f"the answer is not valid JSON ({e.msg} at line {e.lineno} "
                          f"column {e.colno}).{cut}")
        if not isinstance(data, dict):
            return None, f"the answer must be one JSON object, not {type(data).__name__}.{cut}"
        try:
            return schema.model_validate(data), None
        except ValidationError as e:
            return None, f"the answer does not match the schema: {_validation_text(e)}.{cut}"

    def _write(self, record: dict[str, Any]) -> None:
        if not self.run_dir:
            return
        folder = Path(self.run_dir) / "llm"
        folder.mkdir(parents=True, exist_ok=True)
        facts = Path(self.run_dir) / "llm-endpoint.json"
        if not facts.exists() and self.endpoint.probed:  # what was learned, once per run
            facts.write_text(json.dumps({"endpoint": self.settings.endpoint,
                                         "model": self.settings.model,
                                         **self.endpoint.public()}, indent=1))
        stem = f"{record['iteration']:02d}-{self.agent}"
        n = len(list(folder.glob(f"{stem}-*.json")))
        data = json.dumps(record, indent=1, default=str).encode()
        while True:  # O_EXCL: parallel agents and resumed runs never overwrite a record
            path = folder / f"{stem}-{n}.json"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                n += 1
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            break
        self.files.append(str(path))
        if self.answers and record.get("answer") and "file" not in self.answers[-1]:
            self.answers[-1]["file"] = str(path)

