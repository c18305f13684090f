"""The fast path on OpenMP threads: equal to the original loops on odd sizes, whatever the thread
count (OMP_NUM_THREADS=1, 2, 3), inside a parallel region of the user's (where it runs on one
thread), and compiled without OpenMP (where the threads compile out).  Values are small integers:
every order of summation gives the same exact result.

The nest with an OpenMP `parallel for` pragma gets threads by itself; the other one only with
`--threads`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CLANG, TRACE_FLAGS, run_cli

GCC = shutil.which("gcc-12") or shutil.which("gcc")

GEMMS = r"""
#include <errno.h>      /* errno is a macro of the C library's that the threaded drivers use */

void gemm_nn(int m, int n, int k, const float *a, const float *b, float *c)
{
#pragma omp parallel for
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}

void gemm_nt(int m, int n, int k, const double *a, const double *b, double *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += a[i * k + p] * b[j * k + p];
            c[i * n + j] = s > 0 ? s : -2 * s;   /* an epilogue: fused (the panel hook) */
        }
}

void dense_nt(int m, int n, int k, const float *a, const float *b, const float *bias, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = bias[j];
            for (int p = 0; p < k; p++)
                s += a[i * k + p] * b[j * k + p];
            c[i * n + j] = s > 0 ? s : 0;      /* an epilogue: in the register tile */
        }
}
"""

# Not rewritten: the reference loops and the checks.  Sizes: past the direct path of small
# problems (the threaded path is the packed one), odd, one over and one under the tiny blocks;
# with those, only the tall one is past the direct path (A's k block of 9 columns fits L2).
HARNESS = r"""
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
void gemm_nn(int m, int n, int k, const float *a, const float *b, float *c);
void gemm_nt(int m, int n, int k, const double *a, const double *b, double *c);
void dense_nt(int m, int n, int k, const float *a, const float *b, const float *bias, float *c);
extern long kernelfarer_threaded_calls __attribute__((weak));
static long nested_threaded;        /* threaded runs from inside the user's parallel region */

static long threaded_calls(void)
{
    return &kernelfarer_threaded_calls ? kernelfarer_threaded_calls : 0;
}

static int check(int m, int n, int k, int nested)
{
    float *a = malloc(sizeof(float) * (m * k + 1)), *b = malloc(sizeof(float) * (k * n + 1));
    float *c = malloc(sizeof(float) * (m * n + 1)), *r = malloc(sizeof(float) * (m * n + 1));
    double *ad = malloc(sizeof(double) * (m * k + 1)), *bd = malloc(sizeof(double) * (k * n + 1));
    double *cd = malloc(sizeof(double) * (m * n + 1)), *rd = malloc(sizeof(double) * (m * n + 1));
    int i, j, p, bad = 0;
    for (i = 0; i < m * k; i++) ad[i] = a[i] = (float)((i * 7 + m) % 9 - 4);
    for (i = 0; i < k * n; i++) b[i] = (float)((i * 5 + n) % 7 - 3);
    for (i = 0; i < k * n; i++) bd[i] = (double)((i * 3 + k) % 7 - 3);     /* n x k */
    for (i = 0; i < m * n; i++) r[i] = c[i] = (float)(i % 5 - 2);
    for (i = 0; i < m; i++)
        for (p = 0; p < k; p++)
            for (j = 0; j < n; j++)
                r[i * n + j] += a[i * k + p] * b[p * n + j];
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            double s = 0;
            for (p = 0; p < k; p++)
                s += ad[i * k + p] * bd[j * k + p];
            rd[i * n + j] = s > 0 ? s : -2 * s;
        }
    if (nested) {
        long before = threaded_calls();
        /* every thread of the user's region runs the whole product on its own copy of C */
#pragma omp parallel num_threads(2) reduction(+:bad)
        {
            float *cc = malloc(sizeof(float) * (m * n + 1));
            int e;
            for (e = 0; e < m * n; e++) cc[e] = (float)(e % 5 - 2);
            gemm_nn(m, n, k, a, b, cc);
            for (e = 0; e < m * n; e++) bad += cc[e] != r[e];
            free(cc);
        }
        nested_threaded += threaded_calls() - before;
    } else {
        gemm_nn(m, n, k, a, b, c);
        for (i = 0; i < m * n; i++) bad += c[i] != r[i];
    }
    gemm_nt(m, n, k, ad, bd, cd);
    for (i = 0; i < m * n; i++) bad += cd[i] != rd[i];
    {
        float *bt = malloc(sizeof(float) * (k * n + 1)), *bias = malloc(sizeof(float) * (n + 1));
        for (i = 0; i < k * n; i++) bt[i] = (float)bd[i];                  /* n x k */
        for (j = 0; j < n; j++) bias[j] = (float)(j % 7 - 3);
        dense_nt(m, n, k, a, bt, bias, c);
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++) {
                float s = bias[j];
                for (p = 0; p < k; p++)
                    s += a[i * k + p] * bt[j * k + p];
                bad += c[i * n + j] != (s > 0 ? s : 0);
            }
        free(bt); free(bias);
    }
    free(a); free(b); free(c); free(r); free(ad); free(bd); free(cd); free(rd);
    return bad;
}

