"""`kernelfarer prepare`: compile ahead of time the support code that kernelfarer-cc links into
the objects of files with GEMMs, so that the first build on a machine does not pay for it.

kernelfarer-cc compiles the kernels, packing routines and drivers of a split compile as units of
their own and keeps their objects in the profile directory (split.py).  The first file of a build
that needs a unit pays for it (a few seconds for the float and double units of `x86-auto`); every
later compile that needs the same unit, in any project on the machine, finds it.  A unit's object
depends on its text (target, element type, the host's blocks), the compiler and the options that
reach it (split.support_options: not the optimization or language level, warnings, include paths
or the macros the support code cannot see), so a handful of configurations covers most builds.
This runs the wrapper itself on a small file with a float and a double GEMM, once per compiler and
configuration: exactly the units such a build would make.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

GEMMS = """\
void kf_prepare_sgemm(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}

void kf_prepare_dgemm(int m, int n, int k, const double *a, const double *b, double *c)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""

# What builds add to an optimizing compile most often and what reaches the support code: debug
# information, position-independent code (shared libraries; libtool's are `-g -O2 -fPIC`), the
# build machine's own ISA.
CONFIGURATIONS = ("-O2", "-O2 -g", "-O2 -fPIC", "-O2 -g -fPIC", "-O2 -march=native")


def wrapper() -> list[str]:
    """The kernelfarer-cc of this installation."""
    beside = os.path.join(os.path.dirname(sys.executable), "kernelfarer-cc")
    if os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which("kernelfarer-cc")
    return [found] if found else [sys.executable, "-m", "kernelfarer.cc"]


def prepare(compilers: list[str], configurations: list[str], *,
            progress: bool = True) -> list[str]:
    """Compile the support units of `compilers` x `configurations`; the problems met (a compiler
    that is not there, a compile that failed), one line each."""
    problems = []
    env = {k: v for k, v in os.environ.items()
           if k not in ("KERNELFARER_DISABLE", "KERNELFARER_SPLIT")}
    with tempfile.TemporaryDirectory(prefix="kernelfarer-prepare-") as work:
        source = os.path.join(work, "kf_prepare.c")
        with open(source, "w", encoding="utf-8") as f:
            f.write(GEMMS)
        for compiler in compilers:
            if shutil.which(compiler.split()[0]) is None:
                problems.append(f"{compiler}: not found")
                continue
            for options in configurations:
                if progress:
                    print(f"kernelfarer prepare: {compiler} {options}", file=sys.stderr)
                done = subprocess.run([*wrapper(), *compiler.split(), *options.split(), "-c",
                                       source, "-o", os.path.join(work, "kf_prepare.o")],
                                      cwd=work, env=env, capture_output=True, text=True)
                said = done.stderr.strip()
                if done.returncode != 0 or "warning" in said:
                    problems.append(f"{compiler} {options}: " + (said.splitlines() or
                                                                  ["failed"])[-1])
    return problems
