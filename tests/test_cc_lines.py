"""kernelfarer-cc keeps the user's lines for debuggers and coverage tools: the generated support code
is numbered in a file of its own (<kernelfarer>), every generated line of a call site is the
nest's first line, and everything else keeps its line.  Checked with gdb (breakpoints by line,
`bt`), addr2line on every function, and gcov's line counts against the plain build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """\
#include <stdio.h>
static void mm(int n, const float *a, const float *b, float *c)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}
static int twice(int x)
{
    return 2 * x;
}
int main(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {0};
    mm(2, a, b, c);
    printf("%g %d %s:%d\\n", c[3], twice(3), __FILE__, __LINE__);
    return 0;
}
"""

WRAPPER = [sys.executable, "-m", "kernelfarer.cc"]


def _build(tmp_path: Path, compiler: str, *flags: str, wrapped: bool) -> Path:
    src = tmp_path / "lines.c"
    src.write_text(PROGRAM)
    exe = tmp_path / ("lines_kf" if wrapped else "lines_plain")
    cmd = ([*WRAPPER, compiler] if wrapped else [compiler]) + [*flags, "lines.c", "-o", exe.name]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, KERNELFARER_REMARKS="1"))
    assert done.returncode == 0, done.stderr
    if wrapped:
        assert "replaced" in done.stderr, done.stderr      # the nest was rewritten
    return exe


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (make test installs it)")
    return path


def test_addr2line_puts_generated_code_apart(tmp_path):
    addr2line, nm = _tool("addr2line"), _tool("nm")
    exe = _build(tmp_path, "clang-19", "-g", "-O0", wrapped=True)
    symbols = subprocess.run([nm, str(exe)], capture_output=True, text=True, check=True).stdout
    functions = {name: addr for addr, kind, name in
                 (line.split() for line in symbols.splitlines() if len(line.split()) == 3)
                 if kind in "tT"}
    ours = [n for n in functions if n.startswith("kf_")]
    assert ours, "the support code was compiled"
    names = ours + ["main", "mm", "twice"]
    out = subprocess.run([addr2line, "-f", "-e", str(exe), *(functions[n] for n in names)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    where = dict(zip(out[0::2], out[1::2]))
    for name in ours:       # the support code's own lines, or none (what the call site calls)
        assert "<kernelfarer>" in where[name] or where[name].endswith((":?", ":0")), \
            (name, where[name])
    # the user's functions: their own file and lines (the line of the opening brace or the name)
    assert re.search(r"lines\.c:(13|14)$", where["main"]), where["main"]
    assert re.search(r"lines\.c:(2|3)$", where["mm"]), where["mm"]
    assert re.search(r"lines\.c:(9|10)$", where["twice"]), where["twice"]


def test_gdb_breakpoints_and_backtrace_name_the_users_lines(tmp_path):
    gdb = _tool("gdb")
    plain = _build(tmp_path, "clang-19", "-g", "-O0", wrapped=False)
    fast = _build(tmp_path, "clang-19", "-g", "-O0", wrapped=True)
    script = ["-batch", "-ex", "break lines.c:11", "-ex", "break lines.c:17", "-ex", "run",
              "-ex", "bt", "-ex", "continue", "-ex", "bt"]
    runs = {}
    for exe in (plain, fast):
        done = subprocess.run([gdb, *script, str(exe)], capture_output=True, text=True,
                              timeout=120)
        lines = [ln for ln in done.stdout.splitlines()
                 if ln.startswith(("Breakpoint", "#"))]
        runs[exe] = [re.sub(r"0x[0-9a-f]+", "ADDR", ln) for ln in lines]
    assert runs[fast] == runs[plain], (runs[plain], runs[fast])
    assert any("lines.c:17" in ln for ln in runs[fast])
    assert any("twice" in ln and "lines.c:11" in ln for ln in runs[fast])


def test_gcov_counts_the_users_lines_only(tmp_path):
    gcc, gcov = _tool("gcc"), _tool("gcov")
    results = []
    for wrapped in (False, True):
        d = tmp_path / ("kf" if wrapped else "plain")
        d.mkdir()
        (d / "lines.c").write_text(PROGRAM)
        cmd = ([*WRAPPER, gcc] if wrapped else [gcc]) + ["--coverage", "-O0", "-c", "lines.c",
                                                          "-o", "lines.o"]
        done = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        subprocess.run([gcc, "--coverage", "lines.o", "-o", "lines"], cwd=d, check=True)
        subprocess.run(["./lines"], cwd=d, check=True, capture_output=True)
        report = subprocess.run([gcov, "-n", "lines.c"], cwd=d, capture_output=True,
                                text=True).stdout
        match = re.search(r"File 'lines\.c'\s*\nLines executed:([\d.]+)% of (\d+)", report)
        assert match, report
        results.append(int(match.group(2)))
    assert results[0] == results[1], results


def _steps(exe: Path, gdb: str, count: int) -> list[str]:
    """Where each of `count` gdb `step`s from the nest's first line (4) stops: file:line, or the
    function gdb names when it has no line."""
    script = ["-batch", "-ex", "break lines.c:4", "-ex", "run"] + ["-ex", "step"] * count
    done = subprocess.run([gdb, *script, str(exe)], capture_output=True, text=True, timeout=120)
    out, where = [], "?"
    for line in done.stdout.splitlines():       # a stop: a frame line (new function), then
        frame = re.search(r" at (\S+):\d+$", line)   # always the source line, "N<tab>..."
        if frame:
            where = os.path.basename(frame.group(1))
        stop = re.match(r"(\d+)\t", line)
        if stop:
            out.append(f"{where}:{stop.group(1)}")
    return out


def test_gdb_steps_over_the_generated_code(tmp_path):
    """clang: `step` on the rewritten nest never enters the generated code (its helpers and
    drivers carry no line information): unoptimized, where the drivers decline, it walks the
    original loops line by line exactly as in the plain build; optimized, one step goes over the
    whole fast path, back to the user's file."""
    gdb = _tool("gdb")
    plain = _steps(_build(tmp_path, "clang-19", "-g", "-O0", wrapped=False), gdb, 8)
    fast = _steps(_build(tmp_path, "clang-19", "-g", "-O0", wrapped=True), gdb, 8)
    assert len(plain) > 6 and fast == plain, (plain, fast)
    assert all(s.startswith("lines.c:") for s in plain)
    optimized = _steps(_build(tmp_path, "clang-19", "-g", "-O1", wrapped=True), gdb, 2)
    assert optimized[:2] and optimized[0] == "lines.c:4", optimized
    assert optimized[1].startswith("lines.c:") and optimized[1] != "lines.c:4", optimized
