"""Run the test suite on every CPU: ``python tests/parallel.py [--jobs N] PYTEST-ARGS``.

Most of the suite's time is clang compiling generated C, one compile at a time: on a machine
with two cores one pytest process leaves one idle.  This starts N pytest processes (workers)
on the same arguments.  Each collects the whole suite and runs the groups of tests (a test
function with all its parameters) that it claims first: a claim is a file created with O_EXCL
in a directory the workers share, so every group runs once, in whichever worker is free (a
worker claims its next group as it starts the last test of the current one).  A group keeps its
tests together and in order; the session's build cache (conftest.BuildCache) is each worker's own.

Afterwards the runner checks that the workers collected the same tests and that every group was
claimed, prints the log of a worker that failed, and sums the workers' counts.  With one job
(or ``--jobs 1``) it is plain pytest.  Only the standard library and pytest: the suite's
dependencies are the product's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUEUE = "KERNELFARER_TEST_QUEUE"      # the shared directory; set in the workers only
WORKER = "KERNELFARER_TEST_WORKER"


# -- in each worker (the hooks are imported by conftest.py) ------------------------------------

def _groups(items) -> list[list]:
    """The collected tests as groups: one test function with all its parameters, in order."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(item.nodeid.split("[", 1)[0], []).append(item)
    return list(groups.values())


def _claim(queue: Path, groups: list[list], start: int) -> int | None:
    """The first group from `start` on that no worker has claimed, now this one's."""
    for index in range(start, len(groups)):
        try:
            fd = os.open(queue / f"{index}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.write(fd, os.environ.get(WORKER, "").encode())
        os.close(fd)
        return index
    return None


def pytest_runtestloop(session):
    """pytest's own loop (_pytest.main.pytest_runtestloop) over the groups this worker claims."""
    queue = os.environ.get(QUEUE)
    if not queue:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} errors during collection")
    if session.config.option.collectonly:
        return True
    queue_dir = Path(queue)
    groups = _groups(session.items)
    worker = os.environ.get(WORKER, "0")
    (queue_dir / f"collected-{worker}.json").write_text(
        json.dumps({"groups": len(groups), "tests": [item.nodeid for item in session.items]}))
    mine = _claim(queue_dir, groups, 0)
    while mine is not None:
        items = groups[mine]
        following = None
        for position, item in enumerate(items):
            if position + 1 < len(items):
                nextitem = items[position + 1]
            else:
                # the next item decides which fixtures end here (module and session scope)
                following = _claim(queue_dir, groups, mine + 1)
                nextitem = groups[following][0] if following is not None else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        mine = following
    return True


def pytest_runtest_logfinish(nodeid, location):
    """Progress for the runner: one line per test finished."""
    queue = os.environ.get(QUEUE)
    if queue:
        with open(Path(queue) / f"done-{os.environ.get(WORKER, '0')}", "a") as done:
            done.write(nodeid + "\n")


def pytest_sessionfinish(session, exitstatus):
    """The worker's counts (passed, failed, skipped, ...) for the runner to sum."""
    queue = os.environ.get(QUEUE)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if queue and reporter is not None:
        counts = {key: len(value) for key, value in reporter.stats.items()
                  if key and key != "warnings"}
        (Path(queue) / f"counts-{os.environ.get(WORKER, '0')}.json").write_text(
            json.dumps({"counts": counts, "status": int(exitstatus)}))


# -- the runner ----------------------------------------------------------------------------------

def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _done(queue: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in queue.glob("done-*"))


def _check(queue: Path, jobs: int) -> list[str]:
    """What went wrong in the sharing itself: workers that collected different suites, groups
    that nobody ran."""
    problems = []
    collected = [queue / f"collected-{w}.json" for w in range(jobs)]
    seen = [json.loads(p.read_text()) for p in collected if p.exists()]
    if len(seen) != jobs:
        return [f"{jobs - len(seen)} worker(s) stopped before running tests"]
    if any(s["tests"] != seen[0]["tests"] for s in seen):
        problems.append("the workers collected different tests")
    missing = [i for i in range(seen[0]["groups"]) if not (queue / f"{i}.claim").exists()]
    if missing:
        problems.append(f"{len(missing)} group(s) of tests were not run, the first #{missing[0]}")
    done = _done(queue)
    if not missing and done != len(seen[0]["tests"]):
        problems.append(f"{done} tests finished of the {len(seen[0]['tests'])} collected")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("KERNELFARER_TEST_JOBS",
                                                                       "0")) or _cpus(),
                        help="pytest processes (default: the CPUs this process may use)")
    options, pytest_args = parser.parse_known_args(argv)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    if options.jobs <= 1:
        return subprocess.call(command + pytest_args)

    def stopped(signum, frame):        # a CI timeout's SIGTERM stops the workers too
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stopped)
    queue = Path(tempfile.mkdtemp(prefix="kf-test-queue-"))
    start = time.monotonic()
    workers, logs = [], []
    for w in range(options.jobs):
        log = open(queue / f"log-{w}.txt", "w")
        env = {**os.environ, QUEUE: str(queue), WORKER: str(w)}
        workers.append(subprocess.Popen(command + ["--basetemp", str(queue / f"tmp-{w}"),
                                                   *pytest_args],
                                        stdout=log, stderr=subprocess.STDOUT, env=env))
        logs.append(log)
    print(f"{options.jobs} pytest workers (logs in {queue})", flush=True)
    try:
        last = start
        while any(w.poll() is None for w in workers):
            time.sleep(1)
            if time.monotonic() - last >= 60:
                last = time.monotonic()
                print(f"  {(last - start) / 60:4.1f} min: {_done(queue)} tests done", flush=True)
    except KeyboardInterrupt:
        # (SIGTERM: a worker started in the background ignores SIGINT)
        for w in workers:
            w.terminate()
        for w in workers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.kill()
        print(f"stopped; logs in {queue}", flush=True)
        return 130
    for log in logs:
        log.close()

    statuses = [w.returncode for w in workers]
    totals: dict[str, int] = {}
    for w in range(options.jobs):
        path = queue / f"counts-{w}.json"
        if path.exists():
            for key, count in json.loads(path.read_text())["counts"].items():
                # each worker deselects the same tests; the rest each counts its own
                totals[key] = count if key == "deselected" else totals.get(key, 0) + count
    problems = _check(queue, options.jobs)
    for w, status in enumerate(statuses):
        text = (queue / f"log-{w}.txt").read_text()
        if status not in (0, 5) or problems:
            print(f"\n===== worker {w} (exit {status}) =====\n{text}", end="")
        else:
            # its skip reasons and summary line, not its dots
            tail = text.split("short test summary info", 1)
            print(f"worker {w}: " + (tail[1].strip() if len(tail) > 1
                                     else text.strip().splitlines()[-1]))
    for problem in problems:
        print(f"error: {problem}")
    order = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "error")
    summary = ", ".join(f"{totals[k]} {k}" for k in (*order, *sorted(set(totals) - set(order)))
                        if totals.get(k))
    print(f"{summary or 'no tests ran'} in {time.monotonic() - start:.0f} s "
          f"({options.jobs} workers)")
    failed = problems or any(status not in (0, 5) for status in statuses)
    if not failed:
        import shutil
        shutil.rmtree(queue, ignore_errors=True)
    if failed:
        return 1
    return 5 if not totals.get("passed") and all(s == 5 for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
