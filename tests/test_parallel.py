"""tests/parallel.py, which `make test` runs: every test once, in one of the workers; a failure
reported, with its worker's log, and the exit status; the counts summed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "parallel.py"

CONFTEST = f"""
import sys
sys.path.insert(0, {str(RUNNER.parent)!r})
from parallel import pytest_runtest_logfinish, pytest_runtestloop, pytest_sessionfinish  # noqa
"""

SUITE = """
import os
import pytest

def ran(name):
    with open(os.environ["RAN_LOG"], "a") as log:
        log.write(name + "\\n")

@pytest.fixture(scope="module")
def shared():
    return []

@pytest.mark.parametrize("x", range(7))
def test_many(x, shared):
    shared.append(x)
    ran(f"many{x}")
    assert x != FAIL_AT

def test_skipped():
    ran("skipped")
    pytest.skip("not here")

def test_one():
    ran("one")

@pytest.mark.parametrize("y", ["a", "b"])
def test_two(y):
    ran("two" + y)
"""


def _run(tmp_path: Path, fail_at: int) -> tuple[subprocess.CompletedProcess, list[str]]:
    suite = tmp_path / f"suite{fail_at}"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_suite.py").write_text(f"FAIL_AT = {fail_at}\n" + SUITE)
    log = suite / "ran.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELFARER_TEST_")}
    env["RAN_LOG"] = str(log)
    done = subprocess.run([sys.executable, str(RUNNER), "--jobs", "2", "-q", str(suite)],
                          capture_output=True, text=True, cwd=suite, env=env, timeout=300)
    return done, log.read_text().split()


def test_every_test_runs_once_and_the_counts_are_summed(tmp_path) -> None:
    done, ran = _run(tmp_path, fail_at=-1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(ran) == sorted([f"many{x}" for x in range(7)] + ["skipped", "one", "twoa",
                                                                    "twob"])
    assert done.stdout.splitlines()[-1].startswith("10 passed, 1 skipped in "), done.stdout


def test_a_failure_fails_the_run_with_its_log(tmp_path) -> None:
    done, ran = _run(tmp_path, fail_at=3)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED" in done.stdout and "test_many[3]" in done.stdout, done.stdout
    assert done.stdout.splitlines()[-1].startswith("1 failed, 9 passed, 1 skipped in ")
    assert len(ran) == 11 and len(set(ran)) == 11
