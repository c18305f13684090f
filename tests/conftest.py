"""Shared helpers for the kernelfarer test suite: running the CLI, compiling C to shared libraries,
loading them with cffi, and a session-wide cache of rewrites and builds.

Every rewrite goes through the real command line (``python -m kernelfarer rewrite``) so that the
tests exercise exactly what a user runs.  Builds are cached per (sample, target, blocking, -D
flags) for the whole session: a sample is rewritten and compiled once however many tests use it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

# tests/parallel.py's workers: which tests this process runs
from parallel import pytest_runtest_logfinish, pytest_runtestloop, pytest_sessionfinish  # noqa: F401

# The suite plans like a user on a fresh machine: a tuned profile `kernelfarer tune` stored for this
# machine must not change its blocks (tests of tune use their own directories).
os.environ["KERNELFARER_PROFILE_DIR"] = tempfile.mkdtemp(prefix="kf-test-profiles-")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
POSITIVE = SAMPLES / "positive"
NEGATIVE = SAMPLES / "negative"

CLANG = os.environ.get("KERNELFARER_CLANG") or shutil.which("clang-19") or shutil.which("clang")
SHARED_FLAGS = ("-O1", "-shared", "-fPIC")
STRICT_FLAGS = ("-Wall", "-Wextra", "-Werror")

# Rewritten files built with -DKERNELFARER_TRACE count their fast-path runs in
# `kernelfarer_fast_path_calls`: a test sees whether the generated code ran or the original nest
# ran instead (after a failed run-time check).  -DKERNELFARER_ALWAYS_FAST turns off the shape
# rule that sends tiny problems to the original loops (a speed decision; test_kernels checks
# it), so that tests of small odd sizes exercise the kernels.
TRACE_FLAGS = ("-DKERNELFARER_TRACE", "-DKERNELFARER_ALWAYS_FAST")
TRACE_COUNTER = "kernelfarer_fast_path_calls"


def run_cli(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m kernelfarer ARGS`` in a subprocess, text output captured; `env` adds to (or,
    with a None value, removes from) the environment."""
    full = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return subprocess.run([sys.executable, "-m", "kernelfarer", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout, env=full)


def compile_c(source: Path, output: Path, *flags: str) -> None:
    """Compile with clang; a failure shows the compiler's complaint."""
    cmd = [CLANG, *flags, str(source), "-o", str(output)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"compiling {source} failed:\n$ {' '.join(cmd)}\n{done.stderr}")


@dataclass(frozen=True)
class Blocking:
    mc: int = 0
    kc: int = 0
    nc: int = 0

    @property
    def default(self) -> bool:
        return not (self.mc or self.kc or self.nc)

    def flags(self) -> list[str]:
        return [f"--{n}={v}" for n, v in (("mc", self.mc), ("kc", self.kc), ("nc", self.nc)) if v]

    def tag(self) -> str:
        return "default" if self.default else f"mc{self.mc}-kc{self.kc}-nc{self.nc}"


DEFAULT_BLOCKING = Blocking()


def small_blocking(*target_names: str, tiles: int = 2, kc: int = 8) -> Blocking:
    """Cache blocks of `tiles` register tiles of every float kernel of the targets (mc and nc
    multiples of all their mr and nr): every block edge lies at a few dozen.  Derived from the
    registry, so a kernel whose register block changes keeps valid test blocks."""
    import math
    from kernelfarer import targets
    from kernelfarer.targets import DType
    shapes = [targets.TARGETS[name].kernel(d) for name in target_names
              for d in (DType.F32, DType.F64) if d in targets.TARGETS[name].kernels]
    return Blocking(mc=tiles * math.lcm(*(s.mr for s in shapes)), kc=kc,
                    nc=tiles * math.lcm(*(s.nr for s in shapes)))


X86_TARGETS = ("x86-avx512", "x86-avx2", "generic")
# Small cache blocks for every x86 target: one register tile of each per mc and nc (12, 32 today),
# so every block edge (mc, kc, nc) and register-tile edge (mr, nr) is crossed at sizes of a few
# dozen.
SMALL_BLOCKING = small_blocking(*X86_TARGETS, tiles=1)
# kc = 7 is not a multiple of the kernels' k unroll (4): full kc blocks take the remainder loop.
ODD_BLOCKING = small_blocking(*X86_TARGETS, tiles=2, kc=7)

@dataclass
class Rewrite:
    source: Path          # the sample as given
    output: Path          # the rewritten file
    report: dict          # the --report JSON
    stderr: str           # remarks


@dataclass
class Build:
    rewrite: Rewrite
    library: Path | None          # rewritten, compiled -shared (None when compile-only)
    original: Path                # the original sample, compiled -shared


class BuildCache:
    """Rewrites and builds, each done once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._rewrites: dict[tuple, Rewrite] = {}
        self._originals: dict[tuple, Path] = {}
        self._builds: dict[tuple, Build] = {}
        self._objects: dict[tuple, Path] = {}

    def _dir(self, *parts: str) -> Path:
        d = self.root.joinpath(*[p.replace("/", "_") for p in parts])
        d.mkdir(parents=True, exist_ok=True)
        return d

    def rewrite(self, sample: Path, target: str, blocking: Blocking = DEFAULT_BLOCKING,
                defines: tuple[str, ...] = ()) -> Rewrite:
        """`kernelfarer rewrite` of a sample (--no-verify: every output is compiled -Werror by
        the tests themselves, which is the stronger check)."""
        key = (str(sample), target, blocking, defines)
        if key not in self._rewrites:
            d = self._dir(sample.stem, target, blocking.tag(), "_".join(defines) or "nodefs")
            out, report = d / sample.name, d / "report.json"
            cmd = ["rewrite", str(sample), "-o", str(out), "--remarks", "--report", str(report),
                   "--target", target, "--no-verify", *blocking.flags()]
            if defines:
                cmd += ["--", *defines]
            done = run_cli(*cmd)
            assert done.returncode == 0, f"kernelfarer {' '.join(cmd)} failed:\n{done.stderr}"
            self._rewrites[key] = Rewrite(sample, out, json.loads(report.read_text()),
                                          done.stderr)
        return self._rewrites[key]

    def original(self, sample: Path, defines: tuple[str, ...] = ()) -> Path:
        key = (str(sample), defines)
        if key not in self._originals:
            d = self._dir(sample.stem, "original", "_".join(defines) or "nodefs")
            lib = d / (sample.stem + ".so")
            compile_c(sample, lib, *SHARED_FLAGS, *defines)
            self._originals[key] = lib
        return self._originals[key]

    def build(self, sample: Path, target: str, blocking: Blocking = DEFAULT_BLOCKING,
              defines: tuple[str, ...] = ()) -> Build:
        """The rewritten sample compiled -shared with -Wall -Wextra -Werror and the fast-path
        counter (KERNELFARER_TRACE), and the original compiled -shared."""
        key = (str(sample), target, blocking, defines)
        if key not in self._builds:
            rw = self.rewrite(sample, target, blocking, defines)
            lib = rw.output.with_suffix(".so")
            compile_c(rw.output, lib, *SHARED_FLAGS, *STRICT_FLAGS, *TRACE_FLAGS, *defines)
            # a private copy: global state of the original library is per build, like the rewrite's
            original = rw.output.parent / ("original-" + sample.stem + ".so")
            shutil.copyfile(self.original(sample, defines), original)
            self._builds[key] = Build(rw, lib, original)
        return self._builds[key]

    def compile_only(self, sample: Path, target: str, blocking: Blocking = DEFAULT_BLOCKING,
                     defines: tuple[str, ...] = ()) -> Path:
        """The rewritten sample compiled to an object file with -Wall -Wextra -Werror, for the
        target's machine (the registry's compile_flags: cross targets build with --target=...)."""
        from kernelfarer import targets
        key = (str(sample), target, blocking, defines)
        if key not in self._objects:
            rw = self.rewrite(sample, target, blocking, defines)
            obj = rw.output.with_suffix(".o")
            compile_c(rw.output, obj, *targets.get_target(target).compile_flags, "-O1", "-c",
                      *STRICT_FLAGS, *defines)
            self._objects[key] = obj
        return self._objects[key]


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> BuildCache:
    return BuildCache(tmp_path_factory.mktemp("kf-builds"))


def load_library(path: Path, cdef: str):
    """dlopen a shared library with cffi; returns (ffi, lib)."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    return ffi, ffi.dlopen(str(path))


def parse_expectations(path: Path) -> list[str]:
    """The `/* expect: <reason substring> */` comments of a negative sample, in order."""
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("/* expect:") and line.endswith("*/"):
            out.append(line[len("/* expect:"):-2].strip())
    return out


def host_runs(target_name: str) -> bool:
    """Does the CPU the tests run on execute this target's code?  (Whatever host KERNELFARER_HOST
    describes for planning: execution is always this machine's.)"""
    from kernelfarer import targets
    return targets.real_host_runs(targets.get_target(target_name))


def native_target() -> str:
    """The best target this CPU runs (never a dispatcher, never a cross target)."""
    from kernelfarer import hostinfo, targets
    real = hostinfo.real_host()
    return targets.best_for_host(real.flags, real.arch).name

