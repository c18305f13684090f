"""kernelfarer-cc, the compiler wrapper: line mapping, fallbacks, pass-through, determinism, and
end-to-end builds of samples/project with Make and CMake.

Every wrapper run goes through the console script installed next to this Python, with a clean
environment (no KERNELFARER_* variables), and checks that the wrapper wrote nothing on stdout
where the compiler itself writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelfarer.linemap import clean_lines, compile_text

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "samples" / "project"
KFCC = Path(sys.executable).parent / "kernelfarer-cc"
CLANG = shutil.which("clang-19") or shutil.which("clang")
GCC = shutil.which("gcc-12") or shutil.which("gcc")
COMPILERS = ["clang", pytest.param("gcc", marks=pytest.mark.skipif(GCC is None, reason="no gcc"))]

MM_H = """\
#define N 37
static const char *header_name = __FILE__;
"""

MM_C = """\
#include <stdio.h>
#include "mm.h"

static float a[N][N], b[N][N], c[N][N];

static void mm(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++)
                c[i][j] += a[i][k] * b[k][j];
}

int main(void)
{
    int unused;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            a[i][j] = (float)((i + j) % 5);
            b[i][j] = (float)((i * j) % 3);
        }
    mm();
    double s = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            s += c[i][j] * (i + 1) + j;
    printf("%s %s %d %.1f\\n", __FILE__, header_name, __LINE__, s);
    return 0;
}
"""


# Loops nested three deep (but no GEMM): the wrapper's prefilter lets such a file through to the
# preprocessor and the parser, where the fallbacks under test happen.
DEEP_LOOPS = ("int f(int n) { int s = 0; for (int i = 0; i < n; i++) for (int j = 0; j < i; j++) "
              "for (int k = 0; k < j; k++) s += i ^ j ^ k; return s; }\n")


@pytest.fixture(scope="module", autouse=True)
def _wrapper_installed():
    if not KFCC.exists():
        pytest.fail(f"{KFCC} is missing: run `pip install -e .` so the console script exists")
    if CLANG is None:
        pytest.skip("clang-19 is not installed")


def compiler(name: str) -> str:
    return CLANG if name == "clang" else GCC


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELFARER_", "CCACHE_"))}
    clean.update(extra)
    return clean


def run(cmd, cwd, *, environ=None, stdin=None, quiet_stdout=True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=environ or env(), input=stdin,
                          capture_output=True, text=True, timeout=300)
    if quiet_stdout:
        assert done.stdout == "", f"something wrote on stdout: {done.stdout!r}"
    return done


def kfcc(*args, cwd, **kw) -> subprocess.CompletedProcess:
    return run([KFCC, *args], cwd, **kw)


def warnings_of(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "kernelfarer-cc: warning:" in ln]


def reports(directory: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["file"]: json.loads(p.read_text())
            for p in directory.glob("*.json")}


@pytest.fixture
def mm(tmp_path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mm.c").write_text(MM_C)
    (tmp_path / "src" / "mm.h").write_text(MM_H)
    return tmp_path


# -- the #line mapping, checked with the real preprocessor -----------------------------------------

def _presumed_lines(text: str, tmp_path: Path) -> dict[str, int]:
    """name -> the __LINE__ the preprocessor gives `int name = __LINE__;` in `text`."""
    src = tmp_path / "t.c"
    src.write_text(text)
    out = run([CLANG, "-E", "-P", src], tmp_path, quiet_stdout=False).stdout
    return {m[0]: int(m[1]) for m in re.findall(r"int (\w+) = (\d+);", out)}


def _edit_around(original: str, first: str, last: str, before: str, after: str):
    start = original.index(first)
    end = original.index(last) + len(last)
    return (start, end, before + original[start:end] + after)


def test_unchanged_lines_keep_their_numbers(tmp_path):
    original = ("int l1 = __LINE__;\n"
                "int l2 = __LINE__;\n"
                "int l3 = __LINE__;\n"
                "void f(void) {\n"
                "    for (;;) { int l5 = __LINE__;\n"
                "        int l6 = __LINE__; } /* a comment that\n"
                "       spans lines */ int l7 = __LINE__;\n"   # no directive can go here
                "    int l8 = __LINE__;\n"
                "}\n"
                "int l10 = __LINE__;\n")
    support = "int s1 = __LINE__;\nint s2 = __LINE__;\n\n"    # inserted before the function
    insert_at = original.index("void f")
    nest = _edit_around(original, "for (;;)", "int l6 = __LINE__; }",
                        "{ /* generated */\n    int g1 = __LINE__;\n    if (g1) {\n        ", "\n    }\n}")
    text = compile_text(original, [(insert_at, insert_at, support), nest], "user/t.c")
    lines = _presumed_lines(text, tmp_path)
    expected = {f"l{n}": n for n in (1, 2, 3, 5, 6, 8, 10)}
    assert {k: lines[k] for k in expected} == expected
    assert text.startswith('#line 1 "user/t.c"\n')
    # support code is numbered apart; a call site's generated lines are the nest's first line
    assert (lines["s1"], lines["s2"], lines["g1"]) == (1, 2, 5)
    assert '#line 1 "<kernelfarer>"\nint s1' in text


def test_user_line_directives_are_followed(tmp_path):
    original = ('#line 100 "grammar.y"\n'
                "int a100 = __LINE__;\n"
                "void f(void) { for (;;) {} }\n"
                "int a102 = __LINE__;\n")
    start = original.index("for")
    end = original.index("{} }") + 2
    edit = (start, end, "{\n  if (1) {\n    " + original[start:end] + "\n  }\n}")
    lines = _presumed_lines(compile_text(original, [edit], "t.c"), tmp_path)
    assert lines == {"a100": 100, "a102": 102}


def test_directives_never_land_in_comments_or_continued_lines():
    original = "int x; /* one\ntwo */\n#define M \\\n  1\nint y;\n"
    assert clean_lines(original)[1:] == [True, False, True, False, True, True]
    text = compile_text(original, [(0, 0, "int z;\n")], "t.c")
    assert text == '#line 1 "t.c"\n#line 1 "<kernelfarer>"\nint z;\n#line 1 "t.c"\n' + original


def test_file_names_are_escaped():
    assert compile_text("int x;\n", [], 'a "b"\\c.c').startswith('#line 1 "a \\"b\\"\\\\c.c"\n')


# -- one file through the wrapper ------------------------------------------------------------------

@pytest.mark.parametrize("cc", COMPILERS)
def test_diagnostics_lines_and_names_match_the_bare_compiler(mm, cc):
    bare = run([compiler(cc), "-Wall", "-O2", "-o", "prog0", "src/mm.c"], mm)
    wrapped = kfcc(compiler(cc), "-Wall", "-O2", "-o", "prog", "src/mm.c", cwd=mm,
                   environ=env(KERNELFARER_REPORT_DIR=str(mm / "rep")))
    assert wrapped.returncode == bare.returncode == 0
    assert "src/mm.c:16:9: warning: unused variable" in bare.stderr
    assert wrapped.stderr == bare.stderr          # same diagnostics, same file:line:col
    [report] = reports(mm / "rep").values()
    assert report["rewritten"] and report["nests"][0]["replaced"] and report["nests"][0]["line"] == 8
    out = run([mm / "prog"], mm, quiet_stdout=False).stdout
    assert out == run([mm / "prog0"], mm, quiet_stdout=False).stdout
    assert out.startswith("src/mm.c src/mm.h 27 ")   # __FILE__, header __FILE__, __LINE__ after it


@pytest.mark.parametrize("cc", COMPILERS)
def test_sources_in_the_working_directory(mm, cc):
    """Quoted includes of a source given without a directory: each compiler spells the header's
    __FILE__ its own way ("./mm.h" for clang, "mm.h" for gcc), and the wrapper keeps it."""
    src = mm / "src"
    run([compiler(cc), "-O2", "-o", "prog0", "mm.c"], src)
    assert kfcc(compiler(cc), "-O2", "-o", "prog", "mm.c", cwd=src).returncode == 0
    out = run([src / "prog"], src, quiet_stdout=False).stdout
    assert out == run([src / "prog0"], src, quiet_stdout=False).stdout
    assert out.startswith("mm.c ") and b"kf_sgemm" in (src / "prog").read_bytes()


def _deps(path: Path) -> list[str]:
    return path.read_text().replace("\\\n", " ").split()


@pytest.mark.parametrize("cc", COMPILERS)
def test_dependency_files_name_the_users_files(mm, cc):
    (mm / "obj").mkdir()
    flags = ["-O2", "-MMD", "-MP", "-c", "src/mm.c", "-o", "obj/mm.o"]
    run([compiler(cc), *flags], mm)
    bare = _deps(mm / "obj" / "mm.d")
    assert kfcc(compiler(cc), *flags, cwd=mm).returncode == 0
    assert _deps(mm / "obj" / "mm.d") == bare == ["obj/mm.o:", "src/mm.c", "src/mm.h",
                                                   "src/mm.h:"]
    # CMake's spelling, and system headers (-MD): the user's target and source come first
    flags = ["-O2", "-MD", "-MT", "obj/x.o", "-MF", "obj/x.o.d", "-o", "obj/x.o", "-c", "src/mm.c"]
    assert kfcc(compiler(cc), *flags, cwd=mm).returncode == 0
    deps = _deps(mm / "obj" / "x.o.d")
    assert deps[:2] == ["obj/x.o:", "src/mm.c"] and "src/mm.h" in deps
    assert "kernelfarer-cc" not in (mm / "obj" / "x.o.d").read_text()


def test_dependency_file_without_output_name(mm):
    assert kfcc(CLANG, "-O2", "-MMD", "-c", "src/mm.c", cwd=mm).returncode == 0
    assert _deps(mm / "mm.d") == ["mm.o:", "src/mm.c", "src/mm.h"]
    assert (mm / "mm.o").exists()


@pytest.mark.parametrize("cc", COMPILERS)
def test_objects_are_deterministic(mm, cc):
    objects = []
    for k in (1, 2):      # a different TMPDIR and profile (cache) each time: no temporary
        (mm / f"tmp{k}").mkdir()        # name or cache path may reach the object
        done = kfcc(compiler(cc), "-g", "-O2", "-c", "src/mm.c", "-o", f"mm{k}.o", cwd=mm,
                    environ=env(TMPDIR=str(mm / f"tmp{k}"),
                                KERNELFARER_PROFILE_DIR=str(mm / f"profile{k}")))
        assert done.returncode == 0 and done.stderr == ""
        objects.append((mm / f"mm{k}.o").read_bytes())
    assert objects[0] == objects[1]
    assert b"kf_sgemm" in objects[0] and b"src/mm.c" in objects[0]
    assert b"kernelfarer-cc" not in objects[0] and b"tmp1" not in objects[0]
    assert b"profile1" not in objects[0]
    assert not any((mm / "tmp1").rglob("*.c")), "temporary files left behind"


def test_a_function_the_parser_cannot_read_is_left_out_alone(tmp_path):
    """gnu_ext.c: GNU C that parses (statement expressions, case ranges, asm, offsetof) beside a
    function the parser cannot read (a local label): that function alone is left out, with its
    line and column in the report, and the file's GEMM is still replaced, without a warning."""
    for name in ("gnu_ext.c", "project.h"):
        shutil.copy(PROJECT / name, tmp_path)
    done = kfcc("-O2", "-c", "gnu_ext.c", "-o", "kf.o", cwd=tmp_path,
                environ=env(KERNELFARER_REPORT_DIR=str(tmp_path / "rep")))
    assert done.returncode == 0 and done.stderr == ""
    assert b"kf_sgemm" in (tmp_path / "kf.o").read_bytes()
    [report] = reports(tmp_path / "rep").values()
    [left_out] = [n for n in report["nests"] if n["kind"] == "function"]
    line = _line_of(PROJECT / "gnu_ext.c", "FIND(x, count, IS_NEGATIVE")
    assert (left_out["line"], left_out["replaced"]) == (line, False)
    assert left_out["reason"].startswith("function 'first_negative' not considered")
    assert [n["replaced"] for n in report["nests"] if n["kind"] == "gemm"] == [True]