/* The program's first OpenMP work is a threaded driver's: the runtime's start must not show in
   the caller's errno (it sets ENOENT looking for a message catalog). */
static int first_call_errno(void)
{
    const int n = 290;
    double *a = calloc(n * n, sizeof(double)), *b = calloc(n * n, sizeof(double));
    double *c = calloc(n * n, sizeof(double));
    int seen;
    errno = 0;
    gemm_nt(n, n, n, a, b, c);
    seen = errno;
    free(a); free(b); free(c);
    return seen;
}

int main(void)
{
    static const int sizes[][3] = {{0, 300, 300}, {1, 1, 1}, {259, 263, 251}, {97, 389, 301},
                                   {301, 97, 389}, {49, 193, 8}, {47, 95, 10}, {290, 290, 290},
                                   {7301, 197, 31}};
    int s, bad = 0, first_errno = first_call_errno();
    for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++)
        bad += check(sizes[s][0], sizes[s][1], sizes[s][2], 0);
    for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++)
        bad += check(sizes[s][0], sizes[s][1], sizes[s][2], 1);
    printf("mismatches %d threaded %ld nested %ld errno %d\n", bad, threaded_calls(),
           nested_threaded, first_errno);
    return 0;
}
"""

# Cache blocks that the sizes above cross many times (multiples of every x86 target's mr, nr).
TINY = ("--mc", "48", "--kc", "9", "--nc", "96")


def _rewrite(tmp: Path, *args: str) -> tuple[Path, str]:
    source = tmp / "gemms.c"
    source.write_text(GEMMS)
    out = tmp / "gemms_kf.c"
    done = run_cli("rewrite", source, "-o", out, "--remarks", *args)
    assert done.returncode == 0, done.stderr
    return out, done.stderr


def _build(tmp: Path, rewritten: Path, compiler: str, openmp: bool) -> Path:
    (tmp / "harness.c").write_text(HARNESS)
    exe = tmp / f"run_{Path(compiler).name}_{int(openmp)}"
    flags = ["-O2", *TRACE_FLAGS, "-fopenmp"] if openmp else ["-O2", *TRACE_FLAGS]
    done = subprocess.run([compiler, *flags, str(rewritten), str(tmp / "harness.c"), "-o",
                           str(exe)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return exe


def _run(exe: Path, threads: int) -> tuple[int, int, int]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[6:] == ["errno", "0"], f"errno changed by the first threaded call: {out.stdout}"
    return int(words[1]), int(words[3]), int(words[5])


def test_the_pragma_asks_for_threads_and_only_its_nest_gets_them(tmp_path) -> None:
    out, remarks = _rewrite(tmp_path)
    text = out.read_text()
    nn, nt, dense = [line for line in remarks.splitlines() if "replaced" in line]
    assert "_mt [" in nn and "_mt" not in nt and "_mt" not in dense
    assert "#pragma omp parallel num_threads(threads)" in text
    assert text.count("#pragma omp for schedule(static)") == 1     # A block
    assert text.count("#pragma omp for schedule(static, kf_epi_chunk)") == 2   # B panel, columns
    report = tmp_path / "r.json"
    done = run_cli("rewrite", tmp_path / "gemms.c", "-o", tmp_path / "again.c", "--report", report)
    assert done.returncode == 0, done.stderr
    assert "asked for by the nest's OpenMP parallel pragma" in report.read_text()
    _, single = _rewrite(tmp_path, "--threads", "1")
    assert "_mt" not in single and "#pragma omp for" not in (tmp_path / "gemms_kf.c").read_text()


@pytest.mark.parametrize("blocks", ["default", "tiny"])
def test_threads_equal_the_original_loops(tmp_path, blocks) -> None:
    out, remarks = _rewrite(tmp_path, "--threads", "auto", *(TINY if blocks == "tiny" else ()))
    assert remarks.count("_mt [") == 3, remarks
    builds = [(CLANG, True), (CLANG, False)] + ([(GCC, True)] if GCC else [])
    for compiler, openmp in builds:
        exe = _build(tmp_path, out, compiler, openmp)
        for threads in (1, 2, 3):
            bad, threaded, nested = _run(exe, threads)
            what = f"{Path(compiler).name} openmp={openmp} OMP_NUM_THREADS={threads}"
            assert bad == 0, what
            # threads ran where they could; never inside the user's parallel region
            assert (threaded > 0) == (openmp and threads > 1), what
            assert nested == 0, what


def test_explain_prints_the_schedule_tree_with_the_shared_loops(tmp_path) -> None:
    source = tmp_path / "gemms.c"
    source.write_text(GEMMS)
    done = run_cli("explain", source, "--schedule", "--target", "x86-avx2")
    assert done.returncode == 0, done.stderr
    trees = done.stdout.split("\nschedule of ")[1:]
    assert [t.split()[0] for t in trees] == ["kf_sgemm_x86_avx2_6x16_mt_driver",
                                              "kf_dgemm_x86_avx2_6x8_driver",
                                              "kf_sgemm_x86_avx2_6x16_driver"]
    threaded, single, _ = trees
    assert threaded.count("mark: kf_parallel_for\n") == 1 and "mark:" not in single   # PackA
    assert threaded.count("mark: kf_parallel_for_chunked\n") == 2      # PackB and the jr loop
    for tree in trees:
        assert "band: [M, N, K] -> { Kern[jc, pc, ic, jr, ir] -> [ir] }" in tree
        assert tree.index("filter: PackB") < tree.index("filter: Kern, PackA") \
            < tree.index("filter: PackA\n")


PRIVATE_COUNTERS = r"""
#include <stdio.h>
__attribute__((noinline)) void mm(int M, int N, int K, const float *A, const float *B, float *C)
{
    int i = -5, j = -7, k = -9;
    float acc;
#pragma omp parallel for private(j, k, acc)
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            acc = 0;
            for (k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
    printf("i=%d j=%d k=%d C=%g\n", i, j, k, C[M * N - 1]);
}

int main(void)
{
    static float A[67 * 61], B[61 * 59], C[67 * 59];
    int e;
    for (e = 0; e < 67 * 61; e++) A[e] = (float)(e % 5 - 2);
    for (e = 0; e < 61 * 59; e++) B[e] = (float)(e % 3 - 1);
    mm(67, 59, 61, A, B, C);
    return 0;
}
"""


def test_counters_openmp_keeps_private_are_left_as_they_were(tmp_path) -> None:
    """Under -fopenmp the parallel loop's counter and the private() ones are the threads' own
    copies: the function's variables keep their values (without OpenMP the loops leave theirs)."""
    source = tmp_path / "private.c"
    source.write_text(PRIVATE_COUNTERS)
    out = tmp_path / "private_kf.c"
    done = run_cli("rewrite", source, "-o", out, "--remarks")
    assert done.returncode == 0 and "replaced" in done.stderr, done.stderr
    for flags in (["-fopenmp"], []):
        outputs = []
        for path in (source, out):
            exe = tmp_path / f"{path.stem}{len(flags)}"
            built = subprocess.run([CLANG, "-O2", *TRACE_FLAGS, *flags, str(path), "-o", str(exe)],
                                   capture_output=True, text=True)
            assert built.returncode == 0, built.stderr[-2000:]
            ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                                 env={**os.environ, "OMP_NUM_THREADS": "2"})
            outputs.append(ran.stdout)
        assert outputs[0] == outputs[1], (flags, outputs)
        assert outputs[0].startswith("i=-5 j=-7 k=-9" if flags else "i=67 j=59 k=61"), outputs


