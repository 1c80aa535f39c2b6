#!/usr/bin/env bash
# GPU validation on real hardware (issue #10): one prepared command for a CUDA machine.
#
#   scripts/gpu_check.sh                  run every check; summary table printed last
#   scripts/gpu_check.sh --fetch-wheels [core|graph|all]
#                                         HERE, with network: download into .whl/ the
#                                         Python packages kernelcrew needs that the lent
#                                         machine's image lacks (core: check and profile;
#                                         graph: + optimize's LangGraph stack; all: +
#                                         Chroma), then carry .whl there
#
# It uses the machine's own CuPy, nvcc and ncu and installs nothing from the network:
# wheels carried in .whl/ (if any) go into a private folder on PYTHONPATH. It must end
# within 8 minutes on an H200: every stage runs under a timeout and a global deadline
# (KERNELCREW_GPU_BUDGET_S, default 450 s), later stages are skipped when time runs out,
# and the summary is always printed. Without a GPU every device stage reports
# "skipped: no GPU" (the kernels are still compiled).
#
# Output: $OUT if set, else ./gpu-out: summary.txt, summary.tsv and gpu-check.tar.gz
# (full logs, check/profile/optimize JSON, raw ncu CSV exports and the .ncu-rep report).
# Environment: KERNELCREW_PYTHON (the interpreter), KERNELCREW_GPU_BUDGET_S,
# KERNELCREW_GPU_OPS (default: the 6 library ops).

set -u -o pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2

# -- python: the first candidate that runs (on the lent machine, the one with CuPy) ----
pick_python() {
    local c
    for c in "${KERNELCREW_PYTHON:-}" python3 "$REPO/.venv/bin/python" python; do
        [ -n "$c" ] || continue
        command -v "$c" >/dev/null 2>&1 || continue
        if [ -z "${KERNELCREW_PYTHON:-}" ] && [ "$c" = python3 ] \
            && ! "$c" -c "import cupy" >/dev/null 2>&1 && [ -x "$REPO/.venv/bin/python" ]; then
            continue  # no CuPy in python3: the project's venv has the other deps at least
        fi
        echo "$c"
        return 0
    done
    return 1
}

