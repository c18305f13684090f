"""Recognizer tests on the samples: every positive sample's GEMM nests are replaced, every negative
sample's nests are not (for the reason its `/* expect: ... */` comment names), and the rewriter
touches nothing but the replaced nests and the one inserted support block."""

from __future__ import annotations

import json
import re

import pytest

from conftest import NEGATIVE, SMALL_BLOCKING, parse_expectations, run_cli
from gemm_samples import SAMPLES, Sample, nest_entry

# Recognition does not depend on the target or the blocking: these share the differential tests'
# build cache.
TARGET = "x86-avx2"
BLOCKING = SMALL_BLOCKING

# Negative samples that the rewriter currently replaces (wrong code): strict xfail until fixed.
KNOWN_BUGS: dict[str, str] = {}

NEGATIVES = sorted(NEGATIVE.glob("*.c"))


def _sample_params():
    for sample in SAMPLES:
        marks = [pytest.mark.xfail(strict=True, reason=sample.xfail)] if sample.xfail else []
        yield pytest.param(sample, id=sample.file, marks=marks)


def _negative_params():
    for path in NEGATIVES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[path.name])] \
            if path.name in KNOWN_BUGS else []
        yield pytest.param(path, id=path.name, marks=marks)


# -- an independent finder of a statement's end in C text -----------------------------------------

_TOKEN = re.compile(r"""
    (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<directive>^[ \t]*\#[^\n]*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<punct>[(){};])
  | (?P<other>\S)
""", re.S | re.M | re.X)


def _tokens(text: str, start: int):
    for m in _TOKEN.finditer(text, start):
        if m.lastgroup not in ("comment", "directive"):
            yield m.lastgroup, m.group(), m.start(), m.end()


def statement_end(text: str, start: int) -> int:
    """Offset one past the statement starting at `start` (a for/while/if/compound/simple
    statement) — written for the samples' shapes, independently of kernelfarer's scanner."""
    toks = list(_tokens(text, start))
    pos = 0

    def matching(i: int, open_: str, close: str) -> int:
        depth = 0
        for j in range(i, len(toks)):
            if toks[j][1] == open_:
                depth += 1
            elif toks[j][1] == close:
                depth -= 1
                if depth == 0:
                    return j
        raise AssertionError("unbalanced")

    def stmt(i: int) -> int:
        word = toks[i][1]
        if word == "{":
            return matching(i, "{", "}")
        if word in ("for", "while"):
            return stmt(matching(i + 1, "(", ")") + 1)
        if word == "if":
            end = stmt(matching(i + 1, "(", ")") + 1)
            if end + 1 < len(toks) and toks[end + 1][1] == "else":
                return stmt(end + 2)
            return end
        depth = 0
        for j in range(i, len(toks)):
            if toks[j][1] in "({":
                depth += 1
            elif toks[j][1] in ")}":
                depth -= 1
            elif toks[j][1] == ";" and depth == 0:
                return j
        raise AssertionError("no ';'")

    return toks[stmt(pos)][3]


def with_leading_pragmas(text: str, start: int) -> int:
    """Move a nest's start back over the #pragma lines right above it (they apply to the loop and
    move with it into the call site)."""
    while True:
        line_start = text.rfind("\n", 0, start) + 1
        if text[line_start:start].strip():
            return start
        prev_start = text.rfind("\n", 0, max(line_start - 1, 0)) + 1
        prev = text[prev_start:line_start]
        if line_start == 0 or not prev.lstrip().startswith("#pragma"):
            return start
        start = prev_start + len(prev) - len(prev.lstrip())


def offset_of(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(ln) + 1 for ln in lines[:line - 1]) + column - 1


