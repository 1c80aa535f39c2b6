"""The peers' child process: `python -m kernelcrew.evals.peers kt|numpy|cupy JOB.json`; its last
stdout line is the JSON result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelcrew.evals.peers.cuda_peers import cupy_child
from kernelcrew.evals.peers.kernel_tuner import kt_child
from kernelcrew.evals.peers.numpy_peer import numpy_child

CHILDREN = {"kt": kt_child, "numpy": numpy_child, "cupy": cupy_child}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in CHILDREN:
        print("usage: python -m kernelcrew.evals.peers kt|numpy|cupy JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[1]).read_text())
    print(json.dumps(CHILDREN[argv[0]](job), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
