#!/usr/bin/env bash
# GPU validation on real hardware (issues 10 and 43): one prepared command for a CUDA machine.
#
#   scripts/gpu_check.sh [--dry-run] [--budget S] [--stages LIST] [--ops LIST]
#   scripts/gpu_check.sh --fetch-wheels [core|graph|all]
#                      HERE, with network: download into .whl/ the Python packages
#                      kernelcrew needs that the lent machine's image lacks (core: check
#                      and profile; graph: + optimize's LangGraph stack; all: + Chroma),
#                      then carry .whl there
#
# Stages, in this order (--stages takes a comma-separated subset; default all):
#   setup      the interpreter, kernelcrew's packages, the device, nvcc, ncu, CuPy
#   smoke      can a sandboxed worker run a cubin at all? (stops the worker stages early)
#   bandwidth  the device's copy bandwidth and its spec-sheet FP32 rate
#   check      `kernelcrew check OP fast.cu` on every op: the hand-written kernel and the
#              op's baseline verified on every CUDA shape group and timed side by side (the
#              timing cross-check must reject no honest kernel)
#   tests      pytest -m "gpu and not slow" (tests/cuda/test_gpu.py)
#   profile    `kernelcrew profile` with ncu inside the sandbox on two ops, and the no-ncu
#              fallback
#   crew       `kernelcrew optimize --backend cuda`, heuristic crew, several iterations, on
#              every op (the time left is shared among them)
#   peers      the baseline, nvcc alone, the hand-written kernel, the crew's best and CuPy,
#              side by side, with the shares of copy bandwidth and FP32 rate
# --ops: comma-separated library ops with a baseline.cu (default: all of them, the issue's
# target ops first). --budget: seconds for the whole run (default 450, within the 8 minutes
# a lent machine's call allows); each stage gets a share of it and each item of a stage a
# share of the stage's time, every command runs under `timeout`, a failed step never stops
# the next, and what the budget cuts is recorded as `skipped: time budget`. --dry-run runs
# nothing: it writes the plan (every command with its time box) and the summary files.
#
# It uses the machine's own CuPy, nvcc and ncu and installs nothing from the network:
# wheels carried in .whl/ (if any) go into a private folder on PYTHONPATH.
#
# Output, all under $OUT (else ./gpu-out): summary.txt, summary.md, summary.json,
# summary.tsv, plan.txt, peers.json and gpu-check.tar.gz (full logs, check/profile/optimize
# JSON, the crew's run folders, raw ncu exports). Exit 0 when nothing failed, 1 when
# something did, 2 on bad arguments.
# Environment: KERNELCREW_PYTHON (the interpreter), KERNELCREW_GPU_BUDGET_S (= --budget),
# KERNELCREW_GPU_OPS (= --ops).

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

# -- arguments ------------------------------------------------------------------------------
ALL_STAGES="setup smoke bandwidth check tests profile crew peers"
# the issue's target ops first (fusion, the memory-bound ones, cuBLAS), then the others
PRIORITY="add_gelu_muladd rmsnorm softmax_rows small_matmul transpose scale_shift_sum layernorm matvec gelu_tanh attention"
usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
bad_usage() { echo "gpu_check.sh: $1; see --help" >&2; exit 2; }
DRY=0
BUDGET=${KERNELCREW_GPU_BUDGET_S:-450}
STAGES=$ALL_STAGES
OPS_ARG=${KERNELCREW_GPU_OPS:-}
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) DRY=1 ;;
        --budget) [ $# -ge 2 ] || bad_usage "--budget needs a number of seconds"; BUDGET=$2; shift ;;
        --budget=*) BUDGET=${1#*=} ;;
        --stages) [ $# -ge 2 ] || bad_usage "--stages needs a list, e.g. check,crew"; STAGES=$2; shift ;;
        --stages=*) STAGES=${1#*=} ;;
        --ops) [ $# -ge 2 ] || bad_usage "--ops needs a list, e.g. rmsnorm,transpose"; OPS_ARG=$2; shift ;;
        --ops=*) OPS_ARG=${1#*=} ;;
        -h|--help) usage; exit 0 ;;
        *) bad_usage "unknown argument '$1'" ;;
    esac
    shift
done
case $BUDGET in
    ''|*[!0-9]*) bad_usage "--budget '$BUDGET' is not a whole number of seconds" ;;
