"""Fixtures for the LLM tests: a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kernelcrew.agents.llm import client as llm_client
from kernelcrew.agents.llm.endpoint import forget_endpoints
from kernelcrew.agents.llm.replay import forget_recordings
from tests.llm.scripted_server import ScriptedServer

API_KEY = "sk-kernelcrew-TEST-4f9a"  # a recognizable fake key: it must never reach a file


@pytest.fixture(autouse=True)
def _fresh_method_memory() -> Iterator[None]:
    """The structured-output method that worked is remembered per process: not across tests."""
    llm_client._WORKING_METHOD.clear()
    forget_endpoints()
    forget_recordings()
    yield
    llm_client._WORKING_METHOD.clear()
    forget_endpoints()
    forget_recordings()


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: dict | None = None, **kw: Any) -> ScriptedServer:
        srv = ScriptedServer(script, **kw)
        srv.start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()


def settings_for(srv: ScriptedServer, **over: Any) -> dict[str, Any]:
    """`RunContext.llm`-style settings with short timeouts and backoff for tests."""
    return {"model": "scripted", "base_url": srv.base_url, "api_key": API_KEY, "timeout": 2.0,
            "retries": 2, "backoff_s": 0.01, **over}


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
