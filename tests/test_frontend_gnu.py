"""The C real projects contain: GNU and clang extensions parse, a function the parser cannot read
is left out alone (the rest of the file is still considered), and deep expressions do not crash.

Each construct sits in a file beside a GEMM nest: the nest must be replaced, the rewrite must
compile, and a nest that holds a construct with effects (asm, computed goto) must be refused."""

from __future__ import annotations

import subprocess

import pytest

from conftest import native_target, run_cli
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from test_spellings import OneTestFactory, build_cases, check_case

GEMM = """
void gemm(int n, const float *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i * n + j] += A[i * n + k] * B[k * n + j];
}
"""

# construct -> code that uses it (each must compile with clang-19 -std=gnu11)
CONSTRUCTS = {
    "offsetof": "#include <stddef.h>\nstruct S { int a; double b; };\n"
                "size_t off(void) { return offsetof(struct S, b); }",
    "asm_volatile": "unsigned long tsc(void) { unsigned lo, hi;\n"
                    "  asm volatile(\"rdtsc\" : \"=a\"(lo), \"=d\"(hi)); "
                    "return ((unsigned long)hi << 32) | lo; }",
    "asm_goto": "int bit(int x) { asm goto(\"\" :::: out); return x; out: return 0; }",
    "asm_label": "extern int renamed(int) __asm__(\"abs\");\n"
                 "int call(int x) { return renamed(x); }",
    "basic_asm_top_level": "__asm__(\".globl kf_marker\\nkf_marker:\");",
    "asm_top_level_after_declaration": "int kf_before;\n__asm__(\".globl kf_marker2\\nkf_marker2:\");\n"
                                       "static int kf_after(void) { return kf_before; }\n"
                                       "int kf_use(void) { return kf_after(); }",
    "computed_goto": "int dispatch(int x) { static void *t[] = { &&one, &&two };\n"
                     "  goto *t[x & 1];\none: return 1;\ntwo: return 2; }",
    # the preprocessor puts a line marker between `{` and the first `&&` (Lua's jump table)
    "computed_goto_after_line_marker": "int disp(int x) { static const void *const t[] = {\n"
                                       "#if 0\n" + "a skipped line\n" * 10 + "#endif\n"
                                       "&&one, &&two };\n  goto *t[x & 1];\n"
                                       "one: return 1;\ntwo: return 2; }",
    "case_ranges": "int lower(int c) { switch (c) { case 'a' ... 'z': return 1; "
                   "default: return 0; } }",
    "int128": "__int128 wide(__int128 x) { return x * 3; }\n"
              "unsigned __int128 uwide(unsigned long x) { return (unsigned __int128)x << 64; }",
    "complex_literal": "#include <complex.h>\ndouble complex cz(double x) { return x + 1.0i + I; }",
    "auto_type": "int autos(int x) { __auto_type y = x + 1; return y; }",
    "typeof": "int tof(int x) { __typeof__(x) y = x; typeof(y) z = y; return z; }",
    "statement_expression": "#define MAX(a, b) ({ __typeof__(a) a_ = (a); __typeof__(b) b_ = (b);"
                            " a_ > b_ ? a_ : b_; })\nint mx(int a, int b) { return MAX(a, b); }",
    "attributes_anywhere": "int __attribute__((noinline)) f1(int x) __attribute__((cold));\n"
                           "int __attribute__((noinline)) f1(int x) { return x; }\n"
                           "struct __attribute__((packed)) P { char c; int i; };\n"
                           "static int counter __attribute__((unused)) = 0;\n"
                           "void f2(int *p) { __attribute__((unused)) int q = *p; }",
    "static_assert": "_Static_assert(sizeof(int) == 4, \"int\");\n"
                     "void sa(void) { _Static_assert(1, \"inside\"); }",
    "knr_definition": "int knr(a, b) int a; int b; { return a + b; }",
    "builtins": "int bi(unsigned x, void *p) { __builtin_prefetch(p); "
                "return __builtin_popcount(x) + __builtin_expect(x > 0, 1); }",
    "vector_extension": "typedef int v4si __attribute__((vector_size(16)));\n"
                        "int vec(void) { v4si a = {1, 2, 3, 4}; return a[0]; }",
    "generic": "#define KIND(x) _Generic((x), int: 1, float: 2, default: 0)\n"
               "int kind(float v) { return KIND(v); }",
    "comments_in_c89_headers": "#include <stdint.h>\nint32_t c89ish(int32_t x) { return x; }",
    "real_imag": "#include <complex.h>\ndouble parts(double complex z) {\n"
                 "  double r = __real__ z + __imag__ z; __real__ z = 2.0; return r + creal(z); }",
    "alignof": "int al(int n) { return __alignof__(double) + __alignof__(n) + _Alignof(long); }",
    "type_builtins": "int tb(void) { return __builtin_types_compatible_p(int, long)\n"
                     "  + __builtin_choose_expr(1, 2, 3); }",
    "offsetof_anonymous_struct": "#include <stddef.h>\n"
                                 "int oa(void) { return (int)__builtin_offsetof(struct { int a, b; }, b); }",
    "range_designators": "static int tab[8] = { [0 ... 3] = 1, [4 ... 7] = 2 };\n"
                         "int rd(int i) { return tab[i & 7]; }",
    "c23_attributes": "[[maybe_unused]] static int q;\n"
                      "[[nodiscard]] int at(int x) { [[maybe_unused]] int y = x; return x; }",
    "elvis": "int el(int a, int b) { return a ?: b ?: 1; }",
    "label_arithmetic": "int la(int n) { static const int off[] = { &&l1 - &&l1, &&l2 - &&l1 };\n"
                        "  goto *(&&l1 + off[n & 1]);\nl1: return 1;\nl2: return 2; }",
    "int128_typedefs": "__int128_t w(__uint128_t x) { return (__int128_t)x; }",
    "bitint": "_BitInt(37) bits37(_BitInt(37) x) { return x + 1; }",
    "fp16_storage": "float widen(const __fp16 *h, int i) { return (float)h[i]; }",
    "non_ascii_identifiers": "float l\u00e4nge(float gr\u00f6\u00dfe) { return gr\u00f6\u00dfe * 2; }",
}