esac
[ "$BUDGET" -ge 30 ] || bad_usage "--budget $BUDGET is too short: give at least 30 seconds"
STAGES=$(echo "$STAGES" | tr ',' ' ')
for s in $STAGES; do
    case " $ALL_STAGES " in *" $s "*) ;; *) bad_usage "unknown stage '$s' in --stages; use some of: ${ALL_STAGES// /,}" ;; esac
done
CUDA_OPS=$(for f in "$REPO"/kernelcrew/kernels/library/*/baseline.cu; do basename "$(dirname "$f")"; done)
if [ -n "$OPS_ARG" ]; then
    OPS=$(echo "$OPS_ARG" | tr ',' ' ')
    for op in $OPS; do
        echo "$CUDA_OPS" | grep -qx "$op" || bad_usage "--ops: '$op' is not a library op with a baseline.cu"
    done
else
    OPS=$( (for op in $PRIORITY; do echo "$CUDA_OPS" | grep -x "$op"; done
            echo "$CUDA_OPS" | grep -vxF -f <(echo "$PRIORITY" | tr ' ' '\n')) | tr '\n' ' ')
fi
want() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
count() { echo $#; }

START=$SECONDS
OUT_DIR=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT_DIR" || exit 2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kc-gpu-XXXXXX")
LOGS=$WORK/logs
mkdir -p "$LOGS" "$WORK/ncu" "$WORK/runs"
SUMMARY=$WORK/summary.tsv
PLAN=$OUT_DIR/plan.txt
: >"$SUMMARY"
: >"$PLAN"
export KERNELCREW_CACHE_DIR=$WORK/cache KERNELCREW_GPU_OUT=$WORK/ncu PYTHONUNBUFFERED=1

# a dry run spends no time: its clock moves by each planned command's whole time box, so the
# plan shows what the budget would cut if every command used all of its box
DRY_USED=0
now() { echo $((SECONDS + DRY_USED)); }
say() { printf '[gpu_check %4ds] %s\n' "$(($(now) - START))" "$*"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" | tr -d '\r' >>"$SUMMARY"; }
left() { echo $((BUDGET - ($(now) - START))); }
# the stages' nominal shares of the budget (percent), in the order they run: a stage may
# use what earlier stages left unused, never the shares of the stages after it (RESERVE)
declare -A SHARE=([setup]=2 [smoke]=8 [bandwidth]=6 [check]=30 [tests]=10 [profile]=8 [crew]=26 [peers]=10)
STAGE_END=0
RESERVE=0
stage() {  # STAGE: start it; it may run until the later stages' shares are all that is left
    local s later=0 seen=0
    for s in $ALL_STAGES; do
        if [ $seen = 1 ] && want "$s"; then later=$((later + SHARE[$s])); fi
        [ "$s" = "$1" ] && seen=1
    done
    RESERVE=$((BUDGET * later / 100))
    STAGE_END=$(( $(now) + $(left) - RESERVE ))
    say "stage $1: $((STAGE_END - $(now)))s"
}
item_time() {  # ITEMS_LEFT CAP [MIN]: this item's time box, a share of what its stage has
    # left, at least MIN (the items run in priority order: the first ones get a box they
    # can finish in and may run past the stage's end; once it has passed, the rest are
    # skipped rather than cut short), at most CAP
    local n=$1 cap=$2 min=${3:-10} t stage_left=$((STAGE_END - $(now)))
    if [ "$stage_left" -le 0 ]; then echo 0; return; fi
    t=$(( stage_left / (n > 0 ? n : 1) ))
    [ "$t" -lt "$min" ] && t=$min
    [ "$t" -gt "$cap" ] && t=$cap
    echo "$t"
}
# run NAME MAX_SECONDS CMD...: output to logs/NAME.log; 124 on its timeout, 125 when the
# budget is spent (nothing ran), 126 in a dry run (the plan records the command)
run() {
    local name=$1 max=$2 rem
    shift 2
    rem=$(($(left) - RESERVE - 10))
    [ "$rem" -lt "$max" ] && max=$rem
    if [ "$max" -lt 10 ]; then
        echo "skipped: time budget" >"$LOGS/$name.log"
        return 125
    fi
    printf '%s\t(timeout %ss)\t%s\n' "$name" "$max" "$(printf '%s' "$*" | tr '\n\t' '  ' | sed 's/  */ /g')" >>"$PLAN"
    if [ "$DRY" = 1 ]; then
        DRY_USED=$((DRY_USED + max))
        return 126
    fi
    echo "\$ $* (timeout ${max}s)" >"$LOGS/$name.log"
    timeout -k 5 "$max" "$@" >>"$LOGS/$name.log" 2>&1
}
# after run: 0 when the caller goes on to read the log, else the step is recorded here
ran() {  # RC STAGE ITEM
    case $1 in
        125) record "$2" "$3" "skipped: time budget"; return 1 ;;
        126) record "$2" "$3" planned "$(tail -1 "$PLAN" | cut -f2- | tr '\t' ' ' | sed "s#$REPO/##g" | cut -c1-220)"; return 1 ;;
        124) record "$2" "$3" FAIL "ran past its time box (logs/$(echo "$3" | tr ' ' '_').log)"; return 1 ;;
    esac
    return 0
}
summarize() { "${PY:-python3}" "$REPO/scripts/gpu_summary.py" "$@" >>"$SUMMARY" 2>>"$LOGS/summary.log" \
    || record summary "$1 ${3:-}" ERROR "the summary writer failed (logs/summary.log)"; }