# -- the packing buffer kept from one call to the next ---------------------------------------------

BUFFER_GEMM = r"""
void gemm(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""

# Sizes past the direct path (the packed path takes the kept buffer), growing and shrinking, odd;
# two threads at once (one holds the buffer, the other allocates); and page faults of calls after
# the allocator gave its free memory back to the system (malloc_trim): a buffer allocated per call
# is then fresh memory, faulting once per 4 KiB page (a 600^3 float problem's is 1.4 MiB).
BUFFER_HARNESS = r"""
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
void gemm(int m, int n, int k, const float *a, const float *b, float *c);
extern long kernelfarer_fast_path_calls __attribute__((weak));
extern long kernelfarer_direct_calls __attribute__((weak));

static long direct_calls(void)
{
    return &kernelfarer_direct_calls ? kernelfarer_direct_calls : 0;
}

static int check(int m, int n, int k, unsigned seed)
{
    float *a = malloc(sizeof(float) * (m * k + 1)), *b = malloc(sizeof(float) * (k * n + 1));
    float *c = malloc(sizeof(float) * (m * n + 1)), *r = malloc(sizeof(float) * (m * n + 1));
    int i, j, p, bad = 0;
    for (i = 0; i < m * k; i++) a[i] = (float)((i * 7 + seed) % 9) - 4;
    for (i = 0; i < k * n; i++) b[i] = (float)((i * 5 + seed) % 7) - 3;
    for (i = 0; i < m * n; i++) r[i] = c[i] = (float)(i % 5) - 2;
    for (i = 0; i < m; i++)
        for (p = 0; p < k; p++)
            for (j = 0; j < n; j++)
                r[i * n + j] += a[i * k + p] * b[p * n + j];
    gemm(m, n, k, a, b, c);
    for (i = 0; i < m * n; i++)
        bad += c[i] != r[i];
    free(a); free(b); free(c); free(r);
    return bad;
}

