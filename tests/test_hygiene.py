"""Regression tests of two silent miscompiles: generated names that captured the user's, and an
epilogue helper that read the result while it was treated as pure."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import TRACE_COUNTER, TRACE_FLAGS, compile_c, load_library, native_target, run_cli

CAPTURE = """
void gemm(int kf_m, int kf_n, int kf_k, const float *A, const float *B, float *C)
{
    for (int i = 0; i < kf_m; i++)
        for (int j = 0; j < kf_n; j++)
            for (int p = 0; p < kf_k; p++)
                C[i * kf_n + j] += A[i * kf_k + p] * B[p * kf_n + j];
}
"""

MACRO_CAPTURE = """
#define kf_n_2 7
int kf_m_2;
void gemm(int kf_m, int kf_n, int kf_k, const float *A, const float *B, float *C)
{
    for (int i = 0; i < kf_m; i++)
        for (int j = 0; j < kf_n; j++)
            for (int p = 0; p < kf_k; p++)
                C[i * kf_n + j] += A[i * kf_k + p] * B[p * kf_n + j];
}
"""

SUPPORT_NAME = """
static int kf_min(int a, int b) { return a < b ? a : b; }
int smaller(int a, int b) { return kf_min(a, b); }
void gemm(int m, int n, int k, const float *A, const float *B, float *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                C[i * n + j] += A[i * k + p] * B[p * n + j];
}
"""


def _build(tmp_path, source: str):
    src = tmp_path / "in.c"
    src.write_text(source)
    out, report = tmp_path / "out.c", tmp_path / "r.json"
    done = run_cli("rewrite", src, "-o", out, "--report", report, "--target", native_target())
    assert done.returncode == 0, done.stderr
    libs = []
    for path, flags in ((src, ()), (out, (*TRACE_FLAGS, "-Wall", "-Wextra", "-Werror"))):
        lib = path.with_suffix(".so")
        compile_c(path, lib, "-O1", "-shared", "-fPIC", *flags)
        libs.append(lib)
    return json.loads(report.read_text())["nests"], out.read_text(), libs


@pytest.mark.parametrize("source", [CAPTURE, MACRO_CAPTURE], ids=["parameters", "macro-and-global"])
def test_sizes_named_like_generated_locals(tmp_path, source) -> None:
    """Size parameters called kf_m, kf_n, kf_k (and a macro and a global named like the fallback
    names): the call site's locals get names the file does not use, and the fast path computes
    what the original does."""
    nests, text, (orig, fast) = _build(tmp_path, source)
    assert nests[0]["replaced"]
    call_site = text[text.index("void gemm("):]
    locals_ = re.findall(r"const kf_index (\w+) =", call_site)
    assert len(locals_) == 3 and not set(locals_) & set(re.findall(r"\w+", source)), locals_
    cdef = "void gemm(int, int, int, const float *, const float *, float *);"
    _, lib0 = load_library(orig, cdef)
    ffi, lib1 = load_library(fast, cdef + f"extern long {TRACE_COUNTER};")
    rng = np.random.default_rng(0)
    for m, n, k in ((1, 1, 1), (13, 37, 29), (40, 33, 70)):
        a = rng.integers(-3, 4, (m, k)).astype(np.float32)
        b = rng.integers(-3, 4, (k, n)).astype(np.float32)
        c0 = rng.integers(-3, 4, (m, n)).astype(np.float32)
        c1 = c0.copy()
        before = getattr(lib1, TRACE_COUNTER)
        lib0.gemm(m, n, k, ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b),
                  ffi.from_buffer("float[]", c0))
        lib1.gemm(m, n, k, ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b),
                  ffi.from_buffer("float[]", c1))
        assert getattr(lib1, TRACE_COUNTER) == before + 1, (m, n, k)
        assert np.array_equal(c0, c1), (m, n, k)


def test_file_using_a_support_name_is_left_as_it_is(tmp_path) -> None:
    src = tmp_path / "in.c"
    src.write_text(SUPPORT_NAME)
    out = tmp_path / "out.c"
    done = run_cli("rewrite", src, "-o", out, "--remarks")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == SUPPORT_NAME
    assert "not replaced: the file uses 'kf_min'" in done.stderr


HELPERS = """
float Y[4096];
static const float table[4] = {0.5f, 2.0f, 3.0f, 4.0f};
static float bump(float x) { return x + Y[0]; }
static float peek(const float *p) { return *p; }
static float twice(float x) { return x * table[1]; }
static float relu(float x) { return x > 0 ? x : 0; }

