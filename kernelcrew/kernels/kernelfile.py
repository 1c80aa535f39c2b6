"""Kernel files: source with a leading `/* kernelcrew ... */` YAML front matter."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelcrew.errors import ExprError, InputError
from kernelcrew.kernels.expr import names_in
from kernelcrew.kernels.flags import build_flags, check_compiler, check_flags, knob_defines
from kernelcrew.kernels.formats import format_for, format_of_path
from kernelcrew.kernels.spec import DTYPES, OpSpec, TensorSpec

_FRONT = re.compile(r"\A\s*/\*\s*kernelcrew[ \t]*\n(?P<yaml>.*?)\*/[ \t]*\n?", re.DOTALL)
Backend = str  # a backend with a registered kernel format (kernels.formats)


class Launch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kernel: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    grid: list[str | int] = Field(min_length=1, max_length=3)
    block: list[str | int] = Field(min_length=1, max_length=3)
    shared_bytes: str | int = 0
    args: list[str]


class FrontMatter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entry: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # CPU: the compiler the kernel is built with (None: g++), `clang++` or `clang++-19`
    compiler: str | None = None
    flags: list[str] = Field(default_factory=list)
    knobs: dict[str, int | float] = Field(default_factory=dict)
    temps: dict[str, TensorSpec] = Field(default_factory=dict)
    launch: list[Launch] = Field(default_factory=list)


class KernelFile(BaseModel):
    """A parsed kernel file. `body` is the source after the front matter."""

    model_config = ConfigDict(frozen=True)
    path: Path | None
    backend: Backend
    meta: FrontMatter
    body: str
    text: str  # the whole file as read

    @property
    def defines(self) -> list[str]:
        return knob_defines(self.meta.knobs, path=self.path)

    def digest(self) -> str:
        return text_digest(self.text)

    def build_line(self) -> str:
        """The compiler and the flags it is given for this kernel, as it was measured
        (`clang++ -O3 -march=native -fopenmp-simd -Wno-register` for a clang++ file that
        lists `-fopenmp`; g++ when the file names no compiler)."""
        return " ".join([self.meta.compiler or "g++",
                         *build_flags(self.meta.compiler, list(self.meta.flags))])

    def with_changes(self, *, body: str | None = None, flags: list[str] | None = None,
                     knobs: dict[str, Any] | None = None, compiler: str | None = None
                     ) -> KernelFile:
        """A new kernel file with some parts replaced (front matter re-rendered);
        `compiler="g++"` names the default compiler (the field is then left out)."""
        meta = self.meta.model_copy(deep=True)
        if compiler is not None:
            meta.compiler = None if compiler == "g++" else compiler
        if flags is not None:
            meta.flags = list(flags)
        if knobs is not None:
            meta.knobs = {**meta.knobs, **knobs}
        text = render(meta, self.body if body is None else body)
        return parse_kernel_text(text, self.backend, path=None)


def text_digest(text: str) -> str:
    """Identity of a kernel file's text (compile cache, evaluation cache, dedup)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def render(meta: FrontMatter, body: str) -> str:
    data = meta.model_dump(exclude_defaults=True)
    if "temps" in data:
        data["temps"] = {k: {"dtype": v["dtype"], "shape": v["shape"]}
                         for k, v in data["temps"].items()}
    front = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return f"/* kernelcrew\n{front}*/\n{body.lstrip(chr(10))}"


def backend_of(path: Path) -> Backend:
    """The backend whose kernel files end as `path` does."""
    return format_of_path(path).backend


def load_kernel(path: str | Path) -> KernelFile:
    path = Path(path)
    if not path.is_file():
        raise InputError("no such kernel file", path=path)
    return parse_kernel_text(path.read_text(errors="replace"), backend_of(path), path=path)


def parse_kernel_text(text: str, backend: Backend, *, path: Path | None = None) -> KernelFile:
    m = _FRONT.match(text)
    if not m:
        raise InputError(
            "no front matter: the file must start with a `/* kernelcrew` comment holding "
            "entry/flags (cpu) or launch (cuda), closed by `*/`", path=path)
    try:
        data = yaml.safe_load(m.group("yaml")) or {}
    except yaml.YAMLError as e:
        raise InputError(f"front matter is not valid YAML: {str(e).splitlines()[0]}",
                         path=path) from None
    if not isinstance(data, dict):
        raise InputError("front matter must be a YAML mapping", path=path)
    for i, launch in enumerate(data.get("launch") or []):
        for key in ("grid", "block"):
            for item in (launch or {}).get(key) or []:
                if isinstance(item, str) and item.count("(") != item.count(")"):
                    raise InputError(
                        f"{item!r} looks like an expression YAML split at a comma; quote it: "
                        f'["ceil_div(n, BLOCK)"]', path=path, field=f"launch[{i}].{key}")
    try:
        meta = FrontMatter.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{err['msg']}", path=path, field=f"front matter {loc}") from None
    fmt = format_for(backend, path=path)
    check_compiler(meta.compiler, backend, path=path)
    check_flags(meta.flags, backend, path=path, compiler=meta.compiler)
    knob_defines(meta.knobs, path=path)
    if fmt.needs == "entry" and not meta.entry:
        raise InputError(f"{backend} kernel files need `entry: <function name>` in the front "
                         "matter", path=path, field="entry")
    if fmt.needs == "launch" and not meta.launch:
        raise InputError(f"{backend} kernel files need a `launch:` list (kernel, grid, block, "
                         "args)", path=path, field="launch")
    return KernelFile(path=path, backend=backend, meta=meta, body=text[m.end():], text=text)


def validate_against(kf: KernelFile, spec: OpSpec) -> None:
    """Check a kernel file's launch plan/temps against the operator's names."""
    known = set(spec.sizes) | set(kf.meta.knobs)
    for name, t in kf.meta.temps.items():
        for d in t.shape:
            _names_ok(d, known, kf, f"temps.{name}.shape")
        if name in spec.inputs or name in spec.outputs:
            raise InputError(f"temp {name!r} shadows an operator tensor; rename it",
                             path=kf.path, field="temps")
        if t.dtype not in DTYPES:
            raise InputError(f"temp {name!r} has unknown dtype", path=kf.path, field="temps")
    args_known = (set(spec.inputs) | set(spec.outputs) | set(spec.scalars) | set(spec.sizes)
                  | set(kf.meta.temps))
    for i, launch in enumerate(kf.meta.launch):
        for key in ("grid", "block"):
            for d in getattr(launch, key):
                _names_ok(d, known, kf, f"launch[{i}].{key}")
        _names_ok(launch.shared_bytes, known, kf, f"launch[{i}].shared_bytes")
        bad = [a for a in launch.args if a not in args_known]
        if bad:
            raise InputError(f"unknown argument(s) {bad}; use names of inputs, outputs, temps, "
                             f"scalars or sizes: {sorted(args_known)}", path=kf.path,
                             field=f"launch[{i}].args")


def _names_ok(expr: str | int, known: set[str], kf: KernelFile, field: str) -> None:
    try:
        unknown = names_in(expr) - known
    except ExprError as e:
        raise InputError(str(e), path=kf.path, field=field) from None
    if unknown:
        raise InputError(f"undefined name(s) {sorted(unknown)} in {expr!r}; sizes and knobs are "
                         f"{sorted(known)}", path=kf.path, field=field)
