"""samples/quantized: quantized and half-precision GEMMs as real code writes them (per-channel
scales, bias, activations, requantization into int8 / uint8 / int16, zero points inside the
product, TFLite's reference spelling, int64 / bf16 / double results, OpenMP, row pointers, VLAs),
one function each.  Each must be rewritten, take the fast path on every call and equal the
original byte for byte (samples/quantized/check.c) on 16 sizes up to 257 x 129 x 67."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import CLANG, SAMPLES, TRACE_FLAGS
sys.path.insert(0, str(SAMPLES.parent / "bench"))
from cwall import TRUNC_BF16  # noqa: E402  (C text the benchmarks' harnesses share too)
from kernelfarer import targets
from kernelfarer.rewrite import RewriteOptions, rewrite_file

QUANTIZED = SAMPLES / "quantized"
TARGETS = ["x86-auto", "generic"]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sample", sorted(p.name for p in QUANTIZED.glob("s*.c")))
def test_quantized_sample_is_rewritten_and_equals_the_original(tmp_path, sample, target):
    if target == "x86-auto" and not targets.real_host_runs(targets.TARGETS["x86-avx2"]):
        pytest.skip("this host does not run AVX2")
    for name in (sample, "common.h"):
        shutil.copy(QUANTIZED / name, tmp_path / name)
    (tmp_path / "check.c").write_text("#include <string.h>\n" + TRUNC_BF16
                                      + (QUANTIZED / "check.c").read_text())
    result = rewrite_file(str(tmp_path / sample), RewriteOptions(target=target))
    gemm = [r for r in result.remarks if r.kind == "gemm" and "run(" not in r.message()]
    assert any(r.replaced for r in gemm), [r.message() for r in gemm]
    (tmp_path / "rewritten.c").write_text(result.text)
    subprocess.run([CLANG, "-O2", "-fopenmp", "-DKERNELFARER_TRACE", "-Drun=run_ref", "-c",
                    sample, "-o", "original.o"], cwd=tmp_path, check=True)
    subprocess.run([CLANG, "-O2", "-fopenmp", *TRACE_FLAGS, "-o", "check", "check.c",
                    "rewritten.c", "original.o", "-lm"], cwd=tmp_path, check=True)
    done = subprocess.run(["./check"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"OMP_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "fast=16 of 16 bad=0", done.stdout
