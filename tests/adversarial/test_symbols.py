"""The first layer behind the static check: a compiled CPU kernel's undefined dynamic
symbols must be on an allow-list (kernelcrew/tools/backends/symbols.py).

One kernel per class of forbidden function, each declaring it by hand (names glued with
## where the static text check would see them): refused after compiling, before any
worker starts, the symbol and its class named. The kernels that reach the same functions
without importing them (through dlsym, found from the address of memcpy) are judged in
test_sandbox.py and test_runtime_attacks.py: the runtime layers must hold on their own.
"""

from __future__ import annotations

import pytest

from tests.adversarial.conftest import assert_rejected, judge

REFUSED = r"^refused after compiling: the kernel imports `{name}` \({kind}\)"

# kernel -> (the symbol the reason names first, its class as the reason words it)
SYMBOL_KERNELS = {
    "symbol_python_api.cpp": ("PyGILState_Ensure", "the Python C API"),
    "symbol_syscall.cpp": ("syscall", "a raw system call"),
    "symbol_dlsym.cpp": ("dlopen", "dynamic loading"),
    "symbol_pthread_create.cpp": ("pthread_create", "thread creation"),
    "symbol_fork.cpp": ("execv", "processes"),
    "symbol_sigaction.cpp": ("sigaction", "signals and timers"),
    "symbol_sched_setaffinity.cpp": ("sched_setaffinity", "scheduling and CPU affinity"),
    "symbol_mprotect.cpp": ("mprotect", "memory mappings"),
    "symbol_files.cpp": ("open", "files, sockets or output"),
}
# the other symbols a kernel imports are listed after the first
ALSO_NAMED = {"symbol_python_api.cpp": ["PyRun_SimpleString"], "symbol_dlsym.cpp": ["dlsym"],
              "symbol_pthread_create.cpp": ["pthread_join"], "symbol_fork.cpp": ["fork"],
              "symbol_files.cpp": ["write"]}
KERNELS_USED = set(SYMBOL_KERNELS)


@pytest.mark.parametrize("kernel", sorted(SYMBOL_KERNELS))
def test_forbidden_symbol_is_refused_after_compiling(kernel: str):
    name, kind = SYMBOL_KERNELS[kernel]
    j = judge(kernel)
    assert_rejected(j, REFUSED.format(name=name, kind=kind))
    for other in ALSO_NAMED.get(kernel, []):
        assert other in j.reason, j.reason
    assert j.doc["rows"] == [], "refused before running: no case was run"
    assert j.doc["compile"]["ok"] is False
    assert j.seconds < 60, j.seconds
