"""The entry point: parse, run the subcommand's handler, turn errors into exit codes."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kernelcrew.cli.parser import build_parser
from kernelcrew.errors import AgentUnavailable, ExecutorError, InputError


def main(argv: Sequence[str] | None = None) -> int:
    """`kernelcrew ...`: 0 ok, 1 rejected or failed, 2 bad input, 130 interrupted."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as e:
        print(f"kernelcrew: error: {e}", file=sys.stderr)
        return 2
    except AgentUnavailable as e:
        print(f"kernelcrew: error: {e}", file=sys.stderr)
        return 1
    except ExecutorError as e:  # the cluster went away: the best so far is on disk
        print(f"kernelcrew: stopped: {e}; the best kernel so far is kept in the run folder, "
              "and `kernelcrew optimize --resume RUN_ID` continues", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kernelcrew: interrupted", file=sys.stderr)
        return 130
