"""Probes for a GPU machine: Nsight Compute through the stock confinement's layers, and
CUDA event times against the host clock. Prints one JSON object per probe.

    python3 scripts/gpu_sandbox_probe.py [ncu|timer|all]

`ncu`: the same small CuPy program profiled by ncu, unconfined and under more and more
of the stock confinement (namespaces; loopback up in the private network namespace; the
program, not ncu, under Landlock; and under seccomp too), so a failing layer shows
itself. `timer`: a one-block kernel timed by a pair of CUDA events and by the host's
clock around the same call, idle and after an L2 sweep, as the worker times a run: an
event time above the host's window would be a timer the parent cannot check against.
Diagnostics only: nothing here is used by kernelcrew itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernelcrew.tools.sandbox import (
    _stock_command,
    _unshare_prefix,
    stock_layers,
)

TARGET = r"""
import cupy as cp
a = cp.arange(1 << 20, dtype=cp.float32)
k = cp.RawKernel('extern "C" __global__ void twice(float* a, int n) { int i = blockIdx.x'
                 ' * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; }', 'twice')
k(((1 << 20) // 256,), (256,), (a, cp.int32(1 << 20)))
cp.cuda.runtime.deviceSynchronize()
print("TARGET_RAN", float(a[3]))
"""

LOOPBACK_UP = r"""
import fcntl, os, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))  # SIOCSIFFLAGS IFF_UP
s.close()
os.execvp(sys.argv[1], sys.argv[1:])
"""


def devices() -> list[str]:
    import glob
    found = [d for d in sorted(glob.glob("/dev/nvidia*")) if not os.path.isdir(d)]
    return found + [d for d in ["/dev/nvidia-caps"] if os.path.isdir(d)]


def probe_ncu() -> None:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    layers = stock_layers() or {"namespaces": [], "landlock": 0, "seccomp": False}
    ns = layers["namespaces"]
    scratch = Path(tempfile.mkdtemp(prefix="kc-ncu-probe-"))
    env = {**os.environ, "HOME": str(scratch), "TMPDIR": str(scratch),
           "CUPY_CACHE_DIR": str(scratch / "cupy")}
    target = [sys.executable, "-c", TARGET]
    prof = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "-c", "1"]
    loup = [sys.executable, "-c", LOOPBACK_UP]

    def launcher(landlock: bool, seccomp: bool) -> list[str]:
        lay = {"namespaces": [], "landlock": layers["landlock"] if landlock else 0,
               "seccomp": seccomp and layers["seccomp"]}
        return _stock_command(target, lay, scratch, [], devices())

    variants = {
        "unconfined": prof + target,
        "namespaces": _unshare_prefix(ns) + prof + target,
        "namespaces+lo": _unshare_prefix(ns) + loup + prof + target,
        "namespaces+lo, target under Landlock": _unshare_prefix(ns) + loup + prof
        + launcher(True, False),
        "namespaces+lo, target under seccomp": _unshare_prefix(ns) + loup + prof
        + launcher(False, True),
        "namespaces+lo, target under Landlock+seccomp": _unshare_prefix(ns) + loup + prof
        + launcher(True, True),
        "all layers around ncu (kernelcrew before the fix)": _stock_command(
            prof + target, {**layers, "namespaces": ns}, scratch, [], devices()),
        "ncu as a tool: namespaces, then ncu, then the layers (kernelcrew now)":
            _stock_command(target, {**layers, "namespaces": ns}, scratch, [], devices(),
                           tool=prof),
    }
    print(json.dumps({"probe": "ncu", "layers": layers, "ncu": ncu}), flush=True)
    for name, argv in variants.items():
        t0 = time.monotonic()
        try:
            r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True,
                               timeout=60, check=False)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = str(e.stdout or "") + str(e.stderr or ""), "timeout"
        except OSError as e:
            out, rc = str(e), "cannot start"
        lines = [ln for ln in out.splitlines() if ln.strip()]
        print(json.dumps({
            "probe": "ncu", "variant": name, "rc": rc, "s": round(time.monotonic() - t0, 1),
            "target_ran": "TARGET_RAN" in out,
            "metric": any("gpu__time_duration.sum" in ln for ln in lines),
            "notes": [ln[:200] for ln in lines if ln.startswith(("==ERROR==", "==WARNING==",
                                                                  "==PROF=="))][:6],
            "tail": [ln[:200] for ln in lines[-4:]],
        }), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)


def probe_timer() -> None:
    import cupy as cp
    import numpy as np
    k = cp.RawKernel(r'extern "C" __global__ void one(float* a) { a[threadIdx.x] += 1.0f; }',
                     "one")
    a = cp.zeros(32, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    s.use()
    props = cp.cuda.runtime.getDeviceProperties(0)
    sweep = cp.empty(2 * int(props["l2CacheSize"]), dtype=cp.uint8)
    host = cp.cuda.alloc_pinned_memory(sweep.nbytes)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    k((1,), (32,), (a,), stream=s)
    s.synchronize()
    for mode in ("back to back", "after 2 ms idle", "after an L2 sweep"):
        rows = []
        for _ in range(200):
            if mode == "after 2 ms idle":
                time.sleep(0.002)
            elif mode == "after an L2 sweep":
                cp.cuda.runtime.memcpyAsync(host.ptr, sweep.data.ptr, sweep.nbytes,
                                            cp.cuda.runtime.memcpyDeviceToHost, s.ptr)
            s.synchronize()
            t0 = time.perf_counter_ns()
            e0.record(s)
            k((1,), (32,), (a,), stream=s)
            e1.record(s)
            e1.synchronize()
            t1 = time.perf_counter_ns()
            rows.append((cp.cuda.get_elapsed_time(e0, e1), (t1 - t0) / 1e6))
        ev, wall = np.array(rows).T
        print(json.dumps({
            "probe": "timer", "mode": mode, "runs": len(rows),
            "event_ms_median": round(float(np.median(ev)), 5),
            "host_ms_median": round(float(np.median(wall)), 5),
            "event_over_host_runs": int((ev > wall).sum()),
            "worst_event_minus_host_ms": round(float((ev - wall).max()), 5),
        }), flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("timer", "all"):
        probe_timer()
    if what in ("ncu", "all"):
        probe_ncu()