# -- --fetch-wheels: run here, where pip can reach PyPI ---------------------------------
if [ "${1:-}" = "--fetch-wheels" ]; then
    which_set=${2:-core}
    PY=$(pick_python) || { echo "no python found" >&2; exit 2; }
    mkdir -p "$REPO/.whl"
    exclude=$(git -C "$REPO" rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)
    case $exclude in /*) ;; *) exclude=$REPO/$exclude ;; esac
    mkdir -p "$(dirname "$exclude")"
    grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"  # never commit them
    # the packages (pinned to the versions installed here) that the lent GPU machine's
    # image lacks; IMAGE is that image's package list as of 2026-11-17
    "$PY" - "$which_set" >"$REPO/.whl/wanted.txt" <<'PYEOF' || exit 2
import re, sys
from importlib import metadata as md
from packaging.requirements import Requirement
IMAGE = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio
attrs botorch build certifi charset-normalizer chex click cloudpickle cmake colorama
contourpy coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x
cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax
fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax
jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader
lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless opt-einsum opt-einsum-fx optax optimistix orbax-checkpoint
packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil py-cpuinfo pyarrow pybind11 pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests
rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
sentence-transformers sentencepiece setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server
tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torch-geometric
torchaudio torchdiffeq torchmetrics torchvision tqdm transformers treescope triton
typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel
wrapt xarray xxhash yarl zipp""".split())
roots = ["numpy", "pydantic", "pyyaml", "filelock", "platformdirs"]
if sys.argv[1] in ("graph", "all"):
    roots += ["langgraph", "langgraph-checkpoint-sqlite", "langchain-openai", "langchain-core",
              "tree-sitter", "tree-sitter-cpp"]
if sys.argv[1] == "all":
    roots += ["chromadb"]
env = {"extra": "", "python_version": "3.12", "python_full_version": "3.12.3",
       "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
       "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "os_name": "posix"}
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
seen, stack = {}, list(roots)
while stack:
    n = norm(stack.pop())
    if n in seen:
        continue
    try:
        d = md.distribution(n)
    except md.PackageNotFoundError:
        seen[n] = None
        continue
    seen[n] = d.version
    for r in d.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate(env):
            stack.append(req.name)
for n, v in sorted(seen.items()):
    if v and n not in IMAGE:
        print(f"{n}=={v}")
PYEOF
    echo "downloading $(wc -l <"$REPO/.whl/wanted.txt") wheels into .whl/ (python 3.12, x86-64)"
    while read -r spec; do
        "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            --platform any -d "$REPO/.whl" "$spec" || echo "  FAILED: $spec" >&2
    done <"$REPO/.whl/wanted.txt"
    du -sh "$REPO/.whl"
    echo "carry it: run(..., carry=[\".whl\"]); the working tree may hold 64 MiB in all"
    exit 0
fi

START=$SECONDS
BUDGET=${KERNELCREW_GPU_BUDGET_S:-450}
OUT_DIR=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kc-gpu-XXXXXX")
LOGS=$WORK/logs
mkdir -p "$LOGS" "$WORK/ncu" "$WORK/runs"
SUMMARY=$WORK/summary.tsv
: >"$SUMMARY"
export KERNELCREW_CACHE_DIR=$WORK/cache KERNELCREW_GPU_OUT=$WORK/ncu PYTHONUNBUFFERED=1
OPS=${KERNELCREW_GPU_OPS:-"add_gelu_muladd rmsnorm scale_shift_sum small_matmul softmax_rows transpose"}

say() { printf '[gpu_check %4ds] %s\n' "$((SECONDS - START))" "$*"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" | tr -d '\r' >>"$SUMMARY"; }
left() { echo $((BUDGET - (SECONDS - START))); }
# run NAME MAX_SECONDS CMD...: output to logs/NAME.log; rc 124 on its timeout
run() {
    local name=$1 max=$2 rem
    shift 2
    rem=$(($(left) - 15))
    [ "$rem" -lt "$max" ] && max=$rem
    if [ "$max" -lt 10 ]; then
        echo "skipped: time budget" >"$LOGS/$name.log"
        return 125
    fi
    echo "\$ $* (timeout ${max}s)" >"$LOGS/$name.log"
    timeout -k 5 "$max" "$@" >>"$LOGS/$name.log" 2>&1
}
finish() {
    say "summary"
    "${PY:-python3}" - "$SUMMARY" "$((SECONDS - START))" "$OUT_DIR" >"$WORK/summary.txt" \
        2>>"$LOGS/summary.log" <<'PYEOF' || column -t -s $'\t' "$SUMMARY" >"$WORK/summary.txt"
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
head = ["stage", "item", "status", "detail"]
w = [max(len(head[i]), *(len(r[i]) for r in rows)) if rows else len(head[i]) for i in range(3)]
fmt = lambda r: "  ".join(r[i].ljust(w[i]) for i in range(3)) + "  " + r[3]
print("== kernelcrew GPU check (issue #10) ==")
print(fmt(head))
print("  ".join("-" * x for x in w) + "  " + "-" * 6)
for r in rows:
    print(fmt((r + [""] * 4)[:4]))
bad = sum(1 for r in rows if r[2].startswith(("FAIL", "ERROR")))
print(f"-- {len(rows)} lines, {bad} failed; {sys.argv[2]} s; logs: {sys.argv[3]}/gpu-check.tar.gz")
PYEOF
    cp "$SUMMARY" "$OUT_DIR/summary.tsv"
    cp "$WORK/summary.txt" "$OUT_DIR/summary.txt"
    tar -czf "$OUT_DIR/gpu-check.tar.gz" -C "$WORK" logs ncu runs summary.tsv 2>/dev/null
    cat "$WORK/summary.txt"
    rm -rf "$WORK"
}
trap finish EXIT

# -- 0. interpreter, packages, device ------------------------------------------------------
PY=$(pick_python) || { record setup python ERROR "no python interpreter found"; exit 1; }
SITE=$WORK/site
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
KC=("$PY" -m kernelcrew.cli)
importable() { "$PY" -c "import kernelcrew.tools.judge.check, kernelcrew.tools.backends.cuda" >"$LOGS/import.log" 2>&1; }
if ! importable && ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
    # the interpreter lacks some of kernelcrew's packages: add the carried wheels
    run wheels 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$SITE" "$REPO"/.whl/*.whl \
        && record setup wheels ok "$(ls "$REPO"/.whl/*.whl | wc -l) wheels from .whl" \
        || record setup wheels FAIL "pip install from .whl failed (logs/wheels.log)"
    export PYTHONPATH="$PYTHONPATH:$SITE"
fi
if ! importable; then
    missing=$(grep -o "No module named '[^']*'" "$LOGS/import.log" | head -1)
    record setup kernelcrew ERROR "cannot import with $PY: ${missing:-see logs/import.log}; run scripts/gpu_check.sh --fetch-wheels here and carry .whl"
    exit 1
fi
record setup python ok "$PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"

"$PY" - >"$LOGS/device.log" 2>&1 <<'PYEOF'
import shutil, subprocess
from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_path, nvcc_version, probe_device
from kernelcrew.tools.observe.ncu import ncu_path
from kernelcrew.tools.sandbox import sandbox_description
be = CudaBackend()
ok, why = be.can_run()
print("can_run", ok, why)
print("describe", be.describe())
print("nvcc", nvcc_path(), nvcc_version(nvcc_path()) if nvcc_path() else "-")
ncu = ncu_path()
if ncu:
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True, check=False)
    print("ncu", ncu, (out.stdout.strip().splitlines() or ["?"])[-1])
else:
    print("ncu none")
try:
    import cupy
    print("cupy", cupy.__version__)
except Exception as e:  # noqa: BLE001
    print("cupy", "missing:", e)
print("sandbox", sandbox_description())
print("devices", be.worker_devices())
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                         check=False).stdout.strip())
PYEOF
HAVE_GPU=0
if grep -q "^can_run True" "$LOGS/device.log"; then
    HAVE_GPU=1
    record setup device ok "$(sed -n 's/^describe //p' "$LOGS/device.log")"
else
    WHY_NOGPU=$(sed -n 's/^can_run False //p' "$LOGS/device.log")
    NOGPU="skipped: no GPU"
    record setup device "no GPU" "$WHY_NOGPU"
fi
record setup tools info "$(grep -E '^(nvcc|ncu|cupy) ' "$LOGS/device.log" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
record setup sandbox info "$(sed -n 's/^sandbox //p' "$LOGS/device.log" | cut -c1-90)"

# -- 1. smoke: can a sandboxed worker use the GPU at all? ---------------------------------
WORKER_OK=0
if [ "$HAVE_GPU" = 1 ]; then
    say "smoke: transpose baseline through a worker"
    run smoke 90 "${KC[@]}" check transpose kernelcrew/kernels/library/transpose/baseline.cu \
        --json --reps 3 --seed 1
    rc=$?
    reason=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["reason"][:160])' \
        <(sed -n '/^{/,$p' "$LOGS/smoke.log") 2>/dev/null)
    if grep -q '"correct": true' "$LOGS/smoke.log"; then
        WORKER_OK=1
        record smoke "transpose baseline" ok "a sandboxed worker ran a cubin through CuPy"
    else
        record smoke "transpose baseline" FAIL "rc=$rc ${reason:-$(tail -1 "$LOGS/smoke.log" | cut -c1-160)}; later worker stages skipped"
        # why: the sandbox's address-space limit, or device nodes missing inside bwrap?
        run diagnose 60 "$PY" - <<'PYEOF'
import resource, subprocess, sys
from kernelcrew.tools.config import Limits
from kernelcrew.tools.sandbox import bwrap_path
gib = Limits().address_space_gib
probe = "import cupy; cupy.cuda.runtime.getDeviceCount(); cupy.empty(1); print('cuda ok')"
def limited():
    resource.setrlimit(resource.RLIMIT_AS, (int(gib * 2**30), int(gib * 2**30)))
r = subprocess.run([sys.executable, "-c", probe], preexec_fn=limited, capture_output=True,
                   text=True, check=False)
print(f"RLIMIT_AS {gib:g} GiB:", "cuda ok" if "cuda ok" in r.stdout
      else "CUDA FAILS: " + (r.stderr.strip().splitlines() or ["?"])[-1][:150])
bw = bwrap_path()
if bw:
    r = subprocess.run([bw, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--dev",
                        "/dev", "--proc", "/proc", sys.executable, "-c", probe],
                       capture_output=True, text=True, check=False)
    print("inside bwrap:", "cuda ok" if "cuda ok" in r.stdout
          else "CUDA FAILS: " + (r.stderr.strip().splitlines() or ["?"])[-1][:150])
else:
    print("bwrap: not used here")
from kernelcrew.tools.sandbox import available_confinements, run_confined, stock_layers
if "stock" in available_confinements():  # unshare + Landlock + seccomp, with the GPU's nodes
    import glob, os, tempfile
    from pathlib import Path
    devs = [d for d in sorted(glob.glob("/dev/nvidia*")) if not os.path.isdir(d)]
    devs += [d for d in ["/dev/nvidia-caps"] if os.path.isdir(d)]
    os.environ["KERNELCREW_SANDBOX"] = "stock"
    for name, layers in (("all layers", None), ("no seccomp", {**stock_layers(), "seccomp": False}),
                         ("namespaces only", {**stock_layers(), "seccomp": False, "landlock": 0})):
        r = run_confined([sys.executable, "-c", probe], scratch=Path(tempfile.mkdtemp()),
                         timeout_s=120, address_space_gib=None, devices=devs, layers=layers,
                         env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        print(f"inside stock ({name}):", "cuda ok" if "cuda ok" in r.stdout
              else "CUDA FAILS: " + (r.stderr.strip().splitlines() or ["?"])[-1][:150])
PYEOF
        record diagnose "worker environment" info "$(grep -E '^(RLIMIT_AS|inside bwrap|bwrap|inside stock)' "$LOGS/diagnose.log" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    fi
fi
NOWORKER="skipped"
WHY_NOWORKER="the smoke check failed: sandboxed workers cannot use the GPU here"

# -- 2. the device's copy bandwidth (CuPy, device to device) ------------------------------
BW_GBPS=""
if [ "$HAVE_GPU" = 1 ]; then
    say "copy bandwidth"
    run bandwidth 60 "$PY" - <<'PYEOF'
import cupy as cp
n = 1 << 30  # 1 GiB each way
a, b = cp.empty(n, dtype=cp.uint8), cp.empty(n, dtype=cp.uint8)
s = cp.cuda.Stream(non_blocking=True)
kind = cp.cuda.runtime.memcpyDeviceToDevice
for _ in range(3):
    cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, n, kind, s.ptr)
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
reps = 20
e0.record(s)
for _ in range(reps):
    cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, n, kind, s.ptr)
e1.record(s)
e1.synchronize()
ms = cp.cuda.get_elapsed_time(e0, e1)
print(f"COPY_GBPS {2 * n * reps / (ms / 1e3) / 1e9:.1f}  (bytes read + written, {reps} x 1 GiB)")
PYEOF
    BW_GBPS=$(sed -n 's/^COPY_GBPS \([0-9.]*\).*/\1/p' "$LOGS/bandwidth.log")
    if [ -n "$BW_GBPS" ]; then
        record bandwidth "device copy" ok "${BW_GBPS} GB/s (read + written)"
    else
        record bandwidth "device copy" FAIL "$(tail -1 "$LOGS/bandwidth.log" | cut -c1-160)"
    fi
