"""Without Ray installed: the local executor works as before, and `--executor ray` is a
one-line error naming the extra (exit 2). `ray` is made unimportable for a subprocess by a
sitecustomize that refuses it, the way a machine without the package would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BLOCK = '''
import sys

class _NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoRay())
'''


def _env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "noray"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCK)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
            "KERNELCREW_RAY_ADDRESS": ""}


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=_env(tmp_path))


def test_the_blocker_really_hides_ray(tmp_path: Path) -> None:
    r = _run(tmp_path, "-c", "import ray")
    assert r.returncode != 0 and "No module named 'ray'" in r.stderr


def test_executor_ray_without_ray_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    for cmd in (["optimize", "scale_shift_sum", "--backend", "cpu", "--executor", "ray"],
                ["eval", "--ops", "scale_shift_sum", "--executor", "ray"]):
        r = _run(tmp_path, "-m", "kernelcrew.cli", *cmd)
        assert r.returncode == 2, (cmd, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "kernelcrew[ray]" in lines[0] and lines[0].startswith("kernelcrew: error:")


@pytest.mark.slow  # a crew run: about 11 s
def test_a_local_crew_run_never_imports_ray(tmp_path: Path) -> None:
    """The graph, its nodes, the suite and the CLI load and a local executor evaluates a
    kernel with Ray unimportable; `ray` is not among the loaded modules afterwards."""
    code = f'''
import sys
from pathlib import Path
import kernelcrew.cli, kernelcrew.evals.suite, kernelcrew.graph.build
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.services import release, tools_for
from kernelcrew.tools.executor import Evaluation
op = Path({str(ROOT / "kernelcrew" / "kernels" / "library" / "scale_shift_sum")!r})
state = {{"run_dir": {str(tmp_path / "run")!r}, "op_path": str(op), "backend": "cpu", "seed": 1}}
tools = tools_for(state, RunContext(reps=3))
assert tools.executor.name == "local"
text = (op / "baseline.cpp").read_text()
[r] = tools.executor.evaluate([Evaluation(key="k", stage="verify", kernel=text, path="b.cpp")])
assert r.verify.correct, r
release(state["run_dir"])
assert not any(m == "ray" or m.startswith("ray.") for m in sys.modules), "ray was imported"
print("ok")
'''
    r = _run(tmp_path, "-c", code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
