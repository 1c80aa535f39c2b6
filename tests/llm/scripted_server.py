"""A small OpenAI-compatible HTTP server that replays scripted replies.

Only the LLM is scripted: tests run the real `ChatOpenAI` client (and the real CLI in a
subprocess) against it. `POST /v1/chat/completions` (non-streaming) answers according to
what the request asked for: a forced tool call when it sends `tools`/`tool_choice`
(function calling), JSON text otherwise (`response_format` json_schema / json_object).
Every answer carries `usage`, and the server keeps what it received and what it reported.

Replies are looked up by (agent, step), read from the request itself: the system prompt
names the agent ("You are the kernelcrew memory_access specialist") and the user message
the step ("STEP: plan"). A reply can also fail: an HTTP error (500, 429, ...), a delay
longer than the client's timeout, or a connection that is accepted and never answered.
`refuse` makes the server reject a structured-output method with a 400, the way DeepSeek
rejects `json_schema` and llama.cpp (without --jinja) rejects `tools` (`refuse_status=500`:
the way llama-cpp-python fails on a schema it cannot compile).

Dialects of real servers, each optional: `reads_cap` (which form of the output cap the
server reads, "max_tokens" or "max_completion_tokens"; an answer longer than the cap is cut
there with finish_reason "length"), `drops_system` (the chat template drops system
messages: the model never sees them and they count no tokens), `n_ctx` (a prompt longer
than the context is refused with llama-cpp-python's 400), `props` (served at /props, as
llama.cpp does), `tokenize` (POST /tokenize, as llama.cpp does), `rejects` (a request
parameter refused with a real server's 400, e.g. OpenAI's for `max_tokens` on its newer
models or for a temperature other than 1). Requests that carry the
client's preflight probe mark are answered at once and kept apart in `probes`.
`max_inflight` is the most chat requests the server had in hand at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

AGENT_RE = re.compile(r"You are the kernelcrew (\w+)")
STEP_RE = re.compile(r"^STEP: ([\w-]+)", re.MULTILINE)

DEEPSEEK_REFUSAL = "This response_format type is unavailable now"
LLAMACPP_SCHEMA_500 = ("1 validation error for CreateChatCompletionRequest response_format "
                       "Input should be a valid dictionary or instance of JsonSchema")
PROBE_MARK = "kernelcrew-probe"
LLAMACPP_TOOLS_REFUSAL = "tools param requires --jinja flag"


@dataclass
class Reply:
    """One scripted reply. `kind`: answer | raw | error | garbage | hang | refusal |
    odd_content."""

    kind: str = "answer"
    data: Any = None  # answer: the JSON object; raw: the text as sent; error: message
    status: int = 200
    delay: float = 0.0  # seconds before replying (longer than the client's timeout: a timeout)
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None


def answer(data: dict, *, delay: float = 0.0) -> Reply:
    """A well-formed structured answer (JSON object)."""
    return Reply("answer", data, delay=delay)


def raw(text: str, *, finish_reason: str | None = None) -> Reply:
    """Text sent as it is (e.g. malformed JSON)."""
    return Reply("raw", text, finish_reason=finish_reason)


def error(status: int, message: str = "scripted error", *, retry_after: float | None = None
          ) -> Reply:
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return Reply("error", message, status=status, headers=headers)


def delayed(data: dict, seconds: float) -> Reply:
    return Reply("answer", data, delay=seconds)


def garbage(text: str = "<html>502 Bad Gateway</html>") -> Reply:
    """A 200 whose body is not an OpenAI response at all (a misconfigured proxy)."""
    return Reply("garbage", text)


def hang() -> Reply:
    """Accept the request and never answer (until the server stops)."""
    return Reply("hang")


def refusal(text: str = "I'm sorry, but I cannot assist with that request.") -> Reply:
    """OpenAI's refusal: no content, the reason in the message's `refusal` field."""
    return Reply("refusal", text)


def odd_content() -> Reply:
    """A chat completion (choices, message, usage) whose content is a number: the client
    libraries fail to read it, which is theirs to report, not a wrong server format."""
    return Reply("odd_content", 123)


# real servers' refusals of a request parameter (param -> test of the body -> error)
OPENAI_MAX_TOKENS = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                     "Use 'max_completion_tokens' instead.")
OPENAI_TEMPERATURE = ("Unsupported value: 'temperature' does not support 0.1 with this model. "
                      "Only the default (1) value is supported.")
OPENAI_CAP_TOO_LARGE = ("max_tokens is too large: 200000. This model supports at most 16384 "
                        "completion tokens, whereas you provided 200000.")


@dataclass
class Exchange:
    """What the server received and what it answered."""

    agent: str | None
    step: str | None
    request: dict
    status: int
    reply_kind: str
    usage: dict | None = None  # as reported to the client (200 answers only)

    @property
    def system(self) -> str:
        return "\n".join(_text(m) for m in self.request.get("messages", [])
                         if m.get("role") in ("system", "developer"))

    @property
    def user(self) -> str:
        return "\n".join(_text(m) for m in self.request.get("messages", [])
                         if m.get("role") == "user")

    @property
    def mode(self) -> str:
        """Which structured-output method the client used."""
        rf = (self.request.get("response_format") or {}).get("type")
        if rf:
            return rf
        return "tools" if self.request.get("tools") else "plain"


def _text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def count_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedServer:
    """Start with `with ScriptedServer(script) as srv:`; `srv.base_url` ends in /v1."""

    def __init__(self, script: dict[Any, list[Reply]] | None = None, *,
                 refuse: set[str] | frozenset[str] = frozenset(), refuse_status: int = 400,
                 default: Reply | Callable[[Exchange], Reply] | None = None,
                 reads_cap: str | None = None, drops_system: bool = False,
                 n_ctx: int | None = None, props: dict | None = None,
                 tokenize: bool = False,
                 rejects: dict[str, tuple[Callable[[Any], bool], str]] | None = None) -> None:
        self.script: dict[Any, list[Reply]] = {k: list(v) for k, v in (script or {}).items()}
        self.refuse = set(refuse)
        self.refuse_status = refuse_status  # DeepSeek answers 400, or 422 for some bodies
        self.default = default
        self.exchanges: list[Exchange] = []
        self.other_posts: list[tuple[str, bytes]] = []  # (path, body) of non-chat requests
        self.reads_cap, self.drops_system, self.n_ctx = reads_cap, drops_system, n_ctx
        self.props, self.tokenize = props, tokenize
        # request parameter -> (does this value get refused?, the 400's message)
        self.rejects = dict(rejects or {})
        self.probes: list[dict] = []
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------
    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/info"):  # LangSmith asks first
                    self._send(200, {"version": "scripted"})
                elif self.path.rstrip("/") == "/props" and server.props is not None:
                    self._send(200, server.props)
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": "scripted", "object": "model", "owned_by": "tests"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw_body = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    body = {}
                else:
                    body = json.loads(raw_body or b"{}")
                if self.path.rstrip("/") == "/tokenize" and server.tokenize:
                    text = json.loads(raw_body or b"{}").get("content", "")
                    self._send(200, {"tokens": list(range(count_tokens(text)))})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    # anything else (e.g. LangSmith's /runs/multipart) is kept and acknowledged
                    with server._lock:
                        server.other_posts.append((self.path, raw_body))
                    self._send(202, {})
                    return
                with server._lock:
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    status, payload, headers = server._respond(body)
                finally:
                    with server._lock:
                        server.inflight -= 1
                if status == 0:  # hang: accepted, never answered
                    server._stop.wait(600)
                    return
                self._send(status, payload, headers)

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): that was the point

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- what was received -------------------------------------------------------------
    def calls(self, agent: str | None = None, step: str | None = None) -> list[Exchange]:
        return [e for e in self.exchanges if (agent is None or e.agent == agent)
                and (step is None or e.step == step)]

    def reported_usage(self) -> dict[str, int]:
        """The sum of the usage the server reported in its answers."""
        tot = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        for e in self.exchanges:
            if e.usage:
                tot["input_tokens"] += e.usage["prompt_tokens"]
                tot["output_tokens"] += e.usage["completion_tokens"]
                tot["total_tokens"] += e.usage["total_tokens"]
        return tot

    # -- answering ---------------------------------------------------------------------
    def _next(self, ex: Exchange) -> Reply:
        with self._lock:
            for key in ((ex.agent, ex.step), (ex.agent, "*"), ("*", ex.step), "*"):
                queue = self.script.get(key)
                if queue:
                    return queue.pop(0)
        if callable(self.default):
            return self.default(ex)
        if self.default is not None:
            return self.default
        return error(418, f"no scripted reply for agent={ex.agent} step={ex.step}")

    def _respond(self, body: dict) -> tuple[int, dict, dict]:
        msgs = body.get("messages", [])
        if self.drops_system:  # what the model sees after the chat template
            msgs = [m for m in msgs if m.get("role") not in ("system", "developer")]
        system = "\n".join(_text(m) for m in msgs if m.get("role") in ("system", "developer"))
        user = "\n".join(_text(m) for m in msgs if m.get("role") == "user")
        prompt = "".join(_text(m) for m in msgs)
        if any(PROBE_MARK in _text(m) for m in body.get("messages", [])):
            usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": 1,
                     "total_tokens": count_tokens(prompt) + 1}
            with self._lock:
                self.probes.append({"request": body, "usage": usage})
            return 200, {"id": "probe", "object": "chat.completion", "created": 0,
                         "model": body.get("model", "scripted"), "usage": usage,
                         "choices": [{"index": 0, "finish_reason": "length",
                                      "message": {"role": "assistant", "content": "ok"}}]}, {}
        agent = m.group(1) if (m := AGENT_RE.search(system) or AGENT_RE.search(user)) else None
        steps = STEP_RE.findall(user)
        step = steps[-1] if steps else None  # a repair message names the step again
        ex = Exchange(agent, step, body, 0, "")
        with self._lock:
            self.exchanges.append(ex)
        rf = (body.get("response_format") or {}).get("type")
        for param, (refused, message) in self.rejects.items():
            if param in body and refused(body[param]):
                return self._error(ex, 400, message, param=param)
        if self.n_ctx and count_tokens(prompt) >= self.n_ctx:
            return self._error(ex, 400, f"Requested tokens ({count_tokens(prompt)}) exceed "
                                        f"context window of {self.n_ctx}")
        if rf == "json_schema" and "json_schema" in self.refuse:
            return self._error(ex, self.refuse_status, DEEPSEEK_REFUSAL
                               if self.refuse_status < 500 else LLAMACPP_SCHEMA_500)
        if body.get("tools") and "tools" in self.refuse:
            return self._error(ex, 400, LLAMACPP_TOOLS_REFUSAL)
        if rf == "json_object" and "json_object" in self.refuse:
            return self._error(ex, 400, "response_format json_object is not supported")
        reply = self._next(ex)
        ex.reply_kind = reply.kind
        if reply.delay:
            time.sleep(reply.delay)
        if reply.kind == "hang":
            ex.status = 0
            return 0, {}, {}
        if reply.kind == "error":
            return self._error(ex, reply.status, str(reply.data), reply.headers)
        if reply.kind == "garbage":
            ex.status = 200
            return 200, {"garbage": reply.data}, {}
        if reply.kind == "refusal":
            ex.status, ex.usage = 200, {"prompt_tokens": count_tokens(prompt),
                                        "completion_tokens": 12,
                                        "total_tokens": count_tokens(prompt) + 12}
            return 200, {"id": f"chatcmpl-{len(self.exchanges)}", "object": "chat.completion",
                         "created": int(time.time()), "model": body.get("model", "scripted"),
                         "choices": [{"index": 0, "finish_reason": "stop", "message": {
                             "role": "assistant", "content": None, "refusal": reply.data}}],
                         "usage": ex.usage}, {}
        if reply.kind == "odd_content":
            ex.status = 200
            return 200, {"id": "chatcmpl-x", "object": "chat.completion", "created": 0,
                         "model": "scripted", "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.data}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                   "total_tokens": 2}}, {}
        text = reply.data if reply.kind == "raw" else json.dumps(reply.data)
        cap = body.get(self.reads_cap) if self.reads_cap else None
        cut = False
        if cap is not None and count_tokens(text) > cap:
            text, cut = text[:cap * 4], True
        usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": count_tokens(text)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        tools = body.get("tools") or []
        if tools:
            name = tools[0]["function"]["name"]
            forced = body.get("tool_choice")
            if isinstance(forced, dict):
                name = forced.get("function", {}).get("name", name)
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(self.exchanges)}", "type": "function",
                "function": {"name": name, "arguments": text}}]}
            finish = "length" if cut else reply.finish_reason or "tool_calls"
        else:
            message = {"role": "assistant", "content": text}
            finish = "length" if cut else reply.finish_reason or "stop"
        ex.status, ex.usage = 200, usage
        return 200, {
            "id": f"chatcmpl-{len(self.exchanges)}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage}, {}

    @staticmethod
    def _error(ex: Exchange, status: int, message: str, headers: dict | None = None,
               param: str | None = None) -> tuple[int, dict, dict]:
        ex.status = status
        kind = "invalid_request_error" if status < 500 else "server_error"
        return status, {"error": {"message": message, "type": kind, "param": param,
                                  "code": kind}}, headers or {}
