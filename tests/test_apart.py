"""Code that runs apart from the GEMM: statements beside it in its loops, split off (canonical
side statements) or run in a copy of the outer loop after it (fission.py).  What they store must
not overlap anything the GEMM reads, C and A and B, what its epilogue reads, and the scalars it
reads once (alpha, a bound or a leading dimension behind a pointer): each is checked at run time.

Each case calls the function twice from the same driver, built against the original and against
the rewrite: once with the store landing in what the GEMM reads (the original then changes
its later rows; the rewrite's checks must send the call to the original loops), once with
separate memory (the fast path runs).  Both builds must print the same, and the rewrite's fast
path must have run exactly for the second call."""

from __future__ import annotations

import subprocess

import pytest

from conftest import CLANG, TRACE_FLAGS
from kernelfarer.rewrite import RewriteOptions, rewrite_file

HEADERS = "#include <stddef.h>\n"
# The case's file also holds its data and the two calls; main.c prints what they leave (and the
# fast path's count, a name the rewritten file may not mention).
RUN = r"""
enum { n = 8 };
static T A[4 * n * n], B[4 * n * n], C[4 * n * n], X[4 * n * n], E[4 * n * n];
static void fill(void)
{
    int x;
    for (x = 0; x < 4 * n * n; x++) {
        A[x] = (T)(x % 3);
        B[x] = (T)(x % 5 - 2);
        C[x] = 0;
        X[x] = 0;
        E[x] = (T)(x % 4);
    }
}
static long hash(void)
{
    long h = 0;
    int x;
    for (x = 0; x < 4 * n * n; x++)
        h = h * 31 + (long)A[x] + 3 * (long)B[x] + 7 * (long)C[x] + 11 * (long)X[x]
            + 13 * (long)E[x];
    return h;
}
void run(void (*show)(const char *, long))
{
    fill();
    ALIASED;
    show("aliased", hash());
    fill();
    SEPARATE;
    show("separate", hash());
}
"""
MAIN = r"""
#include <stdio.h>
__attribute__((weak)) long kernelfarer_fast_path_calls;   /* the rewrite's count, if any */
void run(void (*)(const char *, long));
static void show(const char *what, long h)
{
    printf("%s %ld fast=%ld\n", what, h, kernelfarer_fast_path_calls);
}
int main(void)
{
    run(show);
    return 0;
}
"""



def _beside(statement: str, param: str, before: bool = False) -> str:
    """f: C += A * B in the loop over i, with `statement` in that loop after the GEMM (or before
    it), `param` the function's parameters after C."""
    return f"""
void f(int M, int N, int K, const T *A, const T *B, T *C{param})
{{
    for (int i = 0; i < M; i++) {{
        {statement if before else ""}
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i*N + j] += A[i*K + k] * B[k*N + j];
        {"" if before else statement}
    }}
}}"""


