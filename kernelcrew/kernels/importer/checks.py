"""Checks of an extracted baseline before it is written: the kernel-file policy (what a
kernel may include and call) and a g++ syntax check, each error mapped back to the line
of the original file (or header) it comes from, with the fix."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.importer.entry import Where
from kernelcrew.kernels.importer.promote import FLOAT_MATH
from kernelcrew.kernels.policy import check_source


def orig_line(line_map: list[Where | None], body_line: int) -> Where | None:
    k = body_line - 1
    return line_map[k] if 0 <= k < len(line_map) else None


def where(w: Where | None, main: Path) -> str:
    if w is None:
        return "the generated code"
    return f"line {w[1]}" if w[0] == main else f"{w[0].name} line {w[1]}"


def check_policy(main: Path, body: str, line_map: list[Where | None],
                 backend: str = "cpu") -> None:
    try:
        check_source(body, backend)
    except PolicyViolation as e:
        msg = str(e)
        m = re.match(r"line (\d+): (.*)", msg)
        if m:
            w = orig_line(line_map, int(m.group(1)))
            raise InputError(f"{where(w, main)}: {m.group(2)}; kernel files may not do this, "
                             "so the function cannot be imported as it is", path=main) from None
        raise InputError(msg, path=main) from None


def syntax_check(main: Path, text: str, line_map: list[Where | None], offset: int,
                 missing_headers: list[str]) -> None:
    """g++ -fsyntax-only on the whole baseline; an error names the original line."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        return  # the harness says so when it compiles
    with tempfile.TemporaryDirectory(prefix="kc-import-") as d:
        p = Path(d) / "baseline.cpp"
        p.write_text(text)
        r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-fopenmp", "-w", str(p)],
                           capture_output=True, text=True, timeout=120, check=False)
    if r.returncode == 0:
        return
    for ln in r.stderr.splitlines():
        m = re.match(r".*?baseline\.cpp:(\d+):\d+: (?:fatal )?error: (.*)", ln)
        if not m:
            continue
        w = orig_line(line_map, int(m.group(1)) - offset)
        what = m.group(2)
        raise InputError(f"{where(w, main) if w else 'the generated entry'}: g++: {what}; "
                         f"{_fix(what, missing_headers)}", path=main)
    raise InputError(f"the extracted code does not compile: {r.stderr.strip()[:200]}",
                     path=main)


def _fix(what: str, missing_headers: list[str]) -> str:
    name = re.search(r"[‘'`]([A-Za-z_]\w*)[’'`] (?:was not declared|has not been declared|"
                     r"does not name a type|is not a member)", what)
    if name and (name.group(1) in FLOAT_MATH or name.group(1) in FLOAT_MATH.values()):
        return f"{name.group(1)} is declared in <math.h>: include it in the file"
    if name:
        fix = (f"{name.group(1)} comes from outside this file (a project header or the "
               f"build): define it in the file, or for a macro pass --define "
               f"{name.group(1)}=VALUE")
        if missing_headers:
            fix += (f"; {', '.join(missing_headers)} was not found: give its folder with "
                    "--include-dir")
        return fix
    if "register" in what:
        return "C's `register` storage class: the import defines it away for C++"
    return "the extracted code must compile on its own as C++"
