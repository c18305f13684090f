"""Matrices read through casts and byte strides: kernelfarer's rewrite against the code as written.

Two spellings from tests/test_views.py: NumPy's matmul loop where no BLAS serves it (double; char
pointers stepped by strides in bytes) and Cython's C for a `double[:, :]` memoryview product as
Cython builds it by default (every index checked; the rewrite checks the ranges once).  Each is
built as written and as rewritten (clang-19 -O2 -march=native), called on the same numpy arrays,
best of several interleaved rounds, single-threaded; numpy's own A @ B (the BLAS its wheel bundles,
one thread: for scale, not the OpenBLAS of bench_gemm.py) is timed beside them.  Printed: seconds
per call and the speed ratios rewrite / original and rewrite / numpy (below 1: the rewrite is
slower).  B is row-major, or stored transposed (Fortran order), which the original walks along
its rows.

    OPENBLAS_NUM_THREADS=1 python bench/views.py [--sizes 64,256,512,1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import cffi
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from kernelfarer.rewrite import RewriteOptions, rewrite_file  # noqa: E402
from test_views import NOBLAS_DECL, _cython_checked, _numpy  # noqa: E402

CC = os.environ.get("CC", "clang-19")
SLICE = ("typedef struct { void *memview; char *data; long shape[8]; long strides[8]; "
         "long suboffsets[8]; } __Pyx_memviewslice;")


def build(source: str, name: str, work: str) -> list[str]:
    """Shared libraries of `source` as written and as rewritten."""
    src = os.path.join(work, f"{name}.c")
    with open(src, "w") as f:
        f.write(source)
    result = rewrite_file(src, RewriteOptions())
    if result.replaced != 1:
        raise SystemExit(f"{name}: not replaced: {[r.message() for r in result.remarks]}")
    libs = []
    for tag, text in (("orig", source), ("fast", result.text)):
        path = os.path.join(work, f"{name}_{tag}.c")
        with open(path, "w") as f:
            f.write(text)
        lib = path[:-2] + ".so"
        subprocess.run([CC, "-O2", "-march=native", "-w", "-shared", "-fPIC", path, "-o", lib],
                       check=True)
        libs.append(lib)
    return libs


def noblas_call(ffi, lib):
    fn = lib.double_matmul_inner_noblas

    def call(a, b, c):
        fn(ffi.cast("void *", a.ctypes.data), a.strides[0], a.strides[1],
           ffi.cast("void *", b.ctypes.data), b.strides[0], b.strides[1],
           ffi.cast("void *", c.ctypes.data), c.strides[0], c.strides[1],
           a.shape[0], a.shape[1], b.shape[1])
    return call


def cython_call(ffi, lib):
    def view(x):
        s = ffi.new("__Pyx_memviewslice *")
        s.data = ffi.cast("char *", x.ctypes.data)
        s.shape[0], s.shape[1] = x.shape
        s.strides[0], s.strides[1] = x.strides
        return s[0]

    def call(a, b, c):
        if lib.cy_matmul(view(a), view(b), view(c)) != 0:
            raise SystemExit("cython: an index error")
    return call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,512,1024")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rng = np.random.default_rng(0)
    print(f"{'spelling':<16} {'B':<5} {'n':>5} {'original s':>11} {'rewrite s':>10} "
          f"{'numpy s':>9} {'vs original':>12} {'vs numpy':>9}")
    with tempfile.TemporaryDirectory() as work:
        for name, source, decl, wrap in (
                ("numpy_noblas", _numpy("double"), NOBLAS_DECL.format(t="double"), noblas_call),
                ("cython_checked", _cython_checked("both"), SLICE +
                 "int cy_matmul(__Pyx_memviewslice, __Pyx_memviewslice, __Pyx_memviewslice);",
                 cython_call)):
            ffi = cffi.FFI()
            ffi.cdef(decl)
            orig, fast = (wrap(ffi, ffi.dlopen(lib)) for lib in build(source, name, work))
            for n in sizes:
                a = rng.integers(-3, 4, (n, n)).astype(np.float64)
                b = rng.integers(-3, 4, (n, n)).astype(np.float64)
                for layout, bb in (("rows", b), ("cols", np.asfortranarray(b))):
                    best = {}
                    for _ in range(args.rounds):
                        for tag, fn in (("orig", orig), ("fast", fast),
                                        ("numpy", lambda x, y, z: np.matmul(x, y, out=z))):
                            c = np.zeros((n, n))
                            t0 = time.perf_counter()
                            fn(a, bb, c)
                            best[tag] = min(best.get(tag, 1e9), time.perf_counter() - t0)
                            if not np.array_equal(c, a @ b):
                                raise SystemExit(f"{name} {layout} {n}: {tag} differs")
                    print(f"{name:<16} {layout:<5} {n:>5} {best['orig']:>11.5f} "
                          f"{best['fast']:>10.5f} {best['numpy']:>9.5f} "
                          f"{best['orig'] / best['fast']:>11.1f}x "
                          f"{best['numpy'] / best['fast']:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
