"""The wrapper's token-scan prefilter may let a file without a candidate through, but never stops
one with a candidate: every GEMM the test suite replaces (samples, spellings, families, thousands of
generated spellings) passes it; files whose loops nest less than three deep do not."""

from __future__ import annotations

import random
import time

import pytest

import gemm_gen
import test_families
import test_spellings
from conftest import POSITIVE, SAMPLES
from kernelfarer import cc
from kernelfarer.cpp import preprocess
from kernelfarer.prefilter import deepest_loop_nest, may_hold_nest, may_hold_product_nest


def _depth(text: str) -> int:
    return deepest_loop_nest(text.encode())


CORPUS = {**{f"spelling:{k}": v[0] for k, v in test_spellings.CASES.items()},
          **{f"family:{k}": v[0] for k, v in test_families.FAMILIES.items()}}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_replaced_spelling_passes(name):
    assert _depth(CORPUS[name]) >= 3


@pytest.mark.parametrize("path", sorted(POSITIVE.glob("*.c")) + [SAMPLES / "sgemm.c"],
                         ids=lambda p: p.name)
def test_every_positive_sample_passes(path):
    assert may_hold_nest(str(path))


def test_generated_spellings_pass():
    rng = random.Random(20261123)
    cases = [gemm_gen.make_case(rng, f"g{i}") for i in range(3000)]
    missed = [c.kind for c in cases if c.gemm and _depth(c.source) < 3]
    assert not missed, missed[:5]


@pytest.mark.parametrize("text, depth", [
    ("void f(void) { int i; for (i = 0; i < 3; i++) g(i); }", 1),
    # sequential loops do not nest; a do-while's `while (...)` is no loop of its own
    ("void f(void) { for (;;) { a(); } for (;;) { for (;;) { b(); } } do { c(); } while (x); }", 2),
    # unbraced bodies nest: a loop's, an expression statement's end where it ends
    ("void f(void) { for (i = 0; i < n; i++) for (j = 0; j < n; j++) while (k--) s(); }", 3),
    ("void f(void) { for (;;) a(); for (;;) for (;;) b[i] = f(c[(i)]); for (;;) d(); }", 2),
    ("void f(void) { do for (;;) x(); while (0); for (;;) for (;;) y(); }", 2),
    ("void f(void) { for (;;); for (;;) for (;;) ; }", 2),
    # other bodies (an if, a label, a statement expression) run to the end of their block
    ("void f(void) { for (;;) if (x) a(); for (;;) for (;;) b(); }", 3),
    ("void f(void) { for (;;) L: for (;;) for (;;) b(); }", 3),
    ("void f(void) { for (;;) for (;;) ({ for (;;) y(); }); }", 3),
    ("void f(void) { for (;;) x = (int[]){1}[0]; for (;;) for (;;) y(); }", 3),
    # loop words in comments, strings, characters and directives are not loops
    ('#define LOOP for (;;) { for (;;) { for (;;) {\n'
     'void f(void) { /* for (;;) { for */ const char *s = "for (;;) {"; char c = \'{\';\n'
     '// while (1) {\n for (;;) { do { x(); } while (0); } }', 2),
    # braces the scan cannot balance: a candidate, to be safe
    ("void f(void) { for (;;) { for (;;) {", 1 << 20),
    ("void f(void) { for (;;) } }", 1 << 20),
])
def test_depth(text, depth):
    assert _depth(text) == depth


def test_files_without_a_deep_nest_are_skipped(tmp_path):
    matvec = SAMPLES / "negative" / "matvec.c"
    assert not may_hold_nest(str(matvec))
    assert not may_hold_nest(str(SAMPLES / "project" / "util.c"))
    assert not may_hold_nest(str(tmp_path / "missing.c"))