finish() {
    local rc=$?
    say "summary"
    local took=$((SECONDS - START))
    [ "$DRY" = 1 ] && took="0 (dry run; the plan's worst case: $(($(now) - START)))"
    record run total info "$took s of a ${BUDGET} s budget; stages: ${STAGES// /,}; ops: $(count $OPS)"
    cp "$SUMMARY" "$OUT_DIR/summary.tsv"
    if ! "${PY:-python3}" "$REPO/scripts/gpu_summary.py" render "$SUMMARY" "$((SECONDS - START))" \
            "$OUT_DIR" >/dev/null 2>>"$LOGS/summary.log"; then
        column -t -s $'\t' "$SUMMARY" >"$OUT_DIR/summary.txt" 2>/dev/null || cp "$SUMMARY" "$OUT_DIR/summary.txt"
    fi
    [ -f "$WORK/peers.json" ] && cp "$WORK/peers.json" "$OUT_DIR/peers.json"
    tar -czf "$OUT_DIR/gpu-check.tar.gz" -C "$WORK" logs ncu runs summary.tsv 2>/dev/null
    cat "$OUT_DIR/summary.txt"
    rm -rf "$WORK"
    if [ "$rc" = 2 ]; then exit 2; fi
    if grep -qE $'\t(FAIL|ERROR)' "$OUT_DIR/summary.tsv"; then exit 1; fi
    exit 0
}
trap finish EXIT

# -- setup: interpreter, packages, device ----------------------------------------------------
PY=$(pick_python) || { record setup python ERROR "no python interpreter found"; exit 1; }
SITE=$WORK/site
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
KC=("$PY" -m kernelcrew.cli)
HAVE_GPU=0
WHY_NOGPU="not probed (--dry-run)"
NOGPU="skipped: no GPU"
if [ "$DRY" = 1 ]; then
    record setup plan info "dry run: nothing is run; the commands and their time boxes are in plan.txt"
else
    stage setup
    importable() { "$PY" -c "import kernelcrew.tools.judge.check, kernelcrew.tools.backends.cuda" >"$LOGS/import.log" 2>&1; }
    if ! importable && ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
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
    timeout -k 5 120 "$PY" - >"$LOGS/device.log" 2>&1 <<'PYEOF'
import shutil, subprocess
from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_path, nvcc_version
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
    q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                        "--format=csv,noheader"], capture_output=True, text=True, check=False)
    print("nvidia-smi", q.stdout.strip())
PYEOF
    if grep -q "^can_run True" "$LOGS/device.log"; then
        HAVE_GPU=1
        record setup device ok "$(sed -n 's/^describe //p' "$LOGS/device.log")"
        record setup driver info "$(sed -n 's/^nvidia-smi //p' "$LOGS/device.log")"
    else
        WHY_NOGPU=$(sed -n 's/^can_run False //p' "$LOGS/device.log")
        record setup device "no GPU" "${WHY_NOGPU:-the device probe failed (logs/device.log)}"
    fi
    record setup tools info "$(grep -E '^(nvcc|ncu|cupy) ' "$LOGS/device.log" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    record setup sandbox info "$(sed -n 's/^sandbox //p' "$LOGS/device.log" | cut -c1-90)"
fi
# a device stage without a device: compile-only stages still run (check, crew), the others skip
device_stage_skips() {  # STAGE ITEM
    if [ "$DRY" = 0 ] && [ "$HAVE_GPU" = 0 ]; then record "$1" "$2" "$NOGPU" "$WHY_NOGPU"; return 0; fi
    if [ "$DRY" = 0 ] && [ "$WORKER_OK" = 0 ]; then
        record "$1" "$2" skipped "the smoke check failed: sandboxed workers cannot use the GPU here"
        return 0
    fi
    return 1
}

