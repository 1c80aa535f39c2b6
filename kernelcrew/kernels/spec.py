"""The operator spec (op.yaml) model and the loader for operator folders."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from kernelcrew.errors import ExprError, InputError
from kernelcrew.kernels.expr import evaluate, names_in
from kernelcrew.kernels.formats import FORMATS

LIBRARY = Path(__file__).parent / "library"

DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    # narrow integers: pixels, audio samples, quantized weights, packed flags
    "uint8": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
    "uint16": np.dtype(np.uint16),
    "int16": np.dtype(np.int16),
    "uint32": np.dtype(np.uint32),
}
DType = Literal["float32", "float64", "float16", "int32", "int64", "uint8", "int8", "uint16",
                "int16", "uint32"]
GROUPS = ("typical", "boundary", "unaligned")
BACKENDS = ("cpu", "cuda")
# default input values of the integer dtypes, as [lo, hi) (an inputs.py chooses others):
# wide ones small (-8..8: products and sums of them stay in range), 8-bit ones over their
# whole range (pixels and quantized values use it all), 16-bit ones over 12 bits (samples,
# coefficients)
INT_INPUTS = {"uint8": (0, 256), "int8": (-128, 128), "uint16": (0, 4096),
              "int16": (-2048, 2048)}

_FIX = {
    "missing": "add it",
    "literal_error": "use one of the listed values",
    "extra_forbidden": "remove it or check its spelling",
    "float_parsing": "write a number such as 1.0e-5",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorSpec(_Strict):
    dtype: DType
    shape: list[str | int] = Field(description="size expressions, outermost first")
    # inputs only. `refresh: false`: the judge never changes this input's elements between
    # timed runs (an input whose order carries meaning: sorted keys, offsets); by default
    # a timed run finds a few of every input's elements swapped, so no run repeats
    refresh: bool = True
    # inputs only: the values the op is defined for, [lo, hi]; the judge's extra inputs
    # at accept time (large magnitudes, ties, tiny values) stay inside it
    domain: tuple[float, float] | None = None


class ScalarSpec(_Strict):
    dtype: DType
    value: float | int


class Cost(_Strict):
    bytes: str | int = Field(description="least bytes any version must move")
    flops: str | int = Field(description="least floating-point operations")


class Tolerance(_Strict):
    rtol: float
    atol: float

    @field_validator("rtol", "atol", mode="before")
    @classmethod
    def _yaml_float(cls, v: Any) -> Any:
        # YAML reads `1e-5` (no dot) as a string; accept it rather than fail later.
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                return v
        return v


class ShapeGroup(_Strict):
    weight: float = Field(gt=0)
    cases: list[dict[str, int]] = Field(min_length=1)


class Origin(_Strict):
    """Where an imported operator's baseline came from (`kernelcrew import`)."""

    source: str = Field(description="the original source file")
    function: str = Field(description="the imported function")
    line: int = Field(default=0, description="its line in the source when imported")
    sha256: str = Field(default="", description="digest of the source when imported")
    entry: str = Field(default="", description="the generated entry in baseline.cpp")
    flags: list[str] = Field(default_factory=list, description="the baseline's flags")
    build: list[str] = Field(default_factory=list,
                             description="the -I/-D flags the file was read with")
    reference: Literal["derived", "given"] = Field(
        default="given", description="derived: reference.py runs the code promoted to float64")
    warnings: list[str] = Field(default_factory=list,
                                description="where float64 promotion changes semantics")
    notes: list[str] = Field(default_factory=list, description="what the cost model guessed")


class OpSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9_]+$")
    description: str = ""
    family: str
    sizes: list[str] = Field(default_factory=list)
    inputs: dict[str, TensorSpec] = Field(min_length=1)
    outputs: dict[str, TensorSpec] = Field(min_length=1)
    scalars: dict[str, ScalarSpec] = Field(default_factory=dict)
    cost: Cost
    tolerance: Tolerance
    shapes: dict[str, ShapeGroup] = Field(min_length=1)
    # groups of one backend only (e.g. a GPU's `typical` a hundred times a CPU's): on that
    # backend a group here replaces the shared group of the same name or adds one; other
    # backends never see it (`for_backend`)
    backend_shapes: dict[str, dict[str, ShapeGroup]] = Field(default_factory=dict)
    # backend (a registered kernel format: kernels.formats) -> its baseline file
    baselines: dict[str, str] = Field(default_factory=dict)
    origin: Origin | None = None
    # how timed runs find the caches: cold (flushed before each run), warm (the previous
    # run's data left in place), auto (by the working set against the last-level cache)
    cache: Literal["cold", "warm", "auto"] = "auto"
    # NaN and infinite inputs are part of the op's contract: a kernel must give NaN and
    # infinities where the reference does (the judge then tries such inputs before it
    # accepts a win; by default it does not, as fast math need not propagate them)
    specials: bool = False
    folder: Path | None = Field(default=None, exclude=True)
    # after for_backend: op.yaml's `shapes:`, and the backend whose groups `shapes` holds
    _shared: dict[str, ShapeGroup] | None = PrivateAttr(default=None)
    _backend: str | None = PrivateAttr(default=None)

    @field_validator("baselines")
    @classmethod
    def _known_backends(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = [k for k in v if k not in FORMATS]
        if unknown:
            raise ValueError(f"no backend named {unknown[0]!r}; use one of {', '.join(FORMATS)}")
        return v

    @model_validator(mode="after")
    def _check_symbols(self) -> OpSpec:
        sizes = set(self.sizes)
        names = list(self.inputs) + list(self.outputs) + list(self.scalars) + self.sizes
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"names used twice across inputs/outputs/scalars/sizes: {sorted(dup)}")
        for kind, tensors in (("inputs", self.inputs), ("outputs", self.outputs)):
            for tname, t in tensors.items():
                for i, dim in enumerate(t.shape):
                    _check_expr(dim, sizes, f"{kind}.{tname}.shape[{i}]")
        _check_expr(self.cost.bytes, sizes, "cost.bytes")
        _check_expr(self.cost.flops, sizes, "cost.flops")
        unknown = [b for b in self.backend_shapes if b not in FORMATS]
        if unknown:
            raise ValueError(f"backend_shapes.{unknown[0]}: unknown backend; the keys are "
                             f"backend names ({', '.join(FORMATS)})")
        groups = [(f"shapes.{g}", s) for g, s in self.shapes.items()]
        groups += [(f"backend_shapes.{b}.{g}", s) for b, gs in self.backend_shapes.items()
                   for g, s in gs.items()]
        for where, g in groups:
            for i, case in enumerate(g.cases):
                missing, extra = sizes - set(case), set(case) - sizes
                if missing or extra:
                    raise ValueError(
                        f"{where}.cases[{i}]: "
                        + (f"missing sizes {sorted(missing)}" if missing else "")
                        + (f" unknown sizes {sorted(extra)}" if extra else "")
                        + f"; give exactly {self.sizes}"
                    )
                if any(v < 0 for v in case.values()):
                    raise ValueError(f"{where}.cases[{i}]: sizes must be >= 0")
        return self

    def for_backend(self, backend: str | None) -> OpSpec:
        """This spec with the shape groups `backend` runs: the shared groups, each replaced
        by the backend's group of the same name where `backend_shapes` has one, then the
        backend's other groups. The spec itself when the backend declares no groups (so a
        CPU run sees exactly what op.yaml's `shapes:` says). None: the shared groups."""
        shared = self._shared_shapes()
        own = self.backend_shapes.get(backend, {}) if backend else {}
        if (own and backend == self._backend) or (not own and self._backend is None):
            return self
        merged = {g: own.get(g, s) for g, s in shared.items()}
        merged.update({g: s for g, s in own.items() if g not in shared})
        out = self.model_copy(update={"shapes": merged})
        out._shared, out._backend = (shared, backend) if own else (None, None)
        return out

    @property
    def shapes_backend(self) -> str | None:
        """The backend whose own groups `shapes` holds; None: op.yaml's `shapes:` as written."""
        return self._backend

    def _shared_shapes(self) -> dict[str, ShapeGroup]:
        return self._shared if self._shared is not None else self.shapes

    # -- derived views -------------------------------------------------------------
    def signature(self) -> list[tuple[str, str]]:
        """(name, kind) in kernel-argument order: inputs, outputs, scalars, sizes."""
        return (
            [(n, "input") for n in self.inputs]
            + [(n, "output") for n in self.outputs]
            + [(n, "scalar") for n in self.scalars]
            + [(n, "size") for n in self.sizes]
        )

    def shape(self, tensor: str, sizes: dict[str, int]) -> tuple[int, ...]:
        t = self.inputs.get(tensor) or self.outputs[tensor]
        return tuple(evaluate(d, sizes) for d in t.shape)

    def cases(self) -> Iterator[Case]:
        for gname, g in self.shapes.items():
            for i, c in enumerate(g.cases):
                yield Case(gname, i, dict(c), g.weight)

    def cost_bytes(self, sizes: dict[str, int]) -> int:
        return evaluate(self.cost.bytes, sizes)

    def cost_flops(self, sizes: dict[str, int]) -> int:
        return evaluate(self.cost.flops, sizes)

    def written_share(self, sizes: dict[str, int]) -> float | None:
        """The share of the cost model's bytes that are the outputs written (each output
        once), at most 1; None when the cost model counts no bytes. Sets the bandwidth
        ceiling of the op's mix of reads and writes (`peaks.bandwidth_ceiling`)."""
        total = self.cost_bytes(sizes)
        if total <= 0:
            return None
        written = sum(int(np.prod(self.shape(n, sizes), dtype=np.int64))
                      * np.dtype(t.dtype).itemsize for n, t in self.outputs.items())
        return min(written / total, 1.0)

    def baseline_path(self, backend: str) -> Path:
        """The baseline `backend` races: its own, or the one of the format it shares."""
        fmt = FORMATS.get(backend)
        if backend not in self.baselines and fmt is not None:
            backend = fmt.baseline_key
        if backend not in self.baselines or self.folder is None:
            raise InputError(
                f"no baseline for backend {backend!r}; add `baselines: {{{backend}: FILE}}`",
                path=self._yaml_path(), field="baselines",
            )
        return self.folder / self.baselines[backend]

    def _yaml_path(self) -> Path | None:
        return self.folder / "op.yaml" if self.folder else None

    @cached_property
    def _module(self) -> Any:
        return _load_module(self.folder / "reference.py", f"kernelcrew_ref_{self.name}")

    def reference_fn(self) -> Callable[..., dict[str, np.ndarray]]:
        fn = getattr(self._module, "reference", None)
        if not callable(fn):
            raise InputError("defines no function `reference(**kw)`; add one",
                             path=self.folder / "reference.py")
        return fn

    def inputs_fn(self) -> Callable[..., dict[str, np.ndarray]] | None:
        p = self.folder / "inputs.py" if self.folder else None
        if p is None or not p.exists():
            return None
        mod = _load_module(p, f"kernelcrew_inputs_{self.name}")
        fn = getattr(mod, "make_inputs", None)
        if not callable(fn):
            raise InputError("defines no function `make_inputs(rng, **sizes)`; add one", path=p)
        return fn


