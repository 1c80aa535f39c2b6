"""Where the CUDA toolkit's programs are (nvcc, cuobjdump, ...), without a device.

In order: an environment variable naming the program, PATH, the directory of the nvcc
that KERNELCREW_NVCC or PATH names (a toolkit's bin/), and last the NVIDIA wheels from PyPI (`nvidia-cuda-nvcc`,
`nvidia-cuda-cuobjdump`, ...: the `dev` and `cuda` extras). Those wheels install into
the `nvidia` namespace package as `nvidia/cu<major>/` with the toolkit's own layout:
bin/ (nvcc, ptxas, nvcc.profile), include/ (the runtime and crt headers, from
nvidia-cuda-runtime and nvidia-cuda-crt), lib/ and nvvm/ (cicc and libdevice, from
nvidia-nvvm). nvcc reads its nvcc.profile relative to itself, so the wheel's nvcc finds
cicc, ptxas, libdevice and the headers with no flag or variable set, as long as those
wheels are installed side by side (pip installs them as nvidia-cuda-nvcc's dependencies).

The namespace package is located with importlib's finder, not imported: nothing of it runs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path


def wheel_roots() -> list[Path]:
    """The `nvidia/cu<major>` directories of installed NVIDIA wheels, newest major first."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    found: list[tuple[int, Path]] = []
    for base in spec.submodule_search_locations or []:
        try:
            entries = list(Path(base).iterdir())
        except OSError:
            continue
        for d in entries:
            m = re.fullmatch(r"cu(\d+)", d.name)
            if m and d.is_dir():
                found.append((int(m.group(1)), d))
    return [d for _, d in sorted(found, key=lambda t: -t[0])]


def wheel_tool(name: str) -> str | None:
    """`name` from the bin/ of an installed NVIDIA wheel (newest CUDA major), or None."""
    for root in wheel_roots():
        cand = root / "bin" / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def cuda_tool(name: str, env_var: str) -> str | None:
    """A CUDA toolkit program: $env_var, else PATH, else next to the nvcc that
    KERNELCREW_NVCC or PATH names, else the NVIDIA wheel's; None when none has it."""
    env = os.environ.get(env_var)
    if env:
        return env
    found = shutil.which(name)
    if found:
        return found
    nvcc = os.environ.get("KERNELCREW_NVCC") or shutil.which("nvcc")
    if nvcc:
        cand = Path(nvcc).resolve().parent / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return wheel_tool(name)
