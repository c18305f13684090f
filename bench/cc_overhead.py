"""What kernelfarer-cc adds to a compile: wall time of `CC -O2 -c FILE`, bare and wrapped.

    python bench/cc_overhead.py [RUNS]

Files from samples/project: util.c (no loops: the wrapper only checks for a `for` token),
main.c (loops but no GEMM: the rewriter runs and replaces nothing) and kernels.c (three GEMM
nests rewritten and the larger result compiled).  Runs alternate bare and wrapped; medians.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "samples" / "project"
KFCC = Path(sys.executable).parent / "kernelfarer-cc"
CC = shutil.which(os.environ.get("KERNELFARER_CC", "clang-19"))


def timed(cmd: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    env_clean = {k: v for k, v in os.environ.items() if not k.startswith("KERNELFARER_")}
    os.environ.clear()
    os.environ.update(env_clean)
    print(f"compiler {CC}, {runs} runs each, median wall time of -O2 -c")
    print(f"{'file':12} {'bare':>8} {'wrapped':>8} {'overhead':>9}")
    with tempfile.TemporaryDirectory() as work:
        for name in ("util.c", "main.c", "kernels.c"):
            shutil.copy(PROJECT / name, work)
        shutil.copy(PROJECT / "project.h", work)
        for name in ("util.c", "main.c", "kernels.c"):
            flags = ["-O2", "-c", name, "-o", "x.o"]
            bare, wrapped = [], []
            for _ in range(runs):
                bare.append(timed([CC, *flags], work))
                wrapped.append(timed([str(KFCC), CC, *flags], work))
            b, w = statistics.median(bare), statistics.median(wrapped)
            print(f"{name:12} {b:7.3f}s {w:7.3f}s {w - b:+8.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
