"""The package's layers, as data, and a checker over its import graph.

The rules below are the ones the README's architecture section states. Each module
belongs to the unit with the longest matching name; a unit may import itself and the
units it lists, nothing else. A rule named `P.*` makes each module or package directly
under `P` a unit of its own with that rule: every move of `agents/transforms/cpu/` is
its own unit, so a move cannot import another move, a new one included. Every import
counts, at module level or inside a function, so a lazy import cannot hide a wrong
arrow or a cycle.

    python -m kernelcrew.layers      # prints each violation and cycle; exit 1 if any

`tests/test_layering.py` runs the same check on the package, and on a small package
with a deliberately wrong import to show that the check fails.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

BOTTOM = ("kernelcrew.errors", "kernelcrew.results", "kernelcrew.trace", "kernelcrew.kernels",
          "kernelcrew.csource")
TOOLS_BASE = ("kernelcrew.tools.config", "kernelcrew.tools.locks", "kernelcrew.tools.confine",
              "kernelcrew.tools.sandbox")

# the moves, in layers of their own (see kernelcrew/agents/transforms/__init__.py)
TF = "kernelcrew.agents.transforms"
# what a move may import: the analysis, the views, the registry and its helpers
MOVE_BASE = (*BOTTOM, f"{TF}.analysis", f"{TF}.views", f"{TF}.kernel_files", f"{TF}.registry",
             f"{TF}.reasons")
MOVE_GROUPS = (f"{TF}.cpu", f"{TF}.cuda", f"{TF}.any_backend")

# unit -> the units it may import (besides itself), from the bottom up
RULES: dict[str, tuple[str, ...]] = {
    "kernelcrew.errors": (),
    "kernelcrew.results": ("kernelcrew.errors",),
    "kernelcrew.trace": (),
    # the importer parses code bases with the masking the moves' parser uses
    "kernelcrew.kernels": ("kernelcrew.errors", "kernelcrew.csource"),
    # C source analysis, shared by the profiler and the moves: tree-sitter only
    "kernelcrew.csource": (),
    "kernelcrew.memory": ("kernelcrew.errors",),
    # measuring: a ladder inside tools
    "kernelcrew.tools.config": (),
    "kernelcrew.tools.locks": ("kernelcrew.tools.config",),
    "kernelcrew.tools.confine": (),  # standard library only: it runs as a script
    "kernelcrew.tools.sandbox": ("kernelcrew.errors", "kernelcrew.tools.config",
                                 "kernelcrew.tools.confine"),
    "kernelcrew.tools.backends": (*BOTTOM, *TOOLS_BASE),
    "kernelcrew.tools.judge": (*BOTTOM, *TOOLS_BASE, "kernelcrew.tools.backends"),
    "kernelcrew.tools.observe": (*BOTTOM, *TOOLS_BASE, "kernelcrew.tools.backends",
                                 "kernelcrew.tools.judge"),
    "kernelcrew.tools.executor": (*BOTTOM, *TOOLS_BASE, "kernelcrew.tools.backends",
                                  "kernelcrew.tools.judge"),
    "kernelcrew.tools": (),  # the package's own docstring
    # deciding: beside tools, never importing it
    "kernelcrew.agents": (*BOTTOM, "kernelcrew.memory", TF),
    # the moves: analysis and views at the bottom, each move its own unit, the catalogue
    # (every move's registration line) on top
    f"{TF}.analysis": BOTTOM,
    f"{TF}.views": (*BOTTOM, f"{TF}.analysis"),
    f"{TF}.kernel_files": (*BOTTOM, f"{TF}.analysis"),
    f"{TF}.registry": (*BOTTOM, f"{TF}.kernel_files"),
    f"{TF}.reasons": (*BOTTOM, f"{TF}.analysis", f"{TF}.views", f"{TF}.kernel_files"),
    f"{TF}.regions": (*BOTTOM, f"{TF}.kernel_files"),
    **{group: () for group in MOVE_GROUPS},  # the packages' own docstrings
    **{f"{group}.*": MOVE_BASE for group in MOVE_GROUPS},  # one unit per move
    f"{TF}.catalogue": (*MOVE_BASE, *MOVE_GROUPS),
    TF: (TF,),  # the package's front door re-exports from all of it
    # reading runs back
    "kernelcrew.report": (*BOTTOM, "kernelcrew.tools"),
    # the loop
    "kernelcrew.graph": (*BOTTOM, "kernelcrew.memory", "kernelcrew.tools", "kernelcrew.agents",
                         "kernelcrew.report"),
    # on top
    "kernelcrew.evals": (*BOTTOM, "kernelcrew.memory", "kernelcrew.tools", "kernelcrew.agents",
                         "kernelcrew.report", "kernelcrew.graph"),
    "kernelcrew.cli": (*BOTTOM, "kernelcrew.memory", "kernelcrew.tools", "kernelcrew.agents",
                       "kernelcrew.report", "kernelcrew.graph", "kernelcrew.evals",
                       "kernelcrew.layers"),
    "kernelcrew.layers": (),
    "kernelcrew": ("kernelcrew.graph",),  # the top-level API re-exports build_graph
}


@dataclass(frozen=True)
class Edge:
    src: str  # importing module
    dst: str  # imported module (or package)
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"



# why a rule is there, added to the message of an import against it
NOTES = {f"{group}.*": "a move never imports another move: code two moves share goes to "
         f"{TF}.analysis" for group in MOVE_GROUPS}


def _units(module: str, rules: dict[str, tuple[str, ...]]) -> list[tuple[str, str]]:
    """(unit, the rule's name) for every rule that covers `module`."""
    out = []
    for rule in rules:
        if rule.endswith(".*"):
            parent = rule[:-2]
            if module.startswith(parent + "."):
                out.append((f"{parent}.{module[len(parent) + 1:].split('.')[0]}", rule))
        elif module == rule or module.startswith(rule + "."):
            out.append((rule, rule))
    return out


def rule_of(module: str, rules: dict[str, tuple[str, ...]] = RULES) -> str | None:
    """The name of the rule `module` follows: its unit's, or the `P.*` rule that made it."""
    got = _units(module, rules)
    return max(got, key=lambda u: len(u[0]))[1] if got else None


def unit_of(module: str, rules: dict[str, tuple[str, ...]] = RULES) -> str | None:
    """The unit with the longest name that is `module` or a package above it (with a
    `P.*` rule, the module or package directly under P that holds it)."""
    got = _units(module, rules)
    return max(got, key=lambda u: len(u[0]))[0] if got else None


def _module_name(root: Path, path: Path, package: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [package, *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_edges(root: Path, package: str = "kernelcrew") -> tuple[set[str], list[Edge]]:
    """All modules of the package under `root`, and every import of one by another."""
    files = sorted(root.rglob("*.py"))
    modules = {_module_name(root, f, package): f for f in files}
    edges: list[Edge] = []
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[:len(pkg) - (node.level - 1)]
                    base = ".".join([*pkg, base] if base else pkg)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in modules else base)
            for t in targets:
                if t == package or t.startswith(package + "."):
                    # an import of a name inside a module counts as the module
                    while t not in modules and "." in t:
                        t = t.rsplit(".", 1)[0]
                    if t != name:
                        edges.append(Edge(name, t, path.relative_to(root.parent), node.lineno))
    return set(modules), edges


def violations(edges: list[Edge], rules: dict[str, tuple[str, ...]] = RULES) -> list[str]:
    """One line per import that crosses the layers against `rules`."""
    out = []
    for e in edges:
        su, du = unit_of(e.src, rules), unit_of(e.dst, rules)
        if su is None:
            out.append(f"{e.where()}: module {e.src} belongs to no layer; add it to the rules")
            continue
        if du is None or du == su:
            continue
        rule = rule_of(e.src, rules)
        allowed = rules[rule]
        if not any(du == a or du.startswith(a + ".") for a in allowed):
            note = f" ({NOTES[rule]})" if rule in NOTES else ""
            out.append(f"{e.where()}: {e.src} imports {e.dst}: {su} may import only "
                       f"{', '.join(allowed) or 'nothing else'}{note}")
    return out


def cycles(modules: set[str], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # recursion depth is bounded by the package's size
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def check(root: Path | None = None, package: str = "kernelcrew",
          rules: dict[str, tuple[str, ...]] = RULES) -> list[str]:
    """Every layering violation and import cycle of the package, one line each."""
    root = root or Path(__file__).resolve().parent
    modules, edges = import_edges(root, package)
    problems = violations(edges, rules)
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(modules, edges)]
    return problems


def main() -> int:
    problems = check()
    for p in problems:
        print(p)
    print(f"{len(problems)} layering problem(s)" if problems else "layers: ok, no import cycle")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
