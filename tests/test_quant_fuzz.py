"""Randomly generated quantized GEMMs (quant_gen.py), rewritten and compared with the original.

Each case sums int8, uint8 or int16 products (zero points added to them or not) in an int
accumulator and stores C (float, double,
fp16, int8, uint8, int16, int64) by statements of its own after the k loop: the rewrite runs the
GEMM of the sums into a copy of C and those statements in a hook.  Int sums are exact, so the
rewritten function must equal the original bit for bit, on full-range operands, odd sizes and
strides, and take the fast path whenever the sizes are positive.  `make test` runs a few batches;
`make fuzz` (the `slow` marker) runs many more.
"""

from __future__ import annotations

import random
import subprocess

import cffi
import numpy as np
import pytest

from kernelfarer import targets
from kernelfarer.rewrite import RewriteOptions, rewrite_file

import gemm_gen
import quant_gen
from conftest import TRACE_FLAGS, native_target

CASES_PER_BATCH = 24
# the int kernels this CPU runs (x86-auto's run-time choice on x86: VNNI, AVX2), and the portable
RUNNABLE = list(dict.fromkeys((
    "x86-auto" if targets.real_host_runs(targets.TARGETS["x86-avx2"]) else native_target(),
    "generic")))
NP = {"int8_t": np.int8, "uint8_t": np.uint8, "short": np.int16}


def _compile(src, out) -> None:
    subprocess.run(["clang-19", "-O2", "-w", "-shared", "-fPIC", *TRACE_FLAGS, str(src), "-o",
                    str(out)], check=True)


def run_batch(seed: int, tmp_path, target: str) -> dict:
    rng = random.Random(seed)
    cases = [quant_gen.make_case(rng, f"q{seed}_{n}") for n in range(CASES_PER_BATCH)]
    text, first_line = gemm_gen.batch_text(quant_gen.PRELUDE, cases)
    src = tmp_path / f"q{seed}.c"
    src.write_text(text)
    blocking = {"mc": 96, "kc": rng.choice((4, 8, 16, 64)), "nc": 64} \
        if rng.random() < 0.5 else {}
    result = rewrite_file(str(src), RewriteOptions(target=target, blocking=blocking))
    fast = tmp_path / f"q{seed}_fast.c"
    fast.write_text(result.text)
    _compile(src, tmp_path / f"q{seed}_0.so")
    _compile(fast, tmp_path / f"q{seed}_1.so")
    ffi = cffi.FFI()
    ffi.cdef("typedef int int32_t; typedef signed char int8_t; typedef unsigned char uint8_t; "
             "typedef short int16_t; typedef unsigned short uint16_t;")
    ffi.cdef("\n".join(quant_gen.cdef(c) for c in cases))
    ffi.cdef("extern long kernelfarer_fast_path_calls;")
    original = ffi.dlopen(str(tmp_path / f"q{seed}_0.so"))
    rewritten = ffi.dlopen(str(tmp_path / f"q{seed}_1.so"))
    stats = {"cases": 0, "calls": 0, "fast": 0}
    for case in cases:
        start = first_line[case.name]
        end = start + case.source.count("\n")
        remark = next(r for r in result.remarks if start <= r.location.line < end)
        assert remark.replaced, f"not replaced: {case.kind}: {remark.reason}\n{case.source}"
        stats["cases"] += 1
        for _ in range(3):
            before = rewritten.kernelfarer_fast_path_calls
            m, n, k = _compare(ffi, original, rewritten, case, rng)
            stats["calls"] += 1
            if min(m, n, k) > 0:          # no silent fallback to the original loops
                assert rewritten.kernelfarer_fast_path_calls == before + 1, (
                    f"fast path not taken: {case.kind} sizes={m, n, k}\n{case.source}")
                stats["fast"] += 1
    return stats


