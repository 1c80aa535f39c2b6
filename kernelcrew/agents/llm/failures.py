"""What an endpoint's error means, decided once, so that each failure is named for its
cause and handled for it:

- transient (a timeout, a lost connection, 429, 5xx): retried with backoff;
- context: the prompt is too long for the model (the context size is learned from it);
- cap-form: the server refuses one form of the output cap (OpenAI: "Unsupported
  parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
  instead."): the other form is sent from then on;
- cap-too-large: the cap is above what the model allows ("max_tokens is too large");
- temperature: the model accepts no (or only its default) temperature: sent without it;
- method: the server refuses the structured-output method (its message names
  response_format, json_schema, tools, ...): the next method of the chain;
- auth, model: the key or the model name is wrong;
- bad-request: any other 400/422 (its own words, never "refuses structured output").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import openai

from kernelcrew.agents.llm.endpoint import is_context_error

CAP_FORMS = ("max_completion_tokens", "max_tokens")  # the longer name first: it contains
# the shorter one
METHOD_WORDS = ("response_format", "json_schema", "tool_choice", "tools", "tool call",
                "function call", "functions", "grammar", "json_object", "--jinja")
_REFUSED_PARAM = re.compile(
    r"(?:unsupported|unrecognized|unknown|not supported|not permitted|invalid)[^'\"`]{0,40}"
    r"(?:parameter|argument|field|key)?[^'\"`]{0,10}['\"`](?P<p>max_completion_tokens|max_tokens)"
    r"['\"`]", re.IGNORECASE)
_INSTEAD = re.compile(r"use ['\"`]?(?P<p>max_completion_tokens|max_tokens)['\"`]? instead",
                      re.IGNORECASE)
_CAP_LIMIT = re.compile(r"(?:at most|maximum(?: value)? (?:is|of)|<=|up to)\s*(\d+)",
                        re.IGNORECASE)
_TOO_LARGE = re.compile(r"max_(?:completion_)?tokens[^.]{0,40}(?:too large|exceeds|greater than"
                        r"|must be less|out of range)", re.IGNORECASE)
_TEMPERATURE = re.compile(r"temperature", re.IGNORECASE)
_UNSUPPORTED = re.compile(r"unsupported|not support|only the default|does not support|"
                          r"invalid|out of range|must be", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    kind: str  # see the module docstring
    text: str  # one line: "HTTP 400: <the server's message>"
    status: int | None = None
    refused: str | None = None  # cap-form: the form of the cap the server refuses
    limit: int | None = None  # cap-too-large: the most the model allows, when it says


def status_of(e: Exception) -> int | None:
    return getattr(e, "status_code", None)


def one_line(text: object, limit: int = 300) -> str:
    t = re.sub(r"\s+", " ", str(text)).strip()
    return t if len(t) <= limit else t[:limit - 3] + "..."


def error_text(e: Exception) -> str:
    """The server's own message, one line, with the HTTP status."""
    s = status_of(e)
    if isinstance(e, openai.APITimeoutError):
        return "request timed out"
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and body.get("message"):
        msg = str(body["message"])
    else:
        msg = getattr(e, "message", None) or str(e) or type(e).__name__
        msg = re.sub(r"^Error code: \d+ - ", "", msg)
    if isinstance(e, openai.APIConnectionError):
        cause = e.__cause__ or e.__context__
        return f"connection error ({one_line(cause or msg, 120)})"
    return f"HTTP {s}: {one_line(msg, 200)}" if s else one_line(msg, 200)


def refused_cap(text: str) -> str | None:
    """The form of the output cap an error refuses. OpenAI names both ("Unsupported
    parameter: 'max_tokens' ... Use 'max_completion_tokens' instead"): the refused one is
    the one called unsupported, never the one it says to use."""
    m = _REFUSED_PARAM.search(text)
    if m:
        return m.group("p")
    m = _INSTEAD.search(text)
    if m:
        return next(f for f in CAP_FORMS if f != m.group("p"))
    low = text.lower()
    if not any(w in low for w in ("unsupported", "not supported", "unrecognized", "unknown",
                                  "extra inputs", "not permitted")):
        return None
    named = [f for f in CAP_FORMS if re.search(rf"\b{f}\b", low)]
    return named[0] if len(named) == 1 else None


def classify(e: Exception) -> Failure:
    """One `Failure` for an exception of the openai SDK."""
    s = status_of(e)
    text = error_text(e)
    raw = f"{getattr(e, 'body', '') or ''} {e}"
    low = raw.lower()
    client_error = s is not None and 400 <= s < 500
    if isinstance(e, openai.APIConnectionError):  # APITimeoutError is one too
        return Failure("transient", text, s)
    if s is not None and is_context_error(low):
        return Failure("context", text, s)
    if client_error:
        form = refused_cap(raw)
        if form:
            return Failure("cap-form", text, s, refused=form)
        if _TOO_LARGE.search(raw):
            m = _CAP_LIMIT.search(raw)
            return Failure("cap-too-large", text, s, limit=int(m.group(1)) if m else None)
        if _TEMPERATURE.search(raw) and _UNSUPPORTED.search(raw):
            return Failure("temperature", text, s)
    if s is not None and s >= 400 and s not in (401, 403, 404, 408, 429) and any(
            w in low for w in METHOD_WORDS):
        return Failure("method", text, s)
    if isinstance(e, openai.RateLimitError | openai.InternalServerError) or (
            s is not None and (s >= 500 or s in (408, 409, 425, 429))):
        return Failure("transient", text, s)
    if s in (401, 403):
        return Failure("auth", text, s)
    if s == 404:
        return Failure("model", text, s)
    if s in (400, 422):
        return Failure("bad-request", text, s)
    return Failure("other", text, s)
