"""`kernelfarer tune`: measures candidate blocks on this machine, stores a profile that rewrites
then use.  Tiny sizes and one round keep these runs to seconds (the timings mean nothing here; the
plumbing does)."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLES, native_target, run_cli
from kernelfarer import hostinfo, targets
from kernelfarer.plan import make_plan
from kernelfarer.targets import DType

GEMM = SAMPLES / "sgemm.c"


def _small_candidate() -> str:
    """Blocks every kernel of the native target accepts, unlike the model's."""
    target = targets.TARGETS[native_target()]
    plan = make_plan(target, DType.F32, caches=hostinfo.real_host().caches)
    mc = plan.mr * 2 if plan.mc != plan.mr * 2 else plan.mr * 3
    return f"{mc},{plan.kc // 2 or 1},{plan.nc}"


def test_tune_writes_a_profile_a_rewrite_uses(tmp_path) -> None:
    profile = tmp_path / "box.json"
    done = run_cli("tune", "--dtypes", "f32", "--sizes", "96,128", "--rounds", "1",
                   "--try", _small_candidate(), "-o", profile, "--no-progress",
                   env={"KERNELFARER_HOST": None})
    assert done.returncode == 0, done.stderr
    assert "chosen" in done.stdout and f"KERNELFARER_HOST={profile}" in done.stdout
    data = json.loads(profile.read_text())
    key = f"{native_target()}/f32"
    chosen = data["blocking"][key]
    assert set(chosen) == {"mc", "kc", "nc"}
    assert data["measured"][key]["sizes"] == [96, 128]
    assert data["flags"] and data["caches"]["l1d"]["size"] > 0
    # the profile is a host description: a rewrite under it uses the tuned blocks
    report = tmp_path / "r.json"
    done = run_cli("rewrite", GEMM, "-o", tmp_path / "out.c", "--report", report,
                   "--target", native_target(), env={"KERNELFARER_HOST": str(profile)})
    assert done.returncode == 0, done.stderr
    entry = json.loads(report.read_text())["nests"][0]
    assert entry["blocking"] == "mc={mc} kc={kc} nc={nc}".format(**chosen)
    assert entry["blocking_source"].startswith("tuned")


def test_profile_of_this_machine_is_used_by_default(tmp_path) -> None:
    """Without -o the profile goes to this machine's file in the profile directory, and plain
    rewrites (no KERNELFARER_HOST) pick it up; another machine's file there is not used."""
    env = {"KERNELFARER_HOST": None, "KERNELFARER_PROFILE_DIR": str(tmp_path)}
    done = run_cli("tune", "--dtypes", "f32", "--sizes", "64", "--rounds", "1",
                   "--try", _small_candidate(), "--no-progress", env=env)
    assert done.returncode == 0, done.stderr
    stored = list(tmp_path.glob("host-*.json"))
    assert [p.name for p in stored] == [f"host-{hostinfo.real_host().key()}.json"]
    report = tmp_path / "r.json"
    done = run_cli("rewrite", GEMM, "-o", tmp_path / "out.c", "--report", report,
                   "--target", native_target(), env=env)
    assert done.returncode == 0, done.stderr
    entry = json.loads(report.read_text())["nests"][0]
    assert entry["blocking_source"].startswith("tuned")
    # the same profile under another machine's name is ignored
    stored[0].rename(tmp_path / "host-0000000000000000.json")
    done = run_cli("rewrite", GEMM, "-o", tmp_path / "out.c", "--report", report,
                   "--target", native_target(), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["nests"][0]["blocking_source"] == "model"


def test_malformed_profile_is_ignored(tmp_path) -> None:
    env = {"KERNELFARER_HOST": None, "KERNELFARER_PROFILE_DIR": str(tmp_path)}
    (tmp_path / f"host-{hostinfo.real_host().key()}.json").write_text("{ truncated")
    report = tmp_path / "r.json"
    done = run_cli("rewrite", GEMM, "-o", tmp_path / "out.c", "--report", report, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["nests"][0]["blocking_source"] == "model"


@pytest.mark.parametrize("args, env, message", [
    (("--try", "5,7"), {}, "give MC,KC,NC"),
    (("--try", "13,64,100"), {}, "multiple of mr"),
    (("--dtypes", "f16"), {}, "unknown type"),
    ((), {"KERNELFARER_HOST": "zen4"}, "tune measures this machine"),
])
def test_tune_refuses_clearly(tmp_path, args, env, message) -> None:
    done = run_cli("tune", "--sizes", "32", "--rounds", "1", "-o", tmp_path / "p.json",
                   "--no-progress", *args, env={"KERNELFARER_HOST": None, **env})
    assert done.returncode == 1, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "p.json").exists()
