"""The package keeps its layers (README, "Architecture") and has no import cycle."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelcrew import layers

PACKAGE = Path(layers.__file__).resolve().parent


def test_the_package_keeps_its_layers_and_has_no_cycle() -> None:
    assert layers.check() == []


def test_every_module_belongs_to_a_layer() -> None:
    modules, _ = layers.import_edges(PACKAGE)
    assert modules and all(layers.unit_of(m) for m in modules)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "kernelcrew"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "library"))
    return root


def test_a_wrong_import_fails_the_check(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    coord = root / "agents" / "coordinator.py"
    # an agent that runs a tool itself: agents and tools sit beside each other
    coord.write_text(coord.read_text() + "\n\ndef _peek():\n"
                     "    from kernelcrew.tools.judge import gate  # inside a function\n"
                     "    return gate\n")
    problems = layers.check(root)
    assert len(problems) == 1
    assert "kernelcrew.agents.coordinator imports kernelcrew.tools.judge.gate" in problems[0]
    assert problems[0].startswith("kernelcrew/agents/coordinator.py:")


def test_a_back_arrow_fails_the_check(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    finalize = root / "graph" / "nodes" / "finalize.py"
    finalize.write_text("from kernelcrew.evals import suite  # noqa: F401\n" + finalize.read_text())
    problems = layers.check(root)
    assert any("kernelcrew.graph.nodes.finalize imports kernelcrew.evals.suite" in p
               for p in problems)


def test_a_cycle_fails_the_check_even_when_hidden_in_a_function(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    summary = root / "tools" / "observe" / "summary.py"
    # profile imports summary; summary reaching back into profile closes a cycle
    summary.write_text(summary.read_text() + "\n\ndef _late():\n"
                       "    from kernelcrew.tools.observe.profile import profile\n"
                       "    return profile\n")
    problems = layers.check(root)
    assert any(p.startswith("import cycle:") and "kernelcrew.tools.observe.profile" in p
               and "kernelcrew.tools.observe.summary" in p for p in problems)


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    pkg = tmp_path / "kernelcrew"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from .kernels import spec  # noqa: F401\n")
    (pkg / "kernels" / "__init__.py").write_text("")
    (pkg / "kernels" / "spec.py").write_text("from ..errors import X  # noqa: F401\n")
    problems = layers.check(pkg)
    assert any("kernelcrew.errors imports kernelcrew.kernels.spec" in p for p in problems)
    assert any(p.startswith("import cycle:") for p in problems)


MOVES = "kernelcrew.agents.transforms"


def test_each_move_is_a_unit_of_its_own() -> None:
    assert layers.unit_of(f"{MOVES}.cpu.unroll_and_jam") == f"{MOVES}.cpu.unroll_and_jam"
    # a move written as a package of several modules is one unit
    assert layers.unit_of(f"{MOVES}.cpu.big_move.plan") == f"{MOVES}.cpu.big_move"
    assert layers.unit_of(f"{MOVES}.cuda.smem_tile") == f"{MOVES}.cuda.smem_tile"
    assert layers.unit_of(f"{MOVES}.analysis.dot_nests") == f"{MOVES}.analysis"


def test_a_move_importing_another_move_fails_the_check(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    tile = root / "agents" / "transforms" / "cpu" / "register_tile.py"
    # borrowing a helper from a sibling move, as register_tile once did from the jam
    tile.write_text(tile.read_text() + "\n\ndef _borrow():\n"
                    "    from kernelcrew.agents.transforms.cpu import unroll_and_jam\n"
                    "    return unroll_and_jam\n")
    problems = layers.check(root)
    assert len(problems) == 1, problems
    assert f"{MOVES}.cpu.register_tile imports {MOVES}.cpu.unroll_and_jam" in problems[0]
    assert "a move never imports another move" in problems[0]


def test_a_new_move_file_cannot_import_a_move_of_the_other_backend(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    cpu = root / "agents" / "transforms" / "cpu"
    # a new move that reads only the analysis and the views is fine ...
    (cpu / "prefetch_hint.py").write_text(
        "from kernelcrew.agents.transforms.analysis.common import model_of  # noqa: F401\n"
        "from kernelcrew.agents.transforms.views import through_views  # noqa: F401\n")
    assert layers.check(root) == []
    # ... one that borrows from a CUDA move is not
    (cpu / "prefetch_hint.py").write_text(
        "from kernelcrew.agents.transforms.cuda.smem_tile import tile_transpose  # noqa: F401\n")
    problems = layers.check(root)
    assert len(problems) == 1
    assert problems[0].startswith("kernelcrew/agents/transforms/cpu/prefetch_hint.py:1:")


def test_the_analysis_cannot_reach_up_into_a_move(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    dep = root / "agents" / "transforms" / "analysis" / "dependence.py"
    dep.write_text(dep.read_text() + "\n\ndef _up():\n"
                   "    from kernelcrew.agents.transforms.cpu.simd import omp_simd_inner\n"
                   "    return omp_simd_inner\n")
    problems = layers.check(root)
    assert any(f"{MOVES}.analysis.dependence imports {MOVES}.cpu.simd" in p for p in problems)


def test_the_shared_c_analysis_sits_below_tools_and_agents(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    syntax = root / "csource" / "syntax.py"
    syntax.write_text(syntax.read_text() + "\n\ndef _up():\n"
                      "    from kernelcrew.tools.observe import cpu_source\n"
                      "    return cpu_source\n")
    problems = layers.check(root)
    assert any("kernelcrew.csource.syntax imports kernelcrew.tools.observe.cpu_source" in p
               for p in problems)