void reads_result(int m, int n, int k, const float *X, const float *W)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += X[i * k + p] * W[p * n + j];
            Y[i * n + j] = bump(acc);
        }
}

void reads_pointer(int m, int n, int k, const float *X, const float *W, float *Z)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += X[i * k + p] * W[p * n + j];
            Z[i * n + j] = acc + peek(Z);
        }
}

void reads_table(int m, int n, int k, const float *X, const float *W, float *Z)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += X[i * k + p] * W[p * n + j];
            Z[i * n + j] = twice(relu(acc));
        }
}
"""


def test_epilogue_helpers_are_checked_for_what_they_read(tmp_path) -> None:
    """A helper that reads the result array (or any memory through a pointer) is not pure, so
    the nest stays as it is, with the reason; one that reads only a const table is pure."""
    nests, _, (orig, fast) = _build(tmp_path, HELPERS)
    by_line = {n["line"]: n for n in nests}
    first, second, third = sorted(by_line)
    assert not by_line[first]["replaced"]
    assert "'bump': it reads 'Y[0]'" in by_line[first]["reason"]
    assert not by_line[second]["replaced"]
    # (peek, an element accessor, is read through: what it reads is an element of the result)
    assert "reads '*Z', an element of 'Z', the result" in by_line[second]["reason"]
    assert by_line[third]["replaced"], by_line[third]
    cdef = ("void reads_result(int, int, int, const float *, const float *);"
            "void reads_table(int, int, int, const float *, const float *, float *);"
            "extern float Y[4096];")
    ffi, lib0 = load_library(orig, cdef)
    _, lib1 = load_library(fast, cdef)
    rng = np.random.default_rng(1)
    m, n, k = 19, 23, 31
    a = rng.integers(-3, 4, (m, k)).astype(np.float32)
    b = rng.integers(-3, 4, (k, n)).astype(np.float32)
    outs = []
    for lib in (lib0, lib1):
        z = np.zeros((m, n), np.float32)
        ffi.memmove(lib.Y, np.arange(4096, dtype=np.float32).tobytes(), 4096 * 4)
        lib.reads_result(m, n, k, ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b))
        lib.reads_table(m, n, k, ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b),
                        ffi.from_buffer("float[]", z))
        outs.append((np.frombuffer(ffi.buffer(lib.Y), np.float32).copy(), z))
    assert np.array_equal(outs[0][0], outs[1][0])
    assert np.array_equal(outs[0][1], outs[1][1])


# Helpers of several statements: pure ones (locals, if, return: saturations, requantizations)
# and the impure neighbours, each for its own reason.
STATEMENT_HELPERS = """
#include <math.h>
#include <stdint.h>
float Y[64];
long calls;
static int8_t requant(int32_t acc, float scale, int32_t zp)
{
    float v = (float)acc * scale;
    int32_t q = (int32_t)lrintf(v);
    q += zp;
    if (q > 127)
        q = 127;
    else if (q < -128) {
        q = -128;
    }
    return (int8_t)q;
}
static float clamp6(float x) { float y = x; if (y < 0) return 0; if (y > 6) y = 6; return y; }
static float counted(float x) { calls++; return x; }
static float scaled(float x) { float s = Y[1]; return x * s; }
static float looped(float x) { for (int t = 0; t < 2; t++) x = x * 0.5f; return x; }
static float cached(float x) { static float last; float r = x + last; return r; }

void q8(int m, int n, int k, const int8_t *X, const int8_t *W, int8_t *Z, float s)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += X[i * k + p] * W[p * n + j];
            Z[i * n + j] = requant(acc, s, -3);
        }
}