else
    record bandwidth "device copy" "$NOGPU" "$WHY_NOGPU"
fi

# check JSON -> one summary line (correctness, verdict, achieved bandwidth of typical cases)
summarize_check() {  # NAME OP KIND
    "$PY" - "$LOGS/$1.log" "$2" "$3" "${BW_GBPS:-0}" >>"$SUMMARY" 2>>"$LOGS/summary.log" <<'PYEOF'
import json, math, sys
path, op, kind, bw = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
text = open(path).read()
item = f"{op} {kind}"
try:
    d = json.loads(text[text.index("{"):])
except ValueError:
    print(f"check\t{item}\tERROR\t{text.strip().splitlines()[-1][:160] if text.strip() else 'no output'}")
    sys.exit()
from kernelcrew.kernels.spec import load_op
spec = load_op(op)
if not d.get("ran", True):
    regs = ",".join(f"{k['kernel']}:{k['registers']}" for k in d["compile"]["resources"])
    print(f"check\t{item}\tskipped: no GPU\tcompiled only; registers {regs}")
    sys.exit()
if d["verdict"] == "rejected" or not d["correct"]:
    print(f"check\t{item}\tFAIL\t{d['verdict']}: {d['reason'][:150]}")
    sys.exit()
rates = [spec.cost_bytes(r["sizes"]) / (r["median_ms"] / 1e3) / 1e9 for r in d["rows"]
         if r["group"] == "typical" and r.get("median_ms")]
gbps = math.exp(sum(map(math.log, rates)) / len(rates)) if rates else None
sp = f"{d['speedup']:.2f}x" if d.get("speedup") else "n/a"
detail = f"correct; {d['verdict']} {sp} vs baseline"
if gbps:
    detail += f"; typical {gbps:.0f} GB/s"
    if bw:
        detail += f" = {100 * gbps / bw:.0f}% of copy"
        if kind == "fast" and spec.family != "matmul":
            detail += " (goal 80%: " + ("met" if gbps >= 0.8 * bw else "NOT met") + ")"
if kind == "fast" and op == "add_gelu_muladd" and d.get("speedup"):
    detail += " (fused goal 2x: " + ("met" if d["speedup"] >= 2 else "NOT met") + ")"
print(f"check\t{item}\tok\t{detail}")
PYEOF
}

