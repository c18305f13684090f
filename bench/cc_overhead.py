"""What kernelfarer-cc adds to a compile, and to a build.

    python bench/cc_overhead.py [RUNS]

Single files (median wall time of `CC -O2 -c FILE`, bare and wrapped, runs alternating):
- samples/project: util.c (no loops), main.c (loops nested two deep: the token-scan prefilter
  sends it straight to the compiler) and kernels.c (three GEMM nests rewritten, the larger
  result compiled);
- large.c, generated: 2,000 functions of shallow loops (about 0.6 MB; the prefilter again);
- deep.c, generated: 300 functions with non-GEMM loop nests three deep (preprocessed, parsed and
  matched, nothing replaced).
A build: `make -j2` of a generated project of 40 files (30 with shallow loops, 8 with deep
non-GEMM nests, 2 with a GEMM each), bare and wrapped, and the ratio: wrapped with an empty
profile directory (a first build on this machine: the support units of the split compiles are
compiled), with the units compiled but no rewrite kept (a first build of another project with
the same kernels and options), and a rebuild (the rewrites kept too: "cold", "units", "warm"); and
a first build after `kernelfarer prepare` ("prepared": what a first build costs once kernelfarer is
installed with `make deps`, which runs it).
The wrapper's profile directory is a temporary one; the user's is not touched.
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

SHALLOW = """int shallow{i}(const int *x, int n)
{{
    int s = 0, i;
    for (i = 0; i < n; i++)
        if (x[i] > {i}) s += x[i];
    while (n-- > 0) s ^= n;
    return s;
}}
"""
DEEP = """long deep{i}(const int *x, int n)
{{
    long s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            for (int k = 0; k < j; k++)
                s += x[i] ^ x[j] ^ (x[k] + {i});
    return s;
}}
"""
GEMM = """void gemm{i}(int m, int n, int k, const float *a, const float *b, float *c)
{{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}}
"""


def timed(cmd: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def write_project(root: Path) -> None:
    root.mkdir()
    names = []
    for f in range(40):
        kind, count = (SHALLOW, 20) if f < 30 else (DEEP, 3) if f < 38 else (GEMM, 1)
        body = "#include <stdio.h>\n" + "".join(kind.format(i=f * 100 + i) for i in range(count))
        (root / f"f{f}.c").write_text(body)
        names.append(f"f{f}.c")
    (root / "Makefile").write_text(
        f"SRCS := {' '.join(names)}\nOBJS := $(SRCS:.c=.o)\nall: $(OBJS)\n"
        "%.o: %.c\n\t$(CC) -O2 -c $< -o $@\nclean:\n\trm -f $(OBJS)\n")


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    env_clean = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELFARER_", "CCACHE"))}
    os.environ.clear()
    os.environ.update(env_clean)
    print(f"compiler {CC}, {runs} runs each, median wall time of -O2 -c (wrapped: warm, its support units and rewrite kept; cold: the first compile)")
    print(f"{'file':12} {'size':>8} {'bare':>8} {'wrapped':>8} {'overhead':>9} {'cold':>8}")
    with tempfile.TemporaryDirectory() as work:
        profiles = Path(work, "profiles")
        profiles.mkdir()

        def fresh_profile() -> None:
            os.environ["KERNELFARER_PROFILE_DIR"] = tempfile.mkdtemp(dir=profiles)

        for name in ("util.c", "main.c", "kernels.c"):
            shutil.copy(PROJECT / name, work)
        shutil.copy(PROJECT / "project.h", work)
        Path(work, "large.c").write_text("".join(SHALLOW.format(i=i) for i in range(2000)))
        Path(work, "deep.c").write_text("".join(DEEP.format(i=i) for i in range(300)))
        for name in ("util.c", "main.c", "kernels.c", "large.c", "deep.c"):
            flags = ["-O2", "-c", name, "-o", "x.o"]
            fresh_profile()
            cold = timed([str(KFCC), CC, *flags], work)
            bare, wrapped = [], []
            for _ in range(runs):
                bare.append(timed([CC, *flags], work))
                wrapped.append(timed([str(KFCC), CC, *flags], work))
            b, w = statistics.median(bare), statistics.median(wrapped)
            size = os.path.getsize(os.path.join(work, name))
            print(f"{name:12} {size / 1024:6.0f}KB {b:7.3f}s {w:7.3f}s {w - b:+8.3f}s "
                  f"{cold:7.3f}s")
        project = Path(work, "project")
        write_project(project)
        bare, cold, units, warm, prepared = [], [], [], [], []
        for _ in range(max(1, runs // 3)):
            fresh_profile()
            for cc, out in ((CC, bare), (f"{KFCC} {CC}", cold), (f"{KFCC} {CC}", units),
                            (f"{KFCC} {CC}", warm), (f"{KFCC} {CC}", prepared)):
                if out is units:        # the support units compiled, the rewrites not kept
                    shutil.rmtree(Path(os.environ["KERNELFARER_PROFILE_DIR"], "rewrites"))
                if out is prepared:     # a new profile, filled by `kernelfarer prepare` only
                    fresh_profile()
                    subprocess.run([str(KFCC.with_name("kernelfarer")), "prepare", "--quiet",
                                    "--compiler", CC], check=True)
                subprocess.run(["make", "-s", "clean"], cwd=project, check=True)
                out.append(timed(["make", "-s", "-j2", f"CC={cc}"], str(project)))
        b, c, u, w, p = min(bare), min(cold), min(units), min(warm), min(prepared)
        print(f"project of 40 files (30 shallow, 8 deep, 2 GEMM), make -j2: bare {b:.2f}s, "
              f"wrapped: first build {c:.2f}s ({c / b:.2f}x), after `kernelfarer prepare` "
              f"{p:.2f}s ({p / b:.2f}x), support units compiled {u:.2f}s ({u / b:.2f}x), "
              f"rebuild {w:.2f}s ({w / b:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
