"""The one place kernelcrew talks to an LLM: `ChatOpenAI` against any OpenAI-compatible
endpoint, structured output with a fallback chain, retries with backoff, hard budgets,
usage and a record of every call.

- Structured output: `with_structured_output(schema, method=..., include_raw=True)`; the
  method starts at `settings.structured_output` (default json_schema, which OpenAI, vLLM,
  Ollama and llama.cpp accept). A server that refuses it (its error names response_format,
  tools, json_schema, grammar, ...) moves the client down the chain json_schema ->
  function_calling -> json_mode -> text at once; the method that worked is remembered per
  endpoint and model for the rest of the process.
- Each error is classified by its cause (`failures`): transient ones (timeouts, connection
  errors, 429, 5xx) are retried with exponential backoff, then `LLMUnavailable`; a refused
  form of the output cap switches to the other form; a refused temperature is dropped; a
  cap above the model's limit, a wrong key or model, and any other 400 stop the agent with
  their own words, never as "refuses structured output".
- A refusal (the message's `refusal` field) is an answer of kind `refused`; it is not
  asked again. Malformed or incomplete output is asked for again once, with the error.
- A call is made only when its worst case (the counted prompt plus the output cap) fits
  the run's token and cost budgets (`budget`); otherwise `BudgetSpent`, nothing sent.
- Before a request is sent its prompt is counted (the server's tokenizer where offered,
  else a conservative estimate) against the model's context (see `endpoint`): a prompt
  that cannot fit raises `PromptTooLarge`, before any request, naming both sizes.
- System messages are merged into one; where the probe found that the chat template drops
  them, their text travels at the top of the user message instead.
- Requests per endpoint are limited (`settings.concurrency`, or the server's slots).
- Every answer is classified (usable, malformed, truncated, schema, wrong_signature,
  invalid, filtered, refused) in `answers`, for the trace and the run's totals.
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

from kernelcrew.agents.llm.budget import ledger_for
from kernelcrew.agents.llm.endpoint import (
    Endpoint,
    context_from_error,
    endpoint_for,
    probe,
)
from kernelcrew.agents.llm.failures import Failure, classify, one_line
from kernelcrew.agents.llm.prompts import render
from kernelcrew.agents.llm.replay import Recording, prompt_text
from kernelcrew.agents.llm.settings import METHODS, LLMSettings, Method
from kernelcrew.errors import AgentUnavailable

MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 60.0
RAW_IN_REPAIR = 4000  # characters of the bad answer quoted back to the model

# parsed answer -> None if usable, else the error text, or (kind, error text)
Validator = Callable[[BaseModel], "str | tuple[str, str] | None"]
# an answer that is not JSON -> the schema's fields read from it, or None
TextParser = Callable[[str], "dict[str, Any] | None"]
OUTPUT_RESERVE = 1024  # tokens kept free for the answer when no output cap is set
ANSWER_KINDS = ("usable", "malformed", "truncated", "schema", "wrong_signature", "invalid",
                "move_refused", "filtered", "refused")

__all__ = ["ANSWER_KINDS", "LLMClient", "LLMUnavailable", "PromptTooLarge", "add_usage",
           "build_chat_model", "check_reachable", "json_text", "new_usage", "one_line",
           "schema_dict"]


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


class _NotACompletion(Exception):
    """A 200 whose body is no OpenAI chat completion (a proxy's page, another API)."""


# (endpoint, model) -> the structured-output method the server accepted
_WORKING_METHOD: dict[tuple[str, str], Method] = {}
_WM_LOCK = threading.Lock()


def new_usage() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "calls": 0}


def add_usage(total: dict[str, int], usage: dict[str, int]) -> None:
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        total[k] = total.get(k, 0) + int(usage.get(k, 0) or 0)
    total["calls"] = total.get("calls", 0) + 1


