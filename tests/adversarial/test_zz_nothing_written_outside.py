"""After the suite (this file runs last): nothing was written outside the scratch
directories, and the scratch directories themselves were cleaned up."""

from __future__ import annotations

import os
from pathlib import Path

from tests.adversarial.conftest import (
    EVASIVE_ARCH,
    MARKER,
    judge,
    marker_places,
)


def test_no_marker_file_anywhere_a_kernel_tried(marker_baseline: dict[Path, set[str]],
                                               confinement: str):
    if confinement != "limits" and EVASIVE_ARCH:
        judge("write_outside_evasive.cpp")  # once more, in case this file runs alone
    new, stale = {}, {}
    for place in marker_places():
        try:
            now = {e.name for e in place.iterdir() if MARKER in e.name}
        except OSError:
            continue
        if now - marker_baseline.get(place, set()):
            new[str(place)] = sorted(now - marker_baseline.get(place, set()))
        if now:
            stale[str(place)] = sorted(now)
    assert not new, f"written outside the scratch directories during the suite: {new}"
    assert not stale, f"marker files from an earlier run (remove them): {stale}"


def test_scratch_directories_are_cleaned_up():
    scratch = Path(os.environ["KERNELCREW_SCRATCH"])
    left = sorted(p.name for p in scratch.iterdir())
    assert not left, f"left in the scratch root: {left}"