def _rewrite(tmp_path, text: str, name: str = "t.c"):
    src = tmp_path / name
    src.write_text(text)
    return src, rewrite_file(str(src), RewriteOptions(target=native_target()))


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
def test_file_with_gnu_construct_is_rewritten(construct, tmp_path):
    code = CONSTRUCTS[construct]
    src, result = _rewrite(tmp_path, code + "\n" + GEMM)
    assert not [r.message() for r in result.remarks if r.kind == "function"], \
        f"{construct}: a function was left out"
    assert result.replaced == 1, [r.message() for r in result.remarks]
    out = tmp_path / "out.c"
    out.write_text(result.text)
    done = subprocess.run(["clang-19", "-std=gnu11", "-O1", "-c", str(out), "-o",
                           str(tmp_path / "out.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


NEST_WITH = {
    "asm": "asm volatile(\"\" ::: \"memory\");",
    "computed_goto": "{ static void *t[] = { &&next }; goto *t[0]; next:; }",
    "statement_expression_writing_c": "(void)({ C[0] = 1; 0; });",
    "inline_asm_operand": "{ float v = A[i * n + k]; asm(\"\" : \"+x\"(v)); (void)v; }",
}


@pytest.mark.parametrize("what", sorted(NEST_WITH))
def test_a_nest_holding_effects_is_refused(what, tmp_path):
    gemm = GEMM.replace("C[i * n + j] += A[i * n + k] * B[k * n + j];",
                        "{ " + NEST_WITH[what] + "\n C[i * n + j] += A[i * n + k] * B[k * n + j]; }")
    _, result = _rewrite(tmp_path, gemm)
    assert result.replaced == 0, [r.message() for r in result.remarks]
    [remark] = [r for r in result.remarks if r.kind != "function"]
    assert remark.reason


def test_forward_substitution_sees_writes_in_statement_expressions(tmp_path):
    """`m` is changed inside a statement expression between its definition and the nest: the
    nest must use the value at run time, and the rewrite must agree with the original."""
    source = """
void se(int n, const float *A, const float *B, float *C)
{
    int m = n;
    (void)({ m = n > 2 ? n - 2 : n; m; });
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i * n + j] += A[i * n + k] * B[k * n + j];
}
"""
    case = {"se": (source, "void se(int, const float *, const float *, float *);", "float",
                   lambda m, n, k: [("int", n), ("T*", n, n), ("T*", n, n), ("T*", n, n)])}
    built = build_cases(case, OneTestFactory(tmp_path))
    assert built["se"][0].replaced == 1
    check_case("se", case["se"], built["se"], sizes=[(1, 1, 1), (1, 5, 1), (1, 17, 1),
                                                     (1, 3, 1), (1, 2, 1)])


def test_every_construct_in_one_file_still_computes_the_same(tmp_path):
    text = "\n".join(CONSTRUCTS[c] for c in sorted(CONSTRUCTS)
                     if c not in ("basic_asm_top_level", "knr_definition")) + GEMM
    case = {"all": (text, "void gemm(int, const float *, const float *, float *);", "float",
                    lambda m, n, k: [("int", n), ("T*", n, n), ("T*", n, n), ("T*", n, n)])}
    built = build_cases(case, OneTestFactory(tmp_path))
    assert built["all"][0].replaced == 1
    check_case("all", case["all"], built["all"],
               sizes=[(1, 0, 1), (1, 1, 1), (1, 7, 1), (1, 31, 1), (1, 33, 1)])


UNREADABLE = {
    "local_label": ("int local(int n) { __label__ out; if (n) goto out; return 0; out: return 1; }",
                    "local", "syntax error before 'out'"),
    "broken_expression": ("int broken(int n) {\n  return n + ;\n}", "broken", "invalid expression"),
    # an error in the function's own declaration (a type its header would have defined): the
    # whole definition is left out, not only its body (which left the error, and the file failed)
    "unknown_parameter_type": ("int unknown(index_t n) {\n  return (int)n;\n}", "unknown",
                               "syntax error before 'n'"),
}


@pytest.mark.parametrize("what", sorted(UNREADABLE))
def test_a_function_the_parser_cannot_read_is_left_out_alone(what, tmp_path):
    code, name, why = UNREADABLE[what]
    before = GEMM.replace("gemm(", "gemm_before(")
    src, result = _rewrite(tmp_path, before + "\n" + code + "\n" + GEMM)
    [left_out] = [r for r in result.remarks if r.kind == "function"]
    line = (before + "\n").count("\n") + 1
    assert left_out.location.line >= line and left_out.location.column > 0
    assert left_out.reason == f"function '{name}' not considered: the parser cannot read it ({why})"
    assert left_out.message().startswith(f"{src}:{left_out.location.line}:")
    assert result.replaced == 2, [r.message() for r in result.remarks]
    assert code in result.text           # the function is kept, unchanged


def _deep_sum(terms: int) -> str:
    return " + ".join(f"x[{t % 7}] * {t}" for t in range(terms))


def test_deep_expressions_do_not_crash(tmp_path):
    """A 3,000-term expression (parsed and analysed recursively) beside a GEMM, and one inside a
    nest (of elements that move with k: A[0] alone would be a scale), which is then refused for
    what it is, not for its depth."""
    deep = f"int deep(const int *x) {{ return {_deep_sum(3000)}; }}\n"
    nest = GEMM.replace("A[i * n + k] * B[k * n + j]",
                        f"A[i * n + k] * B[k * n + j] * ({_deep_sum(1500).replace('x[', 'A[k + ')})")
    src, result = _rewrite(tmp_path, deep + GEMM + nest.replace("gemm(", "gemm_deep("))
    assert result.replaced == 1, [r.message() for r in result.remarks]
    refused = [r for r in result.remarks if not r.replaced and r.kind != "function"]
    assert refused and all("nested too deeply" not in r.reason for r in refused)


def test_the_cli_warns_once_per_left_out_function(tmp_path):
    src = tmp_path / "two.c"
    src.write_text(UNREADABLE["local_label"][0] + "\n" + GEMM)
    done = run_cli("rewrite", src, "-o", tmp_path / "out.c")
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"{src}:1:30: warning: function 'local' not considered: the parser cannot read it "
        "(syntax error before 'out')"]


@pytest.mark.parametrize("directive, replaced", [
    ('#line 200 "calc.y"', False), ("#line 300", False), ("# 40", False),
    ('#line {next} "{path}"', True), ("#line {next}", True), ('#line {next} "t.c"', False),
    # spellings the quick look for such a directive (before any tokenizing) must not miss
    ('/* c */ #line 300', False), ("# /* c */ line 300", False), ("#\\\nline 300", False),
    ("  #  300", False), ("/* #line 300 */", True), ('char *s = "#line 300";', True)])
def test_line_directives_of_the_file(directive, replaced, tmp_path):
    """Generated code (bison, re2c) renumbers or renames its lines with #line: its nests can then
    not be found in the file by the compiler's coordinates, and the file is left as it is, with
    one warning naming the directive; a directive that restates the next line's own number and
    name (the file's name as the compiler is given it) changes nothing."""
    text = "int before;\n" + directive.format(next=3, path=tmp_path / "t.c") + "\n" + GEMM
    src, result = _rewrite(tmp_path, text)
    assert result.replaced == (1 if replaced else 0), [r.message() for r in result.remarks]
    if not replaced:
        (remark,) = [r for r in result.remarks if r.kind == "function"]
        assert remark.location.line == 2 and "#line directive" in remark.message()
        assert result.text == text


def test_non_ascii_names_in_a_rewritten_nest(tmp_path):
    """Names beyond ASCII (C99) in the nest itself: the generated call spells them as written."""
    gemm = GEMM.replace("A", "M\u00e4").replace("B", "B\u00f6")
    src, result = _rewrite(tmp_path, gemm)
    assert result.replaced == 1, [r.message() for r in result.remarks]
    assert "M\u00e4" in result.text and "_kfU" not in result.text
    assert "M\u00e4" in result.remarks[0].message()
    out = tmp_path / "out.c"
    out.write_text(result.text)
    done = subprocess.run(["clang-19", "-O1", "-c", str(out), "-o", str(tmp_path / "out.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_nest_holding_a_directive_says_so(tmp_path):
    """A nest whose text holds an #ifdef is not what the compiler sees: left alone, and the
    remark names the directive rather than a macro expansion."""
    gemm = GEMM.replace("            for (int k", "#ifdef NOTHING\n#endif\n            for (int k")
    _, result = _rewrite(tmp_path, gemm)
    assert result.replaced == 0
    (remark,) = [r for r in result.remarks if r.kind == "gemm"]
    assert "preprocessor directive ('#ifdef'" in remark.message()


def test_a_nest_whose_body_is_chosen_by_if_0_is_left_alone(tmp_path):
    """`#if 0 ... #else body #endif` inside the nest: the parser sees the active branch, the text
    holds both; the nest is left alone (it used to be cut inside the inactive branch)."""
    gemm = GEMM.replace("                C[i * n + j] += A[i * n + k] * B[k * n + j];",
                        "#if 0\n                C[i * n + j] = 0;\n#else\n"
                        "                C[i * n + j] += A[i * n + k] * B[k * n + j];\n#endif")
    _, result = _rewrite(tmp_path, gemm)
    assert result.replaced == 0 and result.text == gemm
    (remark,) = [r for r in result.remarks if r.kind == "gemm"]
    assert "preprocessor directive ('#if'" in remark.message()


WEAK_SPELLINGS = """
__attribute__((weak)) float a1(float x) { return x; }
float __attribute__((__weak__)) a2(float x) { return x; }
float a3(float x) __attribute__((weak)), a4(float y);
[[gnu::weak]] float a5(float x) { return x; }
#pragma weak a6
# pragma weak a7 = a1
static float n1(float x) __attribute__((always_inline, unused));
float n2(float x) { __attribute__((unused)) float y = x; return y; }
float n3(float v[4]) { return v[0]; }
struct s { int k; } __attribute__((weak)) a8(void) { struct s r = {0}; return r; }
"""


def test_weak_functions_in_every_spelling(tmp_path):
    """`weak` on any declaration of a function, in GNU or C23 attribute form or by pragma, marks
    it (its body here may not be what runs); another attribute does not, nor does a weak one
    mark the functions around it."""
    from kernelfarer import frontend
    src = tmp_path / "weak.c"
    src.write_text(WEAK_SPELLINGS)
    weak = frontend.load(str(src)).weak
    assert weak == {"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"}