# -- smoke: can a sandboxed worker use the GPU at all? -----------------------------------------
WORKER_OK=1
if want smoke; then
    stage smoke
    if [ "$DRY" = 0 ] && [ "$HAVE_GPU" = 0 ]; then
        record smoke "transpose baseline" "$NOGPU" "$WHY_NOGPU"
    else
        say "smoke: transpose baseline through a worker (CPU-sized cases)"
        run smoke "$(item_time 1 90 40)" "$PY" -c "
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.check import check
spec = load_op('transpose')  # the shared (small) cases: quick
r = check(spec, spec.baseline_path('cuda'), 'cuda', seed=1, bench=BenchSettings(reps=3, rounds=1))
print('SMOKE', r.correct, r.verdict, r.reason[:160])
"
        rc=$?
        if ran $rc smoke "transpose baseline"; then
            if grep -q "^SMOKE True" "$LOGS/smoke.log"; then
                record smoke "transpose baseline" ok "a sandboxed worker ran a cubin through CuPy"
            else
                WORKER_OK=0
                record smoke "transpose baseline" FAIL "rc=$rc $(grep '^SMOKE' "$LOGS/smoke.log" || tail -1 "$LOGS/smoke.log" | cut -c1-160); later worker stages skipped"
            fi
        fi
    fi
fi

# -- bandwidth: the device's copy bandwidth, and the peaks kernelcrew records --------------------
BW_GBPS=""
if want bandwidth; then
    stage bandwidth
    if ! device_stage_skips bandwidth "device copy"; then
        say "copy bandwidth"
        run bandwidth "$(item_time 1 90 40)" "$PY" -c "
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
print(f'COPY_GBPS {2 * n * reps / (ms / 1e3) / 1e9:.1f}  (bytes read + written, {reps} x 1 GiB)')
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.backends.peaks import cuda_peaks
pk = cuda_peaks(get_backend('cuda'), remeasure=True)
print('PEAKS', pk.model_dump_json())
"
        rc=$?
        if ran $rc bandwidth "device copy"; then
            BW_GBPS=$(sed -n 's/^COPY_GBPS \([0-9.]*\).*/\1/p' "$LOGS/bandwidth.log")
            if [ -n "$BW_GBPS" ]; then
                record bandwidth "device copy" ok "${BW_GBPS} GB/s (read + written, memcpy of 1 GiB)"
                record bandwidth "kernelcrew peaks" info "$(sed -n 's/^PEAKS //p' "$LOGS/bandwidth.log" | cut -c1-200)"
            else
                record bandwidth "device copy" FAIL "$(tail -1 "$LOGS/bandwidth.log" | cut -c1-160)"
            fi
        fi
    fi
fi

# -- check: every op's hand-written kernel against its baseline, on the CUDA shape groups -----
if want check; then
    stage check
    n=$(count $OPS)
    for op in $OPS; do
        if [ "$DRY" = 0 ] && [ "$HAVE_GPU" = 1 ] && [ "$WORKER_OK" = 0 ]; then
            device_stage_skips check "$op fast"; n=$((n - 1)); continue
        fi
        say "check $op fast.cu"
        KERNELCREW_ROUNDS=4 run "check_${op}_fast" "$(item_time "$n" 120 40)" "${KC[@]}" check "$op" \
            "tests/kernels/$op/fast.cu" --json --reps 8 --seed 11
        rc=$?
        n=$((n - 1))
        ran $rc check "$op fast" || continue
        summarize check "$LOGS/check_${op}_fast.log" "$op" fast "${BW_GBPS:-0}"
    done
fi

# -- tests: the GPU-marked tests ---------------------------------------------------------------
if want tests; then
    stage tests
    if ! device_stage_skips tests "pytest -m gpu"; then
        say "pytest -m 'gpu and not slow'"
        run pytest_gpu "$(item_time 1 240 60)" "$PY" -m pytest tests/cuda -m "gpu and not slow" -q -rA \
            -p no:cacheprovider --junitxml="$LOGS/pytest-gpu.xml"
        rc=$?
        if ran $rc tests "pytest -m gpu"; then
            counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$LOGS/pytest_gpu.log" | tail -1 \
                | sed 's/=//g; s/^ *//; s/ *$//')
            if [ "$rc" = 0 ]; then
                record tests "pytest -m gpu" ok "$counts"
            else
                record tests "pytest -m gpu" FAIL "rc=$rc ${counts}; $(grep -E '^FAILED' "$LOGS/pytest_gpu.log" | head -3 | cut -c1-90 | tr '\n' ' ')"
            fi
        fi
    fi
