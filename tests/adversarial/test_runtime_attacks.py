"""The attacks of issues #38 and #41 that target the judge's runtime layers, through
`kernelcrew check`.

None of these kernels imports anything the symbol allow-list refuses: the ones that need
a forbidden function find `dlsym` in the C library's dynamic symbol table from the
address of memcpy (an allowed import) and everything else through it (see any of them),
so the layers behind the allow-list must hold on their own: the parent owns the buffers,
the clock and the evidence; the worker is stopped between its calls and guarded (no new
processes, no signal handlers); the gate judges a group against the incumbent's noise; a
win is checked on inputs it was never timed on. The same kernels go through the crew's
race path in test_crew_path.py.
"""

from __future__ import annotations

import re
from unittest import mock

import pytest

from tests.adversarial.conftest import (
    HERE,
    KERNELS,
    NO_GAIN,
    assert_no_gain,
    assert_rejected,
    judge,
    needs_resolver,
)

GELU = HERE / "ops" / "gelu_mid"  # the library's gelu_tanh, every case ~0.1 ms or more
# the kernels that must reach a `faster` verdict (and the checks behind it) are timed at
# the default 20 reps and 20 rounds: at the suite's 4 reps a group of an honest fast
# kernel was once read as regressing (0.49x) on a loaded machine
FULL = {"reps": 20, "env": {"KERNELCREW_ROUNDS": "20"}, "timeout": 30}
FIRST_UNWRITTEN = (r"^wrong result in typical case rows=256,cols=1024: first call, input set 0:"
                   r" out: {n} element\(s\) where NaN/Inf differ from the reference \({n} NaN in"
                   r" the output: unwritten or invalid\)")
UNSEEN = r"^wrong result on inputs it was never timed on: sizes n=\d+ \(not a case of op\.yaml\), "
# the unaligned group regresses: the gate judged it against the incumbent's own noise
# by the medians, or by the tail means when the slowdown hits under half of the calls
GROUP_REGRESSES = (r"overall but the unaligned group regresses (in its slower calls )?"
                   r"\(0\.\d+x")

KERNELS_USED = {"rewritten_outputs.cpp", "relabeled_report.cpp", "hidden_pid_timer.cpp",
                "sabotage_baseline.cpp", "zero_work.cpp", "async_thread.cpp",
                "fork_helper.cpp", "sigsegv_handler.cpp", "unreadable_outputs.cpp",
                "memo_full_attention.cpp", "memo_full_gelu.cpp", "gelu_cutoff.cpp",
                "gelu_sizes.cpp", "gelu_fast.cpp", "lib_sss_noisy_group.cpp",
                "lib_sss_fast.cpp", "sss_fast_float.cpp"}

# -- issue #38: the worker's own writings, identity and clock ---------------------------
# kernel -> the rows left unwritten in the first call of the first case (the reason)
UNWRITTEN = {
    # 1 row in 1024 computed; the rest written by Python in the worker after the window,
    # and saved as .npy files where output files used to be read from
    "rewritten_outputs.cpp": 255,
    # half the rows; the worker's replies and a report at exit forged
    "relabeled_report.cpp": 128,
    # the worker's call of the kernel replaced (from Python) by one that returns at once
    "zero_work.cpp": 256,
    # a tenth of the rows; a helper thread writes the rest 50 ms after the call returned
    "async_thread.cpp": 231,
    # nothing computed, the output pages made unreadable (PROT_NONE) for a fault handler
    "unreadable_outputs.cpp": 256,
}


@needs_resolver
@pytest.mark.parametrize("kernel", sorted(UNWRITTEN))
def test_outputs_written_outside_the_window_or_not_at_all_are_rejected(kernel: str):
    """Whatever the worker says or writes elsewhere, the parent reads the outputs from its
    own mapping right after each call's window (every thread of the worker stopped): the
    rows the call did not write still hold the parent's poison."""
    j = judge(kernel)
    assert_rejected(j, FIRST_UNWRITTEN.format(n=UNWRITTEN[kernel]))


