"""Planning for a described host (KERNELFARER_HOST: presets and host files), on any machine.

Planning and policy must not assume the machine the tests run on: every preset's plans are checked
here, and a rewrite under each preset compiles warning-free (execution stays with the real CPU:
conftest.host_runs).  Also: the warning flood of clang-19's -march=native on recent Intel CPUs,
dispatch that emits only what the file's ISA can reach, and one copy of the support code per
translation unit however many nests use it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import CLANG, POSITIVE, SAMPLES, compile_c, run_cli
from kernelfarer import hostinfo, targets
from kernelfarer.plan import KC_MAX, blocking_error, l1_kc, make_plan, stack_buffer_elems
from kernelfarer.targets import DType

PRESETS = sorted(hostinfo.PRESETS)
X86 = ("x86-avx512", "x86-avx2", "generic")
FLOATS = (DType.F32, DType.F64)
GEMM = SAMPLES / "sgemm.c"


# -- the presets and the model ------------------------------------------------------------------

@pytest.mark.parametrize("preset", PRESETS)
def test_auto_target_follows_the_described_host(preset) -> None:
    host = hostinfo.PRESETS[preset]
    want = "x86-avx512" if "avx512f" in host.flags else "x86-avx2"
    assert targets.best_for_host(host.flags, host.arch).name == want
    done = run_cli("targets", env={"KERNELFARER_HOST": preset})
    assert done.returncode == 0, done.stderr
    auto = [line.split()[0] for line in done.stdout.splitlines() if line.endswith("(auto)")]
    assert auto == [want]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("target", X86)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
def test_model_blocks_fit_every_preset(preset, target, dtype) -> None:
    """The analytical blocks of every x86 kernel on every preset: valid for the kernel, its A
    micro-panel in L1; arranged as Goto does, kc within KC_MAX and the A block in a quarter of L2;
    as AMD's AVX-512 cores run best ("a-in-l1"), an A block of two micro-panels; the B panel
    within L3, and a direct path whose copied B micro-panel fits the L1-sized stack buffer."""
    host = hostinfo.PRESETS[preset]
    plan = make_plan(targets.TARGETS[target], dtype, host=host)
    caches, size = host.caches, dtype.in_size
    assert plan.blocking_source == "model"
    assert blocking_error(plan.blocking, plan.shape) is None
    assert plan.mr * plan.kc * size <= caches.l1d.size
    if host.arrangement == "a-in-l1" and plan.shape.a_in_l1:
        longest = 2 * KC_MAX * plan.shape.kr
        assert plan.mc == 2 * plan.mr and plan.kc <= longest
        assert plan.mr * (plan.kc + 4) * size > caches.l1d.size or plan.kc == longest
    else:
        assert plan.kc <= KC_MAX
        assert plan.mc * plan.kc * size <= caches.l2.size // 4 or plan.mc == plan.mr
    assert plan.kc * plan.nc * size <= caches.l3.size
    assert plan.direct and plan.direct_kc == min(plan.kc, l1_kc(plan.shape, dtype, caches))
    assert plan.direct_kc * plan.nr <= stack_buffer_elems(dtype, caches)


def test_presets_differ_where_the_machines_do() -> None:
    """A larger L1 allows a longer k block, a larger L2 a taller A block (AVX-512 f64 kernel);
    Zen 4 holds two A micro-panels in L1 instead of an A block in L2."""
    plans = {p: make_plan(targets.TARGETS["x86-avx512"], DType.F64, host=hostinfo.PRESETS[p])
             for p in PRESETS}
    assert plans["sapphirerapids"].kc > plans["zen4"].kc > plans["zen3"].kc
    assert plans["sapphirerapids"].mc * plans["sapphirerapids"].kc > \
        plans["zen3"].mc * plans["zen3"].kc
    assert plans["zen4"].mc == 2 * plans["zen4"].mr
    assert [hostinfo.PRESETS[p].arrangement for p in ("zen3", "zen4", "sapphirerapids")] == \
        ["goto", "a-in-l1", "goto"]


def test_the_arrangement_follows_the_cpu_and_host_files(tmp_path) -> None:
    """AMD cores with AVX-512 (clzero is AMD's) hold A micro-panels in L1; Intel's and AMD's AVX2
    cores, and other machines, arrange the blocks as Goto does; a host file may say either, and
    nothing else."""
    assert hostinfo._arrangement("x86_64", frozenset({"avx512f", "avx2", "clzero"})) == "a-in-l1"
    assert hostinfo._arrangement("x86_64", frozenset({"avx512f", "avx2"})) == "goto"
    assert hostinfo._arrangement("x86_64", frozenset({"avx2", "clzero"})) == "goto"
    assert hostinfo._arrangement("aarch64", frozenset({"asimd"})) == "goto"
    good = tmp_path / "host.json"
    good.write_text('{"base": "sapphirerapids", "arrangement": "a-in-l1"}')
    host = hostinfo.load_host_file(good)
    assert host.arrangement == "a-in-l1"
    assert make_plan(targets.TARGETS["x86-avx512"], DType.F32, host=host).mc == 24
    bad = tmp_path / "bad.json"
    bad.write_text('{"base": "zen4", "arrangement": "sideways"}')
    with pytest.raises(hostinfo.HostError, match="arrangement"):
        hostinfo.load_host_file(bad)


@pytest.mark.parametrize("preset", PRESETS)
def test_rewrite_under_each_preset(tmp_path, preset) -> None:
    """A rewrite planned for each preset: the report's blocks are the preset's, the output compiles
    with -Wall -Wextra -Werror on this machine (whatever CPU it has)."""
    out, report = tmp_path / "out.c", tmp_path / "r.json"
    done = run_cli("rewrite", GEMM, "-o", out, "--report", report,
                   env={"KERNELFARER_HOST": preset})
    assert done.returncode == 0, done.stderr
    entry = json.loads(report.read_text())["nests"][0]
    host = hostinfo.PRESETS[preset]
    target = targets.best_for_host(host.flags, host.arch)
    plan = make_plan(target, DType.F32, host=host)
    assert entry["target"] == target.name
    assert entry["blocking"] == f"mc={plan.mc} kc={plan.kc} nc={plan.nc}"
    compile_c(out, tmp_path / "out.o", "-O2", "-c", "-Wall", "-Wextra", "-Werror")


def test_host_file_with_base_and_tuned_blocks(tmp_path) -> None:
    """A host file takes what it does not say from its base preset; its blocks are used for the
    kernels they name (and the report says so), the model's for the others."""
    path = tmp_path / "box.json"
    path.write_text(json.dumps({
        "name": "box", "base": "zen4", "caches": {"l2": "2M/16"},
        "blocking": {"x86-avx512/f32": {"mc": 96, "kc": 256, "nc": 1024}}}))
    host = hostinfo.load_host_file(path)
    assert host.flags == hostinfo.PRESETS["zen4"].flags
    assert host.caches.l2.size == 2 * 1024 * 1024 and host.caches.l1d.size == 32 * 1024
    f32 = make_plan(targets.TARGETS["x86-avx512"], DType.F32, host=host)
    f64 = make_plan(targets.TARGETS["x86-avx512"], DType.F64, host=host)
    assert (f32.mc, f32.kc, f32.nc) == (96, 256, 1024) and f32.blocking_source.startswith("tuned")
    assert f64.blocking_source == "model"
    out, report = tmp_path / "out.c", tmp_path / "r.json"
    done = run_cli("rewrite", GEMM, "-o", out, "--report", report, "--remarks",
                   env={"KERNELFARER_HOST": str(path)})
    assert done.returncode == 0, done.stderr
    entry = json.loads(report.read_text())["nests"][0]
    assert entry["blocking"] == "mc=96 kc=256 nc=1024"
    assert entry["blocking_source"] == f"tuned (host file {path})"


def test_tuned_blocks_that_do_not_fit_the_kernel_are_ignored(tmp_path) -> None:
    path = tmp_path / "stale.json"
    path.write_text(json.dumps({"base": "zen4", "blocking": {
        "x86-avx512/f32": {"mc": 100, "kc": 256, "nc": 1000}}}))     # not multiples of 12, 32
    plan = make_plan(targets.TARGETS["x86-avx512"], DType.F32, host=hostinfo.load_host_file(path))
    assert plan.blocking_source == "model"


@pytest.mark.parametrize("value, message", [
    ("no-such-host", "no such preset"),
    ("{dir}/broken.json", "cannot read a host description"),
    ("{dir}/badbase.json", "unknown base preset"),
])
def test_bad_host_descriptions_are_clear_errors(tmp_path, value, message) -> None:
    (tmp_path / "broken.json").write_text("{ not json")
    (tmp_path / "badbase.json").write_text(json.dumps({"base": "pentium"}))
    done = run_cli("rewrite", GEMM, "-o", tmp_path / "out.c",
                   env={"KERNELFARER_HOST": value.format(dir=tmp_path)})
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.c").exists()


def test_real_host_is_read_from_this_machine(monkeypatch) -> None:
    """KERNELFARER_HOST changes what is planned for, never what this machine is."""
    monkeypatch.setenv("KERNELFARER_HOST", "zen3")
    hostinfo.reset()
    try:
        assert hostinfo.current_host().name == "zen3"
        assert hostinfo.real_host().flags == hostinfo.real_cpu_flags()
        with hostinfo.planning_for(hostinfo.this_machine()):
            assert hostinfo.current_host().flags == hostinfo.real_cpu_flags()
    finally:
        monkeypatch.delenv("KERNELFARER_HOST")
        hostinfo.reset()


# -- clang-19's "invalid feature combination" flood -----------------------------------------------

# What clang-19 -march=native gives on recent Intel CPUs: AVX-512 and AVX10.1/256 (and it warns
# once for the command line); every function with a target attribute then warned again.
AVX10_256 = ("-march=sapphirerapids", "-mavx10.1-256")


def _warnings(path, *flags) -> list[str]:
    done = subprocess.run([CLANG, "-O2", *flags, "-c", str(path), "-o", "/dev/null"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if "warning:" in line]


@pytest.mark.parametrize("target", ["x86-auto", "x86-avx512", "x86-avx2"])
def test_no_warning_flood_under_avx10_256(tmp_path, target) -> None:
    out = tmp_path / "fast.c"
    done = run_cli("rewrite", GEMM, "-o", out, "--target", target)
    assert done.returncode == 0, done.stderr
    before = _warnings(GEMM, *AVX10_256)
    assert len(before) == 1 and "invalid feature combination" in before[0]   # clang's own
    assert _warnings(out, *AVX10_256) == before
    assert _warnings(out) == []


# -- x86-auto: only the paths the file's ISA can reach ----------------------------------------------

def _symbols(obj) -> str:
    return subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("flags, present, absent", [
    ((), ("x86_avx512", "x86_avx2"), ()),
    (("-mavx2", "-mfma"), ("x86_avx512", "x86_avx2"), ()),
    (("-mavx512f", "-mavx2", "-mfma"), ("x86_avx512",), ("x86_avx2",)),
    (("-march=x86-64-v4",), ("x86_avx512",), ("x86_avx2",)),
], ids=["baseline", "avx2", "avx512", "x86-64-v4"])
def test_dispatch_emits_only_reachable_paths(tmp_path, flags, present, absent) -> None:
    """A file compiled for AVX-512 only runs on CPUs that have it: the AVX2 path is not even
    compiled.  Without such flags every path is there."""
    out = tmp_path / "fast.c"
    done = run_cli("rewrite", POSITIVE / "loop_orders_f32.c", "-o", out, "--target", "x86-auto")
    assert done.returncode == 0, done.stderr
    obj = tmp_path / "fast.o"
    compile_c(out, obj, "-O1", "-c", "-Wall", "-Wextra", "-Werror", *flags)
    names = _symbols(obj)
    for tag in present:
        assert re.search(rf"kf_sgemm_{tag}_\d+x\d+", names), tag
    for tag in absent:
        assert not re.search(rf"kf_sgemm_{tag}_\d+x\d+", names), tag



INT8_GEMM = """
#include <stdint.h>
void gemm_s8(int m, int n, int k, const int8_t *a, const int8_t *b, int32_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""


def test_amx_file_keeps_the_paths_below_it(tmp_path) -> None:
    """A file built for AMX (-march=sapphirerapids) still runs on a process Linux refuses the
    tile state: its int8 GEMM keeps the AVX512-VNNI path below AMX, and AMX's run-time check asks
    for the tiles (a refusal then takes VNNI, not the user's loops)."""
    src, out, obj = tmp_path / "s8.c", tmp_path / "s8_fast.c", tmp_path / "s8.o"
    src.write_text(INT8_GEMM)
    done = run_cli("rewrite", src, "-o", out, "--target", "x86-auto")
    assert done.returncode == 0, done.stderr
    check = re.search(r"int kf_cpu_x86_amx\(void\)\n\{\n\s*return ([^\n]*);", out.read_text())
    assert check and check[1].endswith("&& kf_cpu_x86_amx_os()"), check
    assert "ARCH_REQ_XCOMP_PERM" in out.read_text()
    compile_c(out, obj, "-O1", "-c", "-Wall", "-Wextra", "-Werror", "-march=sapphirerapids")
    names = _symbols(obj)
    for tag in ("x86_amx", "x86_avx512_vnni"):
        assert re.search(rf"kf_i8i32gemm_{tag}_\d+x\d+", names), tag

# -- one copy of the support code per translation unit ---------------------------------------------

MANY = """
void gemm{i}(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}}
"""


@pytest.mark.parametrize("target", ["x86-auto", "generic"])
def test_one_copy_of_each_kernel_per_file(tmp_path, target) -> None:
    """Three nests or thirty: the same kernels, pack routines and drivers, each defined once; the
    call sites only grow the user's own functions."""
    objects = {}
    for count in (3, 30):
        src = tmp_path / f"many{count}.c"
        src.write_text("".join(MANY.format(i=i, t=("float", "double")[i % 2])
                               for i in range(count)))
        out = tmp_path / f"many{count}_fast.c"
        done = run_cli("rewrite", src, "-o", out, "--target", target)
        assert done.returncode == 0, done.stderr
        text = subprocess.run([CLANG, "-E", "-P", str(out)], capture_output=True, text=True,
                              check=True).stdout
        definitions = re.findall(r"^static[^;{]*\b(kf_\w+)\(", text, re.M)
        assert len(definitions) == len(set(definitions)), "a support function defined twice"
        obj = tmp_path / f"many{count}.o"
        compile_c(out, obj, "-O0", "-c")       # no inlining: every function keeps its symbol
        objects[count] = {line.split()[-1] for line in _symbols(obj).splitlines()
                          if " kf_" in line}
    assert objects[3] == objects[30]