def _line_of(path: Path, text: str) -> int:
    return next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def test_a_file_that_falls_back_says_where_in_one_line(tmp_path):
    (tmp_path / "p.c").write_text("#ifdef __KERNELFARER__\n#include \"only-when-rewriting.h\"\n"
                                  "#endif\n" + DEEP_LOOPS)
    run([CLANG, "-O2", "-c", "p.c", "-o", "bare.o"], tmp_path)
    done = kfcc("-O2", "-c", "p.c", "-o", "kf.o", cwd=tmp_path)
    assert done.returncode == 0
    [line] = done.stderr.splitlines()
    assert re.fullmatch(r"p\.c:2:10: kernelfarer-cc: warning: does not preprocess: "
                        r"'only-when-rewriting\.h' file not found; compiled unchanged", line), line
    assert (tmp_path / "kf.o").read_bytes() == (tmp_path / "bare.o").read_bytes()


@pytest.mark.parametrize("setting, why", [
    ({"KERNELFARER_TIMEOUT": "0.05"}, "the rewrite took longer than 0.05 s"),
    ({"KERNELFARER_TARGET": "no-such-target"}, "unknown target 'no-such-target'"),
])
def test_internal_failures_compile_the_original(mm, setting, why):
    run([CLANG, "-O2", "-c", "src/mm.c", "-o", "bare.o"], mm)
    done = kfcc("-O2", "-c", "src/mm.c", "-o", "kf.o", cwd=mm, environ=env(**setting))
    assert done.returncode == 0
    [line] = done.stderr.splitlines()
    assert line.startswith(f"src/mm.c: kernelfarer-cc: warning: {why}")
    assert line.endswith("; compiled unchanged")
    assert (mm / "kf.o").read_bytes() == (mm / "bare.o").read_bytes()


def test_the_compilers_exit_code_wins(tmp_path):
    (tmp_path / "broken.c").write_text("int f(int n) {\n    int s = 0;\n"
                                       "    for (int i = 0; i < n; i++) s += missing[i];\n"
                                       "    return s;\n}\n")
    bare = run([CLANG, "-c", "broken.c", "-o", "b.o"], tmp_path)
    done = kfcc("-c", "broken.c", "-o", "b.o", cwd=tmp_path)
    assert done.returncode == bare.returncode == 1
    assert "broken.c:3:38: error: use of undeclared identifier 'missing'" in bare.stderr
    assert done.stderr == bare.stderr


def test_a_rewritten_file_that_does_not_compile_falls_back(mm):
    # a "compiler" that refuses kernelfarer-cc's temporary files and compiles everything else
    fake = mm / "pickycc"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *kernelfarer-cc*) echo "picky: no" >&2; exit 1;; esac\n'
                    f'exec {CLANG} "$@"\n')
    fake.chmod(0o755)
    run([CLANG, "-O2", "-c", "src/mm.c", "-o", "bare.o"], mm)
    done = kfcc(fake, "-O2", "-c", "src/mm.c", "-o", "kf.o", cwd=mm)
    assert done.returncode == 0
    assert warnings_of(done.stderr) == done.stderr.splitlines()
    [line] = warnings_of(done.stderr)
    assert "the rewritten file did not compile (picky: no)" in line
    assert (mm / "kf.o").read_bytes() == (mm / "bare.o").read_bytes()


