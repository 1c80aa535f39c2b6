"""What a compiled cubin's SASS says, without a device: `cuobjdump -sass`, per kernel.

The counts that show a CUDA rewrite did what it claims: 128-bit global loads/stores
(LDG.E.128 / STG.E.128) after vectorization, warp shuffles (SHFL) and barriers (BAR)
after a block reduction, shared-memory traffic (LDS/STS) after tiling, local-memory
traffic (LDL/STL: spills) after a register change, tensor-core instructions (HMMA) and
asynchronous copies into shared memory (LDGSTS). cuobjdump (and the nvdisasm it calls)
come with the CUDA toolkit, or from the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm
wheels (the `dev` extra; `toolkit.cuda_tool` finds them); `sass_tool()` is None when
neither is there.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.tools.backends.toolkit import cuda_tool

_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


@dataclass
class KernelSass:
    kernel: str
    ops: Counter = field(default_factory=Counter)  # full opcode with modifiers -> count

    def count(self, prefix: str) -> int:
        """Instructions whose opcode (with modifiers) starts with `prefix`."""
        return sum(n for op, n in self.ops.items() if op == prefix or op.startswith(prefix + "."))

    def features(self) -> dict[str, int]:
        vec_ld = sum(n for op, n in self.ops.items() if op.startswith("LDG") and ".128" in op)
        vec_st = sum(n for op, n in self.ops.items() if op.startswith("STG") and ".128" in op)
        return {"global_loads": self.count("LDG"), "global_loads_128": vec_ld,
                "global_stores": self.count("STG"), "global_stores_128": vec_st,
                "shuffles": self.count("SHFL"), "barriers": self.count("BAR"),
                "shared_loads": self.count("LDS"), "shared_stores": self.count("STS"),
                "local_loads": self.count("LDL"), "local_stores": self.count("STL"),
                "atomics": self.count("ATOM") + self.count("RED") + self.count("REDG")
                + self.count("ATOMG"),
                # tensor-core matrix instructions (wmma / mma.sync), asynchronous copies
                "tensor_ops": self.count("HMMA") + self.count("IMMA") + self.count("HGMMA")
                + self.count("DMMA"),
                "async_copies": self.count("LDGSTS"),
                "instructions": sum(self.ops.values())}


def sass_tool() -> str | None:
    """cuobjdump from KERNELCREW_CUOBJDUMP, PATH, next to nvcc, or the nvidia wheel."""
    return cuda_tool("cuobjdump", "KERNELCREW_CUOBJDUMP")


def parse_sass(text: str) -> dict[str, KernelSass]:
    out: dict[str, KernelSass] = {}
    cur: KernelSass | None = None
    for line in text.splitlines():
        if m := _FUNC.match(line):
            cur = out.setdefault(m.group(1), KernelSass(m.group(1)))
            continue
        if cur is not None and (m := _INSN.search(line)):
            cur.ops[m.group(1)] += 1
    return out


def disassemble(cubin: str | Path, timeout_s: float = 60) -> dict[str, KernelSass]:
    """Per-kernel SASS instruction counts of a cubin. Raises RuntimeError when no tool is
    found or it fails (one line saying why)."""
    tool = sass_tool()
    if tool is None:
        raise RuntimeError("cuobjdump not found (CUDA toolkit, or pip install "
                           "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    env = dict(os.environ)
    env["PATH"] = str(Path(tool).parent) + os.pathsep + env.get("PATH", "")
    try:
        r = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                           timeout=timeout_s, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cuobjdump failed: {e}") from None
    if r.returncode != 0:
        line = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cuobjdump failed: {line[:200]}")
    return parse_sass(r.stdout)