class _ResponseWatch:
    """Looks at each chat-completion response before the SDK parses it, so that a body
    that is no chat completion is told apart from a failure inside the client libraries.
    One per client (an agent's calls are sequential); langchain may send from a worker
    thread, so this is an attribute, not a thread-local."""

    def __init__(self) -> None:
        self.last_seen: tuple[bool, str] = (True, "")

    def hook(self, response: Any) -> None:
        if not str(response.request.url.path).rstrip("/").endswith("/chat/completions"):
            return
        ok, snippet = True, ""
        if response.status_code == 200:
            try:
                response.read()
                data = json.loads(response.content or b"null")
                ok = isinstance(data, dict) and isinstance(data.get("choices"), list)
            except (ValueError, UnicodeDecodeError):
                ok = False
            if not ok:
                snippet = one_line(response.content[:160].decode(errors="replace"), 120)
        self.last_seen = (ok, snippet)

    def last(self) -> tuple[bool, str]:
        return self.last_seen

    def clear(self) -> None:
        self.last_seen = (True, "")


def build_chat_model(settings: LLMSettings, cap_param: str | None = None,
                     watch: _ResponseWatch | None = None, temperature: bool = True) -> Any:
    """The `ChatOpenAI` for these settings; our own loop does the retries (max_retries=0)."""
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {
        "model": settings.model, "base_url": settings.base_url, "api_key": settings.api_key,
        "temperature": settings.temperature if temperature else None,
        "timeout": settings.timeout, "max_retries": 0, "use_responses_api": False}
    kwargs.update(settings.cap_kwargs(settings.max_tokens, cap_param))  # type: ignore[arg-type]
    if watch is not None:
        import httpx

        kwargs["http_client"] = httpx.Client(event_hooks={"response": [watch.hook]})
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


def _retry_after(e: Exception) -> float | None:
    resp = getattr(e, "response", None)
    try:
        v = resp.headers.get("retry-after") if resp is not None else None
        return min(float(v), MAX_RETRY_AFTER_S) if v else None
    except (TypeError, ValueError):
        return None


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


def _refusal(raw: Any) -> str | None:
    """The model's refusal (OpenAI's `message.refusal`), when it refused."""
    if raw is None:
        return None
    text = (getattr(raw, "additional_kwargs", None) or {}).get("refusal")
    if text:
        return str(text)
    content = getattr(raw, "content", None)
    if isinstance(content, list):
        for p in content:
            if isinstance(p, dict) and p.get("type") == "refusal":
                return str(p.get("refusal") or "refused")
    return None


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


def _loads(text: str) -> Any:
    # strict=False: a raw newline or tab inside a string (a kernel written without
    # escaping its line ends, as small models do) is still that string
    return json.loads(json_text(text), strict=False)


def _stopped_text(finish: str | None, text: str) -> str:
    if finish == "content_filter":
        return "The answer was stopped by the server's content filter."
    valid = ""
    try:
        _loads(text)
    except json.JSONDecodeError:
        valid = " and is not valid JSON"
    return ("The answer was cut off at the output token limit (finish_reason=length)"
            f"{valid}: keep the plan short and send the whole kernel file.")


def _usage(raw: Any) -> dict[str, int]:
    um = getattr(raw, "usage_metadata", None) or {}
    out = {}
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        try:
            out[k] = int(um.get(k, 0) or 0)
        except (TypeError, ValueError):  # a server that reports no numbers: none counted
            out[k] = 0
    return out


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
    if error.startswith("the model refused"):
        return "refused"
    if "cut off at the output token limit" in error:
        return "truncated"
    if "content filter" in error:
        return "filtered"
    if "does not match the schema" in error:
        return "schema"
    return "malformed"


def parse_answer(schema: type[BaseModel], text: str, finish: str | None,
                 text_parser: TextParser | None = None) -> tuple[BaseModel | None, str | None]:
    """Strict JSON (langchain's parser accepts partial JSON: a cut-off answer would
    pass), after removing what local models wrap around it (think tags, fences); an
    answer that is no JSON object goes to `text_parser` (fenced code, edits, move names)."""
    cut = " " + _stopped_text(finish, text) if finish in ("length", "content_filter") else ""
    if cut and text_parser is not None and finish == "length":
        cut = (" The answer was cut off at the output token limit (finish_reason=length): "
               "answer in a few lines.")
    try:
        data = _loads(text)
    except json.JSONDecodeError as e:
        data, error = None, (f"the answer is not valid JSON ({e.msg} at line {e.lineno} "
                             f"column {e.colno}).{cut}")
    else:
        error = None if isinstance(data, dict) else \
            f"the answer must be one JSON object, not {type(data).__name__}.{cut}"
    if not isinstance(data, dict) and text_parser is not None:
        # a plain-text answer (moves, edits, a fenced kernel); cut off at the cap it may
        # still name a move, and a cut-off kernel fails its own checks
        data = text_parser(text)
        if data is None:
            why = (error or "").split(".")[0].strip() or "the answer is no JSON object"
            error = (f"{why}, and it holds no MOVE line naming a move of the catalogue, no "
                     f"search/replace edit and no fenced code block.{cut}")
    if not isinstance(data, dict):
        return None, error
    try:
        return schema.model_validate(data), None
    except ValidationError as e:
        return None, f"the answer does not match the schema: {_validation_text(e)}.{cut}"