def check_only_nests_changed(original: str, output: str, nests: list[dict]) -> None:
    """output == original with each replaced nest N_i turned into a call site that holds N_i
    verbatim (and nothing after it but the closing braces of the call site), plus one block
    inserted at a line start before the first replaced nest."""
    spans = []
    for entry in sorted(nests, key=lambda e: (e["line"], e["column"])):
        start = offset_of(original, entry["line"], entry["column"])
        assert original.startswith("for", start), f"report points at {original[start:start + 20]!r}"
        spans.append((with_leading_pragmas(original, start), statement_end(original, start)))
    marker = "{ /* kernelfarer:"
    assert output.count(marker) == len(spans), "one call site per replaced nest"
    gaps = [original[:spans[0][0]]]
    gaps += [original[spans[i][1]:spans[i + 1][0]] for i in range(len(spans) - 1)]
    gaps.append(original[spans[-1][1]:])
    pos = 0
    for i, (start, end) in enumerate(spans):
        site = output.index(marker, pos)
        if i == 0:
            head = output[:site]
            gap = gaps[0]
            prefix = next((n for n in range(min(len(head), len(gap)))
                           if head[n] != gap[n]), min(len(head), len(gap)))
            # the support block is inserted at a line start; everything around it is unchanged
            prefix = gap.rfind("\n", 0, prefix) + 1 if prefix < len(gap) else prefix
            inserted = len(head) - len(gap)
            assert inserted > 0 and head[:prefix] == gap[:prefix] and \
                head[prefix + inserted:] == gap[prefix:], \
                "text before the first nest changed beyond the inserted support block"
            assert "generated by kernelfarer" in head[prefix:prefix + inserted]
        else:
            assert output[pos:site] == gaps[i], f"text between nests {i} and {i + 1} changed"
        nest = original[start:end]
        at = output.index(nest, site)
        # the call site opens blocks before the verbatim nest and only closes them after it
        depth = output[site:at].count("{") - output[site:at].count("}")
        pos = at + len(nest)
        while depth:
            assert output[pos] in " \t\r\n}", \
                f"call site {i + 1}: unexpected text after its verbatim original nest"
            depth -= output[pos] == "}"
            pos += 1
    assert output[pos:] == gaps[-1], "text after the last nest changed"


# -- positive samples -----------------------------------------------------------------------------

@pytest.mark.parametrize("sample", list(_sample_params()))
def test_positive_sample_is_replaced(builds, sample: Sample) -> None:
    rw = builds.rewrite(sample.path, TARGET, BLOCKING)
    nests = rw.report["nests"]
    replaced = [e for e in nests if e["replaced"]]
    others = [e for e in nests if not e["replaced"]]
    assert len(replaced) == sample.replaced, [(e["line"], e["reason"]) for e in others]
    assert len(others) == sample.not_replaced, [(e["line"], e["reason"]) for e in others]
    for entry in replaced:
        assert entry["kind"] == "gemm" and entry["reason"] == ""
        assert entry["file"] == str(sample.path)
        if "fallback" in entry:      # no kernel of this type for the target: generic, reported
            assert entry["target"] == "generic", entry
        else:
            assert entry["target"] == TARGET, entry
    for fn in sample.functions:
        entry = nest_entry(rw.report, sample, fn)
        assert entry["replaced"], f"{fn.name}: {entry['reason']}"
        assert entry["dtype"] == fn.types.report
    for entry in others:
        assert entry["reason"], "every nest left alone says why"


@pytest.mark.parametrize("sample", list(_sample_params()))
def test_positive_sample_changes_only_its_nests(builds, sample: Sample) -> None:
    rw = builds.rewrite(sample.path, TARGET, BLOCKING)
    original = sample.path.read_bytes().decode()
    output = rw.output.read_bytes().decode()
    check_only_nests_changed(original, output, [e for e in rw.report["nests"] if e["replaced"]])


def test_loop_orders_are_all_recognized(builds) -> None:
    sample = next(s for s in SAMPLES if s.file == "loop_orders_f32.c")
    report = builds.rewrite(sample.path, TARGET, BLOCKING).report
    orders = {e["loop_order"] for e in report["nests"]}
    assert orders == {"ijk", "ikj", "jik", "jki", "kij", "kji"}


def test_layouts_and_init_are_reported(builds) -> None:
    by_file = {s.file: s for s in SAMPLES}

    def entry(file, fn_name):
        sample = by_file[file]
        fn = next(f for f in sample.functions if f.name == fn_name)
        return nest_entry(builds.rewrite(sample.path, TARGET, BLOCKING).report, sample, fn)

    assert entry("zero_init.c", "sgemm_zero")["init"] == "overwrite"
    assert entry("accumulator.c", "dgemm_dot")["init"] == "overwrite"
    assert entry("accumulator.c", "sgemm_dot_ab")["init"] == "scale"
    assert entry("flat_ld.c", "sgemm_rm")["init"] == "accumulate"
    assert entry("alpha_minus.c", "dgemm_minus")["alpha"] != "1"
    assert entry("flat_ld.c", "sgemm_rm")["layouts"] == "C[i*ldc + j] A[i*lda + k] B[k*ldb + j]"
    # restrict: no overlap check; plain pointers: one per operand; distinct global arrays: none
    overlap_checks = lambda e: [g for g in e["guards"] if "does not overlap" in g]  # noqa: E731
    assert overlap_checks(entry("restrict_ptrs.c", "sgemm_restrict")) == []
    assert overlap_checks(entry("overlap.c", "g")) == ["C does not overlap A",
                                                       "C does not overlap B"]
    assert entry("loop_orders_f64_globals.c", "dgemm_ijk")["guards"] == []


# -- negative samples -----------------------------------------------------------------------------