static void *worker(void *arg)
{
    long bad = 0;
    int round;
    for (round = 0; round < 6; round++)
        bad += check(203 + round, 211, 199 + (int)(long)arg, (unsigned)round);
    return (void *)bad;
}

static long faults(void)
{
    struct rusage use;
    getrusage(RUSAGE_SELF, &use);
    return use.ru_minflt;
}

int main(void)
{
    static const int sizes[][3] = { {600, 600, 600}, {97, 389, 211}, {1000, 7, 900},
                                    {601, 603, 599}, {131, 1031, 257}, {600, 600, 600} };
    int s, round, bad = 0;
    long most = 0, direct;
    pthread_t t1, t2;
    void *r1, *r2;
    float *a = calloc(600 * 600, sizeof(float)), *b = calloc(600 * 600, sizeof(float));
    float *c = calloc(600 * 600, sizeof(float));
    for (s = 0; s < 6; s++)
        bad += check(sizes[s][0], sizes[s][1], sizes[s][2], (unsigned)s);
    gemm(600, 600, 600, a, b, c);                 /* every page of a, b, c touched */
    direct = direct_calls();
    for (round = 0; round < 3; round++) {
        long before;
        malloc_trim(0);
        before = faults();
        gemm(600, 600, 600, a, b, c);
        if (faults() - before > most)
            most = faults() - before;
    }
    direct = direct_calls() - direct;             /* 600^3 on the direct path: nothing packed */
    pthread_create(&t1, 0, worker, (void *)1L);
    pthread_create(&t2, 0, worker, (void *)2L);
    pthread_join(t1, &r1);
    pthread_join(t2, &r2);
    printf("%d %ld %ld %ld\n", bad + (int)(long)r1 + (int)(long)r2, most,
           &kernelfarer_fast_path_calls ? kernelfarer_fast_path_calls : -1L, direct);
    return 0;
}
"""


@pytest.mark.skipif(not os.path.exists("/usr/include/malloc.h"), reason="needs glibc's malloc_trim")
def test_the_packing_buffer_is_kept_between_calls(tmp_path) -> None:
    """Calls after the first take the packing buffer the first allocated (no page fault for it
    even after the allocator gave its memory back), sizes that grow and shrink stay equal to the
    original loops, and two threads calling at once both get right results."""
    src = tmp_path / "gemm.c"
    src.write_text(BUFFER_GEMM)
    out = tmp_path / "gemm_kf.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "kf_cache_take" in out.read_text()
    (tmp_path / "main.c").write_text(BUFFER_HARNESS)
    exe = tmp_path / "t"
    subprocess.run([CLANG, "-O2", "-pthread", *TRACE_FLAGS, str(out), str(tmp_path / "main.c"),
                    "-o", str(exe)], check=True)
    bad, most, fast_calls, direct = (int(v) for v in subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.split())
    assert bad == 0
    assert fast_calls >= 6 + 4 + 12 - 1, "the rewritten nest did not run"
    if direct:
        pytest.skip("this host's plan runs 600^3 on the direct path (A and B fit its L2): "
                    "nothing is packed there to keep")
    assert most < 64, f"{most} page faults in a call: the buffer was allocated anew"