def _compare(ffi, original, rewritten, case: quant_gen.QCase, rng: random.Random):
    pick = lambda: rng.choice((0, 1, 2, 3, 5, 7, 12, 13, 17, 31, 33, 37, 64, 65))
    m, n, k = pick(), pick(), rng.choice((1, 3, 4, 5, 8, 17, 64, 130, 300))
    if rng.random() < 0.1:
        m = 0
    lda = (k if case.a_rows else m) + rng.choice((0, 1, 3))
    ldb = (n if case.b_rows else k) + rng.choice((0, 2))
    ldc = (n if case.c_rows else m) + rng.choice((0, 1))
    a_rows, b_rows = (m if case.a_rows else k), (k if case.b_rows else n)
    c_rows = m if case.c_rows else n
    a = _operand(case.a_type, max(a_rows, 1) * max(lda, 1) + 1, rng)
    b = _operand(case.b_type, max(b_rows, 1) * max(ldb, 1) + 1, rng)
    size = max(c_rows, 1) * max(ldc, 1) + 1
    if case.c_type in ("float", "double", "_Float16"):      # quarters (fp16: their bits)
        c0 = np.array([rng.randint(-40, 40) / 4 for _ in range(size)],
                      dtype=np.float16 if case.c_type == "_Float16" else
                      quant_gen.RESULTS[case.c_type][1]).view(quant_gen.RESULTS[case.c_type][1])
    else:
        info = np.iinfo(quant_gen.RESULTS[case.c_type][1])
        c0 = np.array([rng.randint(max(info.min, -100), 100) for _ in range(size)],
                      dtype=quant_gen.RESULTS[case.c_type][1])
    sa = np.array([rng.uniform(1e-4, 3e-2) for _ in range(130)], dtype=np.float32)
    sb = np.array([rng.uniform(-2e-2, 2e-2) for _ in range(130)], dtype=np.float32)
    bias = np.array([rng.uniform(-8, 8) for _ in range(130)], dtype=np.float32)
    ibias = np.array([rng.randint(-50000, 50000) for _ in range(130)], dtype=np.int32)
    mult = np.array([rng.randint(1 << 29, (1 << 31) - 1) for _ in range(130)], dtype=np.int32)
    shift = np.array([rng.randint(0, 9) for _ in range(130)], dtype=np.int32)
    s, zp = rng.choice((0.0125, 0.00077, 0.5)), rng.choice((0, 3, -128))
    za, zb = rng.choice((0, 1, -3, 128, -128, 255)), rng.choice((0, 7, -128, 127))
    results = []
    for lib in (original, rewritten):
        c = c0.copy()
        ptr = lambda x, t: ffi.cast(t, ffi.from_buffer(x))
        getattr(lib, case.name)(
            m, n, k, lda, ldb, ldc, ptr(a, f"{case.a_type} *"), ptr(b, f"{case.b_type} *"),
            ptr(c, f"{quant_gen.RESULTS[case.c_type][0]} *"), ptr(sa, "float *"),
            ptr(sb, "float *"), ptr(bias, "float *"), ptr(ibias, "int32_t *"),
            ptr(mult, "int32_t *"), ptr(shift, "int *"), s, zp, za, zb)
        results.append(c)
    assert results[0].tobytes() == results[1].tobytes(), (
        f"MISCOMPILE {case.kind} M={m} N={n} K={k} lda={lda} ldb={ldb} ldc={ldc} s={s} zp={zp} "
        f"za={za} zb={zb}"
        f"\n{case.source}")
    return m, n, k


def _operand(c_type: str, size: int, rng: random.Random) -> np.ndarray:
    info = np.iinfo(NP[c_type])
    low, high = (info.min, info.max) if c_type != "short" else (-4000, 4000)
    return np.array([rng.randint(low, high) for _ in range(size)], dtype=NP[c_type])


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("seed", range(2))
def test_generated_quantized_cases(seed, target, tmp_path):
    stats = run_batch(seed * 104729 + len(target), tmp_path, target)
    assert stats["cases"] == CASES_PER_BATCH and stats["fast"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("seed", range(100, 130))   # 30 batches x 2 targets x 24 = 1,440 cases
def test_generated_quantized_cases_long(seed, target, tmp_path):
    stats = run_batch(seed * 104729 + len(target), tmp_path, target)
    assert stats["cases"] == CASES_PER_BATCH and stats["fast"] > 0