# -- 3. check every op's faster kernel (it runs the baseline too) ----------------------------
for op in $OPS; do
    if [ "$HAVE_GPU" = 1 ] && [ "$WORKER_OK" = 0 ]; then
        record check "$op fast" "$NOWORKER" "$WHY_NOWORKER"
        continue
    fi
    say "check $op fast.cu"
    run "check_${op}_fast" 100 "${KC[@]}" check "$op" "tests/kernels/$op/fast.cu" --json \
        --reps 16 --seed 11
    [ $? = 125 ] && { record check "$op fast" "skipped: time budget"; continue; }
    summarize_check "check_${op}_fast" "$op" fast
done

# -- 4. the GPU-marked tests (the per-op checks above stand in for the slow ones) ----------
say "pytest -m 'gpu and not slow'"
run pytest_gpu 180 "$PY" -m pytest tests/cuda -m "gpu and not slow" -q -rA -p no:cacheprovider \
    --junitxml="$LOGS/pytest-gpu.xml"
rc=$?
counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$LOGS/pytest_gpu.log" | tail -1 \
    | sed 's/=//g; s/^ *//; s/ *$//')
if [ "$rc" = 125 ]; then
    record tests "pytest -m gpu" "skipped: time budget"
elif [ "$HAVE_GPU" = 0 ]; then
    record tests "pytest -m gpu" "$NOGPU" "${counts:-see logs/pytest_gpu.log}"