@needs_resolver
def test_hidden_worker_with_patched_clocks_gains_nothing():
    """Command line and process name overwritten in a constructor, the worker's clocks
    slowed to a third, honest math: the parent found its worker in the process tree before
    the kernel was loaded (no 'could not be identified'), and its own clock judged."""
    j = judge("hidden_pid_timer.cpp", **NO_GAIN)
    assert_no_gain(j)
    assert "identified" not in j.reason


@needs_resolver
def test_sabotaged_baseline_gains_nothing():
    """The worker hidden and two threads spinning forever from load on, honest math: the
    spinners are stopped with the worker whenever the baseline runs, and only slow their
    own kernel."""
    assert_no_gain(judge("sabotage_baseline.cpp", **NO_GAIN))


# -- the worker's guard: processes, signal handlers, protections ----------------------
@needs_resolver
def test_helper_process_is_refused():
    """fork, vfork, clone3 and execve reached through dlsym: each refused (the kernel
    writes minus errno in out[0..3]: -1 EPERM from the worker's guard; clone3, whose flags
    a filter cannot read, -38 ENOSYS from the stock sandbox's filter). A process made
    would read as its PID; a successful exec would leave no worker to answer."""
    j = judge("fork_helper.cpp")
    assert_rejected(j, r"^wrong result in typical case rows=256,cols=1024: first call, input "
                       r"set 0: out: 4 of 256 elements outside tolerance .*worst at \[\d\]: "
                       r"got -(1|38),")
    rows = {r["case"]: r for r in j.doc["rows"]}
    assert rows["rows=256,cols=1024"]["failing_indices"] == [[0], [1], [2], [3]], rows


@needs_resolver
def test_fault_handlers_and_writable_inputs_are_refused():
    """sigaction(SIGSEGV) and signal(SIGBUS) reached through dlsym: EPERM (the guard
    refuses rt_sigaction); mprotect of an input page to writable: EACCES (sealed memory
    the worker may only map read-only). Minus errno in out[0..2]."""
    j = judge("sigsegv_handler.cpp")
    assert_rejected(j, r"^wrong result in typical case rows=256,cols=1024: first call, input "
                       r"set 0: out: 3 of 256 elements outside tolerance .*worst at \[\d\]: "
                       r"got -(1|13),")
    rows = {r["case"]: r for r in j.doc["rows"]}
    assert rows["rows=256,cols=1024"]["failing_indices"] == [[0], [1], [2]], rows


# -- issue #41: memoization, noise, overfitting -----------------------------------------
def test_memoization_by_full_comparison_gains_nothing_on_attention():
    """Kept copies of q, k, v compared per batch entry with memcmp: every element of a
    timed run's inputs is new, so nothing is reused and the comparison is extra work
    (issue #41: 66-92x when inputs repeated). Judged against its honest twin (the same
    per-entry helper without the memo, ops/attention_entry): the library's baseline is
    twice as slow as that helper's code, which would hide nothing here but the memo's
    (lack of) gain."""
    assert_no_gain(judge("memo_full_attention.cpp", op=HERE / "ops" / "attention_entry",
                         timeout=30, **NO_GAIN))


def test_memoization_by_full_comparison_gains_nothing_on_gelu():
    j = judge("memo_full_gelu.cpp", op=GELU, **FULL)
    assert j.doc is not None and j.doc["correct"] is True, j.stdout[-2000:]
    assert j.verdict != "faster", j.reason


def test_gelu_wrong_beyond_the_normal_range_is_rejected_on_unseen_inputs():
    """0 for |x| > 6.5 (never reached by standard normal inputs), fast elsewhere: `faster`
    in the duel, then rejected on large magnitudes it was never timed on."""
    j = judge("gelu_cutoff.cpp", op=GELU, **FULL)
    assert_rejected(j, UNSEEN + r"large magnitudes \(standard normal x 30\): y: ")


