"""One real, short crew run shared by the report tests (about 20-60 s on two cores)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import OPS, kernelcrew


@pytest.fixture(scope="session")
def crew_run(_isolated_dirs: None) -> dict:
    """`kernelcrew optimize` on the small vadd op, two iterations, memory off (the
    roofline stop is off: vadd's baseline may already run near the bandwidth peak).

    The run folder sits in the session's runs root (so `kernelcrew runs` lists it) under a
    name that is not its run id (so lookups by id are exercised too)."""
    run_dir = Path(os.environ["KERNELCREW_RUNS_DIR"]) / "report-tests"
    proc = kernelcrew("optimize", str(OPS / "vadd"), "--backend", "cpu", "--max-iters", "2",
                      "--roofline-done", "2", "--reps", "4", "--run-dir", str(run_dir),
                      "--no-memory", "--json", timeout=240)
    assert proc.returncode == 0, f"optimize failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout)
    assert Path(result["run_dir"]) == run_dir
    return result
