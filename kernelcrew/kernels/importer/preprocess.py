"""The file as the code base's build reads it: the C preprocessor run with the build's
include folders and `-D` defines (`--include-dir`, `--define`, or its entry in a
`compile_commands.json`).

The importer extracts code from the original text (character for character, macros
unexpanded), and asks the preprocessor what the text means:
- which lines the build compiles (every `#if` decided as the build decides it), in which
  files (the project headers the file includes, found through the include folders);
- which definition of each macro is in effect where the function starts, and where it is
  written (file and line), so the closure copies that one;
- the function with every macro expanded (`DATA_TYPE POLYBENCH_2D(A,M,N,m,n)` becomes
  `double A[1900 + 0][2100 + 0]`, `i < _PB_N` becomes `i < n`), which the analysis of
  types, extents, subscripts and loop bounds reads.

The preprocessor reads the file from stdin, so a quoted include that is missing (a header
of the project not found in the given folders) can be left out and named in a note rather
than stop the import; the code that needs it then fails the compile check with the name
it lacked.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import InputError

_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d)*)\s*$')
_DIRECTIVE = re.compile(r"^#\s*(define|undef)\s+([A-Za-z_]\w*)(.*)$")
_MISSING = re.compile(r"^(.*?):(\d+):\d+: fatal error: (.+?): No such file or directory")
STDIN = "<stdin>"


@dataclass
class BuildFlags:
    """What of the code base's build line the preprocessor needs, and its other flags."""

    include_dirs: list[Path] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)  # NAME -> value (-DNAME: "1")
    undefines: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # -O3, -fopenmp, -std=... (not -I/-D)

    def cpp_args(self) -> list[str]:
        out = [f"-I{d}" for d in self.include_dirs]
        out += [f"-D{k}={v}" for k, v in self.defines.items()]
        out += [f"-U{n}" for n in self.undefines]
        # the flags that change what the preprocessor defines (__STDC_VERSION__, _OPENMP)
        out += [f for f in self.other if f.startswith("-std=") or f == "-fopenmp"]
        return out

    def as_list(self) -> list[str]:
        """The flags as op.yaml records them (origin.build)."""
        return ([f"-I{d}" for d in self.include_dirs]
                + [f"-D{k}" if v == "1" else f"-D{k}={v}" for k, v in self.defines.items()]
                + [f"-U{n}" for n in self.undefines])


def parse_define(item: str) -> tuple[str, str]:
    """`NAME=VALUE` or `NAME` (value 1, as -DNAME)."""
    name, eq, value = item.partition("=")
    name = name.strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise InputError(f"--define {item!r}: {name!r} is not a macro name; write NAME or "
                         "NAME=VALUE", field="--define")
    return name, value.strip() if eq else "1"


def from_compile_commands(db: Path, source: Path) -> BuildFlags:
    """The build flags of `source` in a compile_commands.json (CMake, Bear, ...)."""
    try:
        entries = json.loads(db.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read it as JSON ({e})", path=db,
                         field="--compile-commands") from None
    src = source.resolve()
    for e in entries if isinstance(entries, list) else []:
        folder = Path(e.get("directory", db.parent))
        if not folder.is_absolute():
            folder = (db.parent / folder)
        if (folder / e.get("file", "")).resolve() != src:
            continue
        args = e.get("arguments") or shlex.split(e.get("command", ""))
        return _flags_of(args[1:], folder)
    raise InputError(f"no entry for {source.name}; give the compile_commands.json of the "
                     "build that compiles it, or --include-dir/--define", path=db,
                     field="--compile-commands")


def _flags_of(args: list[str], folder: Path) -> BuildFlags:
    out = BuildFlags()
    it = iter(args)
    for a in it:
        for opt, kind in (("-I", "inc"), ("-isystem", "inc"), ("-iquote", "inc"),
                          ("-D", "def"), ("-U", "undef")):
            if a == opt or (a.startswith(opt) and opt in ("-I", "-D", "-U")):
                val = a[len(opt):] or next(it, "")
                if kind == "inc":
                    p = Path(val)
                    out.include_dirs.append(p if p.is_absolute() else (folder / p).resolve())
                elif kind == "def":
                    k, v = parse_define(val)
                    out.defines[k] = v
                else:
                    out.undefines.append(val)
                break
        else:
            if a in ("-o", "-MF", "-MT", "-MQ", "-include", "-x"):
                next(it, None)
            elif a.startswith("-") and not a.startswith(("-M", "-c", "-o", "-W", "-g")):
                out.other.append(a)
    return out


@dataclass
class MacroDef:
    name: str
    text: str  # "#define NAME BODY" as the preprocessor prints it
    file: str  # the file it is written in; "" for built-in and command-line macros
    line: int
    system: bool  # from a system header
    undef: bool = False


