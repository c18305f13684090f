"""`kernelfarer compare` (the command, its harness, its statistics and outputs) and the `--backend
blas` rewrite it measures."""

from __future__ import annotations

import csv
import subprocess

import pytest

from conftest import CLANG, SAMPLES, STRICT_FLAGS, run_cli
from kernelfarer import backends, compare, frontend, harness, timing
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.unit import find_candidates

SAMPLE = SAMPLES / "compare" / "gemm.c"


# -- the command ------------------------------------------------------------------------------------

def test_compare_prints_the_table_and_writes_csv_and_plot(tmp_path):
    out_csv, out_png = tmp_path / "gemm.csv", tmp_path / "gemm.png"
    done = run_cli("compare", SAMPLE, "--function", "sgemm", "--sizes", "8,24", "--rounds", "2",
                   "--min-time", "0.002", "--csv", out_csv, "--plot", out_png, "--no-progress",
                   "--variants", "original,pluto-style,tiled,tiled+packed,blas")
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0].split(" | ")[:3] == ["| function", "dtype", "N"]
    for variant in ("original", "pluto-style", "tiled", "tiled+packed", "blas"):
        assert variant in table[0]
    assert [line.split(" | ")[2] for line in table[1:]] == ["8", "24"]
    assert "—" not in "".join(table[1:])          # every variant ran at every size
    with open(out_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {"variant", "size", "dtype", "gflops_median", "ci_low", "ci_high"} <= set(rows[0])
    assert len(rows) == 5 * 2
    for row in rows:
        assert row["dtype"] == "f32" and row["function"] == "sgemm"
        low, mid, high = float(row["ci_low"]), float(row["gflops_median"]), float(row["ci_high"])
        assert 0 < low <= mid <= high
        assert (row["m"], row["n"], row["k"]) == (row["size"],) * 3
    png = out_png.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000


def test_compare_reports_what_it_cannot_drive(tmp_path):
    src = tmp_path / "globals.c"
    src.write_text("float A[64][64], B[64][64], C[64][64];\n"
                   "void mm(void) {\n    for (int i = 0; i < 64; i++)\n"
                   "        for (int j = 0; j < 64; j++)\n            for (int k = 0; k < 64; k++)\n"
                   "                C[i][j] += A[i][k] * B[k][j];\n}\n")
    done = run_cli("compare", src, "--rounds", "1", "--no-progress")
    assert done.returncode == 1
    assert "not a parameter of the function" in done.stderr
    done = run_cli("compare", SAMPLE, "--function", "nope", "--no-progress")
    assert done.returncode == 1 and "'nope' holds no recognized GEMM nest" in done.stderr


def test_subject_roles_come_from_the_spec():
    tu = frontend.load(str(SAMPLE))
    cand = next(c for c in find_candidates(tu) if c.spec and c.function.decl.name == "dgemm")
    subject = harness.make_subject(cand.function, cand.spec, tu.ast)
    # through the harness's volatile pointer: the function as compiled on its own
    assert subject.call == "kf_cmp_fn_dgemm(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)"
    assert "kf_index lda = kf_cmp_size" in subject.locals
    assert f"double alpha = {harness.ALPHA}" in subject.locals
    assert f"double beta = {harness.BETA}" in subject.locals
    assert {op.local for op in subject.operands} == {"a", "b", "c"} and subject.result.local == "c"


def test_a_wrong_variant_is_caught_before_timing(tmp_path):
    options = compare.CompareOptions(path=str(SAMPLE), functions=("sgemm",))
    subjects = compare.load_subjects(str(SAMPLE), functions=("sgemm",))
    text = compare.harness(options, subjects)
    original = compare.make_variant("original", options, subjects, str(tmp_path))
    broken = compare.Variant("broken", text=original.text.replace("*= beta", "*= 2 * beta"))
    for variant in (original, broken):
        compare.build(variant, options, text, str(tmp_path))
    problem = compare.check(broken, original, 0, subjects[0], 9, str(tmp_path))
    assert problem is not None and "differs" in problem


# -- statistics and the randomized rounds --------------------------------------------------------

def test_median_interval_uses_order_statistics():
    ten = timing.median_interval([float(v) for v in range(10, 0, -1)])
    assert ten.median == 5.5 and (ten.low, ten.high) == (2.0, 9.0) and ten.coverage >= 0.95
    two = timing.median_interval([3.0, 1.0])
    assert (two.median, two.low, two.high, two.coverage) == (2.0, 1.0, 3.0, 0.5)


def test_rounds_run_every_job_once_per_round_in_random_order():
    order = []

    def parse(stdout: str) -> float:
        order.append(stdout.strip())
        return float(len(order))

    jobs = [timing.Job(key=(name,), command=("echo", name), label=name) for name in "abcdef"]
    results = timing.run_rounds(jobs, rounds=4, parse=parse, seed=1)
    assert all(len(v) == 4 for v in results.values())
    rounds = [order[i:i + 6] for i in range(0, 24, 6)]
    assert all(sorted(r) == list("abcdef") for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1


# -- the blas backend -------------------------------------------------------------------------------

BLAS_NESTS = """
void notrans(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}

void trans_a_overwrite(int m, int n, int k, double alpha, const double *a, const double *b,
                       double *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[p * m + i] * b[p * n + j];
            c[i * n + j] = alpha * acc;
        }
}
"""
STRIDED = """
void strided(int n, const float *a, const float *b, float *c)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < n; p++)
                c[i * n + j] += a[2 * (i * n + p)] * b[p * n + j];
}
"""


def test_blas_backend_calls_cblas_with_the_layout_of_the_operands(tmp_path):
    src, out = tmp_path / "mm.c", tmp_path / "mm_blas.c"
    src.write_text(BLAS_NESTS)
    done = run_cli("rewrite", src, "-o", out, "--backend", "blas", "--remarks")
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "#include <cblas.h>" in text
    assert "cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans" in text
    assert "cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans" in text
    assert "kf_sgemm_" not in text and "kf_dgemm_" not in text     # no kernelfarer driver needed
    assert done.stderr.count("with kernel cblas_") == 2
    subprocess.run([CLANG, "-c", *STRICT_FLAGS, "-O1", str(out), "-o", str(tmp_path / "mm.o")],
                   check=True)


def test_blas_backend_equals_the_original_on_odd_sizes(tmp_path):
    src = tmp_path / "mm.c"
    src.write_text(BLAS_NESTS)
    options = compare.CompareOptions(path=str(src))
    subjects = compare.load_subjects(str(src))
    text = compare.harness(options, subjects)
    original = compare.make_variant("original", options, subjects, str(tmp_path))
    blas = compare.make_variant("blas", options, subjects, str(tmp_path))
    assert blas.skipped == {} and blas.link == ("-lopenblas",)
    for variant in (original, blas):
        compare.build(variant, options, text, str(tmp_path))
    for index, subject in enumerate(subjects):
        for size in (1, 7, 33, 100):       # check() also requires the CBLAS path to have run
            assert compare.check(blas, original, index, subject, size, str(tmp_path)) is None


def test_blas_backend_keeps_kernelfarer_for_what_cblas_cannot_express(tmp_path):
    src, out = tmp_path / "strided.c", tmp_path / "out.c"
    src.write_text(STRIDED)
    done = run_cli("rewrite", src, "-o", out, "--backend", "blas", "--remarks")
    assert done.returncode == 0, done.stderr
    assert "CBLAS cannot express this GEMM: A" in done.stderr
    text = out.read_text()
    assert "cblas_" not in text.split("#include <cblas.h>")[-1]
    assert "kf_sgemm_" in text


def test_blas_call_rejects_integer_gemms():
    tu = frontend.load(str(SAMPLE))
    spec = next(c.spec for c in find_candidates(tu) if c.spec)
    int_spec = spec.__class__(**{**spec.__dict__, "dtype": spec.dtype.__class__.I32})
    assert backends.blas_call(int_spec) == "CBLAS has no int GEMM"
    call = backends.blas_call(spec)
    assert call.function == "cblas_sgemm" and call.beta == spec.beta
    assert any("beta is not 0" in g.why for g in call.guards)


def test_unknown_backend_is_an_error():
    with pytest.raises(KernelfarerError, match="unknown backend"):
        backends.get_backend("mkl")


def test_polycc_variant_runs_the_polycc_found_on_path(tmp_path):
    """A stand-in polycc (it copies the file, #pragma scop and all) shows the plumbing: the nest is
    marked as Pluto's static control part, polycc's output is built, checked and timed."""
    import os
    import sys
    fake = tmp_path / "bin" / "polycc"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nin=$1; out=""\n'
                    'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                    'grep -q "#pragma scop" "$in" && cp "$in" "$out"\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run([sys.executable, "-m", "kernelfarer", "compare", str(SAMPLE),
                           "--function", "sgemm", "--variants", "original,polycc", "--sizes", "8",
                           "--rounds", "1", "--min-time", "0.001", "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    header, _, row = [line for line in done.stdout.splitlines() if line.startswith("|")][:3]
    assert "polycc" in header and "—" not in row


# -- Polly, the interchange, threads, whole directories ---------------------------------------------

# the accumulator spelling (a scalar declared between the loops), as in BLAS_NESTS
ACC_NEST = BLAS_NESTS[BLAS_NESTS.index("void trans_a_overwrite"):]


def _quick(path, **kw):
    return compare.CompareOptions(path=str(path), rounds=1, min_time=0.001, progress=False, **kw)


def test_polly_interchange_and_threaded_variants_are_checked_and_timed(tmp_path):
    """Polly's plain and parallel modes, the interchange and kernelfarer on two threads: each is
    built, equal to the original at the check sizes, and timed (Polly's GEMM path is left to
    `make fuzz`: it takes clang a minute a function)."""
    options = _quick(SAMPLE, functions=("sgemm",), sizes=(33,), threads=2,
                     variants=("original", "interchange", "pluto-style", "polly", "tiled+packed"))
    rows, notes = compare.run(options)
    got = {r.variant: r for r in rows}
    assert set(got) == {"original", "interchange", "pluto-style", "polly", "tiled+packed",
                        "pluto-style x2", "tiled+packed x2", "polly-parallel x2"}, notes
    for row in rows:
        assert row.gflops_median and not row.note.startswith("WRONG"), (row.variant, row.note)


@pytest.mark.slow
def test_polly_gemm_variant(tmp_path):
    rows, notes = compare.run(_quick(SAMPLE, functions=("sgemm",), sizes=(33,),
                                     variants=("original", "polly-gemm")))
    assert [r.variant for r in rows] == ["original", "polly-gemm"]
    assert all(r.gflops_median for r in rows), notes


BF16_NEST = """
void hgemm(int m, int n, int k, const __bf16 *a, const __bf16 *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += (float)a[i * k + p] * (float)b[p * n + j];
            c[i * n + j] = acc;
        }
}
"""


def test_a_bf16_gemm_is_compared_and_the_tiled_variant_says_why_not(tmp_path):
    """bf16 operands: the harness of a variant without kernelfarer's prelude still names their
    type (kf_bf16, the generated code's), and every variant equals the original; the tiled
    variant, whose vector loads read A and B in place as float, is not built (it was built,
    read the bf16 bits as floats and was caught WRONG)."""
    src = tmp_path / "half.c"
    src.write_text(BF16_NEST)
    rows, notes = compare.run(_quick(src, sizes=(5, 33), target="x86-avx512",
                                     variants=("original", "pluto-style", "tiled",
                                               "tiled+packed")))
    if not any(r.variant == "tiled+packed" for r in rows):
        pytest.skip(f"this host does not run x86-avx512: {notes}")
    assert {r.variant for r in rows} == {"original", "pluto-style", "tiled+packed"}, notes
    assert all(r.gflops_median and not r.note.startswith("WRONG") for r in rows), \
        [(r.variant, r.note) for r in rows]
    assert "tiled: not built: the tiled variant reads A and B in place as float; __bf16 " \
           "operands are converted only by packing" in notes, notes


def test_pluto_style_and_interchange_expand_a_local_accumulator(tmp_path):
    src = tmp_path / "acc.c"
    src.write_text(ACC_NEST)
    rows, notes = compare.run(_quick(src, sizes=(1, 31), threads=2,
                                     variants=("original", "interchange", "pluto-style")))
    assert {r.variant for r in rows} == {"original", "interchange", "pluto-style",
                                         "pluto-style x2"}
    assert all(r.gflops_median for r in rows), [(r.variant, r.note) for r in rows]
    assert any("pluto-style trans_a_overwrite(): scalar 'acc' over 2 loops expanded" in n for n in notes)
    assert any(n.startswith("interchange trans_a_overwrite(): scalar 'acc'") for n in notes)


def test_a_wrong_or_crashing_variant_is_shown_as_such():
    from kernelfarer import compare_report
    rows = [compare.Row("original", "f", "f32", 64, 64, 64, 64, 2.0, 1.9, 2.1, 0.1, 3),
            compare.Row("polly", "f", "f32", 64, 0, 0, 0, None, None, None, None, 0,
                        "WRONG: result differs from the original at N=67 in 3 elements "
                        "(largest difference 2 at element 5); not timed")]
    table = compare_report.markdown(rows)
    assert "| f | f32 | 64 | 2.00 (1.90–2.10) | WRONG |" in table
    assert "polly f(): WRONG: result differs from the original at N=67 in 3 elements" in table
    assert "| f | f32 | polly | WRONG |" in compare_report.summary(rows)


def test_stack_limit_is_raised_for_the_variants():
    import resource
    compare.raise_stack_limit()
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    wanted = compare.STACK_BYTES if hard == resource.RLIM_INFINITY else min(compare.STACK_BYTES,
                                                                              hard)
    assert soft == resource.RLIM_INFINITY or soft >= wanted


def test_compare_runs_on_a_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "acc.c").write_text(ACC_NEST)
    (tmp_path / "gemm.c").write_text(SAMPLE.read_text())
    (tmp_path / "none.c").write_text("int f(int x) { return x + 1; }\n")
    # a function the parser cannot read (a local label) beside a GEMM compare drives
    (tmp_path / "label.c").write_text(
        "int g(int n) { __label__ out; if (n) goto out; return 0; out: return 1; }\n"
        + SAMPLE.read_text().split("void dgemm")[0])
    out_png = tmp_path / "out" / "cmp.png"
    out_png.parent.mkdir()
    done = run_cli("compare", tmp_path, "--sizes", "9,20", "--rounds", "1", "--min-time", "0.001",
                   "--variants", "original,pluto-style,tiled+packed", "--no-progress",
                   "--plot", out_png)
    assert done.returncode == 0, done.stderr
    assert "none.c: not compared:" in done.stdout and "no recognized GEMM nest" in done.stdout
    summary = done.stdout[done.stdout.index("Summary"):]
    lines = [ln for ln in summary.splitlines() if ln.startswith("| ")]
    assert lines[0] == ("| function | dtype | variant | N=9 | N=20 | x original | x pluto-style |")
    functions = {ln.split(" | ")[0][2:] for ln in lines[1:]}
    assert functions == {"gemm.c:sgemm", "gemm.c:dgemm", "label.c:sgemm", "sub/acc.c:trans_a_overwrite"}
    packed = [ln for ln in lines if "| tiled+packed |" in ln]
    assert len(packed) == 4 and all(ln.rstrip(" |").endswith("(N=20)") for ln in packed)
    assert sorted(p.name for p in out_png.parent.iterdir()) == [
        "cmp-gemm.c_dgemm.png", "cmp-gemm.c_sgemm.png", "cmp-label.c_sgemm.png",
        "cmp-sub_acc.c_trans_a_overwrite.png"]


def test_threaded_pluto_style_is_plutos_parallel_loop(tmp_path):
    subjects = compare.load_subjects(str(SAMPLE), functions=("sgemm",))
    options = _quick(SAMPLE, functions=("sgemm",), threads=2)
    one = compare.make_variant("pluto-style", options, subjects, str(tmp_path))
    two = compare.make_variant(compare.threaded_name("pluto-style", 2), options, subjects,
                               str(tmp_path))
    assert "omp parallel for" not in one.text and one.cflags == ()
    # on each outermost loop (isl may split the first loop where the statements change)
    assert two.text.count("#pragma omp parallel for schedule(static) private(") >= 1
    assert two.cflags == ("-fopenmp",) and ("OMP_NUM_THREADS", "2") in two.env


def test_an_empty_gemm_or_a_row_table_is_said_not_wrong(tmp_path):
    """Every integer parameter gets N: a block i0..i1 is then empty (nothing to time, nothing
    wrong); a table of row pointers is not an array compare can allocate."""
    src = tmp_path / "block.c"
    src.write_text((SAMPLES / "positive" / "submatrix.c").read_text())
    rows, notes = compare.run(_quick(src, functions=("sgemm_block",), sizes=(16,),
                                     variants=("original", "pluto-style")))
    assert {r.variant: r.note for r in rows} == {
        v: "not run: the GEMM is empty when every integer parameter is 16 (M N K = 0 0 0); "
           "not timed" for v in ("original", "pluto-style")}
    with pytest.raises(KernelfarerError, match="'C' is a table of row pointers"):
        compare.load_subjects(str(SAMPLES / "positive" / "row_pointers.c"), functions=("gemm_rows",))