@pytest.mark.parametrize("path", list(_negative_params()))
def test_negative_sample_is_left_alone(tmp_path, path) -> None:
    expectations = parse_expectations(path)
    assert expectations, f"{path.name} has no /* expect: ... */ comment"
    out, report = tmp_path / path.name, tmp_path / "report.json"
    done = run_cli("rewrite", path, "-o", out, "--report", report, "--remarks",
                   "--target", TARGET)
    assert done.returncode == 0, done.stderr
    nests = json.loads(report.read_text())["nests"]
    assert nests, "the nest was not even considered"
    for entry in nests:
        assert not entry["replaced"], f"line {entry['line']} was replaced"
    reasons = [e["reason"] for e in nests]
    if len(expectations) == 1:
        expectations = expectations * len(nests)
    assert len(expectations) == len(nests), reasons
    for want, got in zip(expectations, reasons):
        assert want in got, f"expected a reason containing {want!r}, got {got!r}"
    assert out.read_bytes() == path.read_bytes(), "a file with nothing replaced must be unchanged"
    remarks = [ln for ln in done.stderr.splitlines() if ": remark: not replaced: " in ln]
    assert len(remarks) == len(nests)


WEAK_MARKERS = re.compile(r"__attribute__\(\((?:noinline, )?(?:__)?weak(?:__)?\)\)|"
                          r"\[\[gnu::weak\]\]|#pragma weak \w+")


def test_weak_helpers_are_gemms_once_strong(tmp_path) -> None:
    """What keeps weak_helpers.c's nests as written is the helpers being weak, nothing else:
    with the markers taken out, the same file's seven GEMMs are all replaced."""
    path = NEGATIVE / "weak_helpers.c"
    strong, markers = WEAK_MARKERS.subn("", path.read_text())
    assert markers == 8 and "weak))" not in strong.replace("__weak__", "")
    src, report = tmp_path / "strong.c", tmp_path / "report.json"
    src.write_text(strong)
    done = run_cli("rewrite", src, "-o", tmp_path / "out.c", "--report", report,
                   "--target", TARGET)
    assert done.returncode == 0, done.stderr
    lines = strong.splitlines()
    first_loops = [n + 2 for n, line in enumerate(lines) if line.startswith("void weak_")]
    assert len(first_loops) == 7 and all("for (" in lines[n - 1] for n in first_loops)
    replaced = [e["line"] for e in json.loads(report.read_text())["nests"] if e["replaced"]]
    assert replaced == first_loops


@pytest.mark.parametrize("product, described", [
    ("a[i * k + p] * b[p * n + j]", "c += a * b"),
    ("b[p * n + j] * a[i * k + p]", "c += a * b"),          # factors written the other way
    ("bt[j * k + p] * at[p * m + i]", "c += at * bt"),       # both transposed
])
def test_the_remark_names_the_operands_in_the_products_order(tmp_path, product, described):
    """C = A * B names the matrix whose rows run with C's rows first, whatever order the
    factors are written in (a remark saying `dinp += weight * dout` would be another product)."""
    src = tmp_path / "mm.c"
    src.write_text(f"""
void mm(int m, int n, int k, const float *a, const float *b, const float *at, const float *bt,
        float *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += {product};
}}
""")
    done = run_cli("rewrite", src, "-o", tmp_path / "out.c", "--remarks")
    assert done.returncode == 0, done.stderr
    assert f"replaced float GEMM {described} (" in done.stderr, done.stderr


TWO_GEMMS = """\
void first(int n, float *c, const float *a, const float *b)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}

void second(int n, float *c, const float *a, const float *b)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}
"""


def test_a_bug_in_one_nests_analysis_leaves_only_that_nest(tmp_path, monkeypatch):
    """An exception in the analysis of one nest (a bug of ours, as sqlite's amalgamation found
    one) is that nest's remark, `internal error in the analysis`, and the nest stays as written;
    the file's other nests are still replaced."""
    from kernelfarer import unit
    from kernelfarer.rewrite import RewriteOptions, rewrite_file
    real = unit.recognize_nest
    calls = []

    def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise AttributeError("'UnaryOp' object has no attribute 'exprs'")
        return real(*args, **kwargs)

    monkeypatch.setattr(unit, "recognize_nest", failing_once)
    src = tmp_path / "two.c"
    src.write_text(TWO_GEMMS)
    result = rewrite_file(str(src), RewriteOptions(target=TARGET, verify=False))
    nests = [r for r in result.remarks if r.kind != "function"]
    assert [r.replaced for r in nests] == [False, True], [r.message() for r in nests]
    assert "internal error in the analysis (AttributeError" in nests[0].reason
    first_body = TWO_GEMMS[:TWO_GEMMS.index("\n\nvoid second") + 1]
    assert first_body in result.text                    # as written