elif [ "$rc" = 0 ]; then
    record tests "pytest -m gpu" ok "$counts"
else
    record tests "pytest -m gpu" FAIL "rc=$rc ${counts}; $(grep -E '^FAILED' "$LOGS/pytest_gpu.log" | head -3 | cut -c1-90 | tr '\n' ' ')"
fi

# -- 5. profile with ncu on two ops, and the fallback without ncu --------------------------
if ! "${KC[@]}" profile --help >/dev/null 2>&1; then
    record profile "kernelcrew profile" "not available" "the profile command does not exist yet"
elif ! "$PY" -c "import kernelcrew.tools.observe.profile, kernelcrew.tools.observe.cuda_profile" >"$LOGS/import_profile.log" 2>&1; then
    record profile "kernelcrew profile" "skipped" "cannot import: $(tail -1 "$LOGS/import_profile.log" | cut -c1-100)"
else
    for spec in "softmax_rows:ncu" "add_gelu_muladd:ncu" "softmax_rows:fallback"; do
        op=${spec%%:*} how=${spec#*:}
        if [ "$HAVE_GPU" = 0 ]; then record profile "$op ($how)" "$NOGPU" "$WHY_NOGPU"; continue; fi
        if [ "$WORKER_OK" = 0 ]; then record profile "$op ($how)" "$NOWORKER" "$WHY_NOWORKER"; continue; fi
        say "profile $op ($how)"
        if [ "$how" = fallback ]; then
            KERNELCREW_NCU=none run "profile_${op}_$how" 90 "${KC[@]}" profile "$op" \
                --backend cuda --json --reps 5
        else
            run "profile_${op}_$how" 150 "${KC[@]}" profile "$op" --backend cuda --json --reps 5
        fi
        rc=$?
        [ $rc = 125 ] && { record profile "$op ($how)" "skipped: time budget"; continue; }
        "$PY" - "$LOGS/profile_${op}_$how.log" "$op ($how)" "$how" >>"$SUMMARY" 2>>"$LOGS/summary.log" <<'PYEOF'
import json, sys
text = open(sys.argv[1]).read()
try:
    d = json.loads(text[text.index("{"):])
except ValueError:
    print(f"profile\t{sys.argv[2]}\tFAIL\t{(text.strip().splitlines() or ['no output'])[-1][:160]}")
    sys.exit()
want = "ncu" if sys.argv[3] == "ncu" else "cuda-fallback"
status = "ok" if d.get("source") == want else f"FAIL (source {d.get('source')}, wanted {want})"
m = d.get("metrics", {})
def v(k):
    x = m.get(k, {}).get("value")
    return "n/a" if x is None else f"{x:.3g}"
print(f"profile\t{sys.argv[2]}\t{status}\t{d['bottleneck']['kind']}; dram {v('dram_throughput_pct')}%;"
      f" sectors/req ld {v('l1_ld_sectors_per_request')}; {d.get('summary', '')[:90]}")
PYEOF
    done
fi

# -- 6. check every op's baseline (against itself: correctness on the device; before the
#       crew's runs, which the budget may cut) --------------------------------------------
for op in $OPS; do
    if [ "$HAVE_GPU" = 1 ] && [ "$WORKER_OK" = 0 ]; then
        record check "$op baseline" "$NOWORKER" "$WHY_NOWORKER"
        continue
    fi
    say "check $op baseline.cu"
    run "check_${op}_baseline" 60 "${KC[@]}" check "$op" \
        "kernelcrew/kernels/library/$op/baseline.cu" --json --reps 4 --seed 13
    [ $? = 125 ] && { record check "$op baseline" "skipped: time budget"; continue; }
    summarize_check "check_${op}_baseline" "$op" baseline
done
# -- 7. a short heuristic optimize on every op (the CUDA crew's transforms: fusion, vector
#       access, block reductions, shared-memory tiles); without a GPU it compiles only -------
if ! "${KC[@]}" optimize --help >/dev/null 2>&1; then
    record optimize "kernelcrew optimize" "not available" "the optimize command does not exist yet"
elif ! "$PY" -c "import kernelcrew.graph.runner" >"$LOGS/import_optimize.log" 2>&1; then
    record optimize "kernelcrew optimize" "skipped" "cannot import: $(tail -1 "$LOGS/import_optimize.log" | cut -c1-80); carry wheels (--fetch-wheels graph)"
else
    for op in $OPS; do
        if [ "$HAVE_GPU" = 1 ] && [ "$WORKER_OK" = 0 ]; then record optimize "$op" "$NOWORKER" "$WHY_NOWORKER"; continue; fi
        say "optimize $op (heuristic, short)"
        # one round each (the observe step without ncu: stage 5 covers ncu), so six ops fit
        KERNELCREW_NCU=none run "optimize_$op" 80 "${KC[@]}" optimize "$op" --backend cuda \
            --agents heuristic --max-iters 1 --budget-s 40 --candidates-per-iter 2 --no-memory \
            --reps 4 --seed 3 --run-dir "$WORK/runs/$op" --json
        rc=$?
        [ $rc = 125 ] && { record optimize "$op" "skipped: time budget"; continue; }
        "$PY" - "$LOGS/optimize_$op.log" "$op" "$rc" >>"$SUMMARY" 2>>"$LOGS/summary.log" <<'PYEOF'
import json, sys
text = open(sys.argv[1]).read()
try:
    d = json.loads(text[text.index("{"):])
except ValueError:
    print(f"optimize\t{sys.argv[2]}\tFAIL\trc={sys.argv[3]} {(text.strip().splitlines() or ['no output'])[-1][:150]}")
    sys.exit()
b = d.get("best") or {}
if not d.get("ran", True):
    cands = d.get("candidates", [])
    ok = sum(1 for c in cands if c["outcome"] == "not-run")
    kinds = ",".join(sorted({c["kind"] for c in cands}))[:90]
    print(f"optimize\t{sys.argv[2]}\tskipped: no GPU\t{ok} candidates compiled, not run ({kinds})")
    sys.exit()
sp = f"{b['speedup']:.2f}x" if b.get("speedup") else "n/a"
acc = ",".join(e["kind"] for e in d.get("accepted", []))[:80] or "none"
print(f"optimize\t{sys.argv[2]}\tok\tbest {sp} (correct {b.get('correct')}) after "
      f"{d.get('iterations')} iterations; accepted: {acc}; stop: {str(d.get('stop_reason'))[:50]}")
PYEOF
    done
fi

if grep -qE $'\t(FAIL|ERROR)' "$SUMMARY"; then exit 1; fi
exit 0