""" + "".join(f"""
void {name}(int m, int n, int k, const float *X, const float *W, float *Z)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += X[i * k + p] * W[p * n + j];
            Z[i * n + j] = {helper}(acc);
        }}
}}
""" for name, helper in (("relu6", "clamp6"), ("with_counted", "counted"), ("with_scaled", "scaled"),
                         ("with_looped", "looped"), ("with_cached", "cached")))


def test_helpers_of_several_statements(tmp_path) -> None:
    """A helper of several statements on local scalars (declarations, assignments, if, return)
    is pure as a `return <expression>;` one is: the nests calling requant and clamp6 are
    replaced and equal the loops; one that stores to a global, reads one, loops or keeps a
    static is not, and its nest stays, with the reason."""
    nests, _, (orig, fast) = _build(tmp_path, STATEMENT_HELPERS)
    nests = sorted((n for n in nests if "3-deep" not in n.get("reason", "")),   # looped's loop
                   key=lambda n: n["line"])
    reasons = [n.get("reason", "") for n in nests]
    replaced = [n["replaced"] for n in nests]
    assert replaced == [True, True, False, False, False, False], reasons
    assert "'counted': it stores to 'calls'" in reasons[2], reasons[2]
    assert "'scaled': it reads 'Y[1]'" in reasons[3], reasons[3]
    assert "'looped': its body holds 'for" in reasons[4], reasons[4]
    assert "'cached': it declares 'static float last" in reasons[5], reasons[5]
    cdef = ("void q8(int, int, int, const int8_t *, const int8_t *, int8_t *, float);"
            "void relu6(int, int, int, const float *, const float *, float *);")
    ffi, lib0 = load_library(orig, cdef)
    _, lib1 = load_library(fast, cdef + f"extern long {TRACE_COUNTER};")
    rng = np.random.default_rng(3)
    for m, n, k in ((1, 1, 1), (13, 37, 29), (40, 33, 70)):
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8)
        fa, fb = a.astype(np.float32), b.astype(np.float32)
        outs = []
        for lib in (lib0, lib1):
            z8, zf = np.zeros((m, n), np.int8), np.zeros((m, n), np.float32)
            lib.q8(m, n, k, ffi.from_buffer("int8_t[]", a), ffi.from_buffer("int8_t[]", b),
                   ffi.from_buffer("int8_t[]", z8), 0.0123)
            lib.relu6(m, n, k, ffi.from_buffer("float[]", fa / 64), ffi.from_buffer("float[]", fb),
                      ffi.from_buffer("float[]", zf))
            outs.append((z8, zf))
        assert np.array_equal(outs[0][0], outs[1][0]), (m, n, k)
        assert np.array_equal(outs[0][1], outs[1][1]), (m, n, k)
    assert getattr(lib1, TRACE_COUNTER) == 6


def test_a_helper_the_wrapper_emptied_is_not_pure() -> None:
    """kernelfarer-cc empties the long bodies of functions without a GEMM before it parses
    (prefilter.hollow_bodies): such a helper reads as a function that returns no value, never as
    a pure one, whatever its statements were."""
    from pycparser import c_parser

    from kernelfarer.epilogue import pure_functions
    from kernelfarer.prefilter import KEEP_BODY_BYTES, hollow_bodies
    pad = " ".join("g += x;" for _ in range(KEEP_BODY_BYTES // 7))
    text = f"float g; static float noisy(float x) {{ {pad} return x; }}\n" \
           "static float quiet(float x) { float y = x; if (y < 0) y = 0; return y; }\n"
    hollowed = hollow_bodies(text)
    assert "g += x" not in hollowed
    found = pure_functions(c_parser.CParser().parse(hollowed))
    assert "quiet" in found and "noisy" not in found
    assert found.why["noisy"] == "it returns no value"

def test_fast_identifiers_cover_the_tokens():
    """scan.identifiers (a regex pass) finds every identifier token of the tokenizer, on the
    samples and on generated support code."""
    from conftest import SAMPLES
    from kernelfarer import emit, scan
    from kernelfarer.plan import make_plan
    from kernelfarer.targets import TARGETS, DType
    texts = [p.read_text(errors="surrogateescape") for p in sorted(SAMPLES.rglob("*.[ch]"))]
    texts.append(emit.render_support([make_plan(TARGETS["x86-avx2"], DType.F32)]))
    texts.append('L"x" u8"y" xL"z" 1.5e+3f 0x1fULL .5 a.b->c /* q */ // r\n#define S(t) #t\n')
    for text in texts:
        tokens = {t.text for t in scan.tokenize(text) if t.kind == "ident"}
        assert tokens <= scan.identifiers(text)