def test_several_sources_in_one_command(mm):
    """Each C source is rewritten or falls back on its own; objects land where they would."""
    (mm / "late.c").write_text("#ifdef __KERNELFARER__\n#error not when rewriting\n#endif\n"
                               + DEEP_LOOPS)
    run([CLANG, "-O2", "-c", "late.c", "-o", "bare.o"], mm)
    done = kfcc("-O2", "-c", "src/mm.c", "late.c", cwd=mm)
    assert done.returncode == 0
    [line] = done.stderr.splitlines()
    assert line.startswith("late.c:2:2: kernelfarer-cc: warning: does not preprocess")
    assert b"kf_sgemm" in (mm / "mm.o").read_bytes()
    assert (mm / "late.o").read_bytes() == (mm / "bare.o").read_bytes()


def test_assembly_output_when_asked(mm):
    done = kfcc("-O2", "-S", "src/mm.c", "-o", "mm.s", cwd=mm, environ=env(KERNELFARER_ASM="1"))
    assert done.returncode == 0 and done.stderr == ""
    assembly = (mm / "mm.s").read_text()
    assert "kf_sgemm" in assembly and '"src/mm.c"' in assembly and "kernelfarer-cc-" not in assembly


@pytest.mark.parametrize("args, output", [
    (["--version"], None),
    (["-E", "src/mm.c"], None),
    (["-S", "-O2", "src/mm.c", "-o", "{out}"], "{out}"),
    (["-x", "c++", "-c", "src/mm.c", "-o", "{out}"], "{out}"),
    (["-Isrc", "-x", "c", "-c", "-", "-o", "{out}"], "{out}"),
    (["-fsyntax-only", "src/mm.c"], None),
])
def test_pass_through_is_untouched(mm, args, output):
    results = []
    for name in ("bare", "kf"):
        argv = [a.replace("{out}", name) for a in args]
        cmd = [CLANG, *argv] if name == "bare" else [KFCC, CLANG, *argv]
        done = run(cmd, mm, stdin=MM_C, quiet_stdout=False,
                   environ=env(KERNELFARER_REPORT_DIR=str(mm / "rep")))
        file = (mm / output.replace("{out}", name)).read_bytes() if output else None
        results.append((done.returncode, done.stdout, done.stderr, file))
    assert results[0] == results[1]
    assert not (mm / "rep").exists()


def test_disabled(mm):
    run([CLANG, "-O2", "-c", "src/mm.c", "-o", "bare.o"], mm)
    done = kfcc("-O2", "-c", "src/mm.c", "-o", "kf.o", cwd=mm,
                environ=env(KERNELFARER_DISABLE="1", KERNELFARER_REMARKS="1"))
    assert done.returncode == 0 and done.stderr == ""
    assert (mm / "kf.o").read_bytes() == (mm / "bare.o").read_bytes()


def test_never_finds_itself_through_path(tmp_path):
    """clang-19 -> kernelfarer-cc first on PATH, then a ccache masquerade directory: the wrapper
    must skip both and run the real compiler (without the skip, ccache would call it back)."""
    shutil.copy(PROJECT / "util.c", tmp_path)
    shutil.copy(PROJECT / "project.h", tmp_path)
    name = os.path.basename(CLANG)
    ours, theirs = tmp_path / "kf-masq", tmp_path / "ccache-masq"
    ours.mkdir()
    theirs.mkdir()
    (ours / name).symlink_to(KFCC)
    ccache = shutil.which("ccache")
    (theirs / name).symlink_to(ccache or KFCC)
    path = os.pathsep.join([str(ours), str(theirs), os.path.dirname(CLANG), os.environ["PATH"]])
    environ = env(PATH=path, CCACHE_DIR=str(tmp_path / "cache"))
    done = run([ours / name, "-O2", "-c", "util.c"], tmp_path, environ=environ)
    assert done.returncode == 0 and done.stderr == ""
    assert (tmp_path / "util.o").exists()
    # and when the guard is set, the wrapper only runs the compiler
    done = run([KFCC, "-c", "util.c", "-o", "g.o"], tmp_path,
               environ=env(KERNELFARER_CC_ACTIVE="1", KERNELFARER_REPORT_DIR=str(tmp_path / "r")))
    assert done.returncode == 0 and not (tmp_path / "r").exists()


def test_choosing_the_compiler(tmp_path):
    def macros(*args, **settings):
        done = run([KFCC, *args, "-dM", "-E", "-x", "c", "/dev/null"], tmp_path,
                   environ=env(**settings), quiet_stdout=False)
        assert done.returncode == 0, done.stderr
        return done.stdout
    assert "__clang__" in macros()                                  # default: clang-19
    assert "EXTRA_FROM_ENV" in macros(KERNELFARER_CC=f"{CLANG} -DEXTRA_FROM_ENV=1")
    if GCC:
        assert "__clang__" not in macros(KERNELFARER_CC=GCC)
        assert "__clang__" not in macros(os.path.basename(GCC))    # launcher form
    done = run([KFCC, "-c", "x.c"], tmp_path, environ=env(KERNELFARER_CC="no-such-cc-here"))
    assert done.returncode == 127 and "cannot find the compiler 'no-such-cc-here'" in done.stderr


def test_response_files_and_remarks(mm):
    (mm / "args.rsp").write_text("-O2 -c src/mm.c -o mm.o\n")
    done = kfcc(CLANG, "@args.rsp", cwd=mm,
                environ=env(KERNELFARER_REMARKS="1", KERNELFARER_REPORT_DIR=str(mm / "rep")))
    assert done.returncode == 0
    assert re.search(r"^src/mm\.c:8:5: remark: replaced float GEMM .* with kernel kf_sgemm_",
                     done.stderr, re.M)
    assert "src/mm.c:17:5: remark: not replaced:" in done.stderr
    assert reports(mm / "rep")["src/mm.c"]["rewritten"]
    assert b"kf_sgemm" in (mm / "mm.o").read_bytes()


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_composes_with_ccache(mm):
    # the compiler is named, not given as a path: ccache would take a path for a second input
    path = os.pathsep.join([os.path.dirname(CLANG), os.environ["PATH"]])
    environ = env(CCACHE_DIR=str(mm / "cache"), CCACHE_NOHASHDIR="1", PATH=path)
    objects = []
    for k in (1, 2):
        done = run(["ccache", KFCC, os.path.basename(CLANG), "-O2", "-c", "src/mm.c", "-o",
                    f"c{k}.o"], mm, environ=environ)
        assert done.returncode == 0 and done.stderr == ""
        objects.append((mm / f"c{k}.o").read_bytes())
    assert kfcc(CLANG, "-O2", "-c", "src/mm.c", "-o", "direct.o", cwd=mm).returncode == 0
    assert objects[0] == objects[1] == (mm / "direct.o").read_bytes()
    assert b"kf_sgemm" in objects[0]
    stats = run(["ccache", "--print-stats"], mm, environ=environ, quiet_stdout=False).stdout
    counts = dict(line.split("\t") for line in stats.splitlines() if "\t" in line)
    assert int(counts["direct_cache_hit"]) + int(counts["preprocessed_cache_hit"]) == 1


# -- end to end: samples/project with Make and CMake ----------------------------------------------

