"""The rewritten file builds wherever the original did, with nothing new to say: the generated code
follows the compile's language level (C89/C90 included), adds no warning under the strictest flags
real projects use (clang-19 and gcc, -Werror), keeps no large stack frames, and an unoptimized
build (-O0) runs the user's own loops.

Warnings are compared with those of the original file (a sample may warn about its own code: an
OpenMP pragma without -fopenmp, a GNU extension under -Wpedantic); only new ones fail a test."""

from __future__ import annotations

import collections
import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import CLANG, POSITIVE, SAMPLES, TRACE_COUNTER, TRACE_FLAGS, run_cli

GCC = shutil.which("gcc-12") or shutil.which("gcc")
TARGET = "x86-auto" if platform.machine() in ("x86_64", "AMD64") else "auto"

# The flags the issue's users build with.
COMMON = ("-Wall", "-Wextra", "-Wpedantic", "-Wcast-align", "-Wunused-macros",
          "-Wdeclaration-after-statement", "-Wswitch-default")
FLAGS = {
    "clang": COMMON + ("-Wused-but-marked-unused", "-Wframe-larger-than=16384"),
    "gcc": COMMON + ("-Wnested-externs", "-Wredundant-decls", "-Wstack-usage=16384",
                     "-Wframe-larger-than=16384", "-Winline"),
}
COMPILERS = ["clang", pytest.param("gcc", marks=pytest.mark.skipif(GCC is None, reason="no gcc"))]

# An ANSI C file: declarations first, block comments only, a K&R definition, no inline/restrict.
ANSI = r"""/* matrices, as a C89 program writes them */
#include <stdio.h>
#include <stdlib.h>

void sgemm_nn(int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc)
{
    int i, j, p;
    float acc;
    for (i = 0; i < m; i++) {
        for (j = 0; j < n; j++) {
            acc = 0.0f;
            for (p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * ldb + j];
            c[i * ldc + j] = alpha * acc + beta * c[i * ldc + j];
        }
    }
}

void dgemm_cm(m, n, k, a, b, c)
    int m, n, k;
    const double *a, *b;
    double *c;
{
    int i, j, l;
    for (j = 0; j < n; j++)
        for (l = 0; l < k; l++)
            for (i = 0; i < m; i++)
                c[i + j * m] += a[i + l * m] * b[l + j * k];
}

int main(void)
{
    int sizes[4], s, i, m, n, k;
    float *a, *b, *c;
    double *x, *y, *z, ssum, dsum;
    sizes[0] = 1; sizes[1] = 7; sizes[2] = 33; sizes[3] = 130;
    for (s = 0; s < 4; s++) {
        m = sizes[s]; n = sizes[(s + 1) % 4]; k = sizes[(s + 2) % 4];
        a = (float *) malloc(sizeof(float) * m * k);
        b = (float *) malloc(sizeof(float) * k * n);
        c = (float *) malloc(sizeof(float) * m * n);
        x = (double *) malloc(sizeof(double) * m * k);
        y = (double *) malloc(sizeof(double) * k * n);
        z = (double *) malloc(sizeof(double) * m * n);
        for (i = 0; i < m * k; i++) { a[i] = (float) (i % 7) - 3.0f; x[i] = (double) (i % 5); }
        for (i = 0; i < k * n; i++) { b[i] = (float) (i % 3); y[i] = (double) (i % 9) - 4.0; }
        for (i = 0; i < m * n; i++) { c[i] = (float) (i % 4); z[i] = 1.0; }
        sgemm_nn(m, n, k, 2.0f, a, k, b, n, 0.5f, c, n);
        dgemm_cm(m, n, k, x, y, z);
        ssum = 0; dsum = 0;
        for (i = 0; i < m * n; i++) { ssum += c[i] * (i % 11 + 1); dsum += z[i] * (i % 13 + 1); }
        printf("%d %d %d: %.1f %.1f\n", m, n, k, ssum, dsum);
        free(a); free(b); free(c); free(x); free(y); free(z);
    }
    return 0;
}
"""

# The samples compiled for every standard they are written in (the slow set takes all of them).
SAMPLE_SET = [SAMPLES / "sgemm.c", SAMPLES / "project" / "kernels.c",
              SAMPLES / "project" / "gnu_ext.c"] + [
    POSITIVE / f"{name}.c" for name in ("row_pointers", "int_matrices", "colmajor",
                                        "struct_matrix", "openmp")]
SLOW_SET = sorted(set(POSITIVE.glob("*.c")) - set(SAMPLE_SET))


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    """source path -> (original path, rewritten path), rewritten once through the CLI."""
    root = tmp_path_factory.mktemp("clean")
    cache: dict[Path, tuple[Path, Path]] = {}

    def get(source: Path) -> tuple[Path, Path]:
        if source not in cache:
            out = root / f"{len(cache)}_{source.name}"
            done = run_cli("rewrite", source, "-o", out, "--target", TARGET)
            assert done.returncode == 0, done.stderr
            assert "kernelfarer" in out.read_text(), f"nothing of {source.name} was replaced"
            cache[source] = (source, out)
        return cache[source]
    return get