class LLMClient:
    """Structured calls for one agent, with usage, retries, fallbacks and call records."""

    def __init__(self, settings: LLMSettings, *, agent: str, run_dir: str | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.agent = agent
        self.run_dir = run_dir
        self.endpoint: Endpoint = endpoint_for(settings)
        self._cap_param = self.endpoint.cap_param
        self._watch = _ResponseWatch()
        self.model = self._chat_model()
        self.sleep = sleep
        self.usage = new_usage()
        self.files: list[str] = []
        self.answers: list[dict[str, Any]] = []  # one per answer: kind, step, reason, ...
        self.last_error: str | None = None
        self.recording = Recording.open(settings.replay) if settings.replay else None
        self._note: dict[str, Any] = {}

    def annotate(self, **fields: Any) -> None:
        """Fields a validator adds to the answer it judges (e.g. its form)."""
        self._note.update(fields)

    def _chat_model(self) -> Any:
        return build_chat_model(self.settings, self._cap_param, self._watch,
                                temperature=not self.endpoint.no_temperature)

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
            iteration: int = 0, validate: Validator | None = None,
            text_parser: TextParser | None = None, text_form: str | None = None
            ) -> BaseModel | None:
        """One structured answer, or None when it is still unusable after one repair.
        Raises `PromptTooLarge` (nothing sent) when the prompt cannot fit the context, and
        `BudgetSpent` (nothing sent) when the call could go over a budget. `text_form`:
        the prompt file that describes a plain-text answer, sent instead of the JSON
        schema when the method is `text`; `text_parser` reads such an answer."""
        self._prepare()
        how = {"schema": schema, "step": step, "iteration": iteration, "validate": validate,
               "text_parser": text_parser, "text_form": text_form}
        parsed, error, raw = self._call(messages, **how)
        if parsed is not None or self.answers[-1:] and self.answers[-1]["kind"] == "refused":
            if parsed is None:
                self.last_error = f"{step}: {error}"
            return parsed
        repair = HumanMessage(render("repair.md", step=step, error=error or "unusable answer",
                                     previous=raw[:RAW_IN_REPAIR] or "(empty)"))
        try:
            parsed, error, _ = self._call([*messages, repair], repair_of=error, **how)
        except PromptTooLarge as e:  # the repair itself does not fit: the first answer stands
            parsed, error = None, f"the repair request does not fit the context ({e})"
        if parsed is None:
            self.last_error = f"{step}: unusable answer after one repair: {error}"
        return parsed

    def check_fit(self, messages: list[BaseMessage], schema: type[BaseModel], step: str,
                  text_form: str | None = None) -> dict[str, Any]:
        """The prompt's size against the context, as it would be sent now; raises
        `PromptTooLarge` (nothing is sent) when it cannot fit."""
        self._prepare()
        if self.recording is not None and self.settings.replay_missing == "stop":
            return {}
        method = self._method_chain()[0]
        return self._check_fit(self._shape(messages, schema, method, text_form), step)

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
               method: Method, text_form: str | None = None) -> list[BaseMessage]:
        """The messages as sent: one system message first (with the JSON-mode schema, or
        the plain-text answer form, in it), or none when the chat template drops system
        messages (then it leads the user text)."""
        system = [str(m.content) for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        if method == "text" and text_form:
            system.append(render(text_form))
        elif method in ("json_mode", "text") and schema is not None:
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

    def _method_chain(self) -> list[Method]:
        key = (self.settings.endpoint, self.settings.model)
        chain = list(self.settings.methods or METHODS)
        with _WM_LOCK:
            first = _WORKING_METHOD.get(key, self.settings.structured_output)
        return chain[chain.index(first):] if first in chain else chain

    def _remember(self, method: Method) -> None:
        with _WM_LOCK:
            _WORKING_METHOD[(self.settings.endpoint, self.settings.model)] = method

    # -- one logical call ---------------------------------------------------------------
    def _call(self, messages: list[BaseMessage], *, schema: type[BaseModel], step: str,
              iteration: int, repair_of: str | None = None, validate: Validator | None = None,
              text_parser: TextParser | None = None, text_form: str | None = None
              ) -> tuple[BaseModel | None, str | None, str]:
        record: dict[str, Any] = {
            "agent": self.agent, "iteration": iteration, "step": step,
            "model": self.settings.model, "endpoint": self.settings.endpoint,
            "repair_of": repair_of, "attempts": [], "messages": None, "response": None,
            "parsed": None, "error": None, "usage": None,
            "prompt": prompt_text(messages)}
        t_start = time.monotonic()
        try:
            if self.recording is not None:
                hit = self.recording.take(self.agent, step, record["prompt"])
                if hit is not None:
                    return self._replayed(record, hit, schema, validate, text_parser)
                miss = self.recording.miss(self.agent, step, iteration, record["prompt"])
                record["replay_miss"] = miss.report
                if self.settings.replay_missing == "stop":
                    raise miss
                self._prepare()
            out = self._exchange(messages, schema, step, iteration, record, text_form)
            text, finish, usage, parsed, error = self._read(out, schema, text_parser)
            add_usage(self.usage, usage)
            record.update(response=text, finish_reason=finish, usage=usage,
                          cost_usd=self.settings.cost_usd(usage))
            parsed, error = self._finish(record, parsed, error, validate)
            return parsed, error, text
        except AgentUnavailable as e:
            record["error"] = str(e)
            record["answer"] = None
            raise
        finally:
            record["seconds"] = round(time.monotonic() - t_start, 3)
            self._write(record)

    def _exchange(self, messages: list[BaseMessage], schema: type[BaseModel], step: str,
                  iteration: int, record: dict[str, Any], text_form: str | None) -> dict:
        """Send until an answer comes back: the next method when the server refuses one,
        the other cap form or no temperature when it refuses those, backoff on transient
        errors. Raises `LLMUnavailable` naming the cause when no answer can come."""
        chain = self._method_chain()
        state = {"m_idx": 0, "retries": 0, "bad_requests": 0}
        while True:
            method = chain[state["m_idx"]]
            msgs = self._shape(messages, schema, method, text_form)
            record["method"] = method
            record["messages"] = [{"role": m.type, "content": str(m.content)} for m in msgs]
            record["fit"] = self._check_fit(msgs, step)
            booked = self._book(record["fit"], step)
            t0 = time.monotonic()
            try:
                out, waited = self._send(msgs, schema, method, step, iteration)
            except openai.APIError as e:
                self._unbook(booked)
                failure = classify(e)
                record["attempts"].append({"method": method, "error": failure.text,
                                           "kind": failure.kind,
                                           "seconds": round(time.monotonic() - t0, 3)})
                self._after_error(failure, e, chain, state, record, step)
                continue
            except _NotACompletion as e:
                self._unbook(booked)
                raise LLMUnavailable(
                    f"LLM endpoint {self.settings.endpoint} sent a response that is not an "
                    f"OpenAI chat completion ({e}); check --base-url (it usually ends in "
                    "/v1)") from None
            except BaseException:
                self._unbook(booked)
                raise
            seconds = time.monotonic() - t0
            record["attempts"].append({"method": method, "error": None,
                                       "seconds": round(seconds, 3),
                                       "waited_s": round(waited, 3)})
            record["seconds_server"] = round(seconds - waited, 3)
            record["booked"] = booked
            self._remember(method)
            return out

    def _book(self, fit: dict[str, Any], step: str) -> dict[str, Any] | None:
        """Reserve this attempt's worst case against the run's budgets (or raise)."""
        s = self.settings
        if s.token_budget is None and s.cost_budget is None:
            return None
        ledger = ledger_for(self.run_dir)
        if ledger is None:
            return None
        worst = {"input_tokens": fit["prompt_tokens"], "output_tokens": fit["reserve"]}
        tokens = fit["prompt_tokens"] + fit["reserve"]
        usd = s.cost_usd(worst)
        ledger.reserve(tokens=tokens, usd=usd, token_budget=s.token_budget,
                       cost_budget=s.cost_budget, who=f"{self.agent} {step}")
        return {"tokens": tokens, "usd": usd}

    def _unbook(self, booked: dict[str, Any] | None, usage: dict[str, int] | None = None
                ) -> None:
        if booked is None:
            return
        ledger = ledger_for(self.run_dir)
        if ledger is not None:
            u = usage or {}
            ledger.settle(reserved_tokens=booked["tokens"], reserved_usd=booked["usd"],
                          tokens=int(u.get("total_tokens", 0) or 0),
                          usd=self.settings.cost_usd(u) if u else None)

    def _send(self, msgs: list[BaseMessage], schema: type[BaseModel], method: Method,
              step: str, iteration: int) -> tuple[dict, float]:
        """One request; (the answer as langchain's include_raw dict, seconds waited for a
        slot). A length or content-filter stop comes back as {"stopped": error}."""
        t0 = time.monotonic()
        gate = self.endpoint.semaphore(self.settings)
        waited = 0.0
        runnable = self.model.with_structured_output(
            schema_dict(schema), method=method, include_raw=True) \
            if method != "text" else self.model
        self._watch.clear()
        try:
            if gate is not None:
                gate.acquire()
                waited = time.monotonic() - t0
            try:
                out = runnable.invoke(msgs, config={
                    "run_name": f"kernelcrew.{self.agent}.{step}",
                    "tags": ["kernelcrew", self.agent, step],
                    "metadata": {"agent": self.agent, "step": step, "iteration": iteration,
                                 "method": method}})
            finally:
                if gate is not None:
                    gate.release()
        except openai.APIError:
            raise
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as e:
            # the SDK's json_schema parsing refuses a cut-off answer: it still is an
            # answer (usage counted) that goes back to the model once
            return {"stopped": e}, waited
        except Exception as e:  # noqa: BLE001 - which one it was decides the message
            ok, snippet = self._watch.last()
            if not ok:
                raise _NotACompletion(f"{type(e).__name__}; it began {snippet!r}") from None
            raise LLMUnavailable(
                f"the LLM client libraries failed on the {self.agent} {step} answer of "
                f"{self.settings.endpoint} ({type(e).__name__}: {one_line(e, 160)}); the "
                "server's response was a chat completion: update langchain-openai and "
                "openai, or report it") from None
        if method == "text":  # a plain completion: we parse it ourselves
            out = {"raw": out, "parsed": None, "parsing_error": None}
        return out, waited

    def _after_error(self, f: Failure, e: Exception, chain: list[Method], state: dict,
                     record: dict[str, Any], step: str) -> None:
        """What to do after a refused request: return to send again, or raise."""
        where = f"LLM endpoint {self.settings.endpoint} (model {self.settings.model})"
        if f.kind == "cap-form" and self._cap_param is None and self.settings.max_tokens:
            other = "max_tokens" if f.refused == "max_completion_tokens" \
                else "max_completion_tokens"
            self._cap_param = self.endpoint.cap_param = other  # sent alone from now on
            self.endpoint.notes.append(f"refuses {f.refused}: the cap goes as {other}")
            self.model = self._chat_model()
            return
        if f.kind == "temperature" and not self.endpoint.no_temperature \
                and self.settings.temperature is not None:
            self.endpoint.no_temperature = True  # the model takes only its own default
            self.endpoint.notes.append(f"refuses temperature={self.settings.temperature:g}: "
                                       "sent without one")
            self.model = self._chat_model()
            return
        if f.kind == "context":
            self._context_refused(f, record, step)
        if f.kind == "cap-too-large":
            most = f" (it allows at most {f.limit})" if f.limit else ""
            raise LLMUnavailable(f"{where} refuses an output cap of {self.settings.max_tokens} "
                                 f"tokens{most}: lower --max-tokens ({f.text})")
        if f.kind in ("method", "bad-request") and state["m_idx"] + 1 < len(chain):
            # the next method, no backoff; an unexplained 400 may be the method too
            state["bad_requests"] += f.kind == "bad-request"
            state["m_idx"] += 1
            self._remember(chain[state["m_idx"]])
            return
        if f.kind == "method":
            raise LLMUnavailable(f"{where} refuses structured output ({', '.join(chain)}); "
                                 f"last answer {f.text}")
        if f.kind == "transient" and state["retries"] < self.settings.retries:
            delay = min(MAX_BACKOFF_S, self.settings.backoff_s * 2 ** state["retries"])
            state["retries"] += 1
            self.sleep(max(delay, _retry_after(e) or 0.0))
            return
        why = {"auth": "; check OPENAI_API_KEY", "model": "; check --model and --base-url",
               "bad-request": " (the request was refused as it was, with every structured-"
                              "output method tried)" if state["bad_requests"] else ""}
        tries = f" after {state['retries'] + 1} attempts" if f.kind == "transient" else ""
        raise LLMUnavailable(f"{where} failed{tries}: {f.text}{why.get(f.kind, '')}")

    def _context_refused(self, f: Failure, record: dict[str, Any], step: str) -> None:
        """The server's 400 says the prompt is too long: learn its context and raise."""
        n_ctx, n_prompt = context_from_error(f.text)
        if not n_ctx:
            raise LLMUnavailable(
                f"LLM endpoint {self.settings.endpoint} refused the {self.agent} {step} "
                f"prompt as too long ({f.text}); serve the model with a larger context or "
                "set KERNELCREW_LLM_CONTEXT_WINDOW")
        self.endpoint.learn_context(n_ctx, "400 message")
        ours = record["fit"]["prompt_tokens"]
        if n_prompt and n_prompt > ours:  # our count was low: learn by how much
            self.endpoint.scale = max(self.endpoint.scale, n_prompt / ours)
        n = max(n_prompt or 0, ours)
        raise PromptTooLarge(
            f"the {self.agent} {step} prompt needs {n} tokens plus {self._reserve()} for the "
            f"answer, but the model's context is {n_ctx} tokens (the server's 400: "
            f"{one_line(f.text, 120)})", prompt_tokens=n, context=n_ctx,
            reserve=self._reserve())

    def _read(self, out: dict, schema: type[BaseModel], text_parser: TextParser | None
              ) -> tuple[str, str | None, dict[str, int], BaseModel | None, str | None]:
        """(text, finish reason, usage, parsed answer or None, error) of an answer."""
        if "stopped" in out:
            comp = out["stopped"].completion
            u = comp.usage
            usage = {"input_tokens": u.prompt_tokens if u else 0,
                     "output_tokens": u.completion_tokens if u else 0,
                     "total_tokens": u.total_tokens if u else 0}
            text = comp.choices[0].message.content or "" if comp.choices else ""
            finish = comp.choices[0].finish_reason if comp.choices else "length"
            return text, finish, usage, None, _stopped_text(finish, text)
        raw = out.get("raw")
        usage = _usage(raw)
        text = _raw_text(raw)
        finish = (getattr(raw, "response_metadata", None) or {}).get("finish_reason")
        refused = _refusal(raw)
        if refused:
            return text or refused, finish, usage, None, \
                f"the model refused: {one_line(refused, 200)}"
        parsed, error = parse_answer(schema, text, finish, text_parser)
        return text, finish, usage, parsed, error

    def _finish(self, record: dict[str, Any], parsed: BaseModel | None, error: Any,
                validate: Validator | None) -> tuple[BaseModel | None, str | None]:
        """Validate a parsed answer and classify the answer; both go into the record."""
        self._unbook(record.pop("booked", None), record.get("usage"))
        kind = "usable"
        self._note = {}
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
                                                                                  False),
                             **(self._note if kind == "usable" else {})})
        if kind == "usable" and self._note:
            record.update(self._note)
        return parsed, error

    def _replayed(self, record: dict[str, Any], hit: dict[str, Any], schema: type[BaseModel],
                  validate: Validator | None, text_parser: TextParser | None
                  ) -> tuple[BaseModel | None, str | None, str]:
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
        elif hit.get("answer") == "refused":
            parsed, error = None, hit.get("error") or "the model refused"
        else:
            parsed, error = parse_answer(schema, text, hit.get("finish_reason"), text_parser)
        parsed, error = self._finish(record, parsed, error, validate)
        return parsed, error, text

    def _write(self, record: dict[str, Any]) -> None:
        if not self.run_dir:
            return
        folder = Path(self.run_dir) / "llm"
        folder.mkdir(parents=True, exist_ok=True)
        facts = Path(self.run_dir) / "llm-endpoint.json"
        if self.endpoint.probed and (not facts.exists() or self.endpoint.notes):
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