@pytest.fixture(scope="module")
def plain_output(tmp_path_factory) -> str:
    """kfdemo built without kernelfarer: what every wrapped build must print."""
    work = tmp_path_factory.mktemp("plain")
    sources = [str(PROJECT / f) for f in ("main.c", "kernels.c", "util.c", "gnu_ext.c")]
    run([CLANG, "-O2", *sources, "-o", "kfdemo"], work)
    return run([work / "kfdemo"], work, quiet_stdout=False).stdout


def _check_reports(directory: Path, prefix: str = "") -> None:
    got = {os.path.basename(k): v for k, v in reports(directory).items()}
    assert set(got) == {"main.c", "kernels.c", "util.c", "gnu_ext.c"}
    assert got["kernels.c"]["rewritten"]
    assert [n["replaced"] for n in got["kernels.c"]["nests"]] == [True, True, True]
    assert not got["main.c"]["rewritten"] and not any(n["replaced"] for n in got["main.c"]["nests"])
    assert not got["util.c"]["rewritten"] and got["util.c"]["nests"] == []
    assert got["gnu_ext.c"]["rewritten"] and not got["gnu_ext.c"]["fallback"]
    assert [n["replaced"] for n in got["gnu_ext.c"]["nests"] if n["kind"] != "loop-nest"] == \
        [False, True]         # first_negative() left out, the A * B^T nest replaced


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_builds_the_sample_project(tmp_path, plain_output):
    work = tmp_path / "project"
    shutil.copytree(PROJECT, work, ignore=shutil.ignore_patterns("build*"))
    make = ["make", "-j2", f"CC={KFCC}"]
    environ = env(KERNELFARER_REPORT_DIR=str(tmp_path / "rep"))
    done = run(make, work, environ=environ, quiet_stdout=False)
    assert done.returncode == 0, done.stderr
    assert warnings_of(done.stderr) == []
    assert run([work / "build" / "kfdemo"], work, quiet_stdout=False).stdout == plain_output
    _check_reports(tmp_path / "rep")
    for depfile in (work / "build").glob("*.d"):
        assert "kernelfarer-cc" not in depfile.read_text()
    # a second make has nothing to do; a touched header makes the objects out of date
    assert run(["make", "-q", f"CC={KFCC}"], work, quiet_stdout=False).returncode == 0
    os.utime(work / "project.h", (time.time() + 5,) * 2)
    assert run(["make", "-q", f"CC={KFCC}"], work, quiet_stdout=False).returncode == 1


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("make") is None,
                    reason="cmake is not installed")
def test_cmake_launcher_builds_the_sample_project(tmp_path, plain_output):
    build = tmp_path / "build"
    environ = env(KERNELFARER_REPORT_DIR=str(tmp_path / "rep"))
    configure = run(["cmake", "-S", PROJECT, "-B", build, f"-DCMAKE_C_COMPILER={CLANG}",
                     f"-DCMAKE_C_COMPILER_LAUNCHER={KFCC}"], tmp_path, environ=environ,
                    quiet_stdout=False)
    assert configure.returncode == 0, configure.stderr
    done = run(["cmake", "--build", build, "-j2"], tmp_path, environ=environ, quiet_stdout=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert warnings_of(done.stderr) == []
    assert run([build / "kfdemo"], tmp_path, quiet_stdout=False).stdout == plain_output
    _check_reports(tmp_path / "rep")
    again = run(["cmake", "--build", build, "-j2"], tmp_path, environ=environ, quiet_stdout=False)
    assert again.returncode == 0 and "Building C object" not in again.stdout


# -- what the plain build would give ------------------------------------------------------------------

def test_timestamp_is_the_sources(mm):
    """__TIMESTAMP__ (the source's modification time) is the same as in the plain build, so a
    file that uses it gives the same object."""
    src = mm / "src" / "stamp.c"
    src.write_text(MM_C.replace('printf("%s %s %d', 'printf("' + "%s " + '%s %s %d')
                   .replace("__FILE__, header_name", "__TIMESTAMP__, __FILE__, header_name"))
    os.utime(src, (1_600_000_000, 1_600_000_000))
    run([CLANG, "-O2", "-c", "src/stamp.c", "-o", "bare.o"], mm)
    done = kfcc("-O2", "-c", "src/stamp.c", "-o", "kf.o", cwd=mm,
                environ=env(KERNELFARER_REMARKS="1"))
    assert done.returncode == 0 and "replaced" in done.stderr, done.stderr
    strings = [subprocess.run(["strings", str(mm / obj)], capture_output=True, text=True).stdout
               for obj in ("bare.o", "kf.o")]
    stamp = time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(1_600_000_000))
    assert stamp in strings[0] and stamp in strings[1]


def test_report_after_a_fallback_says_not_replaced(mm):
    fake = mm / "pickycc"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *kernelfarer-cc*) echo "picky: no" >&2; exit 1;; esac\n'
                    f'exec {CLANG} "$@"\n')
    fake.chmod(0o755)
    done = kfcc(fake, "-O2", "-c", "src/mm.c", "-o", "kf.o", cwd=mm,
                environ=env(KERNELFARER_REPORT_DIR=str(mm / "reports")))
    assert done.returncode == 0
    [report] = reports(mm / "reports").values()
    assert report["rewritten"] is False and report["nests"]
    assert not any(n["replaced"] for n in report["nests"])
    assert all("did not compile" in n["reason"] for n in report["nests"] if n["kind"] == "gemm")


def test_remarks_name_each_chained_gemms_own_matrices(tmp_path):
    src = tmp_path / "chain.c"
    src.write_text("""
void chain(int n, float alpha, float beta, const float *A, const float *B, const float *C,
           float *D, float *E)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += A[i * n + k] * B[k * n + j];
            D[i * n + j] = alpha * s + beta * D[i * n + j];
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += D[i * n + k] * C[k * n + j];
            E[i * n + j] = alpha * s + beta * E[i * n + j];
        }
}
""")
    done = run([sys.executable, "-m", "kernelfarer", "explain", src], tmp_path, quiet_stdout=False)
    lines = [ln for ln in done.stdout.splitlines() if "remark: replaced" in ln]
    assert len(lines) == 2
    assert "D = beta*D + alpha*A * B" in lines[0] and "E = beta*E + alpha*D * C" in lines[1], lines


# -- split compiles: the support code compiled once per configuration ------------------------------

def _symbols(obj: Path) -> str:
    return subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout


def _entry_tags(obj: Path) -> set[str]:
    """The tags of the split support units linked into `obj` (weak entry drivers)."""
    return set(re.findall(r" W kf_\w+_driver_(kf[0-9a-f]+)$", _symbols(obj), re.M))


def test_split_compile_reuses_the_support_object(mm, tmp_path):
    cache = tmp_path / "profile"
    environ = env(KERNELFARER_PROFILE_DIR=str(cache))
    plain = run([CLANG, "-O2", "src/mm.c", "-o", "plain"], mm)
    assert plain.returncode == 0
    objects = []
    for k in (1, 2):
        done = kfcc(CLANG, "-O2", "-g", "-MD", "-c", "src/mm.c", "-o", f"mm{k}.o", cwd=mm,
                    environ=environ)
        assert done.returncode == 0 and done.stderr == ""
        objects.append(mm / f"mm{k}.o")
    stored = sorted(p.name for p in (cache / "objects").iterdir())
    units = {name[:-2] for name in stored if name.endswith(".o")}
    # a unit per kernel driver and one for the dispatcher; each with its source and its lock
    assert len(units) >= 2 and len(stored) == 3 * len(units), stored
    assert {f"{u}{ext}" for u in units for ext in (".c", ".o", ".lock")} == set(stored), stored
    assert objects[0].read_bytes() == objects[1].read_bytes()        # the second one reused them
    tags = _entry_tags(objects[0])
    assert tags == units, (tags, stored)
    assert "src/mm.c" in (mm / "mm1.d").read_text()
    link = run([CLANG, str(objects[0]), "-o", "fast"], mm)
    assert link.returncode == 0, link.stderr
    assert run([mm / "fast"], mm, quiet_stdout=False).stdout == \
        run([mm / "plain"], mm, quiet_stdout=False).stdout


