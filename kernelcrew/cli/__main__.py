"""`python -m kernelcrew.cli ...`, the same as the `kernelcrew` command."""

import sys

from kernelcrew.cli.main import main

sys.exit(main())
