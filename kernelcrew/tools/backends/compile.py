"""Compilation shared by the backends: the cache, the sandboxed compiler call, and the
normalization of compiler diagnostics into (line, kind, message)."""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from kernelcrew.results import CompileResult, CompilerMessage
from kernelcrew.tools.config import CompileLimits, cache_dir, scratch_root
from kernelcrew.tools.sandbox import run_confined

_DIAG = re.compile(
    r"^(?P<file>[^:\n]+?)(?::(?P<line>\d+))?(?::(?P<col>\d+))?:\s*"
    r"(?P<kind>fatal error|error|warning|note)\s*:?\s*(?P<msg>.*)$")
_NVCC_DIAG = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\):\s*"
                        r"(?P<kind>catastrophic error|error|warning)"
                        r"(?:\s*#\S+-D)?\s*:\s*(?P<msg>.*)$")


@functools.cache
def tool_version(exe: str) -> str:
    """First line of `exe --version` (part of the cache key)."""
    try:
        out = subprocess.run([exe, "--version"], check=False, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    return lines[-1] if "nvcc" in exe else (lines[0] if lines else "unknown")


@functools.cache
def machine_fingerprint() -> str:
    """CPU model and flags: -march=native output depends on them."""
    model, flags = platform.machine(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == platform.machine():
                model += " " + line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return hashlib.sha256(f"{model}|{flags}".encode()).hexdigest()[:12]


def cache_key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def trim(text: str, max_lines: int = 80) -> str:
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text.strip("\n")
    keep = max_lines // 2
    return "\n".join(lines[:keep] + [f"... {len(lines) - 2 * keep} lines omitted"]
                     + lines[-keep:])


def normalize(log: str, source_name: str) -> list[CompilerMessage]:
    """Compiler output -> [(line, kind, message)] for the kernel file only."""
    msgs: list[CompilerMessage] = []
    for raw in log.splitlines():
        # nvcc's `kernel.cu(12): error: ...` first: _DIAG would take `kernel.cu(12)` for a name
        m = _NVCC_DIAG.match(raw.strip()) or _DIAG.match(raw.strip())
        if not m:
            continue
        if Path(m.group("file")).name != source_name:
            continue
        kind = m.group("kind").replace("fatal error", "fatal").replace("catastrophic error",
                                                                       "fatal")
        msg = m.group("msg").strip()
        line = int(m.group("line")) if m.group("line") else None
        if msgs and msgs[-1].line == line and msgs[-1].message == msg:
            continue
        msgs.append(CompilerMessage(line=line, kind=kind, message=msg[:300]))
    return msgs


def compile_cached(
    *,
    source_text: str,
    source_name: str,
    argv_for: callable,  # (src: Path, out: Path) -> argv
    artifact_name: str,
    key_parts: Sequence[object],
    limits: CompileLimits | None = None,
    parse_extra: callable | None = None,  # (log) -> dict of extra CompileResult fields
) -> CompileResult:
    """Compile in a sandboxed scratch dir, or return the cached artifact."""
    limits = limits or CompileLimits()
    key = cache_key(source_text, *key_parts)
    entry = cache_dir() / "compile" / key
    meta_path = entry / "result.json"
    (cache_dir() / "compile").mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir() / "compile" / f"{key}.lock")):
        if meta_path.exists() and (entry / artifact_name).exists():
            res = CompileResult.model_validate_json(meta_path.read_text())
            return res.model_copy(update={"cached": True, "artifact": str(entry / artifact_name)})
        work = scratch_root() / f"compile-{key}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        src = work / source_name
        src.write_text(source_text)
        argv = argv_for(src, work / artifact_name)
        t0 = time.monotonic()
        run = run_confined(argv, scratch=work, timeout_s=limits.timeout_s,
                           cpu_s=limits.timeout_s + 5, address_space_gib=limits.address_space_gib,
                           file_size_mib=limits.file_size_mib, processes=32, log_name="compiler")
        log = (run.stderr + ("\n" + run.stdout if run.stdout.strip() else "")).strip()
        log = log.replace(str(work) + "/", "")
        ok = run.returncode == 0 and (work / artifact_name).exists()
        reason = ""
        if not ok:
            if run.timed_out:
                reason = f"compile timed out after {limits.timeout_s:.0f} s (limit)"
            elif run.signal_name:
                reason = f"compiler killed ({run.signal_name}): likely the memory limit " \
                         f"({limits.address_space_gib:g} GiB)"
            else:
                reason = "compile failed"
        extra = parse_extra(log) if parse_extra else {}
        res = CompileResult(ok=ok, command=[Path(argv[0]).name, *argv[1:]],
                            seconds=time.monotonic() - t0, messages=normalize(log, source_name),
                            log=trim(log), reason=reason, **extra)
        if ok:
            entry.mkdir(parents=True, exist_ok=True)
            shutil.move(str(work / artifact_name), entry / artifact_name)
            res.artifact = str(entry / artifact_name)
            meta_path.write_text(res.model_dump_json())
        shutil.rmtree(work, ignore_errors=True)
        return res
