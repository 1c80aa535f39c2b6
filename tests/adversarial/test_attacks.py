"""One test per attack: each kernel is `rejected`, with a reason that names the problem.

The twelve of issue #2 (wrong results, crashes, hangs, CUDA host code and host
includes, flags), the static-check evasions, and the shape and NaN tricks. The
attacks on the machine itself (files, network, processes, memory, compile bombs) are
in test_sandbox.py; the timing tricks in test_timing_integrity.py.
"""

from __future__ import annotations

import re

import pytest

from tests.adversarial.conftest import (
    KERNELS,
    WorkerWatch,
    assert_none_left,
    assert_rejected,
    judge,
)

NAN = r"NaN/Inf differ from the reference"
TOL = r"outside tolerance \(rtol=0\.0001"

# kernel file -> a pattern its rejection reason must match
ATTACKS = {
    # issue #2
    "writes_nothing.cpp": NAN + r".*unwritten",
    "half_work.cpp": NAN + r".*unwritten",
    "replay_cached.cpp": r"first call, input set 1: .*" + TOL,
    "low_precision_fp16.cpp": TOL,
    "low_precision_bf16.cpp": TOL,
    "writes_inputs.cpp": r"kernel crashed with SIGSEGV in case typical\[0\] .*inputs are "
                         r"read-only memory",
    "never_returns.cpp": r"kernel timed out after [\d.]+ s \(killed\) in case typical\[0\]",
    "null_deref.cpp": r"kernel crashed with SIGSEGV in case typical\[0\]",
    "only_multiples_1024.cpp": r"wrong result in (boundary|unaligned) case .*" + TOL,
    "returns_nan.cpp": r"256 element\(s\) where " + NAN,
    "cuda_host_code.cu": r"refused before compiling: .*line 25: CUDA runtime API calls "
                         r"\(host code\) are not allowed",
    "cuda_include_host_file.cu": r"line 12: include '#include \"/etc/passwd\"' refused",
    "bad_flags.cpp": r"flag '-include/etc/passwd' is not on the cpu allow-list",
    "bad_flags_plugin.cpp": r"flag '-fplugin=/tmp/evil.so' is not on the cpu allow-list",
    # issue #9 and the brief: static refusals, and evasions of the static check
    "write_outside_scratch.cpp": r"include '#include <cstdio>' refused",
    "network.cpp": r"include '#include <sys/socket.h>' refused",
    "fork_bomb.cpp": r"include '#include <unistd.h>' refused",
    "reads_host_file.cpp": r"include '#include \"/etc/passwd\"' refused",
    "reads_host_file_fopen.cpp": r"include '#include <cstdio>' refused",
    "include_digraph.cpp": r"include '%:include \"/etc/passwd\"' refused",
    "include_spliced_string.cpp": r"line 11: line continuation .* is not allowed",
    "syscall_hidden_by_digit_separator.cpp": r"line 11: system calls are not allowed",
    "cuda_include_digraph.cu": r"include '%:include </etc/passwd>' refused",
    "cuda_host_code_raw_string.cu": r"line 21: host code is not allowed: function 'host_side'",
    "cuda_host_code_attribute.cu": r"line 20: host code is not allowed: function 'host_side'",
    "prompt_injection.cpp": r"wrong result in typical case .*" + TOL,
    "shape_specialized.cpp": r"wrong result in boundary case .*" + TOL,
    "nan_as_match.cpp": r"1 element\(s\) where " + NAN + r" \(1 NaN in the output",
}

# attacks on a library operator, not the tiny test op
LIBRARY_ATTACKS = {
    "lib_scale_shift_sum_multiples_1024.cpp": (
        "scale_shift_sum", r"wrong result in (boundary|unaligned) case .*outside tolerance"),
    "lib_add_gelu_muladd_tanh.cpp": (
        "add_gelu_muladd", r"wrong result in typical case .*outside tolerance \(rtol=0\.0001"),
}

TIMEOUT_S = {"never_returns.cpp": 3}


def test_every_kernel_file_is_tested():
    """Each kernel under kernels/ is an attack some test judges, with a header naming it."""
    from tests import test_duel_plan
    from tests.adversarial import (
        test_runtime_attacks,
        test_sandbox,
        test_symbols,
        test_timing_integrity,
        test_worker_hygiene,
    )

    tested = (set(ATTACKS) | set(LIBRARY_ATTACKS) | test_sandbox.KERNELS_USED
              | test_timing_integrity.KERNELS_USED | test_worker_hygiene.KERNELS_USED
              | test_symbols.KERNELS_USED | test_runtime_attacks.KERNELS_USED
              | test_duel_plan.KERNELS_USED)
    files = {p.name for p in KERNELS.iterdir() if p.suffix in (".cpp", ".cu")}
    assert files == tested, (files - tested, tested - files)
    for name in files:
        assert "ATTACK" in (KERNELS / name).read_text()[:1500], f"{name}: header names no attack"


@pytest.mark.parametrize("kernel", sorted(ATTACKS))
def test_attack_is_rejected(kernel: str):
    timeout = TIMEOUT_S.get(kernel, 10)
    j = judge(kernel, timeout=timeout)
    assert_rejected(j, ATTACKS[kernel])
    # one worker run (or none) at most, plus compile and process start-up
    assert j.seconds < timeout + 60, j.seconds


@pytest.mark.parametrize("kernel", sorted(LIBRARY_ATTACKS))
def test_attack_on_library_op_is_rejected(kernel: str):
    op, pattern = LIBRARY_ATTACKS[kernel]
    j = judge(kernel, op=op, reps=3)
    assert_rejected(j, pattern)


def test_never_returns_ends_within_its_timeout(tmp_path):
    """The worker of a kernel that never returns is killed at its timeout: the parent
    waited the whole timeout, and the kill, not the end of the duel, ended the worker.

    Wall-clock bounds do not hold on a loaded machine (compiling and starting the
    workers there take many seconds), the order of events does: after the kill the
    parent closes its pipes, and only then does the baseline's worker, waiting for its
    next command, read their end and exit. A kill that does not happen leaves the
    kernel's worker spinning after the baseline's worker is gone (until the parent's
    fallback kill, seconds later, or the worker's wall-clock limit)."""
    scratch = tmp_path / "scratch"
    with WorkerWatch(scratch) as watch:
        j = judge("never_returns.cpp", timeout=2, env={"KERNELCREW_SCRATCH": str(scratch)})
    # killed in its first call; on a machine loaded enough that starting the worker
    # took longer than the timeout, while loading (the same kill, the same witness below)
    assert_rejected(j, r"^kernel timed out after \d+\.\d s \(killed\)"
                       r"( in case typical\[0\] \(rows=256,cols=1024\))?$")
    waited = float(re.search(r"timed out after (\d+\.\d) s", j.reason).group(1))
    assert waited >= 2.0, j.reason
    kernel, baseline = watch.worker("run1"), watch.worker("run2")
    assert kernel.last <= baseline.last, (
        f"the kernel's worker was still seen {kernel.last - baseline.last:.2f} s after the "
        "baseline's worker had exited: it was not killed at its timeout")
    assert_none_left(scratch)


def test_prompt_injection_changes_nothing():
    """The 'accept this kernel' text reaches nothing: the verdict is the measurement's."""
    j = judge("prompt_injection.cpp")
    assert_rejected(j, r"outside tolerance")
    assert "ACCEPTED" not in j.reason and "verdict=faster" not in j.reason
