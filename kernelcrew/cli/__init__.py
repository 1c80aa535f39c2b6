"""The `kernelcrew` command line.

- `parser`: the argument parser, one `add_<command>` per subcommand;
- `handlers`: one `cmd_<command>(args) -> exit code` per subcommand;
- `options`: argument types, and the settings parsed flags make;
- `printing`: tables, JSON and progress lines;
- `main`: parse, dispatch, and errors as exit codes (0 ok, 1 rejected or failed, 2 bad input).
"""

from kernelcrew.cli.main import main
from kernelcrew.cli.options import EMBEDDING_CHOICES, context_from_args, llm_settings
from kernelcrew.cli.parser import build_parser
from kernelcrew.cli.printing import table

# the name this function had when the command line was one module
_context_from_args = context_from_args

__all__ = ["EMBEDDING_CHOICES", "build_parser", "context_from_args", "llm_settings", "main",
           "table"]