def test_scan_is_fast_on_a_large_file(tmp_path):
    """A 1.3 MB file dense with shallow loops (20,000 of them) is settled in about 0.1 s."""
    body = "".join(f"int f{i}(int *x, int n) {{ int s = 0, i; /* for */ for (i = 0; i < n; i++) "
                   f"{{ if (x[i]) s += x[i]; }} while (n--) s++; return s; }}\n"
                   for i in range(10000))
    path = tmp_path / "big.c"
    path.write_text(body)
    start = time.perf_counter()
    assert not may_hold_nest(str(path))
    assert time.perf_counter() - start < 0.5    # a loose bound for a loaded CI machine


# -- after preprocessing: a nest three deep that multiplies ---------------------------------------

def _preprocessed(tmp_path, text: str) -> str:
    path = tmp_path / "case.c"
    path.write_text(text)
    return preprocess(str(path))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_replaced_spelling_has_a_product_nest(name, tmp_path):
    assert may_hold_product_nest(_preprocessed(tmp_path, CORPUS[name]))


@pytest.mark.parametrize("path", sorted(POSITIVE.glob("*.c")) + [SAMPLES / "sgemm.c"],
                         ids=lambda p: p.name)
def test_every_positive_sample_has_a_product_nest(path):
    assert may_hold_product_nest(preprocess(str(path)))


def test_generated_spellings_have_a_product_nest(tmp_path):
    rng = random.Random(20261124)
    cases = [c for c in (gemm_gen.make_case(rng, f"g{i}") for i in range(3000)) if c.gemm]
    # the raw text stands for the preprocessed one when it says yes (no macro hides a loop)
    missed = [c for c in cases if not may_hold_product_nest(c.source)]
    missed = [c.kind for c in missed if not may_hold_product_nest(_preprocessed(tmp_path, c.source))]
    assert not missed, missed[:5]


PRODUCT_FREE = """#include <stdio.h>
#define MIX(a, b) ((a) ^ (b))
long deep(const int *x, int n)    /* x * y in a comment is no product */
{
    long s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            for (int k = 0; k < j; k++)
                s += MIX(x[i], x[j]) + x[k];
    for (int i = 0; i < n; i++)
        s += (long)x[i] * x[n - 1 - i];          /* a product, but one loop deep */
    return s;
}
"""


def test_nests_without_a_product_are_not_parsed(tmp_path):
    assert not may_hold_product_nest(_preprocessed(tmp_path, PRODUCT_FREE))
    # a macro that multiplies is seen through
    hidden = PRODUCT_FREE.replace("((a) ^ (b))", "((a) * (b))")
    assert may_hold_product_nest(_preprocessed(tmp_path, hidden))
    # the wrapper skips the parse (no remarks to give), but not when remarks are asked for
    path = tmp_path / "case.c"
    path.write_text(PRODUCT_FREE)
    quick = cc._rewrite_one(str(path), (), "generic", True)
    full = cc._rewrite_one(str(path), (), "generic", False)
    assert quick.error is None and quick.compile_text is None and not quick.nests
    assert any("not parsed" in n for n in quick.notes)
    assert full.error is None and full.compile_text is None and full.nests


ACCESSORS_ONLY = """#include <math.h>
static inline float at(const float *p, int ld, int r, int c) { return p[r * ld + c]; }
static inline void put(float *p, int ld, int r, int c, float v) { p[r * ld + c] = v; }
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s = fmaf(at(A, K, i, k), at(B, N, k, j), s);
            put(C, N, i, j, s);
        }
}
"""


def test_products_hidden_in_accessors_are_seen(tmp_path):
    """Every `*` of a nest may be in the element accessors it calls (their index arithmetic) and
    its product a fused multiply-add: the nest is parsed, and the wrapper replaces it."""
    assert may_hold_product_nest(_preprocessed(tmp_path, ACCESSORS_ONLY))
    path = tmp_path / "case.c"
    path.write_text(ACCESSORS_ONLY)
    quick = cc._rewrite_one(str(path), (), "generic", True)
    assert quick.error is None and quick.compile_text is not None
    assert [n["replaced"] for n in quick.nests] == [True], quick.nests
    # ... while a nest calling only functions without one stays unparsed
    plain = ACCESSORS_ONLY.replace("r * ld + c", "r + c").replace("fmaf(", "fmaxf(")
    assert not may_hold_product_nest(_preprocessed(tmp_path, plain))