@pytest.fixture(scope="module")
def ansi(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ansi") / "ansi.c"
    path.write_text(ANSI)
    return path


def _compiler(name: str) -> str:
    return CLANG if name == "clang" else GCC


def _warnings(compiler: str, path: Path, std: str, *extra: str) -> collections.Counter | None:
    """The warnings of one compile, as (flag, message) without the location; None if it fails."""
    with tempfile.TemporaryDirectory() as tmp:     # never beside the samples
        cmd = [_compiler(compiler), f"-std={std}", "-O2", *FLAGS[compiler], *extra,
               f"-I{SAMPLES / 'project'}", "-c", str(path), "-o", os.path.join(tmp, "out.o")]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode:
        return None if "error" in done.stderr else collections.Counter({("failed", done.stderr): 1})
    found = collections.Counter()
    for line in done.stderr.splitlines():
        m = re.search(r"warning: (.*) \[(-W[^\]]+)\]$", line)
        if m:
            found[(m[2], m[1])] += 1
    return found


def _check_no_new_warnings(compiler: str, original: Path, rewritten: Path, std: str) -> None:
    before = _warnings(compiler, original, std)
    if before is None:
        pytest.skip(f"{original.name} is not valid {std} for {compiler}")
    after = _warnings(compiler, rewritten, std)
    assert after is not None, f"the rewrite of {original.name} does not compile as {std}"
    new = after - before
    assert not new, f"{compiler} -std={std}: the rewrite adds {sum(new.values())} warnings: {dict(new)}"


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("source", SAMPLE_SET, ids=lambda p: p.name)
def test_rewritten_samples_add_no_warning(rewritten, compiler, source):
    original, out = rewritten(source)
    _check_no_new_warnings(compiler, original, out, "gnu11")


@pytest.mark.slow
@pytest.mark.parametrize("std", ["gnu11", "c99"])
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("source", SLOW_SET, ids=lambda p: p.name)
def test_every_positive_sample_adds_no_warning(rewritten, compiler, source, std):
    original, out = rewritten(source)
    _check_no_new_warnings(compiler, original, out, std)


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("std", ["c89", "gnu89", "c99", "gnu11"])
def test_c89_file_builds_with_werror_at_every_level(rewritten, ansi, compiler, std):
    """The ANSI file compiles warning-free as itself (-Werror) and so does its rewrite, at every
    language level: no inline, restrict, // comments, declarations after statements or long long
    reach a C89 compile from the generated code."""
    original, out = rewritten(ansi)
    extra = ("-Werror",) + (("-Wno-deprecated-non-prototype",) if compiler == "clang" else ())
    assert _warnings(compiler, original, std, *extra) == collections.Counter()
    assert _warnings(compiler, out, std, *extra) == collections.Counter(), (
        f"the rewrite fails under -std={std} -Werror")


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("level", ["-O0", "-Os", "-O2"])
def test_support_code_is_clean_without_its_diagnostic_region(rewritten, ansi, compiler, level):
    """The support code silences warnings in its own region, but it does not need to:
    -DKERNELFARER_SUPPORT_WARNINGS shows them, and there are none, at any optimization level
    (gcc's -Winline judges inlining differently at -Os; -O0 must not keep big frames)."""
    for source, std in ((ansi, "c89"), (SAMPLES / "sgemm.c", "gnu11")):
        original, out = rewritten(source)
        extra = (level, "-DKERNELFARER_SUPPORT_WARNINGS") + (
            ("-Wno-deprecated-non-prototype",) if compiler == "clang" else ())
        before = _warnings(compiler, original, std, *extra)
        after = _warnings(compiler, out, std, *extra)
        assert before is not None and after is not None
        assert not after - before, f"{source.name} {level}: {dict(after - before)}"


def _run(compiler: str, source: Path, workdir: Path, *flags: str) -> tuple[str, int]:
    exe = workdir / f"{source.stem}.{compiler}{''.join(flags)}.exe"
    probe = workdir / "probe.c"
    probe.write_text(f"extern long {TRACE_COUNTER};\n#include <stdio.h>\n"
                     f"__attribute__((destructor)) static void report(void)\n"
                     f"{{ fprintf(stderr, \"fast=%ld\\n\", {TRACE_COUNTER}); }}\n"
                     f"long {TRACE_COUNTER};\n")
    subprocess.run([_compiler(compiler), "-std=c89", *flags, *TRACE_FLAGS, str(source),
                    str(probe), "-o", str(exe)], check=True, capture_output=True, text=True)
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
    fast = int(re.search(r"fast=(\d+)", done.stderr)[1])
    return done.stdout, fast


@pytest.mark.parametrize("compiler", COMPILERS)
def test_c89_rewrite_computes_what_the_original_does(rewritten, ansi, compiler, tmp_path):
    """Both nests of the ANSI file, the K&R one too, are replaced and give the original's values
    (exact: small integers); optimized builds run the kernels, -O0 builds the original loops."""
    original, out = rewritten(ansi)
    text = out.read_text()
    assert text.count("kernelfarer: ") >= 2, "both GEMM nests (prototype and K&R) are replaced"
    expected, _ = _run(compiler, original, tmp_path, "-O0")
    assert expected.count("\n") == 4
    optimized, fast = _run(compiler, out, tmp_path, "-O2")
    assert optimized == expected and fast == 8
    unoptimized, fast = _run(compiler, out, tmp_path, "-O0")
    assert unoptimized == expected and fast == 0


UNSIGNED_SIZES = """
void sizes_unsigned(unsigned m, unsigned n, unsigned k, const float *a, const float *b, float *c)
{
    for (unsigned i = 0; i < m; i++)
        for (unsigned j = 0; j < n; j++)
            for (unsigned p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""

TANH_LAYER = """
#include <math.h>
void layer_tanh(int m, int n, int k, const float *x, const float *w, const float *bias, float *y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = bias[j];
            for (int p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            y[i * n + j] = tanhf(acc);
        }
}
"""

HALF_RESULT = """
void layer_fp16(int m, int n, int k, const _Float16 *x, const _Float16 *w, _Float16 *y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = y[i * n + j];
            for (int p = 0; p < k; p++)
                acc += (float)x[i * k + p] * (float)w[p * n + j];
            y[i * n + j] = (_Float16)acc;
        }
}
"""

# int sums stored by the nest's own statements from a copy of C (a hook of the converted C's
# wrapper): one that reads the function's variables, one with a zero point and an int bias seed,
# one that reads file-scope tables only
QUANTIZED = """
#include <stdint.h>
static int32_t qbias[512];
void dequant(int m, int n, int k, const int8_t *x, const int8_t *w, const float *sx,
             const float *sw, const float *bias, float *y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            float v;
            for (int p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            v = (float)acc * sx[i] * sw[j] + bias[j];
            y[i * n + j] = v > 0.0f ? v : 0.0f;
        }
}
void zero_point(int m, int n, int k, const uint8_t *x, int x_zp, const int8_t *w,
                const int32_t *bias, float s, float *y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = bias[j];
            for (int p = 0; p < k; p++)
                acc += (x[i * k + p] - x_zp) * w[p * n + j];
            y[i * n + j] = acc * s;
        }
}
void requant(const int8_t x[64][256], const int8_t w[256][64], int8_t y[64][64])
{
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++) {
            int32_t acc = qbias[j];
            for (int p = 0; p < 256; p++)
                acc += x[i][p] * w[p][j];
            acc >>= 8;
            y[i][j] = (int8_t)(acc < -128 ? -128 : acc > 127 ? 127 : acc);
        }
}
"""


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("source", ["unsigned_sizes", "tanh_layer", "half_result", "quantized"])
def test_call_sites_and_hooks_add_no_warning(tmp_path, compiler, source):
    """What lands in the user's function and beside it: checks that unsigned sizes and strides are
    not negative (gcc's -Wtype-limits would find them always true), a fused epilogue that the
    vectorizer cannot vectorize (clang would say so at its loop hint, by default), the float
    copy of a C of _Float16 (templates/converted.c.j2) and the int copies of quantized GEMMs
    whose statements after the k loop run in hooks."""
    text = {"unsigned_sizes": UNSIGNED_SIZES, "tanh_layer": TANH_LAYER,
            "half_result": HALF_RESULT, "quantized": QUANTIZED}[source]
    src = tmp_path / f"{source}.c"
    src.write_text(text)
    out = tmp_path / f"{source}.kf.c"
    done = run_cli("rewrite", src, "-o", out, "--target", TARGET)
    assert done.returncode == 0, done.stderr
    assert "kf_" in out.read_text()
    if source == "quantized":
        assert out.read_text().count("kf_converted_c") >= 3, done.stderr
    cc = CLANG if compiler == "clang" else GCC
    flags = FLAGS[compiler]
    if source == "half_result" and compiler == "gcc":
        # gcc's -Wpedantic: "ISO C does not support the '_Float16' type", the user's own code first
        flags = tuple(f for f in flags if f != "-Wpedantic")
    for level in ("-O2", "-O3"):
        built = subprocess.run([cc, level, "-march=native", *flags, "-Wtype-limits",
                                "-Werror", "-c", str(out), "-o", str(tmp_path / "out.o")],
                               capture_output=True, text=True)
        assert built.returncode == 0 and "warning" not in built.stderr, built.stderr
