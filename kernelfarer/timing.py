"""Timing method of `kernelfarer compare` (the paper's): the executables of all variants run one at a
time, in a new random order every round, each run one measurement; after all rounds each variant
gets the median and a distribution-free 95% confidence interval of the median.

Running every variant once per round, shuffled, turns a drift of the machine (another process, the
clock, the temperature) into spread of every variant rather than a bias against one of them.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence, TextIO

from kernelfarer.diagnostics import KernelfarerError


@dataclass(frozen=True)
class Interval:
    median: float
    low: float
    high: float
    coverage: float     # the interval's actual confidence (>= 0.95 when there are >= 6 samples)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def median_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The median and the order-statistic confidence interval [x_(r), x_(n+1-r)] for it: the
    widest-r interval whose binomial coverage is at least `confidence` (with fewer than 6 values
    no interval reaches 95%; then it is [min, max] and `coverage` says what it reaches)."""
    ordered = sorted(values)
    n = len(ordered)
    m = median(ordered)
    best = (1, _coverage(n, 1))
    for r in range(1, n // 2 + 1):
        cov = _coverage(n, r)
        if cov >= confidence:
            best = (r, cov)
        else:
            break
    r, cov = best
    return Interval(median=m, low=ordered[r - 1], high=ordered[n - r], coverage=cov)


def _coverage(n: int, r: int) -> float:
    """P(x_(r) <= median <= x_(n+1-r)) for n samples: 1 - 2 P(Binomial(n, 1/2) <= r - 1)."""
    tail = sum(math.comb(n, i) for i in range(r)) / 2 ** n
    return max(0.0, 1.0 - 2.0 * tail)


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal, unless forced)."""

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool | None = None,
                 width: int = 30) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self.start = time.monotonic()
        self.last = ""

    def step(self, label: str, amount: int = 1) -> None:
        self.done = min(self.total, self.done + amount)
        self.show(label)

    def show(self, label: str) -> None:
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        elapsed = time.monotonic() - self.start
        line = (f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"{elapsed:5.0f}s {label}")
        pad = max(0, len(self.last) - len(line))
        self.stream.write(line + " " * pad)
        self.stream.flush()
        self.last = line

    def close(self) -> None:
        if self.enabled and self.last:
            self.stream.write("\n")
            self.stream.flush()


@dataclass(frozen=True)
class Job:
    """One executable run that gives one measurement."""

    key: tuple                  # what the measurement belongs to (variant, function, size)
    command: tuple[str, ...]
    label: str
    env: tuple[tuple[str, str], ...] = ()    # added to run_rounds' environment for this run


def run_rounds(jobs: Sequence[Job], *, rounds: int, parse: Callable[[str], float],
               env: dict | None = None, seed: int | None = None,
               progress: Progress | None = None, timeout: float = 3600) -> dict[tuple, list[float]]:
    """Run every job once per round, in a new random order each round, never two at once;
    `parse` turns a run's stdout into its measurement."""
    rng = random.Random(seed)
    results: dict[tuple, list[float]] = {job.key: [] for job in jobs}
    for round_ in range(rounds):
        order = list(jobs)
        rng.shuffle(order)
        for job in order:
            if progress is not None:
                progress.show(f"round {round_ + 1}/{rounds}: {job.label}")
            run_env = env if not job.env else {**(env or os.environ), **dict(job.env)}
            done = subprocess.run(job.command, capture_output=True, text=True, env=run_env,
                                  timeout=timeout)
            if done.returncode != 0:
                raise KernelfarerError(f"{job.label}: exit status {done.returncode}: "
                                   f"{done.stderr.strip()[:300]}")
            results[job.key].append(parse(done.stdout))
            if progress is not None:
                progress.step(f"round {round_ + 1}/{rounds}: {job.label}")
    return results