DOT_CALLER = """
static float dot(const float *x, const float *y, int n)
{
    float s = 0;
    for (int t = 0; t < n; t++)
        s += x[t] * y[t];
    return s;
}
static float first(const float *x, int n) { return n > 0 ? x[0] : 0; }
void rows(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            c[i * n + j] = CALL(a + i * k, b + j * k, k);
}
"""


def test_two_loops_around_a_dot_product_helper_pass(tmp_path):
    """Two loops around the call of a function of the file with a loop of products are a
    candidate (the call is inlined: three loops); around another function's call, not."""
    dot = DOT_CALLER.replace("CALL(a + i * k, b + j * k, k)", "dot(a + i * k, b + j * k, k)")
    other = DOT_CALLER.replace("CALL(a + i * k, b + j * k, k)", "first(a + i * k, k)")
    assert _depth(dot) == 3 and _depth(other) == 2
    assert may_hold_product_nest(_preprocessed(tmp_path, dot))
    assert not may_hold_product_nest(_preprocessed(tmp_path, other.replace("x[t] * y[t]",
                                                                            "x[t] + y[t]")))


# -- hollowed parses: only the functions that can hold a GEMM -------------------------------------

def test_hollowing_keeps_lines_gemms_and_helpers():
    from kernelfarer.prefilter import KEEP_BODY_BYTES, hollow_bodies
    big = "long big(int n) {\n" + "    n += 1;\n" * (KEEP_BODY_BYTES // 8) + "    return n;\n}\n"
    gemm = CORPUS[sorted(CORPUS)[0]]
    helper = "static float act(float x) { return x > 0 ? x : 0; }\n"
    struct = "struct s { int a[64]; } table = { { 1, 2 } };\n"
    # a long dot-product helper stays whole: a GEMM may call it per element
    dot = ("static float dot(const float *x, const float *y, int n) {\n    float s = 0;\n" +
           "    /* a long comment */\n" * (KEEP_BODY_BYTES // 24) +
           "    for (int t = 0; t < n; t++) s += x[t] * y[t];\n    return s;\n}\n")
    caller = ("void rows(int m, int n, const float *a, float *c) {\n    for (int i = 0; i < m; i++)"
              "\n        for (int j = 0; j < n; j++)\n            c[i * n + j] = dot(a, a, n);\n}\n")
    text = helper + struct + big + dot + caller + gemm
    out = hollow_bodies(text)
    assert out.count("\n") == text.count("\n") and len(out) == len(text)
    assert helper in out and struct in out and gemm in out and dot in out and caller in out
    assert "n += 1" not in out and "long big(int n) {" in out
    # ... but not when no two loops call it (a long function with a loop of products)
    alone = hollow_bodies(helper + dot + gemm)
    assert "s += x[t] * y[t]" not in alone


@pytest.mark.parametrize("path", sorted(POSITIVE.glob("*.c")) + [SAMPLES / "sgemm.c"],
                         ids=lambda p: p.name)
def test_a_hollowed_parse_rewrites_the_same(path):
    """What kernelfarer-cc rewrites with hollowed parses is what the full parse rewrites."""
    from kernelfarer.rewrite import RewriteOptions, rewrite_file
    full = rewrite_file(str(path), RewriteOptions(target="generic", verify=False))
    quick = rewrite_file(str(path), RewriteOptions(target="generic", verify=False, hollow=True))
    assert quick.text == full.text
    assert [r.location for r in quick.remarks if r.replaced] == \
        [r.location for r in full.remarks if r.replaced]


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_a_hollowed_parse_rewrites_every_spelling_the_same(name, tmp_path):
    from kernelfarer.rewrite import RewriteOptions, rewrite_file
    path = tmp_path / "case.c"
    path.write_text(CORPUS[name])
    full = rewrite_file(str(path), RewriteOptions(target="generic", verify=False))
    quick = rewrite_file(str(path), RewriteOptions(target="generic", verify=False, hollow=True))
    assert quick.text == full.text