# name: (element type, the function, its call with a store into what the GEMM reads, and with
# separate memory).  X and E are the driver's spare buffers.
CASES = {
    # a split-off store through a pointer, into B (int) or A
    "deref_counter_into_b": ("int", _beside("(*cnt)++;", ", T *cnt"),
                             "f(n, n, n, A, B, C, B)", "f(n, n, n, A, B, C, X)"),
    "deref_store_into_a": ("float", _beside("*p = (T)i;", ", T *p"),
                           "f(n, n, n, A, B, C, A + 7 * n + 1)", "f(n, n, n, A, B, C, X)"),
    "deref_before_the_gemm": ("float", _beside("*p = *p + 1;", ", T *p", before=True),
                              "f(n, n, n, A, B, C, B)", "f(n, n, n, A, B, C, X)"),
    # a member of a struct behind a pointer
    "member_store_into_b": ("float", "struct counts { T pad[5]; T count; };\n"
                            + _beside("s->count += 1;", ", struct counts *s"),
                            "f(n, n, n, A, B, C, (struct counts *)(void *)B)",
                            "f(n, n, n, A, B, C, (struct counts *)(void *)X)"),
    # a global the GEMM reads as B
    "global_store_read_as_b": ("float", "T g;\nT *g_address(void) { return &g; }\n"
                               + _beside("g += 1;", ""),
                               "f(n, 1, 1, A, g_address(), C)", "f(n, 1, 1, A, B, C)"),
    # an array store into what the epilogue reads (a bias, a residual)
    "array_store_into_the_bias": ("float", """
void f(int M, int N, int K, const T *A, const T *B, T *C, const T *bias, T *Y)
{
    for (int i = 0; i < M; i++) {
        Y[0] = (T)i;
        for (int j = 0; j < N; j++) {
            T s = bias[j];
            for (int k = 0; k < K; k++)
                s += A[i*K + k] * B[k*N + j];
            C[i*N + j] = s;
        }
    }
}""", "f(n, n, n, A, B, C, E, E)", "f(n, n, n, A, B, C, E, X)"),
    "array_store_into_the_residual": ("float", """
void f(int M, int N, int K, const T *A, const T *B, T *C, const T *R, T *Y)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            T s = 0;
            for (int k = 0; k < K; k++)
                s += A[i*K + k] * B[k*N + j];
            C[i*N + j] = s + R[i*N + j];
        }
        Y[i] = 100;
    }
}""", "f(n, n, n, A, B, C, E, E + n + 1)", "f(n, n, n, A, B, C, E, X)"),
    # a store into the scale the epilogue reads through a pointer
    "array_store_into_alpha": ("float", """
void f(int M, int N, int K, const T *A, const T *B, T *C, const T *alpha, T *Y)
{
    for (int i = 0; i < M; i++) {
        Y[0] = (T)i;
        for (int j = 0; j < N; j++) {
            T s = 0;
            for (int k = 0; k < K; k++)
                s += A[i*K + k] * B[k*N + j];
            C[i*N + j] = *alpha * s;
        }
    }
}""", "f(n, n, n, A, B, C, E + 3, E + 3)", "f(n, n, n, A, B, C, E + 3, X)"),
    "deref_store_into_alpha": ("float", """
void f(int M, int N, int K, const T *A, const T *B, T *C, const T *alpha, T *p)
{
    for (int i = 0; i < M; i++) {
        *p = (T)i;
        for (int j = 0; j < N; j++) {
            T s = 0;
            for (int k = 0; k < K; k++)
                s += A[i*K + k] * B[k*N + j];
            C[i*N + j] = *alpha * s;
        }
    }
}""", "f(n, n, n, A, B, C, E + 3, E + 3)", "f(n, n, n, A, B, C, E + 3, X)"),
    # a store into a bound or a leading dimension read through a pointer
    "array_store_into_a_bound": ("float", """
void f(int M, const int *pn, int K, const T *A, const T *B, T *C, int *Y)
{
    for (int i = 0; i < M; i++) {
        Y[0] = i + 1;
        for (int j = 0; j < *pn; j++)
            for (int k = 0; k < K; k++)
                C[i*8 + j] += A[i*K + k] * B[k*8 + j];
    }
}
static int bound[2] = {8, 0};""", "bound[0] = 8; f(n, bound, n, A, B, C, bound)",
        "bound[0] = 8; f(n, bound, n, A, B, C, bound + 1)"),
    "array_store_into_the_leading_dimension": ("float", """
void f(int M, int N, int K, const T *A, const T *B, T *C, const int *ldc, int *Y)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * *ldc + j] += A[i*K + k] * B[k*N + j];
        Y[0] = 9;
    }
}
static int ld[2] = {8, 0};""", "ld[0] = 8; f(n, n, n, A, B, C, ld, ld)",
        "ld[0] = 8; f(n, n, n, A, B, C, ld, ld + 1)"),
    # llm.c's weight gradient with a total kept through a pointer (split off from the k loop)
    "weight_gradient_total": ("float", """
void f(int Bn, int Tn, int Cn, int OC, const T *dout, const T *inp, T *dweight, T *dtot)
{
    for (int o = 0; o < OC; o++) {
        for (int b = 0; b < Bn; b++) {
            for (int t = 0; t < Tn; t++) {
                const T *dout_bt = dout + b * Tn * OC + t * OC;
                const T *inp_bt = inp + b * Tn * Cn + t * Cn;
                T *dwrow = dweight + o * Cn;
                T d = dout_bt[o];
                if (dtot != NULL) { *dtot += d; }
                for (int i = 0; i < Cn; i++) dwrow[i] += inp_bt[i] * d;
            }
        }
    }
}""", "f(2, 4, n, n, A, B, C, B + 2 * 4 * n - 1)", "f(2, 4, n, n, A, B, C, X)"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_store_apart_from_the_gemm_into_what_it_reads(tmp_path, name) -> None:
    ctype, source, aliased, separate = CASES[name]
    src = tmp_path / "f.c"
    src.write_text(f"{HEADERS}typedef {ctype} T;\n{source}\n"
                   + RUN.replace("ALIASED", aliased).replace("SEPARATE", separate))
    result = rewrite_file(str(src), RewriteOptions(target="generic"))
    assert sum(r.replaced for r in result.remarks) == 1, [r.message() for r in result.remarks]
    (tmp_path / "f_fast.c").write_text(result.text)
    (tmp_path / "main.c").write_text(MAIN)
    outs = []
    for impl in ("f.c", "f_fast.c"):
        exe = tmp_path / impl.replace(".c", "")
        subprocess.run([CLANG, "-O2", "-w", *TRACE_FLAGS, "-o", str(exe), str(tmp_path / "main.c"),
                        str(tmp_path / impl)], check=True)
        outs.append(subprocess.run([str(exe)], capture_output=True, text=True,
                                   check=True).stdout.splitlines())
    original, rewritten = outs
    assert [ln.split(" fast=")[0] for ln in original] == \
        [ln.split(" fast=")[0] for ln in rewritten], (original, rewritten)
    assert rewritten[0].endswith("fast=0") and rewritten[1].endswith("fast=1"), rewritten