fi

# -- profile: ncu inside the sandbox on two ops, and the fallback without ncu -----------------
if want profile; then
    stage profile
    PROFILE_ITEMS=""
    for op in softmax_rows add_gelu_muladd; do
        case " $OPS " in *" $op "*) PROFILE_ITEMS="$PROFILE_ITEMS $op:ncu" ;; esac
    done
    first=$(echo "$PROFILE_ITEMS" | awk '{print $1}' | cut -d: -f1)
    [ -n "$first" ] || first=$(echo $OPS | awk '{print $1}')
    PROFILE_ITEMS="$PROFILE_ITEMS $first:fallback"
    [ -z "$(echo "$PROFILE_ITEMS" | grep ncu)" ] && PROFILE_ITEMS="$first:ncu $PROFILE_ITEMS"
    n=$(count $PROFILE_ITEMS)
    for item in $PROFILE_ITEMS; do
        op=${item%%:*} how=${item#*:}
        if device_stage_skips profile "$op ($how)"; then n=$((n - 1)); continue; fi
        say "profile $op ($how)"
        if [ "$how" = fallback ]; then
            KERNELCREW_NCU=none run "profile_${op}_$how" "$(item_time "$n" 90 30)" "${KC[@]}" profile "$op" \
                --backend cuda --json --reps 5
        else
            run "profile_${op}_$how" "$(item_time "$n" 150 40)" "${KC[@]}" profile "$op" --backend cuda --json --reps 5
        fi
        rc=$?
        n=$((n - 1))
        ran $rc profile "$op ($how)" || continue
        summarize profile "$LOGS/profile_${op}_$how.log" "$op ($how)" "$how"
    done
fi

# -- crew: the heuristic CUDA crew, several iterations, on every op -----------------------------
if want crew; then
    stage crew
    n=$(count $OPS)
    for op in $OPS; do
        if [ "$DRY" = 0 ] && [ "$HAVE_GPU" = 1 ] && [ "$WORKER_OK" = 0 ]; then
            device_stage_skips crew "$op"; n=$((n - 1)); continue
        fi
        box=$(item_time "$n" 150 60)
        say "optimize $op (heuristic, up to 3 iterations, ${box}s)"
        # ncu off in the crew's observe step (the profile stage covers ncu); the crew stops
        # itself 15 s before the time box so it writes its result
        KERNELCREW_NCU=none KERNELCREW_ROUNDS=4 run "optimize_$op" "$box" "${KC[@]}" optimize "$op" \
            --backend cuda --agents heuristic --max-iters 3 --budget-s $((box > 30 ? box - 15 : 15)) \
            --candidates-per-iter 3 --no-memory --reps 6 --seed 3 --run-dir "$WORK/runs/$op" --json
        rc=$?
        n=$((n - 1))
        ran $rc crew "$op" || continue
        summarize optimize "$LOGS/optimize_$op.log" "$op" "$rc"
    done
fi

# -- peers: every kernel and CuPy side by side, shares of copy bandwidth and FP32 -------------
if want peers; then
    stage peers
    if ! device_stage_skips peers "all ops"; then
        say "peers (baseline, nvcc alone, hand-written, crew, CuPy)"
        run peers "$(item_time 1 600 60)" "$PY" -m kernelcrew.evals.peers.cuda_peers \
            --ops "$(echo $OPS | tr ' ' ',')" --crew-runs "$WORK/runs" --reps 6 --rounds 2 \
            --out "$WORK/peers.json"
        rc=$?
        if ran $rc peers "all ops" || [ "$rc" = 124 ]; then
            if [ -f "$WORK/peers.json" ]; then
                summarize peers "$WORK/peers.json" "${BW_GBPS:-0}"
            else  # cut by its time box: the rows printed so far (one JSON per line)
                "$PY" -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{\"op\"')]
json.dump({'rows': rows, 'partial': True}, open(sys.argv[2], 'w'))
" "$LOGS/peers.log" "$WORK/peers.json" 2>>"$LOGS/summary.log" && summarize peers "$WORK/peers.json" "${BW_GBPS:-0}"
            fi
        fi
    fi
fi
exit 0
