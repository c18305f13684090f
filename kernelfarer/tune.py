"""`kernelfarer tune`: measure the cache blocks around the model's on this machine, keep the best.

ATLAS tuned at install time; kernelfarer tunes once per machine.  For each element type the search
starts at the analytical model's blocks (plan.analytical_blocking) and walks one block at a time:

1. kc from half to twice the model's (mc adjusted so the packed A block keeps its size, and
   mc = mr),
2. mc around the best so far,
3. nc, when the sizes reach past half of it,

each candidate compiled as its own shared library (templates/tune.c.j2: the real driver with those
blocks) and timed on square GEMMs, every candidate once per round in a new random order, never two
at once, best thread CPU time per size; a candidate's score is the geometric mean of its GFLOP/s
over the sizes.  The model's blocks stay unless a candidate beats them by more than
`MIN_GAIN` (noise must not move the blocks).  The result is a host profile (hostinfo): this
machine's description plus the tuned blocks, stored where the rewriter and kernelfarer-cc find it.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import json
import math
import os
import random
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from kernelfarer import hostinfo, targets
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.plan import Blocking, KernelPlan, blocking_error, make_plan
from kernelfarer.targets import DType, Target
from kernelfarer.timing import Progress
from kernelfarer.toolchain import clang_path

MIN_GAIN = 1.01          # a candidate must beat the model's blocks by more than 1%
DTYPES = {"f32": DType.F32, "f64": DType.F64}


@dataclass(frozen=True)
class TuneOptions:
    target: str = "auto"
    dtypes: tuple[str, ...] = ("f32", "f64")
    sizes: tuple[int, ...] = (1024, 2048)
    rounds: int = 3
    budget: float = 60.0                       # seconds; the search stops early past it
    candidates: tuple[Blocking, ...] = ()      # try exactly these (and the model's); no search
    output: str | None = None                  # the profile file (default: this machine's)
    progress: bool | None = None
    jobs: int = 0                              # parallel compiles (0: the machine's cores)


@dataclass(frozen=True)
class Trial:
    blocking: Blocking
    gflops: tuple[float, ...]                  # best GFLOP/s at each size

    @property
    def score(self) -> float:
        return math.exp(sum(math.log(g) for g in self.gflops) / len(self.gflops))


@dataclass(frozen=True)
class KernelResult:
    target: str
    dtype: DType
    sizes: tuple[int, ...]
    model: Trial
    best: Trial
    trials: tuple[Trial, ...]

    @property
    def chosen(self) -> Trial:
        return self.best if self.best.score > MIN_GAIN * self.model.score else self.model


def _round(value: float, multiple: int, low: int, high: int) -> int:
    return max(low, min(high, int(round(value / multiple)) * multiple or multiple))


def kc_candidates(model: Blocking, plan: KernelPlan) -> list[Blocking]:
    """kc from half to twice the model's, each with the model's A block size and with a single
    A micro-panel (mc = mr: the A micro-panel then stays in L1 across the jr loop, and B's
    micro-panels stream; on Zen 4 that won by 4-10%)."""
    step = math.lcm(plan.shape.kr, plan.shape.unroll)
    a_block = model.mc * model.kc
    out = []
    for factor in (0.5, 1, 1.5, 2):
        kc = _round(model.kc * factor, step, step, 1024)
        out.append(Blocking(mc=_round(a_block / kc, plan.mr, plan.mr, 4096), kc=kc, nc=model.nc))
        out.append(Blocking(mc=plan.mr, kc=kc, nc=model.nc))
    return _unique(out)


def mc_candidates(best: Blocking, plan: KernelPlan) -> list[Blocking]:
    return _unique(Blocking(mc=_round(mc, plan.mr, plan.mr, 4096), kc=best.kc, nc=best.nc)
                   for mc in (2 * plan.mr, best.mc / 2, best.mc * 2, best.mc * 4))


def nc_candidates(best: Blocking, plan: KernelPlan, sizes: Sequence[int]) -> list[Blocking]:
    """nc only matters once N exceeds it: below that every candidate is one jc block."""
    if max(sizes) <= best.nc // 2:
        return []
    return _unique(Blocking(mc=best.mc, kc=best.kc, nc=_round(best.nc * f, plan.nr, plan.nr, 8192))
                   for f in (0.25, 0.5, 2))


def _unique(blockings) -> list[Blocking]:
    seen: dict[Blocking, None] = {}
    for b in blockings:
        seen.setdefault(b, None)
    return list(seen)


class _Library:
    """One candidate compiled: kf_tune_seconds() times the driver with its blocks."""

    def __init__(self, plan: KernelPlan, path: Path) -> None:
        self.plan = plan
        self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        self.lib.kf_tune_seconds.restype = ctypes.c_double
        self.lib.kf_tune_seconds.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_long,
                                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.c_int)
        self.lib.kf_tune_fill.argtypes = (ctypes.c_void_p, ctypes.c_long, ctypes.c_uint)


def _source(plan: KernelPlan) -> str:
    from kernelfarer import emit
    return emit.render_support([plan]) + emit.environment().get_template("tune.c.j2").render(
        plan=plan)


def _compile(plan: KernelPlan, workdir: Path, index: int) -> Path:
    src = workdir / f"cand{index}.c"
    lib = workdir / f"cand{index}.so"
    src.write_text(_source(plan))
    cmd = [clang_path(), "-O2", "-shared", "-fPIC", "-w", str(src), "-o", str(lib)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise KernelfarerError(f"tune: compiling a candidate failed: {done.stderr.strip()[:300]}")
    return lib


class _Buffers:
    """A, B and C of the largest size, 64-byte aligned, filled with small integers."""

    def __init__(self, size: int, dtype: DType, fill: Callable) -> None:
        self._keep = []
        self.a = self._alloc(size * size, dtype.in_size)
        self.b = self._alloc(size * size, dtype.in_size)
        self.c = self._alloc(size * size, dtype.size)
        fill(self.a, size * size, 1)
        fill(self.b, size * size, 2)

    def _alloc(self, count: int, elem: int) -> int:
        raw = ctypes.create_string_buffer(count * elem + 64)
        self._keep.append(raw)
        address = ctypes.addressof(raw)
        return address + (-address % 64)


class Tuner:
    def __init__(self, options: TuneOptions, progress: Progress, workdir: Path) -> None:
        self.options = options
        self.progress = progress
        self.workdir = workdir
        self.count = 0
        self.start = time.monotonic()
        self.rng = random.Random(12345)

    def over_budget(self) -> bool:
        return time.monotonic() - self.start > self.options.budget

    def build(self, plans: Sequence[KernelPlan]) -> list[_Library]:
        jobs = self.options.jobs or os.cpu_count() or 1
        indices = range(self.count, self.count + len(plans))
        self.count += len(plans)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_compile, plan, self.workdir, i)
                       for plan, i in zip(plans, indices)]
            paths = []
            for future in futures:
                paths.append(future.result())
                self.progress.step("compiling candidates")
        return [_Library(plan, path) for plan, path in zip(plans, paths)]

    def measure(self, libs: Sequence[_Library], buffers: _Buffers) -> list[Trial]:
        sizes = self.options.sizes
        best = [[math.inf] * len(sizes) for _ in libs]
        for round_ in range(self.options.rounds):
            order = list(range(len(libs)))
            self.rng.shuffle(order)
            for i in order:
                lib = libs[i]
                for s, n in enumerate(sizes):
                    reps = 1 if round_ else 2      # the first round also warms up (pages, caches)
                    seconds = lib.lib.kf_tune_seconds(n, n, n, buffers.a, buffers.b, buffers.c,
                                                      reps)
                    if seconds < 0:
                        raise KernelfarerError("tune: a candidate could not allocate its packing "
                                               "buffers")
                    best[i][s] = min(best[i][s], seconds)
                self.progress.step(f"{lib.plan.kernel_name} round {round_ + 1}/"
                                   f"{self.options.rounds}")
        return [Trial(lib.plan.blocking, tuple(2.0 * n ** 3 / t * 1e-9 for n, t in
                                               zip(sizes, times)))
                for lib, times in zip(libs, best)]

    def tune_kernel(self, target: Target, dtype: DType) -> KernelResult:
        host = hostinfo.real_host()
        model_plan = make_plan(target, dtype, caches=host.caches)
        model = model_plan.blocking
        buffers: _Buffers | None = None
        trials: dict[Blocking, Trial] = {}

        def run(blockings: Sequence[Blocking]) -> None:
            nonlocal buffers
            new = [b for b in _unique(blockings) if b not in trials
                   and blocking_error(b, model_plan.shape) is None]
            if not new:
                return
            plans = [make_plan(target, dtype, caches=host.caches,
                               overrides=dict(mc=b.mc, kc=b.kc, nc=b.nc)) for b in new]
            libs = self.build(plans)
            if buffers is None:
                buffers = _Buffers(max(self.options.sizes), dtype, libs[0].lib.kf_tune_fill)
            for trial in self.measure(libs, buffers):
                trials[trial.blocking] = trial

        def best() -> Blocking:
            return max(trials.values(), key=lambda t: t.score).blocking

        if self.options.candidates:
            for b in self.options.candidates:
                error = blocking_error(b, model_plan.shape)
                if error:
                    raise KernelfarerError(f"--try {b.mc},{b.kc},{b.nc}: for the "
                                           f"{model_plan.kernel_name} kernel, {error[2:]}")
            run([model, *self.options.candidates])
        else:
            run([model, *kc_candidates(model, model_plan)])
            if not self.over_budget():
                run(mc_candidates(best(), model_plan))
            if not self.over_budget():
                run(nc_candidates(best(), model_plan, self.options.sizes))
        winner = max(trials.values(), key=lambda t: t.score)
        return KernelResult(target=target.name, dtype=dtype, sizes=tuple(self.options.sizes),
                            model=trials[model], best=winner,
                            trials=tuple(sorted(trials.values(), key=lambda t: -t.score)))


def estimated_steps(options: TuneOptions) -> int:
    per_kernel = len(options.candidates) + 1 if options.candidates else 8 + 4
    # each candidate: one compile step and one step per round
    return len(options.dtypes) * per_kernel * (1 + options.rounds)


def tune(options: TuneOptions) -> tuple[list[KernelResult], Path]:
    if os.environ.get(hostinfo.HOST_ENV, "").strip():
        raise KernelfarerError(f"tune measures this machine; unset {hostinfo.HOST_ENV} "
                               f"(it is {os.environ[hostinfo.HOST_ENV]!r})")
    host = hostinfo.real_host()
    target = (targets.best_for_host(host.flags, host.arch) if options.target == "auto"
              else targets.get_target(options.target))
    if target.dispatch or not targets.real_host_runs(target):
        raise KernelfarerError(f"tune: this machine does not run target '{target.name}' natively")
    for name in options.dtypes:
        if name not in DTYPES:
            raise KernelfarerError(f"tune: unknown type '{name}' (known: {', '.join(DTYPES)})")
    if not options.sizes or min(options.sizes) < 1:
        raise KernelfarerError("tune: give positive sizes")
    progress = Progress(estimated_steps(options), enabled=options.progress)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="kf-tune-") as workdir:
            tuner = Tuner(options, progress, Path(workdir))
            for name in options.dtypes:
                results.append(tuner.tune_kernel(target, DTYPES[name]))
    finally:
        progress.close()
    path = Path(options.output) if options.output else hostinfo.profile_path(host)
    save_profile(host, results, path)
    hostinfo.reset()
    return results, path


def save_profile(host: hostinfo.Host, results: Sequence[KernelResult], path: Path) -> None:
    """Write (or update) the host profile: this machine's description, the chosen blocks and what
    was measured."""
    data = host.to_json()
    old = hostinfo.load_profile(path)
    blocking = dict(old.blocking) if old is not None and old.key() == host.key() else {}
    measured = {}
    if old is not None and old.key() == host.key():
        try:
            measured = dict(json.loads(path.read_text()).get("measured", {}))
        except (OSError, ValueError):
            measured = {}
    for r in results:
        key = f"{r.target}/{_dtype_key(r.dtype)}"
        chosen = r.chosen.blocking
        blocking[key] = dict(mc=chosen.mc, kc=chosen.kc, nc=chosen.nc)
        measured[key] = {
            "sizes": list(r.sizes),
            "model": {"blocking": _blocking_text(r.model.blocking),
                      "gflops": [round(g, 2) for g in r.model.gflops]},
            "chosen": {"blocking": _blocking_text(chosen),
                       "gflops": [round(g, 2) for g in r.chosen.gflops]},
            "date": time.strftime("%Y-%m-%d"),
        }
    data["name"] = f"tuned: {host.cpu_model or host.arch}"
    data["blocking"] = {k: dict(v) for k, v in sorted(blocking.items())}
    data["measured"] = measured
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _dtype_key(dtype: DType) -> str:
    return {DType.F32: "f32", DType.F64: "f64"}[dtype]


def _blocking_text(b: Blocking) -> str:
    return f"mc={b.mc} kc={b.kc} nc={b.nc}"


def report(results: Sequence[KernelResult], path: Path, *, default_location: bool) -> str:
    lines = []
    for r in results:
        head = " ".join(f"N={n:>5}" for n in r.sizes)
        lines.append(f"{r.target} {_dtype_key(r.dtype)}: GFLOP/s at {head}  (geometric mean)")
        for t in r.trials:
            mark = " <- model" if t.blocking == r.model.blocking else ""
            mark += " <- chosen" if t.blocking == r.chosen.blocking else ""
            cells = " ".join(f"{g:7.1f}" for g in t.gflops)
            lines.append(f"  {_blocking_text(t.blocking):28} {cells}   {t.score:7.1f}{mark}")
        gain = r.chosen.score / r.model.score
        lines.append(f"  chosen {_blocking_text(r.chosen.blocking)}: {gain:.3f}x the model's blocks")
    if default_location:
        lines.append(f"profile written to {path}: kernelfarer rewrite and kernelfarer-cc use it on "
                     "this machine")
    else:
        lines.append(f"profile written to {path}: use it with KERNELFARER_HOST={path}")
    return "\n".join(lines) + "\n"