def test_gelu_specialized_to_the_listed_sizes_is_rejected_on_unseen_sizes():
    """Right only for the sizes op.yaml lists: `faster` in the duel, then rejected on a
    size drawn near the op's own cases."""
    j = judge("gelu_sizes.cpp", op=GELU, **FULL)
    assert_rejected(j, UNSEEN + r"standard normal values: y: ")


def test_honest_fast_gelu_is_judged_faster():
    """The control of the two above: the same fast GELU, right for every size and value
    the tanh form defines, is judged `faster` (the unseen inputs included)."""
    j = judge("gelu_fast.cpp", op=GELU, **FULL)
    context = f"rc={j.rc} reason={j.reason!r}\n{j.stderr[-2000:]}"
    assert j.rc == 0 and j.doc["correct"] is True, context
    assert j.verdict == "faster" and not j.doc["suspicious"], context


def test_group_slowed_at_random_to_hide_a_regression_is_not_accepted():
    """Fast everywhere but the unaligned group, where 40% of the calls at random take ten
    times the baseline's loop. At the default 20 reps and 20 rounds (the gate's noise
    estimates need rounds) the group must read as regressing and the kernel must not be
    accepted."""
    j = judge("lib_sss_noisy_group.cpp", op="scale_shift_sum", reps=20, timeout=30,
              env={"KERNELCREW_ROUNDS": "20"}, limit_s=600)
    context = f"rc={j.rc} reason={j.reason!r}\n{j.stderr[-2000:]}"
    assert j.rc == 0 and j.doc["correct"] is True, context
    assert j.doc["group_speedups"]["typical"] > 1.5, context  # fast where it is honest
    assert j.verdict == "same", context
    assert re.search(GROUP_REGRESSES, j.reason), context


def test_noisy_groups_control_is_faster_where_the_attack_was_slow():
    """The control: the same kernel without the coin reads faster on the unaligned group
    the attack slowed (and on the typical one), so the regression above is the coin's.
    (Its verdict is not asserted: the boundary group's 1x1 and 33x31 cases, some 0.02 ms,
    read up to a third apart between two workers of the same code on a loaded machine, and
    can make the gate see a regression there: see the suite's README.)"""
    j = judge("lib_sss_fast.cpp", op="scale_shift_sum", reps=20, timeout=30,
              env={"KERNELCREW_ROUNDS": "20"}, limit_s=600)
    context = f"rc={j.rc} reason={j.reason!r}\n{j.stderr[-2000:]}"
    assert j.rc == 0 and j.doc["correct"] is True, context
    groups = j.doc["group_speedups"]
    assert groups["typical"] > 1.5 and groups["unaligned"] > 1.5, context


# -- an honest kernel the unseen-inputs check rejects -----------------------------------
def test_unseen_inputs_accept_an_honest_vectorized_reduction():
    """sss_fast_float.cpp sums each row with a vectorized float reduction (another order
    than the baseline's sequential sum, no less accurate). With the unseen check's draw
    fixed (seed 17: sizes rows=57,cols=1547, among them), it is rejected on one row of the
    large-magnitude set: its error there is a few ulps of the row's summed magnitudes."""
    from kernelcrew.kernels.kernelfile import load_kernel
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.tools.backends.backend import get_backend
    from kernelcrew.tools.judge import unseen
    from kernelcrew.tools.judge.harness import Harness
    from tests.adversarial.conftest import TINY

    spec = load_op(TINY)
    be = get_backend("cpu")
    base = load_kernel(spec.baseline_path("cpu"))
    fast = load_kernel(KERNELS / "sss_fast_float.cpp")
    bc, fc = be.compile(base, spec), be.compile(fast, spec)
    assert bc.ok and fc.ok, (bc.reason, fc.reason)
    with Harness(spec, be) as h, mock.patch.object(unseen.secrets, "randbits", lambda n: 17):
        why, row = unseen.unseen_failure(h, (fc, fast), incumbent=(bc, base))
    assert why == "" and row is None, why