@dataclass
class Preprocessed:
    """What the preprocessor said about the file (see the module's docstring)."""

    source: Path
    active: dict[str, set[int]] = field(default_factory=dict)  # file -> compiled lines
    headers: list[Path] = field(default_factory=list)  # project headers, inclusion order
    order: dict[tuple[str, int], int] = field(default_factory=dict)  # (file, line) -> pos
    code: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, text)
    events: list[tuple[int, MacroDef]] = field(default_factory=list)  # (pos, define/undef)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # quoted includes not found

    def is_active(self, path: Path, line: int) -> bool:
        lines = self.active.get(_key(path, self.source))
        return lines is None or line in lines

    def position(self, path: Path, line: int) -> int | None:
        return self.order.get((_key(path, self.source), line))

    def macros_at(self, pos: int) -> dict[str, MacroDef]:
        """The macros in effect at output position `pos`."""
        table: dict[str, MacroDef] = {}
        for p, m in self.events:
            if p >= pos:
                break
            if m.undef:
                table.pop(m.name, None)
            else:
                table[m.name] = m
        return table

    def expanded(self, path: Path, first: int, last: int) -> str:
        """The lines first..last of `path` as the compiler sees them (macros expanded)."""
        return "\n".join(t for t, _ln in self.expanded_lines(path, first, last))

    def expanded_lines(self, path: Path, first: int, last: int) -> list[tuple[str, int]]:
        """(text, line in `path`) of each line of the expansion."""
        key = _key(path, self.source)
        return [(t, ln) for f, ln, t in self.code if f == key and first <= ln <= last]

    def text(self) -> str:
        """The whole unit after preprocessing (code only: no markers, no #define lines)."""
        return "\n".join(t for _f, _ln, t in self.code)


def _key(path: Path | str, source: Path) -> str:
    p = str(path)
    return STDIN if p == str(source) else p


def cpp_command(source: Path) -> list[str] | None:
    c = source.suffix.lower() == ".c"
    exe = shutil.which("gcc" if c else "g++") or shutil.which("cpp")
    if exe is None:
        return None
    return [exe, "-E", "-dD", "-x", "c" if c else "c++"]


def preprocess(source: Path, text: str, flags: BuildFlags) -> Preprocessed | None:
    """Run the preprocessor on `text` (the file's content) as the build would; None where
    no preprocessor is installed."""
    cmd = cpp_command(source)
    if cmd is None:
        return None
    # the file's own folder first for quoted includes, as when the compiler reads the file
    argv = [*cmd, "-iquote", str(source.parent), *flags.cpp_args(), "-"]
    missing: list[str] = []
    for _ in range(20):
        run = subprocess.run(argv, input=text, capture_output=True, text=True,
                             cwd=source.parent, timeout=120, check=False)
        if run.returncode == 0:
            break
        m = next((m for ln in run.stderr.splitlines() if (m := _MISSING.match(ln))), None)
        if m is None or m.group(1) != STDIN:
            first = next((ln for ln in run.stderr.splitlines() if "error" in ln),
                         run.stderr.strip()[:200])
            raise InputError(f"the preprocessor stops on it with the given build flags: "
                             f"{first.replace(STDIN, source.name)}; give the folders its "
                             "headers are in with --include-dir (or --compile-commands)",
                             path=source)
        # a project header that is not there: leave that include out and say so
        lines = text.split("\n")
        k = int(m.group(2)) - 1
        missing.append(m.group(3))
        lines[k] = ""
        text = "\n".join(lines)
    else:
        return None
    pp = _parse(run.stdout, source)
    pp.missing = missing
    for h in missing:
        pp.notes.append(f"{source.name}: header {h} not found (add its folder with "
                        "--include-dir); read without it")
    return pp


def _parse(out: str, source: Path) -> Preprocessed:
    pp = Preprocessed(source)
    cur, line, system = STDIN, 1, False
    seen_headers: list[str] = []
    for pos, raw in enumerate(out.split("\n")):
        m = _MARKER.match(raw)
        if m:
            line, cur = int(m.group(1)), m.group(2)
            if not cur.startswith("<"):  # a header found relative to the file's folder
                cur = str((source.parent / cur).resolve())
            system = "3" in m.group(3).split()
            if not system and not cur.startswith("<") and cur != STDIN \
                    and cur not in seen_headers:
                seen_headers.append(cur)
            continue
        d = _DIRECTIVE.match(raw)
        builtin = cur.startswith("<") and cur != STDIN
        if d:
            pp.events.append((pos, MacroDef(d.group(2), raw, "" if builtin else cur, line,
                                            system, undef=d.group(1) == "undef")))
        elif not system and not builtin:
            if raw.strip():  # a skipped line comes out blank: only code marks a line active
                pp.active.setdefault(cur, set()).add(line)
                pp.order.setdefault((cur, line), pos)
            pp.code.append((cur, line, raw))
        line += 1
    pp.headers = [Path(h) for h in seen_headers]
    return pp