@dataclass(frozen=True)
class Case:
    group: str
    index: int
    sizes: dict[str, int]
    weight: float

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.sizes.items())


def _check_expr(expr: str | int, sizes: set[str], field: str) -> None:
    if isinstance(expr, str) and re.fullmatch(r"\s*", expr):
        raise ValueError(f"{field}: empty expression")
    try:
        unknown = names_in(expr) - sizes
    except ExprError as e:
        raise ValueError(f"{field}: {e}") from None
    if unknown:
        raise ValueError(
            f"{field}: undefined size symbol(s) {sorted(unknown)} in {expr!r}; declare them in "
            f"`sizes` (now {sorted(sizes)})"
        )


def _load_module(path: Path, name: str) -> Any:
    if not path.exists():
        raise InputError("file is missing; every operator folder needs it", path=path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except Exception as e:  # noqa: BLE001 - user code: any failure is bad input
        raise InputError(f"failed to import: {type(e).__name__}: {e}", path=path) from None
    return mod


def _format_validation(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    fix = _FIX.get(err["type"], "")
    if err["type"] == "literal_error" and "dtype" in loc:
        fix = f"use one of {', '.join(DTYPES)}"
    if err["type"] == "missing":
        text, fix = f"missing field {loc!r}", "add it"
    else:
        text = f"{loc}: {msg}" if loc else msg
    more = f" (+{len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return text + (f"; {fix}" if fix else "") + more


def resolve_op_folder(ref: str | Path) -> Path:
    """A library name or a path to an operator folder -> the folder."""
    p = Path(ref)
    if p.is_dir():
        return p.resolve()
    if isinstance(ref, str) and re.fullmatch(r"[a-z0-9_]+", ref) and (LIBRARY / ref).is_dir():
        return LIBRARY / ref
    known = ", ".join(library_ops())
    raise InputError(f"no such operator {str(ref)!r}: give a library name ({known}) or a folder")


def library_ops() -> list[str]:
    return sorted(p.name for p in LIBRARY.iterdir() if (p / "op.yaml").exists())


def load_op(ref: str | Path | OpSpec, backend: str | None = None) -> OpSpec:
    """Load and validate an operator folder (or pass an OpSpec through); with a backend,
    its shape groups are the ones that backend runs (`OpSpec.for_backend`)."""
    if isinstance(ref, OpSpec):
        return ref.for_backend(backend) if backend else ref
    spec = _load_folder(ref)
    return spec.for_backend(backend) if backend else spec


def _load_folder(ref: str | Path) -> OpSpec:
    folder = resolve_op_folder(ref)
    yml = folder / "op.yaml"
    if not yml.exists():
        raise InputError("missing op.yaml; an operator folder needs one", path=folder)
    try:
        data = yaml.safe_load(yml.read_text())
    except yaml.YAMLError as e:
        raise InputError(f"invalid YAML: {str(e).splitlines()[0]}", path=yml) from None
    if not isinstance(data, dict):
        raise InputError("must be a YAML mapping of fields (name, sizes, inputs, ...)", path=yml)
    _hint_split_expressions(data, yml)
    try:
        spec = OpSpec.model_validate({**data, "folder": folder})
    except ValidationError as e:
        raise InputError(_format_validation(e), path=yml) from None
    for backend, fname in spec.baselines.items():
        if not (folder / fname).exists():
            raise InputError(f"baseline file {fname!r} does not exist; fix the name or add it",
                             path=yml, field=f"baselines.{backend}")
    if not (folder / "reference.py").exists():
        raise InputError("missing reference.py with `def reference(**kw)`", path=folder)
    return spec


def _hint_split_expressions(data: dict, path: Path) -> None:
    """YAML splits `[ceil_div(n, B)]` into two items; say so instead of a parse error."""
    for kind in ("inputs", "outputs"):
        for tname, t in (data.get(kind) or {}).items():
            shape = t.get("shape") if isinstance(t, dict) else None
            for dim in shape or []:
                if isinstance(dim, str) and dim.count("(") != dim.count(")"):
                    raise InputError(
                        f"{dim!r} looks like an expression YAML split at a comma; quote it, "
                        f'e.g. ["ceil_div(n, 4)"]', path=path, field=f"{kind}.{tname}.shape")