def test_split_objects_of_one_program_keep_their_own_support(mm, tmp_path):
    """Objects of the same support code share one (weak) copy at link time; objects compiled
    with other options carry their own, under another name."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    second = MM_C.replace("static void mm(void)", "void mm2(void)").replace("int main(void)",
                                                                             "int unused_main(void)")
    second = second.replace("mm();", "mm2();")
    (mm / "src" / "mm2.c").write_text(second)
    (mm / "src" / "mm3.c").write_text(second.replace("mm2", "mm3").replace("unused_main",
                                                                            "unused3"))
    builds = [("mm.o", "src/mm.c", ()), ("mm2.o", "src/mm2.c", ()),
              ("mm3.o", "src/mm3.c", ("-fno-omit-frame-pointer",))]
    for out, src, extra in builds:
        done = kfcc(CLANG, "-O2", *extra, "-c", src, "-o", out, cwd=mm, environ=environ)
        assert done.returncode == 0 and done.stderr == ""
    tags = [_entry_tags(mm / out) for out, _, _ in builds]
    assert tags[0] == tags[1] and not tags[0] & tags[2] and all(tags), tags
    link = run([CLANG, "mm.o", "mm2.o", "mm3.o", "-o", "prog"], mm)
    assert link.returncode == 0, link.stderr
    plain = run([CLANG, "-O2", "src/mm.c", "-o", "plain"], mm)
    assert plain.returncode == 0
    assert run([mm / "prog"], mm, quiet_stdout=False).stdout == \
        run([mm / "plain"], mm, quiet_stdout=False).stdout


FAKE_CC = """\
import sys, time
args = sys.argv[1:]
source, out = args[args.index("-x") + 2], args[args.index("-o") + 1]
start = time.time()
time.sleep(0.3)
with open(sys.argv[0] + ".log", "a") as log:        # the unit, and when it was compiled
    log.write(f"{source} {start} {time.time()}\\n")
if "FAIL" in open(source).read():
    sys.exit("error: no")
open(out, "w").write("object of " + source)
"""


def test_support_units_are_compiled_once_by_the_compiles_of_a_build(tmp_path, monkeypatch):
    """Two compiles of a build that need the same support units: each unit is compiled once, in
    parallel with the others, and the second compile waits for the first one's instead of
    compiling it again; a unit whose compile failed is tried again by the compile that waited,
    and both report it."""
    from kernelfarer import split
    monkeypatch.setenv("KERNELFARER_PROFILE_DIR", str(tmp_path / "profile"))
    fake = tmp_path / "cc.py"
    fake.write_text(FAKE_CC)
    compiler = [sys.executable, str(fake)]
    units = [(("kf_a_driver",), '__asm__("kf_a_driver_KERNELFARER_SPLIT_TAG")'),
             (("kf_b_driver",), 'int x; __asm__("kf_b_driver_KERNELFARER_SPLIT_TAG")'),
             (("kf_c_driver",), 'calls __asm__("kf_a_driver_KERNELFARER_SPLIT_TAG") and '
                                '__asm__("kf_c_driver_KERNELFARER_SPLIT_TAG")')]
    tags, resolved = split.resolve(units, compiler, ["-O2"])
    assert len(set(tags.values())) == 3
    assert f"kf_a_driver_{tags['kf_a_driver']}" in resolved[2][1]     # the unit it calls
    assert f"kf_c_driver_{tags['kf_c_driver']}" in resolved[2][1]     # its own
    first = split.SupportBuild(resolved, compiler, ["-O2"], dict(os.environ))
    second = split.SupportBuild(resolved, compiler, ["-O2"], dict(os.environ))
    assert len(second.others) == 3 and not second.queue            # all being built by `first`
    objects = first.wait()
    assert objects == second.wait() and all(Path(o).read_text().startswith("object of")
                                            for o in objects)
    log = [line.split() for line in Path(str(fake) + ".log").read_text().splitlines()]
    assert sorted(unit for unit, _, _ in log) == sorted(f"{t}.c" for t, _ in resolved), log
    if split._cpus() >= 2:          # in parallel: a compile started before another one ended
        spans = sorted((float(start), float(end)) for _, start, end in log)
        assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), spans
    again = split.SupportBuild(resolved, compiler, ["-O2"], dict(os.environ))
    assert not again.queue and not again.others and again.wait() == objects  # all cached

    broken = [(("kf_d_driver",), 'FAIL __asm__("kf_d_driver_KERNELFARER_SPLIT_TAG")')]
    _, resolved = split.resolve(broken, compiler, ["-O2"])
    first = split.SupportBuild(resolved, compiler, ["-O2"], dict(os.environ))
    second = split.SupportBuild(resolved, compiler, ["-O2"], dict(os.environ))
    assert first.wait() == second.wait() == "error: no"
    assert Path(str(fake) + ".log").read_text().split().count(f"{resolved[0][0]}.c") == 2
    assert not [p for p in (tmp_path / "profile" / "objects").iterdir() if ".tmp" in p.name]


def test_an_abandoned_support_build_leaves_nothing_half_made(tmp_path, monkeypatch):
    """A compile that stops early (its own file failed, or it was interrupted) kills the unit
    compiles it started: no temporary object stays, and the units' locks are free for the next
    compile, which compiles them itself."""
    from kernelfarer import split
    monkeypatch.setenv("KERNELFARER_PROFILE_DIR", str(tmp_path / "profile"))
    fake = tmp_path / "cc.py"
    fake.write_text(FAKE_CC.replace("time.sleep(0.3)", "time.sleep(30)"))
    compiler = [sys.executable, str(fake)]
    _, units = split.resolve([(("kf_e_driver",), '__asm__("kf_e_driver_KERNELFARER_SPLIT_TAG")')],
                             compiler, ["-O2"])
    first = split.SupportBuild(units, compiler, ["-O2"], dict(os.environ))
    assert first.running
    first.abandon()
    objects = tmp_path / "profile" / "objects"
    assert not [p for p in objects.iterdir() if ".tmp" in p.name or p.suffix == ".o"]
    second = split.SupportBuild(units, compiler, ["-O2"], dict(os.environ))
    assert not second.others and second.running               # the lock was free
    second.abandon()


def test_a_rebuild_takes_the_rewrite_from_the_cache(tmp_path, monkeypatch):
    """The outcome of a rewrite is kept under a hash of what it depends on: the same file,
    headers, options and environment again give it without parsing; a change to the file, to a
    header it includes, to a KERNELFARER_ variable or to the options rewrites it again, and
    KERNELFARER_REWRITE_CACHE=0 turns the cache off."""
    from kernelfarer import cc, rewrite
    monkeypatch.setenv("KERNELFARER_PROFILE_DIR", str(tmp_path / "profile"))
    monkeypatch.chdir(tmp_path)
    Path("n.h").write_text("#define N 64\n")
    Path("mm.c").write_text('#include "n.h"\n' + MM_C.split('#include "mm.h"')[1]
                            .replace("header_name, ", "").replace("%s %s %d", "%s %d"))
    calls = []
    real = rewrite.rewrite_file

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(rewrite, "rewrite_file", counting)
    first = cc._rewrite_one("mm.c", (), "x86-avx2", True, True)
    assert first.compile_text and first.support_units and len(calls) == 1
    again = cc._rewrite_one("mm.c", (), "x86-avx2", True, True)
    assert len(calls) == 1                                          # from the cache
    assert (again.compile_text, again.support_units, again.remarks) == \
        (first.compile_text, first.support_units, first.remarks)
    for change in ("header", "source", "env", "options", "off"):
        if change == "header":
            Path("n.h").write_text("#define N 65\n")
        elif change == "source":
            Path("mm.c").write_text(Path("mm.c").read_text() + "\n/* changed */\n")
        elif change == "env":
            monkeypatch.setenv("KERNELFARER_THREADS", "1")
        elif change == "off":
            monkeypatch.setenv("KERNELFARER_REWRITE_CACHE", "0")
        before = len(calls)
        cc._rewrite_one("mm.c", ("-DX=1",) if change == "options" else (), "x86-avx2", True,
                        True)
        assert len(calls) == before + 1, change                    # rewritten again
    assert len(list((tmp_path / "profile" / "rewrites").iterdir())) == 5
    monkeypatch.setattr(cc, "REWRITE_CACHE_ENTRIES", 4)          # the oldest ones go
    monkeypatch.delenv("KERNELFARER_REWRITE_CACHE")
    cc._rewrite_one("mm.c", ("-DX=2",), "x86-avx2", True, True)
    assert len(list((tmp_path / "profile" / "rewrites").iterdir())) == 2


def test_files_with_gemms_of_a_type_in_common_share_its_support_units(mm, tmp_path):
    """A float GEMM in one file and a float and a double one in another: the second compile
    reuses the float kernel's unit the first one compiled."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    nest = """
