"""`make demo`: rewrite a sample with kernelfarer, build original and rewritten, run both, compare.

    python bench/demo.py samples/sgemm.c [N]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np

CC = os.environ.get("CC", "clang-19")
CFLAGS = ["-O3", "-march=native"]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, **kw)


def main() -> int:
    sample = sys.argv[1] if len(sys.argv) > 1 else "samples/sgemm.c"
    n = sys.argv[2] if len(sys.argv) > 2 else "1024"
    os.makedirs("out", exist_ok=True)
    stem = os.path.splitext(os.path.basename(sample))[0]
    fast_c = f"out/{stem}_fast.c"
    start = time.perf_counter()
    run([sys.executable, "-m", "kernelfarer", "rewrite", sample, "-o", fast_c, "--remarks",
         "--report", f"out/{stem}.json"])
    rewrite_seconds = time.perf_counter() - start
    for src, exe in ((sample, f"out/{stem}_orig"), (fast_c, f"out/{stem}_fast")):
        run([CC, *CFLAGS, "-Wall", "-Wextra", src, "-o", exe])
    results = {}
    for label, exe in (("original", f"out/{stem}_orig"), ("kernelfarer", f"out/{stem}_fast")):
        done = run([f"./{exe}", n, f"{exe}.bin"], capture_output=True)
        print(done.stdout.strip())
        results[label] = float(re.search(r"gflops=([0-9.]+)", done.stdout).group(1))
    orig = np.fromfile(f"out/{stem}_orig.bin", dtype=np.float32)
    fast = np.fromfile(f"out/{stem}_fast.bin", dtype=np.float32)
    diff = float(np.max(np.abs(orig - fast))) if orig.size else 0.0
    print()
    print(f"rewrite took {rewrite_seconds:.2f} s; rewritten source: {fast_c}")
    print(f"{'':12} {'GFLOP/s':>10}")
    for label, gflops in results.items():
        print(f"{label:12} {gflops:10.2f}")
    print(f"speedup      {results['kernelfarer'] / results['original']:10.1f}x")
    print(f"max |difference| = {diff:g} ({'identical' if diff == 0 else 'differs'})")
    return 0 if diff == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
