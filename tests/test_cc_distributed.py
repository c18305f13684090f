"""kernelfarer-cc in front of distributed compilers: the launcher chains users write
(`kernelfarer-cc distcc clang-19`, `ccache kernelfarer-cc distcc gcc`, `kernelfarer-cc icecc ...`)
rewrite here and ship only the rewritten translation unit.  samples/project is built through a
distccd listening on 127.0.0.1 (distcc never compiles remotely for "localhost"), with local
fallback off, so every object was compiled by the daemon."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_cc import CLANG, GCC, KFCC, PROJECT, env, reports, warnings_of

DISTCC = shutil.which("distcc")
DISTCCD = shutil.which("distccd")
ICECC = shutil.which("icecc")
pytestmark = pytest.mark.skipif(not (DISTCC and DISTCCD),
                                reason="distcc is not installed (the Makefile installs it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def daemon():
    """A distccd on 127.0.0.1; yields (DISTCC_HOSTS value, its log file)."""
    # run as root, distccd drops to the distcc user, who cannot enter pytest's private tmp
    logdir = Path(tempfile.mkdtemp(prefix="kf-distccd-"))
    os.chmod(logdir, 0o777)
    log = logdir / "distccd.log"
    port = _free_port()
    proc = subprocess.Popen([DISTCCD, "--daemon", "--no-detach", "--allow", "127.0.0.1",
                             "--listen", "127.0.0.1", "--port", str(port), "--jobs", "2",
                             "--enable-tcp-insecure", "--log-file", str(log), "--log-level", "info"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.skip("distccd did not start")
    yield f"127.0.0.1:{port}", log
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(logdir, ignore_errors=True)


def _build(project: Path, cc: str, build: str, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(["make", "-s", f"CC={cc}", f"BUILD={build}"], cwd=project,
                          env=env(**extra_env), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def _compiled_by_daemon(log: Path, name: str) -> list[str]:
    """The daemon's log lines of the jobs that compiled a file called `name`."""
    text = log.read_text() if log.exists() else ""
    return [line for line in text.splitlines()
            if "COMPILE_OK" in line and line.endswith(("/" + name, " " + name))]


def _has_kernels(obj: Path) -> bool:
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    return any(line.split()[-1].startswith("kf_") for line in symbols.splitlines() if line.strip())


@pytest.mark.parametrize("chain", [
    "{kfcc} distcc {clang}",
    pytest.param("ccache {kfcc} distcc {gcc}",
                 marks=pytest.mark.skipif(not (GCC and shutil.which("ccache")),
                                          reason="needs gcc and ccache")),
])
def test_project_builds_through_distccd(daemon, tmp_path, chain):
    hosts, log = daemon
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("build", "*.o", "*.d"))
    (tmp_path / "dd").mkdir()
    dist = {"DISTCC_HOSTS": hosts, "DISTCC_FALLBACK": "0", "DISTCC_DIR": str(tmp_path / "dd"),
            "CCACHE_DIR": str(tmp_path / "ccache"), "KERNELFARER_REPORT_DIR": str(tmp_path / "rep")}
    compiler = os.path.basename(GCC or "gcc") if "{gcc}" in chain else os.path.basename(CLANG)
    names = {"clang": os.path.basename(CLANG), "gcc": os.path.basename(GCC or "gcc")}
    before = len(_compiled_by_daemon(log, "kernels.c"))
    plain = _build(project, chain.replace("{kfcc} ", "").format(**names), "plain", dist)
    middle = len(_compiled_by_daemon(log, "kernels.c"))
    wrapped = _build(project, chain.format(kfcc=KFCC, **names), "kf", dist)

    assert not warnings_of(wrapped.stderr) and "warning" not in wrapped.stderr, wrapped.stderr
    assert wrapped.stderr == plain.stderr
    expected = subprocess.run([str(project / "plain" / "kfdemo")], capture_output=True,
                              text=True, check=True).stdout
    got = subprocess.run([str(project / "kf" / "kfdemo")], capture_output=True, text=True,
                         check=True).stdout
    assert got == expected
    # the daemon compiled kernels.c as often as in the plain build through the same chain, and
    # what it compiled was the rewrite: the wrapper's copy, with kernelfarer's code
    jobs = _compiled_by_daemon(log, "kernels.c")[middle:]
    assert middle > before and len(jobs) == middle - before
    assert all("kernelfarer-cc-" in line for line in jobs), jobs
    assert _has_kernels(project / "kf" / "kernels.o")
    assert not _has_kernels(project / "plain" / "kernels.o")
    rep = reports(tmp_path / "rep")
    kernels = next(r for f, r in rep.items() if f.endswith("kernels.c"))
    assert kernels["rewritten"] and kernels["launchers"] == ["distcc"]
    assert os.path.basename(kernels["compiler"]) == compiler
    # the dependency files name the user's sources, where the plain distcc build put them
    assert "kernels.c" in (project / "kernels.d").read_text()
    assert "kernelfarer-cc-" not in (project / "kernels.d").read_text()


@pytest.mark.skipif(ICECC is None, reason="icecc is not installed")
def test_icecc_chain_is_understood(tmp_path):
    """`kernelfarer-cc icecc clang-19`: icecc is a launcher, clang-19 the compiler (without a
    scheduler icecc compiles locally; what matters here is that the chain is parsed)."""
    src = tmp_path / "k.c"
    shutil.copy(PROJECT / "kernels.c", src)
    shutil.copy(PROJECT / "project.h", tmp_path / "project.h")
    done = subprocess.run([str(KFCC), "icecc", os.path.basename(CLANG), "-O2", "-c", "k.c",
                           "-o", "k.o"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env(KERNELFARER_REPORT_DIR=str(tmp_path / "rep"),
                                  ICECC_DEBUG="error"))
    assert done.returncode == 0, done.stderr
    assert not warnings_of(done.stderr)
    assert _has_kernels(tmp_path / "k.o")
    (report,) = reports(tmp_path / "rep").values()
    assert report["rewritten"] and report["launchers"] == ["icecc"]
