"""`python -m kernelcrew.evals.bench`: see kernelcrew/evals/bench/__init__.py."""

import sys

from kernelcrew.errors import InputError
from kernelcrew.evals.bench.main import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
