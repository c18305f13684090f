"""The `kernelfarer` command line: errors, outputs, in-place rewriting, remarks, reports and
explain."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from conftest import NEGATIVE, POSITIVE, run_cli

GEMM = """\
void mm(int M, int N, int K, float C[M][N], const float A[M][K], const float B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i][j] += A[i][k] * B[k][j];
}
"""
NOT_GEMM = """\
void gemv(int m, int n, const double *A, const double *x, double *y)
{
    for (int i = 0; i < m; i++)
        for (int k = 0; k < n; k++)
            y[i] += A[i * n + k] * x[k];
}
"""
ERROR_LINE = re.compile(r"^(\S+:\d+:\d+: error: |kernelfarer: error: |error: )", re.M)
REMARK_LINE = re.compile(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): remark: (?P<text>.*)$")


@pytest.fixture
def gemm_file(tmp_path):
    path = tmp_path / "mm.c"
    path.write_text(GEMM)
    return path


def leftovers(directory) -> list[str]:
    """Temporary files a failed or atomic write might leave behind."""
    return [p.name for p in directory.iterdir() if p.name.startswith(".kernelfarer")]


# -- errors ---------------------------------------------------------------------------------------

def test_missing_input_file(tmp_path):
    out = tmp_path / "out.c"
    done = run_cli("rewrite", tmp_path / "nope.c", "-o", out)
    assert done.returncode != 0
    assert ERROR_LINE.search(done.stderr) and "nope.c" in done.stderr
    assert not out.exists() and leftovers(tmp_path) == []


def test_input_that_does_not_preprocess(tmp_path):
    src = tmp_path / "bad_include.c"
    src.write_text('#include "no_such_header_kf.h"\n' + GEMM)
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode != 0
    assert ERROR_LINE.search(done.stderr), done.stderr
    assert "no_such_header_kf.h" in done.stderr
    assert not out.exists() and leftovers(tmp_path) == []


def test_input_that_does_not_parse(tmp_path):
    src = tmp_path / "bad_syntax.c"
    src.write_text("int ok;\n\nvoid f( {\n}\n")
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode != 0
    assert re.search(r"bad_syntax\.c:3:\d+: error: ", done.stderr), done.stderr
    assert not out.exists() and leftovers(tmp_path) == []


def test_a_function_that_does_not_parse_is_left_out_with_a_warning(tmp_path):
    """Per function, not per file: the output is written, the function that could not be read
    is unchanged, and a warning says where it is."""
    src = tmp_path / "bad_expr.c"
    src.write_text("void f(void)\n{\n    int x = ;\n}\n")
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode == 0
    assert re.fullmatch(r"\S*bad_expr\.c:3:13: warning: function 'f' not considered: the parser "
                        r"cannot read it \(invalid expression\)\n", done.stderr), done.stderr
    assert out.read_text() == src.read_text()


def test_unknown_target_lists_the_targets(gemm_file, tmp_path):
    from kernelfarer import targets
    out = tmp_path / "out.c"
    done = run_cli("rewrite", gemm_file, "-o", out, "--target", "pdp11")
    assert done.returncode != 0
    assert ERROR_LINE.search(done.stderr) and "pdp11" in done.stderr
    for name in targets.TARGETS:
        assert name in done.stderr
    assert not out.exists()


def test_invalid_blocking_is_an_error(gemm_file, tmp_path):
    out = tmp_path / "out.c"
    done = run_cli("rewrite", gemm_file, "-o", out, "--target", "x86-avx2", "--mc", "7")
    assert done.returncode != 0
    assert ERROR_LINE.search(done.stderr) and "mc" in done.stderr
    assert not out.exists()


def test_unwritable_output_directory(gemm_file, tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "out.c"
    done = run_cli("rewrite", gemm_file, "-o", out)
    assert done.returncode != 0
    assert ERROR_LINE.search(done.stderr)
    assert not out.exists()


def test_failed_rewrite_leaves_an_existing_output_alone(tmp_path):
    src = tmp_path / "bad_include.c"
    src.write_text('#include "no_such_header_kf.h"\n' + GEMM)
    out = tmp_path / "out.c"
    out.write_text("precious\n")
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode != 0
    assert out.read_text() == "precious\n" and leftovers(tmp_path) == []


def test_preprocessor_flags_after_double_dash(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "sizes_kf.h").write_text("#define NI 8\n#define NJ 16\n")
    src = tmp_path / "needs_flags.c"
    src.write_text('#include "sizes_kf.h"\n#ifndef NK\n#error "define NK"\n#endif\n'
                   "void mm(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])\n"
                   "{\n    for (int i = 0; i < NI; i++)\n        for (int j = 0; j < NJ; j++)\n"
                   "            for (int k = 0; k < NK; k++)\n"
                   "                C[i][j] += A[i][k] * B[k][j];\n}\n")
    out, report = tmp_path / "out.c", tmp_path / "r.json"
    assert run_cli("rewrite", src, "-o", out).returncode != 0          # without the flags
    done = run_cli("rewrite", src, "-o", out, "--report", report, "--", f"-I{inc}", "-DNK=4")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(report.read_text())["nests"]
    assert entry["replaced"] and entry["sizes"] == "M=8 N=16 K=4"


@pytest.mark.parametrize("triple, kernel", [("aarch64-linux-gnu", "neon"),
                                             ("powerpc64le-linux-gnu", "power10_mma")])
def test_auto_target_follows_a_cross_triple_in_the_flags(gemm_file, tmp_path, triple, kernel):
    """`-- --target=<triple>` for another machine: --target auto is that machine's best target
    (as kernelfarer-cc's default is), not this host's, whose intrinsics would not compile there
    (an internal error before)."""
    out = tmp_path / "out.c"
    done = run_cli("rewrite", gemm_file, "-o", out, "--remarks", "--", f"--target={triple}")
    assert done.returncode == 0, done.stderr
    assert f"_{kernel}_" in done.stderr and out.exists(), done.stderr


# -- outputs --------------------------------------------------------------------------------------

def test_input_is_never_modified_without_in_place(gemm_file, tmp_path):
    before = gemm_file.read_bytes()
    stamp = os.stat(gemm_file)
    out = tmp_path / "out.c"
    assert run_cli("rewrite", gemm_file, "-o", out).returncode == 0
    to_stdout = run_cli("rewrite", gemm_file)
    assert to_stdout.returncode == 0
    assert run_cli("explain", gemm_file).returncode == 0
    assert gemm_file.read_bytes() == before
    after = os.stat(gemm_file)
    assert (after.st_ino, after.st_mtime_ns) == (stamp.st_ino, stamp.st_mtime_ns)
    # without -o the rewritten file goes to stdout, the same text -o writes
    assert to_stdout.stdout == out.read_text() != before.decode()


def test_output_is_written_on_success(gemm_file, tmp_path):
    out = tmp_path / "out.c"
    done = run_cli("rewrite", gemm_file, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "kf_sgemm_" in out.read_text() and leftovers(tmp_path) == []


def test_nothing_to_replace_still_succeeds(tmp_path):
    src = tmp_path / "gemv.c"
    src.write_text(NOT_GEMM)
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == src.read_bytes()


def test_in_place_rewrites_atomically(gemm_file, tmp_path):
    os.chmod(gemm_file, 0o640)
    inode = os.stat(gemm_file).st_ino
    expected = run_cli("rewrite", gemm_file).stdout
    done = run_cli("rewrite", gemm_file, "--in-place")
    assert done.returncode == 0, done.stderr
    assert gemm_file.read_text() == expected != GEMM
    st = os.stat(gemm_file)
    assert st.st_ino != inode, "written in place instead of renamed over the input"
    assert stat.S_IMODE(st.st_mode) == 0o640, "the input's permissions were not kept"
    assert leftovers(tmp_path) == []


def test_in_place_without_replacement_does_not_touch_the_file(tmp_path):
    src = tmp_path / "gemv.c"
    src.write_text(NOT_GEMM)
    stamp = os.stat(src)
    assert run_cli("rewrite", src, "--in-place").returncode == 0
    after = os.stat(src)
    assert src.read_text() == NOT_GEMM
    assert (after.st_ino, after.st_mtime_ns) == (stamp.st_ino, stamp.st_mtime_ns)


def test_in_place_failure_leaves_the_input_alone(gemm_file, tmp_path):
    done = run_cli("rewrite", gemm_file, "--in-place", "--target", "x86-avx2", "--nc", "20")
    assert done.returncode != 0
    assert gemm_file.read_text() == GEMM and leftovers(tmp_path) == []


def test_in_place_and_output_are_exclusive(gemm_file, tmp_path):
    done = run_cli("rewrite", gemm_file, "--in-place", "-o", tmp_path / "out.c")
    assert done.returncode != 0
    assert gemm_file.read_text() == GEMM and not (tmp_path / "out.c").exists()


# -- remarks, report, explain ---------------------------------------------------------------------

MIXED = POSITIVE / "with_headers.c"      # one GEMM, two other nests in main


def test_remarks_for_every_nest(tmp_path):
    report = tmp_path / "r.json"
    done = run_cli("rewrite", MIXED, "-o", tmp_path / "out.c", "--remarks", "--report", report)
    assert done.returncode == 0, done.stderr
    nests = json.loads(report.read_text())["nests"]
    remarks = [REMARK_LINE.match(ln) for ln in done.stderr.splitlines()]
    remarks = [m for m in remarks if m]
    assert len(remarks) == len(nests) == 3
    lines = MIXED.read_text().splitlines()
    for m, entry in zip(remarks, nests):
        assert m["file"] == str(MIXED)
        line, col = int(m["line"]), int(m["col"])
        assert (line, col) == (entry["line"], entry["column"])
        assert lines[line - 1][col - 1:].startswith("for"), "remark does not point at the loop"
        if entry["replaced"]:
            assert m["text"].startswith("replaced ")
        else:
            assert m["text"] == f"not replaced: {entry['reason']}"
    assert sum(e["replaced"] for e in nests) == 1


def test_no_remarks_unless_asked(tmp_path):
    done = run_cli("rewrite", MIXED, "-o", tmp_path / "out.c")
    assert done.returncode == 0
    assert not any(REMARK_LINE.match(ln) for ln in done.stderr.splitlines())


def test_report_schema(tmp_path):
    report = tmp_path / "r.json"
    done = run_cli("rewrite", MIXED, "-o", tmp_path / "out.c", "--report", report)
    assert done.returncode == 0
    data = json.loads(report.read_text())
    assert isinstance(data["nests"], list) and data["nests"]
    for entry in data["nests"]:
        assert isinstance(entry["file"], str) and entry["file"] == str(MIXED)
        assert isinstance(entry["line"], int) and entry["line"] > 0
        assert isinstance(entry["kind"], str) and isinstance(entry["reason"], str)
        assert isinstance(entry["replaced"], bool)
        assert (entry["kind"] == "gemm") if entry["replaced"] else entry["reason"]
    gemm = next(e for e in data["nests"] if e["replaced"])
    for key in ("dtype", "kernel", "target", "sizes", "layouts", "loop_order", "blocking"):
        assert key in gemm


def test_report_for_a_file_without_nests(tmp_path):
    src = tmp_path / "empty.c"
    src.write_text("int answer(void) { return 42; }\n")
    report = tmp_path / "r.json"
    done = run_cli("rewrite", src, "-o", tmp_path / "out.c", "--report", report)
    assert done.returncode == 0
    assert json.loads(report.read_text())["nests"] == []


def test_explain_lists_verdicts(tmp_path):
    before = set(os.listdir(tmp_path))
    done = run_cli("explain", MIXED, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    verdicts = [REMARK_LINE.match(ln) for ln in done.stdout.splitlines()]
    verdicts = [m for m in verdicts if m]
    assert len(verdicts) == 3
    assert sum(m["text"].startswith("replaced ") for m in verdicts) == 1
    assert sum(m["text"].startswith("not replaced: ") for m in verdicts) == 2
    assert "kernel:" in done.stdout          # details of the replaced nest
    assert set(os.listdir(tmp_path)) == before


def test_explain_negative_sample_gives_its_reason():
    path = NEGATIVE / "triangular.c"
    done = run_cli("explain", path)
    assert done.returncode == 0
    assert f"{path}:" in done.stdout and "not replaced: " in done.stdout
    assert "triangular" in done.stdout


def test_targets_command():
    from kernelfarer import targets
    done = run_cli("targets")
    assert done.returncode == 0
    for name, target in targets.TARGETS.items():
        (line,) = [ln for ln in done.stdout.splitlines() if ln.split()[0] == name]
        assert ("runs here" in line) == targets.host_can_run(target)


# -- known bugs -----------------------------------------------------------------------------------

def test_non_utf8_bytes_are_preserved(tmp_path):
    src = tmp_path / "latin1.c"
    src.write_bytes(b"/* Matrix-Vektor-Produkt f\xfcr kleine Matrizen */\n" + NOT_GEMM.encode())
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == src.read_bytes()


def test_declaration_on_the_function_header_line(tmp_path):
    src = tmp_path / "same_line.c"
    src.write_text("static int calls; " + GEMM)
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "kf_sgemm_" in out.read_text()
