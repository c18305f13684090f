"""Randomly generated GEMM spellings and near-misses, rewritten and compared with the original.

Every case is run through both the original and the rewritten function on the same small-integer
data; results must be identical.  GEMM spellings must be replaced, near-misses must not.  `make test`
runs a few hundred cases; `make fuzz` (the `slow` marker) runs thousands.
"""

from __future__ import annotations

import random
import subprocess

import cffi
import numpy as np
import pytest

from kernelfarer import targets
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from kernelfarer.targets import DType

import gemm_gen
from conftest import TRACE_FLAGS, native_target

CASES_PER_BATCH = 60
# the best target this CPU runs, and the portable reference
RUNNABLE = list(dict.fromkeys((native_target(), "generic")))


def _compile(src: str, out: str) -> None:
    subprocess.run(["clang-19", "-O1", "-w", "-shared", "-fPIC", *TRACE_FLAGS, src,
                    "-o", out], check=True)


def _small_blocking(target: str, rng: random.Random) -> dict:
    shapes = [targets.TARGETS[target].kernel(d) for d in (DType.F32, DType.F64)]
    # Blocks must be multiples of both float types' register blocks.
    mc = np.lcm.reduce([s.mr for s in shapes]) * rng.choice((1, 2))
    nc = np.lcm.reduce([s.nr for s in shapes]) * rng.choice((1, 2))
    return {"mc": int(mc), "kc": rng.choice((4, 7, 8, 16)), "nc": int(nc)}


def run_batch(seed: int, tmp_path, target: str) -> dict:
    rng = random.Random(seed)
    cases = [gemm_gen.make_case(rng, f"case{seed}_{n}", near_miss=rng.random() < 0.3)
             for n in range(CASES_PER_BATCH)]
    text, first_line = gemm_gen.batch_text(gemm_gen.PRELUDE, cases)
    src = tmp_path / f"batch{seed}.c"
    src.write_text(text)
    blocking = _small_blocking(target, rng) if rng.random() < 0.7 else {}
    result = rewrite_file(str(src), RewriteOptions(target=target, blocking=blocking))
    fast = tmp_path / f"batch{seed}_fast.c"
    fast.write_text(result.text)
    lib0, lib1 = tmp_path / f"b{seed}_0.so", tmp_path / f"b{seed}_1.so"
    _compile(str(src), str(lib0))
    _compile(str(fast), str(lib1))
    ffi = cffi.FFI()
    ffi.cdef("\n".join(gemm_gen.cdef(c) for c in cases))
    ffi.cdef("extern long kernelfarer_fast_path_calls;")
    original, rewritten = ffi.dlopen(str(lib0)), ffi.dlopen(str(lib1))

    replaced_lines = {r.location.line for r in result.remarks if r.replaced}
    stats = {"cases": 0, "gemm": 0, "near_miss": 0, "replaced": 0, "calls": 0}
    for case in cases:
        start = first_line[case.name]
        end = start + case.source.count("\n")
        replaced = any(start <= line < end for line in replaced_lines)
        if case.gemm:
            assert replaced, f"{case.kind} not replaced: " + next(
                (r.reason for r in result.remarks if start <= r.location.line < end), "?") + \
                "\n" + case.source
        else:
            assert not replaced, f"near-miss replaced: {case.kind}\n{case.source}"
        stats["cases"] += 1
        stats["gemm" if case.gemm else "near_miss"] += 1
        stats["replaced"] += replaced
        for _ in range(3):
            stats["calls"] += 1
            before = rewritten.kernelfarer_fast_path_calls if replaced else 0
            sizes = _compare(ffi, original, rewritten, case, rng)
            if replaced and min(sizes) > 0:     # no silent fallback to the original loops
                assert rewritten.kernelfarer_fast_path_calls == before + 1, (
                    f"fast path not taken: {case.kind} sizes={sizes}\n{case.source}")
                stats["fast"] = stats.get("fast", 0) + 1
    return stats


def _compare(ffi, original, rewritten, case, rng: random.Random) -> None:
    np_type = np.float32 if case.dtype == "float" else np.float64
    pick = lambda: rng.choice((0, 1, 2, 3, 5, 7, 13, 17, 19, 24, 31, 37))
    if case.gemm:
        m, n, k = pick(), pick(), pick()
    else:
        m = n = k = pick()
    majors = case.kind.split()[3:6]           # "Ar", "Bc", "Cr"
    dims = {"A": (m, k), "B": (k, n), "C": (m, n)}
    arrays, lds = {}, {}
    for label, major in zip("ABC", majors):
        rows, cols = dims[label]
        outer, inner = (rows, cols) if major[1] == "r" else (cols, rows)
        ld = max(inner, 1) + rng.choice((0, 0, 1, 3))
        lds[label] = ld
        size = max(outer, 1) * ld + 1
        arrays[label] = np.array([rng.randint(-3, 3) for _ in range(size)], dtype=np_type)
    if case.overwrites_c:
        arrays["C"][:] = np.nan
    alpha, beta = rng.choice((1, 2, -1)), rng.choice((0, 1, 3))
    results = []
    for lib in (original, rewritten):
        copies = {key: value.copy() for key, value in arrays.items()}
        ptr = {key: ffi.cast(f"{case.dtype} *", ffi.from_buffer(value)) for key, value in copies.items()}
        getattr(lib, case.name)(m, n, k, lds["A"], lds["B"], lds["C"], alpha, beta,
                                ptr["A"], ptr["B"], ptr["C"])
        results.append(copies["C"])
    assert np.array_equal(results[0], results[1], equal_nan=True), (
        f"MISCOMPILE {case.kind} M={m} N={n} K={k} lds={lds} alpha={alpha} beta={beta}\n{case.source}")
    return m, n, k


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("seed", range(4))
def test_generated_cases(seed, target, tmp_path):
    stats = run_batch(seed * 7919 + len(target), tmp_path, target)
    assert stats["cases"] == CASES_PER_BATCH


@pytest.mark.slow
@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("seed", range(100, 184))   # 84 batches x 2 targets x 60 = 10,080 cases
def test_generated_cases_long(seed, target, tmp_path):
    stats = run_batch(seed * 7919 + len(target), tmp_path, target)
    assert stats["cases"] == CASES_PER_BATCH