void mm_{t}(int n, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}}
"""
    (mm / "src" / "both.c").write_text(nest.format(t="float") + nest.format(t="double"))
    for out, src in (("mm.o", "src/mm.c"), ("both.o", "src/both.c")):
        done = kfcc(CLANG, "-O2", "-c", src, "-o", out, cwd=mm, environ=environ)
        assert done.returncode == 0 and done.stderr == ""
    single, both = _entry_tags(mm / "mm.o"), _entry_tags(mm / "both.o")
    floats = {t for t in single      # the float kernels' units (not the dispatcher's)
              if re.search(rf" W kf_sgemm_(?!\w*_auto_)\w+_{t}$", _symbols(mm / "mm.o"), re.M)}
    assert floats and floats <= both and both - single, (single, both)
    units = {p.stem for p in (tmp_path / "profile" / "objects").glob("*.o")}
    assert units == single | both


def test_warning_options_do_not_make_other_support_units(mm, tmp_path):
    """Options that change only what a compile says (-W..., -w, -pedantic, diagnostics' format)
    are left out of the support units' compiles: builds that differ in them share the units;
    an option's value is never taken for an option (-Xclang -Wfoo stays whole)."""
    from kernelfarer import ccargs, split
    cmd = ccargs.parse(["-O2", "-Wall", "-Xclang", "-Wfoo", "-Wa,-mbig-obj", "-pedantic", "-w",
                        "-fdiagnostics-color=always", "-g", "-DX=1", "-c", "x.c", "-o", "x.o"])
    assert split.support_options(cmd) == [split.SUPPORT_LEVEL, "-Xclang", "-Wfoo",
                                          "-Wa,-mbig-obj", "-g", "-DX=1"]
    shown = ccargs.parse(["-O2", "-Wall", "-DKERNELFARER_SUPPORT_WARNINGS", "-c", "x.c"])
    assert split.support_options(shown) == ["-O2", "-Wall", "-DKERNELFARER_SUPPORT_WARNINGS"]
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    tags = []
    for k, flags in enumerate((["-O2"], ["-O2", "-Wall", "-Wextra", "-Wno-unused-variable"])):
        done = kfcc(CLANG, *flags, "-c", "src/mm.c", "-o", f"mm{k}.o", cwd=mm, environ=environ)
        assert done.returncode == 0
        tags.append(_entry_tags(mm / f"mm{k}.o"))
    assert tags[0] and tags[0] == tags[1]


def test_support_units_are_shared_across_levels_and_unseen_macros(mm, tmp_path):
    """The support units are compiled at one optimization level (-Ofast keeping -ffast-math), in
    the compiler's language level, without the macros whose names neither they nor the system
    headers they include spell: builds that differ only there share them (so do projects, and
    `kernelfarer prepare` can compile them ahead); debug information, PIC, and a macro the units
    or their headers do spell (`k`, one of their parameters; _GNU_SOURCE, which glibc's headers
    test) make units of their own."""
    from kernelfarer import ccargs, split
    fast = ccargs.parse(["-Ofast", "-DNDEBUG", "-std=c99", "-ansi", "-c", "x.c"])
    assert split.support_options(fast) == [split.SUPPORT_LEVEL, "-ffast-math", "-DNDEBUG"]
    units = [(("d",), "#include <immintrin.h>\nstatic int kf_k(int k) { return k; }\n")]
    seen = ccargs.parse(["-O1", "-DNDEBUG", "-D", "k=2", "-UHAVE_X", "-D_GNU_SOURCE", "-c", "x.c"])
    assert split.support_options(seen, units, [CLANG], env()) == \
        [split.SUPPORT_LEVEL, "-D", "k=2", "-D_GNU_SOURCE"]
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    shared = (["-O2"], ["-O3", "-std=c99", "-DNDEBUG", "-DHAVE_CONFIG_H=1"], ["-Os", "-UFOO"],
              ["-O1", "-std=gnu11", '-DVERSION="2"', "-pipe"])
    apart = (["-O2", "-g"], ["-O2", "-fPIC"], ["-O2", "-Dk=k"], ["-O2", "-D_GNU_SOURCE"])
    tags = []
    for n, flags in enumerate(shared + apart):
        done = kfcc(CLANG, *flags, "-c", "src/mm.c", "-o", f"mm{n}.o", cwd=mm, environ=environ)
        assert done.returncode == 0 and "warning" not in done.stderr, (flags, done.stderr)
        tags.append(_entry_tags(mm / f"mm{n}.o"))
        assert tags[-1], flags                                              # replaced
    assert all(t == tags[0] for t in tags[:len(shared)]), tags
    for n in range(len(shared), len(tags)):
        assert tags[n].isdisjoint(tags[0]), (shared + apart)[n]


def test_prepare_compiles_the_units_a_first_build_needs(mm, tmp_path):
    """`kernelfarer prepare` (which `make deps` runs) leaves the support units in the profile:
    a build with other levels and macros then compiles none of its own, and its program prints
    what the plain build prints."""
    profile = tmp_path / "profile"
    environ = env(KERNELFARER_PROFILE_DIR=str(profile))
    done = run([KFCC.with_name("kernelfarer"), "prepare", "--quiet", "--compiler", CLANG,
                "--options=-O2"], mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    prepared = sorted(p.name for p in (profile / "objects").glob("*.o"))
    assert prepared
    flags = ["-O3", "-DNDEBUG", "-std=gnu11"]
    done = kfcc(CLANG, *flags, "-c", "src/mm.c", "-o", "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert _entry_tags(mm / "mm.o")                                         # replaced
    assert sorted(p.name for p in (profile / "objects").glob("*.o")) == prepared
    assert run([CLANG, "mm.o", "-o", "fast"], mm).returncode == 0
    assert run([CLANG, *flags, "src/mm.c", "-o", "plain"], mm).returncode == 0
    assert run([mm / "fast"], mm, quiet_stdout=False).stdout == \
        run([mm / "plain"], mm, quiet_stdout=False).stdout


def test_command_line_macros_do_not_reach_into_the_support_units(mm, tmp_path):
    """-D names that the support code uses as identifiers (its parameters) are set aside around
    it in each unit, which is compiled with the command line's macros; the program still prints
    what the plain build prints."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    flags = ["-O2", "-Dalpha=oops(", "-D", "k=no_such_name", "-Ubeta"]
    done = kfcc(CLANG, *flags, "-c", "src/mm.c", "-o", "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert _entry_tags(mm / "mm.o")                                         # replaced
    sources = "".join(p.read_text() for p in (tmp_path / "profile" / "objects").glob("*.c"))
    assert '#pragma push_macro("alpha")' in sources and '#pragma push_macro("k")' in sources
    assert run([CLANG, "mm.o", "-o", "fast"], mm).returncode == 0
    plain = run([CLANG, *flags, "src/mm.c", "-o", "plain"], mm)
    assert plain.returncode == 0
    assert run([mm / "fast"], mm, quiet_stdout=False).stdout == \
        run([mm / "plain"], mm, quiet_stdout=False).stdout


@pytest.mark.parametrize("option", ["-fprofile-generate", "-fsanitize=undefined", "-flto",
                                    "KERNELFARER_SPLIT=0"])
def test_some_compiles_do_not_split(mm, tmp_path, option):
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    flags = ["-O2"]
    if option.startswith("KERNELFARER_"):
        environ.update([option.split("=")])
    else:
        flags.append(option)
    done = kfcc(CLANG, *flags, "-c", "src/mm.c", "-o", "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == ""
    assert not (tmp_path / "profile" / "objects").exists()
    if option != "-flto":                       # an LTO object is bitcode: nm names no kernels
        symbols = _symbols(mm / "mm.o")
        assert " t kf_sgemm" in symbols and " W kf_" not in symbols


MACRO_FACTORS = """\
#define alpha 0.5f
#define beta 2.0f

float scaled(int n, float *c, const float *a, const float *b);
float scaled(int n, float *c, const float *a, const float *b)
{
    int i, j, k;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            for (k = 0; k < n; k++)
                c[i * n + j] += alpha * a[i * n + k] * b[k * n + j];
    return c[0] * beta;
}
"""


@pytest.mark.parametrize("cc", COMPILERS)
def test_macros_named_like_the_support_codes_identifiers_stay_used(tmp_path, cc):
    """`alpha` and `beta` are macros of the file, used only after the point where the support code
    goes: saved and undefined around it, they still count as used (-Wunused-macros -Werror)."""
    (tmp_path / "macros.c").write_text(MACRO_FACTORS)
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    done = kfcc(compiler(cc), "-O2", "-Wunused-macros", "-Werror", "-c", "macros.c", cwd=tmp_path,
                environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert " kf_" in _symbols(tmp_path / "macros.o")        # rewritten, not fallen back


TYPE_BY_COMPILER = """\
#include <stdio.h>
#if defined(__clang__)
typedef float real_t;           /* what the analysis (clang's preprocessor) sees */
#else
typedef double real_t;          /* what gcc compiles */
#endif
static void mm(int n, real_t *c, const real_t *a, const real_t *b)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}
int main(void)
{
    static real_t a[67 * 67], b[67 * 67], c[67 * 67];
    double s = 0;
    for (int q = 0; q < 67 * 67; q++) {
        a[q] = (real_t)(q % 9) - 4;
        b[q] = (real_t)(q % 7) - 3;
    }
    mm(67, c, a, b);
    for (int q = 0; q < 67 * 67; q++)
        s += (double)c[q] * (q % 17);
    printf("%d %.1f\\n", (int)sizeof(real_t), s);
    return 0;
}
"""


def test_a_source_that_is_a_pipe_reaches_the_compiler_whole(mm, tmp_path):
    """A FIFO (or `-x c <(generator)`) can be read once: the compiler reads it, untouched."""
    fifo = mm / "src" / "piped.c"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat src/mm.c > {fifo}"], cwd=mm)
    try:
        done = kfcc(CLANG, "-O2", "-Isrc", "-c", "src/piped.c", "-o", "piped.o", cwd=mm,
                    environ=env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile")))
    finally:
        writer.wait(timeout=60)
    assert done.returncode == 0, done.stderr
    assert " T main" in _symbols(mm / "piped.o")


def test_a_source_under_a_non_ascii_directory(mm, tmp_path):
    """Line markers spell the path's non-ASCII bytes as octal escapes: still the user's file."""
    where = mm / "josé"
    where.mkdir()
    (where / "mm.c").write_text(MM_C)
    (where / "mm.h").write_text(MM_H)
    done = kfcc(CLANG, "-O2", "-c", str(where / "mm.c"), "-o", "mm.o", cwd=mm,
                environ=env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile")))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert " kf_" in _symbols(mm / "mm.o")


@pytest.mark.parametrize("split", ["1", "0"])
def test_trace_counters_through_the_wrapper(mm, tmp_path, split):
    """-DKERNELFARER_TRACE is kernelfarer's own switch: never shielded from the support code,
    whose counters the call sites then find (split or not)."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"), KERNELFARER_SPLIT=split)
    done = kfcc(CLANG, "-O2", "-DKERNELFARER_TRACE", "-c", "src/mm.c", "-o", "mm.o", cwd=mm,
                environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "kernelfarer_fast_path_calls" in _symbols(mm / "mm.o")


def test_preprocessor_defines_given_through_wp(mm, tmp_path):
    """Distributions' default flags hold -Wp,-D_FORTIFY_SOURCE=2: defines for the preprocessor,
    which do not stop a rewrite (a -Wp, with anything else passes the command through)."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    done = kfcc(CLANG, "-O2", "-Wp,-D_FORTIFY_SOURCE=2,-DUNUSED_NAME=1", "-c", "src/mm.c", "-o",
                "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert " kf_" in _symbols(mm / "mm.o")
    assert run([CLANG, "mm.o", "-o", "fast"], mm).returncode == 0
    assert run([CLANG, "-O2", "src/mm.c", "-o", "plain"], mm).returncode == 0
    assert run([mm / "fast"], mm, quiet_stdout=False).stdout == \
        run([mm / "plain"], mm, quiet_stdout=False).stdout


def test_a_source_of_another_suffix_compiled_as_c(mm, tmp_path):
    """`-x c` on a file named otherwise (a unity build's .inc): it is preprocessed as C too."""
    (mm / "src" / "mm.inc").write_text(MM_C)
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    done = kfcc(CLANG, "-O2", "-x", "c", "-c", "src/mm.inc", "-o", "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert " kf_" in _symbols(mm / "mm.o")


LIMITS = """\
#include <float.h>
#include <limits.h>
#include <stdint.h>
int limits_hold(int x)
{
    int y = INT_MAX > 0 && LONG_MAX > 0 && UINT_MAX > 0 && INT32_MAX > 0 && SIZE_MAX > 0;
    y += FLT_MAX > 0 && CHAR_BIT == 8 && x > 0;
    y += DBL_EPSILON > 0 && INT16_MIN < 0 && UINT8_MAX > 0 && x < 9;
    return y + (LLONG_MAX > 0 && SCHAR_MIN < 0 && SHRT_MAX > 0 && x != 3);
}
void mm(int n, const float *a, const float *b, float *c)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}
"""


@pytest.mark.skipif(GCC is None, reason="no gcc")
def test_gcc_builds_of_files_using_the_limits_macros_are_rewritten(tmp_path):
    """gcc and clang spell INT_MAX, LONG_MAX, FLT_MAX... differently (0x7fffffff, 2147483647):
    the same values of the same types, which the comparison of the two preprocessors allows."""
    (tmp_path / "limits.c").write_text(LIMITS)
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    done = kfcc(GCC, "-O2", "-c", "limits.c", "-o", "limits.o", cwd=tmp_path, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert " kf_" in _symbols(tmp_path / "limits.o")


@pytest.mark.skipif(GCC is None, reason="no gcc")
def test_a_file_gcc_preprocesses_otherwise_is_compiled_unchanged(tmp_path):
    """The analysis preprocesses with clang; a file that gcc preprocesses to other code (types
    chosen by compiler) is compiled as it is under gcc, and still rewritten under clang."""
    (tmp_path / "by_compiler.c").write_text(TYPE_BY_COMPILER)
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"), KERNELFARER_REMARKS="1")
    for cc, rewritten in ((GCC, False), (CLANG, True)):
        done = kfcc(cc, "-O2", "-c", "by_compiler.c", "-o", "w.o", cwd=tmp_path, environ=environ)
        assert done.returncode == 0, done.stderr
        assert (" kf_" in _symbols(tmp_path / "w.o")) == rewritten, done.stderr
        assert ("preprocessor gives the file other code" in done.stderr) != rewritten
        assert run([cc, "w.o", "-o", "w"], tmp_path).returncode == 0
        assert run([cc, "-O2", "by_compiler.c", "-o", "plain"], tmp_path).returncode == 0
        assert run([tmp_path / "w"], tmp_path, quiet_stdout=False).stdout == \
            run([tmp_path / "plain"], tmp_path, quiet_stdout=False).stdout


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("flags", [[], ["-O0"], ["-g", "-O0"], ["-O2", "-O0"], ["-Og"]],
                         ids=lambda f: " ".join(f) or "no -O")
def test_unoptimized_objects_link(mm, tmp_path, cc, flags):
    """A compile without optimization (no -O, or a last -O0) leaves the kernels out: its call
    sites call drivers that decline, compiled with them (no split), and the object links alone."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    done = kfcc(compiler(cc), *flags, "-c", "src/mm.c", "-o", "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "profile" / "objects").exists() == (flags == ["-Og"])
    assert run([compiler(cc), "mm.o", "-o", "fast"], mm).returncode == 0
    assert run([compiler(cc), *flags, "src/mm.c", "-o", "plain"], mm).returncode == 0
    assert run([mm / "fast"], mm, quiet_stdout=False).stdout == \
        run([mm / "plain"], mm, quiet_stdout=False).stdout


def test_a_split_that_cannot_store_its_support_falls_back(mm, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    done = kfcc(CLANG, "-O2", "-c", "src/mm.c", "-o", "mm.o", cwd=mm,
                environ=env(KERNELFARER_PROFILE_DIR=str(blocker)))
    assert done.returncode == 0
    assert len(warnings_of(done.stderr)) == 1 and "support code" in done.stderr
    assert "kf_" not in _symbols(mm / "mm.o")                # the original, compiled unchanged


def test_split_never_replaces_what_is_not_a_regular_file(mm, tmp_path):
    """An object named by a symbolic link (or a device) is compiled whole: the wrapper never
    replaces it itself (what the compiler does with it is the compiler's business)."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"))
    target = mm / "real.o"
    target.write_text("")
    (mm / "link.o").symlink_to(target)
    done = kfcc(CLANG, "-O2", "-c", "src/mm.c", "-o", "link.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == ""
    assert " t kf_sgemm" in _symbols(mm / "link.o")
    assert not (tmp_path / "profile" / "objects").exists()


def test_threads_asked_for_in_the_environment(mm, tmp_path):
    """KERNELFARER_THREADS gives the wrapper's rewrites the threaded fast path (rewrite
    --threads); a value that is not a count warns once and is ignored.  The program built with
    -fopenmp prints what the plain build prints, on one thread and on three."""
    environ = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"), KERNELFARER_THREADS="3")
    plain = run([CLANG, "-O2", "src/mm.c", "-o", "plain"], mm)
    assert plain.returncode == 0
    done = kfcc(CLANG, "-O2", "-fopenmp", "-c", "src/mm.c", "-o", "mm.o", cwd=mm, environ=environ)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    symbols = run(["nm", "mm.o"], mm, quiet_stdout=False).stdout
    assert "_t3_driver" in symbols and "__kmpc_fork_call" in symbols     # threads, at most 3
    link = run([CLANG, "-fopenmp", "mm.o", "-o", "fast"], mm)
    assert link.returncode == 0, link.stderr
    for threads in ("1", "3"):
        out = subprocess.run([str(mm / "fast")], capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": threads})
        assert out.stdout == run([mm / "plain"], mm, quiet_stdout=False).stdout
    bad = env(KERNELFARER_PROFILE_DIR=str(tmp_path / "profile"), KERNELFARER_THREADS="many")
    done = kfcc(CLANG, "-O2", "-c", "src/mm.c", "-o", "mm1.o", cwd=mm, environ=bad)
    assert done.returncode == 0
    assert done.stderr.count("KERNELFARER_THREADS=many") == 1, done.stderr
    assert "_t3_driver" not in run(["nm", "mm1.o"], mm, quiet_stdout=False).stdout


def test_one_preprocessor_run_gives_the_text_and_the_macro_names(tmp_path):
    """kernelfarer-cc preprocesses a candidate once (-dD): the same code on the same lines as the
    plain preprocess, and every macro name that the end-of-file list (-dM) has, and the undefined
    ones too (hygiene stays away from both)."""
    from kernelfarer import cpp
    (tmp_path / "m.h").write_text("#define from_header(x) ((x) + 1)\n")
    src = tmp_path / "m.c"
    src.write_text('#include <stddef.h>\n#include "m.h"\n#define n 64\n#define gone 1\n'
                   "#undef gone\nint f(int k)\n{\n    return from_header(k) + n;\n}\n"
                   "#define late_macro 3\nint g(void) { return late_macro; }\n")
    text, names = cpp.preprocess_with_macros(str(src))
    plain = cpp.preprocess(str(src))
    assert "#define" not in text and "#undef" not in text
    code = lambda t: [ln for ln in t.splitlines() if ln.strip() and not ln.startswith("# ")]
    assert code(text) == code(plain)
    assert "int g(void) { return 3; }" in text
    assert cpp.defined_macros(str(src)) <= names
    assert {"n", "gone", "from_header", "late_macro", "offsetof"} <= names


def test_compiler_family_is_asked_once_per_compiler(tmp_path, monkeypatch):
    """The wrapper remembers each compiler's family (clang/gcc) by its identity: a second compile
    does not run `--version` again; a changed compiler (another size or mtime) is asked anew."""
    from kernelfarer import cc
    monkeypatch.setenv("KERNELFARER_PROFILE_DIR", str(tmp_path / "profile"))
    log = tmp_path / "asked"
    fake = tmp_path / "fakecc"
    fake.write_text(f'#!/bin/sh\necho asked >> "{log}"\necho "Debian clang version 19.1.7"\n')
    fake.chmod(0o755)
    assert cc._compiler_family(str(fake)) == "clang"
    assert cc._compiler_family(str(fake)) == "clang"
    assert log.read_text().count("asked") == 1
    fake.write_text(f'#!/bin/sh\necho asked >> "{log}"\necho "gcc (Debian 12.2.0-14) 12.2.0"\n'
                    'echo "This is free software; see the source for copying conditions.  '
                    'There is NO"\necho "Free Software Foundation"\n')
    assert cc._compiler_family(str(fake)) == "gcc"
    assert log.read_text().count("asked") == 2
