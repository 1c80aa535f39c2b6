"""Functions imported unchanged from small code bases written the way real C code bases
are (tests/importer/codebases): a polyhedral-benchmark-style suite (types and sizes from
macros and typedefs, `A[N][N]` parameters declared through macros, loop bounds through
macros, `-D` dataset switches, headers beside the file and in a common folder, `register`),
a CNN-framework-style library (a header in include/, helpers with early returns, `lda`
strides, `pow`) and a single-file LLM inference program. Each is imported with `--case`
alone: types, roles, shapes and the cost model come from the code. A `--shape` that
disagrees with how the code indexes an array is refused at import, naming the array."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kernelcrew.kernels.spec import load_op
from tests.conftest import kernelcrew

CODEBASES = Path(__file__).resolve().parent / "codebases"
POLY = CODEBASES / "polyhedral"
CNN = CODEBASES / "cnn"
LLM = CODEBASES / "llm" / "infer.c"
GRID = CODEBASES / "grid" / "thermal.c"
SOLVE = CODEBASES / "grid" / "solve.c"


def imp(src: Path, function: str, case: str, out: Path, *extra: str):
    p = kernelcrew("import", str(src), "--function", function, "--case", case,
                   "--out", str(out), *extra, timeout=180)
    return p


def imported(src: Path, function: str, case: str, out: Path, *extra: str):
    p = imp(src, function, case, out, *extra)
    assert p.returncode == 0, p.stderr
    return load_op(out), p.stdout + p.stderr


def one_line_error(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def check_ok(folder: Path) -> dict:
    p = kernelcrew("check", str(folder), str(folder / "baseline.cpp"), "--json", "--reps", "2",
                   timeout=600)
    res = json.loads(p.stdout)
    assert p.returncode == 0 and res["correct"], res["reason"]
    return res


COMMON = ("--include-dir", str(POLY / "common"))


def test_polyhedral_style_functions_import_with_case_alone(tmp_path):
    # colsum: `typedef double real_t` for the array and the scalar, `real_t PS_2D(A, N, N)`
    # with N from a dataset switch in the header beside the file, `_PS_N` bounds,
    # `register`, counters declared at the top
    spec, out = imported(POLY / "linalg/colsum/colsum.c", "kernel_colsum", "n=1000",
                         tmp_path / "colsum", *COMMON)
    assert spec.inputs["A"].dtype == "float64" and spec.inputs["A"].shape == [1000, 1000]
    assert list(spec.outputs) == ["s"] and spec.outputs["s"].shape == [1000]
    assert spec.scalars["scale"].dtype == "float64" and "no --scalar gives it" in out
    # the macro loop bounds reach the cost model: one add per element, one multiply per
    # column (not "0", not "counted as one trip")
    assert spec.cost.flops == "n*n + n" and "one trip" not in out
    base = (tmp_path / "colsum" / "baseline.cpp").read_text()
    # the file's own text, and the definitions the build selects, from the headers
    assert "real_t PS_2D(A, N, N)" in base and "for (j = 0; j < _PS_N; j++)" in base
    assert "# define N 1000" in base and "typedef double real_t;" in base
    assert "typedef float real_t;" not in base and "define N 120" not in base
    assert "#define register" in base  # C's register, defined away for C++
    assert spec.origin.build == [f"-I{POLY / 'common'}"]
    check_ok(tmp_path / "colsum")
    a = np.random.default_rng(0).standard_normal((1000, 1000))
    got = spec.reference_fn()(A=a, scale=0.5, n=700)["s"]
    assert np.allclose(got[:700], 0.5 * a[:700, :700].sum(axis=0), rtol=1e-12)

    # the build's -D switches choose the sizes and the types, as the code base's build does
    small, _ = imported(POLY / "linalg/colsum/colsum.c", "kernel_colsum", "n=100",
                        tmp_path / "colsum_small", *COMMON, "--define", "SMALL_SET",
                        "--define", "TYPE_IS_FLOAT")
    assert small.inputs["A"].shape == [120, 120] and small.inputs["A"].dtype == "float32"
    assert small.scalars["scale"].dtype == "float32"
    # a case larger than the arrays the code declares is refused, naming the array
    msg = one_line_error(imp(POLY / "linalg/colsum/colsum.c", "kernel_colsum", "n=500",
                             tmp_path / "x", *COMMON, "--define", "SMALL_SET"))
    assert "A (shape [120, 120] from its declaration)" in msg and "--case 1 (n=500)" in msg

    # gesum2: `#define DATA_TYPE double` for arrays and scalars, token pasting in SCALAR()
    spec, _ = imported(POLY / "linalg/gesum2/gesum2.c", "kernel_gesum2", "n=500",
                       tmp_path / "gesum2", *COMMON)
    assert list(spec.inputs) == ["A", "B", "x"] and list(spec.outputs) == ["tmp", "y"]
    assert spec.inputs["B"].shape == [500, 500] and spec.cost.flops == "4*n*n + 3*n"
    check_ok(tmp_path / "gesum2")


def test_a_shape_that_disagrees_with_the_code_is_refused_naming_the_array(tmp_path):
    # the code strides A by rows of N = 1000; a shape in the size n has rows of n
    msg = one_line_error(imp(POLY / "linalg/colsum/colsum.c", "kernel_colsum", "n=1000",
                             tmp_path / "a", *COMMON, "--shape", "A=n,n"))
    assert "--shape A=n,n: A is declared" in msg and "rows of 1000" in msg
    assert "leave --shape A out (inferred: [1000, 1000])" in msg
    assert str(POLY / "linalg/colsum/colsum.c") in msg
    # a flat array too small for what the loops read
    msg = one_line_error(imp(CNN / "src/stats.c", "channel_var", "batch=4,filters=64,spatial=400",
                             tmp_path / "b", "--include-dir", str(CNN / "include"),
                             "--shape", "x=filters*spatial"))
    assert "--shape x=filters*spatial: line 14 of the file reaches element 102399 of x" in msg
    assert "inferred: [batch*filters*spatial]" in msg
    # a shape the code agrees with is taken as given
    spec, _ = imported(CNN / "src/stats.c", "channel_var", "batch=4,filters=64,spatial=400",
                       tmp_path / "c", "--include-dir", str(CNN / "include"),
                       "--shape", "x=batch,filters,spatial")
    assert spec.inputs["x"].shape == ["batch", "filters", "spatial"]


def test_cnn_style_functions_import_with_case_alone(tmp_path):
    inc = ("--include-dir", str(CNN / "include"))
    # per-filter variance with pow(x, 2) and an index in a local
    spec, _ = imported(CNN / "src/stats.c", "channel_var", "batch=4,filters=64,spatial=400",
                       tmp_path / "var", *inc)
    assert spec.inputs["x"].shape == ["batch*filters*spatial"]
    assert list(spec.outputs) == ["var"] and spec.outputs["var"].shape == ["filters"]
    check_ok(tmp_path / "var")
    # i-k-j GEMM with a `register` scalar and leading dimensions: C is read and written
    spec, _ = imported(CNN / "src/matmul.c", "gemm_acc",
                       "M=64,N=200,K=72,lda=72,ldb=200,ldc=200", tmp_path / "gemm", *inc)
    assert spec.inputs["A"].shape == ["M*lda + K - lda"]
    assert list(spec.outputs) == ["C"] and "C_in" in spec.inputs
    assert spec.cost.flops == "2*M*K*N + M*K"
    # an early-return helper (hard tanh) inside the loop
    spec, _ = imported(CNN / "src/activate.c", "activate_hardtan", "n=10000", tmp_path / "act",
                       *inc)
    assert spec.outputs["x"].shape == ["n"]
    check_ok(tmp_path / "act")
    x = np.linspace(-3, 3, 10000)
    assert np.array_equal(spec.reference_fn()(x_in=x, n=10000)["x"], np.clip(x, -1, 1))
    # im2col through a padding helper with an early `return 0`: the output's extent comes
    # from the loops (through locals computed from the sizes); the image's only through
    # the helper, which the analysis does not follow: --shape for that one
    case = "channels=8,height=12,width=12,ksize=3,stride=1,pad=1"
    msg = one_line_error(imp(CNN / "src/unroll.c", "col_unroll", case, tmp_path / "u0", *inc))
    assert "'im' needs a shape" in msg and "passed to unroll_pixel()" in msg
    spec, out = imported(CNN / "src/unroll.c", "col_unroll", case, tmp_path / "unroll", *inc,
                         "--shape", "im=channels,height,width")
    out_hw = ("((height + 2 * pad - ksize) // stride + 1)*((width + 2 * pad - ksize) // "
              "stride + 1)")
    assert spec.outputs["col"].shape == [f"{out_hw}*channels*ksize*ksize"]
    assert "one trip" not in out  # loop bounds through locals reach the cost model
    check_ok(tmp_path / "unroll")


def test_llm_style_functions_import_with_case_alone(tmp_path):
    spec, _ = imported(LLM, "matvec", "n=512,d=1376", tmp_path / "matvec")
    assert spec.inputs["w"].shape == ["d*n"] and spec.outputs["xout"].shape == ["d"]
    assert "-fopenmp" in spec.origin.flags and spec.cost.flops == "2*d*n"
    spec, _ = imported(LLM, "softmax", "size=4096", tmp_path / "softmax")
    # read first (x[0]), then written: read and written, one element at least
    assert spec.inputs["x_in"].shape == ["size"] and list(spec.outputs) == ["x"]
    check_ok(tmp_path / "softmax")
    spec, _ = imported(LLM, "rmsnorm", "size=512", tmp_path / "rmsnorm")
    assert list(spec.inputs) == ["x", "weight"] and list(spec.outputs) == ["o"]


def test_compile_commands_gives_the_build_flags(tmp_path):
    db = tmp_path / "compile_commands.json"
    db.write_text(json.dumps([{"directory": str(POLY), "file": "linalg/colsum/colsum.c",
                               "arguments": ["gcc", "-O2", "-Icommon", "-DSMALL_SET", "-c",
                                             "linalg/colsum/colsum.c", "-o", "colsum.o"]}]))
    spec, _ = imported(POLY / "linalg/colsum/colsum.c", "kernel_colsum", "n=100",
                       tmp_path / "cc", "--compile-commands", str(db))
    assert spec.inputs["A"].shape == [120, 120]
    assert spec.origin.build == [f"-I{POLY / 'common'}", "-DSMALL_SET"]
    msg = one_line_error(imp(CNN / "src/stats.c", "channel_var", "batch=1,filters=2,spatial=3",
                             tmp_path / "x", "--compile-commands", str(db)))
    assert "no entry for stats.c" in msg


def test_a_header_not_found_is_named_with_the_flag_to_add(tmp_path):
    # the function needs nothing from it: imported, with a note
    _spec, out = imported(CNN / "src/stats.c", "channel_var", "batch=1,filters=2,spatial=3",
                          tmp_path / "ok")
    assert "header netlite.h not found (add its folder with --include-dir)" in out
    # it needs a macro from it: the error names the macro, the header and the flag
    msg = one_line_error(imp(CNN / "src/stats.c", "channel_norm", "batch=1,filters=2,spatial=3",
                             tmp_path / "x"))
    assert "NL_EPS" in msg and "netlite.h was not found: give its folder with --include-dir" in msg
    spec, _ = imported(CNN / "src/stats.c", "channel_norm", "batch=2,filters=8,spatial=30",
                       tmp_path / "norm", "--include-dir", str(CNN / "include"))
    assert list(spec.outputs) == ["x"] and spec.inputs["var"].shape == ["filters"]


FIXED = CODEBASES / "fixed" / "dsp.c"


def test_fixed_size_functions_and_array_typedefs_import_as_the_compiler_reads_them(tmp_path):
    """Embedded style: sizes fixed by the header's macros, no integer parameter (so no
    --case at all), 2D data through `typedef float mat_t[ROWS][COLS]` (a parameter of that
    type is a pointer to rows) and a pointer to such arrays."""
    p = kernelcrew("import", str(FIXED), "--function", "fir_fixed", "--out",
                   str(tmp_path / "fir"), timeout=180)
    assert p.returncode == 0, p.stderr
    spec = load_op(tmp_path / "fir")
    assert spec.sizes == [] and [c for g in spec.shapes.values() for c in g.cases] == [{}]
    # x[i + j] for i < SAMPLES - TAPS, j < TAPS: 4064 + 31 cells
    assert spec.inputs["x"].shape == [4095] and spec.outputs["y"].shape == [4064]
    check_ok(tmp_path / "fir")

    p = kernelcrew("import", str(FIXED), "--function", "scale_rows", "--out",
                   str(tmp_path / "rows"), timeout=180)
    assert p.returncode == 0, p.stderr
    spec = load_op(tmp_path / "rows")
    assert spec.inputs["a"].shape == [64, 96] and spec.outputs["out"].shape == [64, 96]
    assert spec.inputs["w"].shape == [32]  # `taps_t` is const: an input
    check_ok(tmp_path / "rows")

    spec, _ = imported(FIXED, "blocks_sum", "nblocks=5", tmp_path / "blocks")
    assert spec.inputs["blocks"].shape == ["nblocks", 64, 96]
    check_ok(tmp_path / "blocks")
    # with an integer parameter, the missing case names it
    msg = one_line_error(kernelcrew("import", str(FIXED), "--function", "blocks_sum", "--out",
                                    str(tmp_path / "x"), timeout=180))
    assert "--case nblocks=VALUE" in msg


AUDIO = CODEBASES / "audio" / "audio.c"


def test_qualifier_macros_and_declarations_split_by_ifdef_import_with_case_alone(tmp_path):
    """An audio-codec style (tests/importer/codebases/audio): `sample_t * AUD_RESTRICT x`
    with the macro from a header (`restrict` in C99, nothing elsewhere), `static
    AUD_INLINE acc_t mac(...)`, a return type chosen by `#ifdef`, a block opened under one
    `#if` and closed under another, an argument split by `#ifdef`. The grammar read each
    of these as an error and the definition was lost ("parameter 'x' is not supported");
    now each imports with `--case` alone, its baseline is correct, and the moves read it
    (the typedef casts `(sample_t)(...)` and `(acc_t)(s + ...)` of an inlined helper are
    casts, not calls)."""
    from kernelcrew.agents.transforms import apply_transform
    from kernelcrew.kernels.importer.source import load_source

    for fn, case, arrays in (("aud_gain", "n=1000", {"in": ["n"]}),
                             ("aud_xcorr", "len=480,max_lag=97", {"y": ["len + max_lag - 1"]}),
                             ("aud_energy", "frames=9,frame_len=160",
                              {"x": ["frame_len*frames"]})):
        spec, _ = imported(AUDIO, fn, case, tmp_path / fn)
        for name, shape in arrays.items():
            assert [s.replace(" ", "") for s in spec.inputs[name].shape] == \
                [s.replace(" ", "") for s in shape], (fn, spec.inputs[name].shape)
        check_ok(tmp_path / fn)
    # the original file as `export --patch` reads it (no preprocessor: the qualifier macro
    # named by the baseline's copied definitions, the first branch of each split)
    base = (tmp_path / "aud_xcorr" / "baseline.cpp").read_text()
    assert "# define AUD_RESTRICT restrict" in base  # the definition C99 selects, as written
    assert "#ifdef FIXED_AUDIO\nacc_t\n#else\nvoid\n#endif\naud_xcorr(" in base
    from kernelcrew.csource.masking import qualifier_macros
    sf = load_source(AUDIO, qualifier_macros(base))
    assert {"aud_gain", "aud_xcorr", "aud_energy", "mac"} <= {
        n for it in sf.items if it.node_type == "function_definition" for n in it.defines}
    assert apply_transform("simd", base) is not None
    gain = (tmp_path / "aud_gain" / "baseline.cpp").read_text()
    assert apply_transform("omp_parallel", gain) is not None
    # a pointer declared with the macro is restrict already: no second qualifier (g++:
    # "duplicate cv-qualifier"); the entry's pointers get theirs
    with_restrict = apply_transform("restrict", gain)
    assert with_restrict is not None and "__restrict__ AUD_RESTRICT" not in with_restrict
    assert "float* __restrict__ out" in with_restrict


def test_generated_cases_the_function_does_not_handle_are_left_out_with_a_note(tmp_path):
    """A solver that works in whole 16x16 tiles asserts its grid is a whole number of tiles
    (tests/importer/codebases/grid, `#include <assert.h>`). The boundary and unaligned
    cases the importer makes up are sizes it never had: its own float64 build aborts on
    them, so they are left out, each with a note, and the op keeps the user's typical case
    (the import stopped on the first of them before). The cost model counts the tiles'
    `r < r0 + TILE` loops as TILE trips and the border tile's path as the alternative it is.
    Integer inputs the code uses as indices get valid indices; where the user's typical
    case itself dies, the inputs are at fault: nothing is left out, and the one-line error
    says which integer input needs --values."""
    shapes = [a for n in ("next", "cur", "heat") for a in ("--shape", f"{n}=rows*cols")]
    spec, out = imported(GRID, "thermal_step", "rows=256,cols=384", tmp_path / "step",
                         *shapes)
    assert {g: [c for c in grp.cases] for g, grp in spec.shapes.items()} == \
        {"typical": [{"rows": 256, "cols": 384}]}
    left = [ln for ln in out.splitlines() if "left out" in ln]
    assert len(left) == 3 and all("died of SIGABRT" in ln for ln in left), out
    assert any("unaligned case rows=255,cols=383" in ln for ln in left)
    assert spec.cost.flops.replace(" ", "") == "8*((rows//16)*(cols//16))*16*16"
    check_ok(tmp_path / "step")
    # an integer input the code reads as a subscript draws valid indices by itself: as a
    # whole subscript (probe: [0, cells)) and through a local scaled by a size (pick:
    # `r = pick[p]; grid[r * cols + c]`: [0, rows))
    spec, out = imported(GRID, "thermal_probe", "probes=100,cells=1000", tmp_path / "probe",
                         "--shape", "grid=cells")
    assert "probe: its values index grid: drawn from [0, cells)" in out
    assert "left out" not in out and set(spec.shapes) == {"typical", "boundary", "unaligned"}
    check_ok(tmp_path / "probe")
    _, out = imported(GRID, "thermal_pick_rows", "picks=50,rows=300,cols=64", tmp_path / "pick",
                      "--shape", "grid=rows*cols")
    assert "pick: its values index grid: drawn from [0, rows)" in out
    check_ok(tmp_path / "pick")
    # counts the code only asserts about: the values drawn by default fail the assert on
    # the typical case, so nothing is left out and the error names --values
    msg = one_line_error(imp(GRID, "thermal_blur", "cols=1000", tmp_path / "blur"))
    assert "died of SIGABRT on cols=1000" in msg
    assert "give their range at import (--values reach=LO:HI)" in msg
    imported(GRID, "thermal_blur", "cols=1000", tmp_path / "blur2", "--values", "reach=1:5")
    check_ok(tmp_path / "blur2")

def test_an_unstable_baseline_does_not_buy_a_tolerance_that_passes_anything(tmp_path):
    """An LU factorization without pivoting (tests/importer/codebases/grid/solve.c) on the
    random matrices `check` draws differs from its float64 build by a percent of its
    largest value: not rounding. The import's calibration used to raise atol to cover it
    (on another such function, to 2e6: any output passed); now atol stays as generated,
    the import warns and says what to do, op.yaml says why, and `check` fails the
    baseline. With inputs the function is meant for (diagonally dominant), it passes."""
    p = imp(SOLVE, "lu_inplace", "n=200", tmp_path / "lu")
    assert p.returncode == 0, p.stderr
    assert "warning: tolerance: atol left at" in p.stdout and "inputs.py" in p.stdout, p.stdout
    text = (tmp_path / "lu" / "op.yaml").read_text()
    assert "# atol NOT raised at import" in text
    assert load_op(tmp_path / "lu").tolerance.atol <= 1e-3
    c = kernelcrew("check", str(tmp_path / "lu"), str(tmp_path / "lu" / "baseline.cpp"),
                   "--json", "--reps", "2", timeout=600)
    assert json.loads(c.stdout)["correct"] is False
    (tmp_path / "lu" / "inputs.py").write_text(
        "import numpy as np\n\n\n"
        "def make_inputs(rng, n):\n"
        "    m = rng.standard_normal((n, n))\n"
        "    m[np.diag_indices(n)] += 2.0 * n\n"
        "    return {'m_in': m.reshape(-1).astype(np.float32)}\n")
    check_ok(tmp_path / "lu")
