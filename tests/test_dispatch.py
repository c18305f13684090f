"""Run-time ISA dispatch (--target x86-auto): every path is correct, forcing works, and a path the
CPU lacks is never executed (proven under qemu-x86_64, which has no AVX-512)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import pytest

from kernelfarer import targets
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from conftest import TRACE_FLAGS

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 dispatch")

GEMM = """
void gemm(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
          float *c, int ldc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int p = 0; p < k; p++)
        c[i * ldc + j] += a[i * lda + p] * b[p * ldb + j];
}
"""

HARNESS = r"""
#include <stdio.h>
#include <string.h>
void gemm_orig(int, int, int, const float *, int, const float *, int, float *, int);
void gemm_kf(int, int, int, const float *, int, const float *, int, float *, int);
extern const char *kernelfarer_last_path;
static float a[80 * 90], b[90 * 100], c0[80 * 100], c1[80 * 100];
int main(void)
{
    static const int sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {13, 17, 29}, {25, 33, 9}, {80, 100, 90}};
    unsigned s = 1;
    for (int x = 0; x < 80 * 90; x++) { s = s * 1103515245u + 12345u; a[x] = (float)((s >> 16) % 7) - 3; }
    for (int x = 0; x < 90 * 100; x++) { s = s * 1103515245u + 12345u; b[x] = (float)((s >> 16) % 7) - 3; }
    for (unsigned t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int m = sizes[t][0], n = sizes[t][1], k = sizes[t][2];
        for (int x = 0; x < 80 * 100; x++) c0[x] = c1[x] = (float)(x % 5);
        gemm_orig(m, n, k, a, 90, b, 100, c0, 100);
        gemm_kf(m, n, k, a, 90, b, 100, c1, 100);
        if (memcmp(c0, c1, sizeof c0) != 0) {
            printf("MISMATCH at %dx%dx%d\n", m, n, k);
            return 1;
        }
    }
    printf("path=%s\n", kernelfarer_last_path ? kernelfarer_last_path : "none");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("dispatch")
    src = d / "gemm.c"
    src.write_text(GEMM)
    result = rewrite_file(str(src), RewriteOptions(target="x86-auto",
                                                   blocking={"mc": 24, "kc": 16, "nc": 96}))
    assert result.replaced == 1
    fast = d / "gemm_fast.c"
    fast.write_text(result.text)
    (d / "main.c").write_text(HARNESS)
    exe = d / "dispatch"
    # -march=x86-64 (no AVX anywhere): the kernels get their ISA from function attributes only,
    # so the binary is the kind that has to run on any x86-64 CPU.
    cc = ["clang-19", "-O2", "-march=x86-64", "-Wall", "-Wextra", "-Werror"]
    subprocess.run(cc + ["-c", "-Dgemm=gemm_orig", str(src), "-o", str(d / "orig.o")], check=True)
    subprocess.run(cc + ["-c", "-Dgemm=gemm_kf", *TRACE_FLAGS, str(fast),
                         "-o", str(d / "fast.o")], check=True)
    subprocess.run(cc + [str(d / "main.c"), str(d / "orig.o"), str(d / "fast.o"), "-o", str(exe)],
                   check=True)
    return exe


def _run(cmd, forced=None):
    env = {k: v for k, v in os.environ.items() if k != "KERNELFARER_PATH"}
    if forced:
        env["KERNELFARER_PATH"] = forced
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def _best_native() -> str:
    """The path this CPU takes for the program's float GEMM: the best it runs that has a float
    kernel (x86-avx512-vnni has int8 ones only), or none (then the original loops run)."""
    for name in targets.TARGETS["x86-auto"].dispatch:
        if targets.DType.F32 in targets.TARGETS[name].kernels and \
                targets.real_host_runs(targets.TARGETS[name]):
            return name
    return "none"


def test_default_path_is_the_best_the_cpu_runs(program):
    done = _run([str(program)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"path={_best_native()}"


@pytest.mark.parametrize("path", ["x86-avx512", "x86-avx2", "generic"])
def test_forced_paths_run_correctly_or_are_refused(program, path):
    """A forced path runs if the CPU has it; otherwise (or when x86-auto has no such path: it
    emits no generic kernel) no kernel runs and the original loops give the same results."""
    done = _run([str(program)], forced=path)
    assert done.returncode == 0, done.stdout + done.stderr
    runnable = (path in targets.TARGETS["x86-auto"].dispatch
                and targets.real_host_runs(targets.TARGETS[path]))
    assert done.stdout.strip() == f"path={path if runnable else 'none'}"


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed")
@pytest.mark.parametrize("forced", [None, "x86-avx512"])
def test_under_qemu_without_avx512_never_runs_avx512(program, forced):
    done = _run(["qemu-x86_64", "-cpu", "max", str(program)], forced=forced)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr}"
    assert "path=x86-avx512" not in done.stdout
    assert done.stdout.startswith("path=")
