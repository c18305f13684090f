"""Exact tests of every kernel path of the x86 and generic targets, on small-integer data.

For each (target, element type) the support code (emit.render_support) is compiled into a shared
library together with exported wrappers of its driver, its pack routines, its packed micro-kernel and
its direct (unpacked) kernel; cffi calls them on operands that end right before a PROT_NONE guard
page (a read past the last element faults), with NaN in every padding element of A and B (an element
read that should not be changes the result) and a sentinel in C around the m x n corner (a stray
write shows).  Every result is compared exactly with a naive reference.

Paths: the driver as planned (small problems direct, the rest packed, the switch between them
checked through the KERNELFARER_TRACE counter `kernelfarer_direct_calls`; the direct path's
column-panel walk for k blocks above 16 and row-panel walk below, B panels in place and copied),
the driver forced to pack
everything (plan.direct off) and forced to run everything direct (direct_policy.elems huge), each with
the analytical and with tiny cache blocks (every mc, kc, nc edge crossed at small sizes).  Operands:
A and B plain and transposed, leading dimensions larger than the matrix, alpha 1/2, beta 0/1/3,
load_c 0 (C full of NaN, never read) and 1.  The AVX-512 code is compiled (clang-19 and gcc-12) and
its k loops are checked for spills, but runs only on a host that has AVX-512F.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import CLANG, TRACE_FLAGS, host_runs
from kernelfarer import emit, hostinfo, targets
from kernelfarer.plan import KernelPlan, make_plan
from kernelfarer.targets import DType

GCC = shutil.which("gcc-12") or shutil.which("gcc")
OBJDUMP = shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump")
WARN_FLAGS = ("-Wall", "-Wextra", "-Werror")

INT8 = DType.int8_types()
# bf16 operands: their bits in uint16 (cffi has no __bf16; a pointer is a pointer)
NUMPY = {DType.F32: np.float32, DType.F64: np.float64, DType.I32: np.int32,
         DType.I64: np.int64, **{d: np.int8 for d in INT8}, DType.BF16F32: np.uint16,
         DType.F16F32: np.float16}
CDEF_T = {DType.F32: "float", DType.F64: "double", DType.I32: "int", DType.I64: "long",
          **{d: "int" for d in INT8}, DType.BF16F32: "float", DType.F16F32: "float"}
CDEF_I = {DType.F32: "float", DType.F64: "double", DType.I32: "int", DType.I64: "long",
          **{d: d.in_ctype for d in INT8}, DType.BF16F32: "unsigned short",
          DType.F16F32: "unsigned short"}
BF16_NAN = 0x7fc0
# the values of an int8 operand: its type's, whole
INT8_SPAN = {"signed char": (-128, 128), "unsigned char": (0, 256)}
SENTINEL = -77          # C elements outside the m x n corner hold this; they must keep it

WRAPPERS = """
/* exported entry points of the test library */
#include <stdlib.h>
/* an epilogue: C = 2 C + 1 on the rows and columns given, counting each element's visits */
static void t_epilogue(const void *const *ctx, kf_index r0, kf_index r1, kf_index c0, kf_index c1)
{{
    {T} *c = *({T} *const *)ctx[0];
    kf_index ldc = *(const kf_index *)ctx[1];
    int *seen = *(int *const *)ctx[2];
    kf_index r, s;
    for (r = r0; r < r1; ++r)
        for (s = c0; s < c1; ++s) {{
            c[r * ldc + s] = 2 * c[r * ldc + s] + 1;
            seen[r * ldc + s] += 1;
        }}
}}
{attr} int t_driver(kf_index m, kf_index n, kf_index k, {T} alpha, const {I} *a, kf_index rsa,
        kf_index csa, const {I} *b, kf_index rsb, kf_index csb, {T} beta, int load_c, {T} *c,
        kf_index ldc, int *seen)
{{
    const void *ctx[3];
    ctx[0] = &c;
    ctx[1] = &ldc;
    ctx[2] = &seen;
    return {driver}(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, load_c, c, ldc,
                    seen ? t_epilogue : 0, seen ? ctx : 0, 0);
}}
/* the same epilogue, C = 2 C + 1, as a tile program too (kernelfarer/tileprog.py): times a
   scalar, a choice that keeps finite values and NaN (v > 1e30 ? 1e30 : v), plus 1 from a column
   (kind 1) and 0 from a matrix of C's shape (kind 2); the driver runs it where its kernel can,
   the hook elsewhere */
{attr} int t_driver_prog(kf_index m, kf_index n, kf_index k, {T} alpha, const {I} *a,
        kf_index rsa, kf_index csa, const {I} *b, kf_index rsb, kf_index csb, {T} beta,
        int load_c, {T} *c, kf_index ldc, int *seen)
{{
    const void *ctx[3];
    kf_tile_prog prog;
    static const {T} one[1] = {{1}};
    {T} *zeros = ({T} *)calloc((size_t)(m * ldc + 1), sizeof({T}));
    int ok;
    ctx[0] = &c;
    ctx[1] = &ldc;
    ctx[2] = &seen;
    prog.n = 4;
    prog.step[0].op = 3; prog.step[0].kind = 0; prog.step[0].p = 0; prog.step[0].rs = 0; prog.step[0].s = 2;
    prog.step[1].op = 5; prog.step[1].kind = 0; prog.step[1].p = 0; prog.step[1].rs = 0; prog.step[1].s = 1e30;
    prog.step[2].op = 0; prog.step[2].kind = 1; prog.step[2].p = one; prog.step[2].rs = 0; prog.step[2].s = 0;
    prog.step[3].op = 0; prog.step[3].kind = 2; prog.step[3].p = zeros; prog.step[3].rs = ldc; prog.step[3].s = 0;
    ok = {driver}(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, load_c, c, ldc, t_epilogue, ctx,
                  &prog);
    free(zeros);
    return ok;
}}
{attr} void t_pack_a(kf_index m, kf_index k, const {I} *a, kf_index rsa, kf_index csa, {I} *ap)
{{
    {pack_a}(m, k, a, rsa, csa, ap);
}}
{attr} void t_pack_b(kf_index k, kf_index n, const {I} *b, kf_index rsb, kf_index csb, {I} *bp)
{{
    {pack_b}(k, n, b, rsb, csb, bp);
}}
{attr} void t_kernel(kf_index k, const {I} *a, const {I} *b, {T} *c, kf_index ldc, kf_index m,
        kf_index n, {T} alpha, {T} beta, int load_c)
{{
    {kernel}(k, a, b, c, ldc, m, n, alpha, beta, load_c);
}}
"""

DIRECT_WRAPPER = """
{attr} void t_direct(kf_index k, const {I} *a, kf_index rsa, kf_index csa, const {I} *b,
        kf_index rsb, {T} *c, kf_index ldc, kf_index m, kf_index n, {T} alpha, {T} beta,
        int load_c)
{{
    {direct}(k, a, rsa, csa, b, rsb, c, ldc, m, n, alpha, beta, load_c);
}}
"""

CDEF = """
int t_driver(long m, long n, long k, {T} alpha, const {I} *a, long rsa, long csa, const {I} *b,
             long rsb, long csb, {T} beta, int load_c, {T} *c, long ldc, int *seen);
int t_driver_prog(long m, long n, long k, {T} alpha, const {I} *a, long rsa, long csa,
                  const {I} *b, long rsb, long csb, {T} beta, int load_c, {T} *c, long ldc,
                  int *seen);
extern long kernelfarer_tile_programs;
void t_pack_a(long m, long k, const {I} *a, long rsa, long csa, {I} *ap);
void t_pack_b(long k, long n, const {I} *b, long rsb, long csb, {I} *bp);
void t_kernel(long k, const {I} *a, const {I} *b, {T} *c, long ldc, long m, long n, {T} alpha,
              {T} beta, int load_c);
void t_direct(long k, const {I} *a, long rsa, long csa, const {I} *b, long rsb, {T} *c, long ldc,
              long m, long n, {T} alpha, {T} beta, int load_c);
extern long kernelfarer_direct_calls;
extern long kernelfarer_thin_calls;
extern long kernelfarer_stream_calls;
"""


def library_source(plan: KernelPlan) -> str:
    names = dict(attr=plan.attribute, T=plan.ctype, I=plan.in_ctype, driver=plan.driver_name,
                 pack_a=plan.pack_a_name, pack_b=plan.pack_b_name, kernel=plan.kernel_name,
                 direct=plan.direct_name)
    text = emit.render_support([plan]) + WRAPPERS.format(**names)
    if plan.direct:
        text += DIRECT_WRAPPER.format(**names)
    else:
        text += "long kernelfarer_direct_calls;\n"
    if not plan.thin_name:
        text += "long kernelfarer_thin_calls;\n"
    if not (plan.direct and plan.direct_policy.stream_k):
        text += "long kernelfarer_stream_calls;\n"
    return text


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}"
    return done


# -- guarded operands -----------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class Guarded:
    """`count` elements of `dtype` that end right before a PROT_NONE page."""

    def __init__(self, count: int, dtype) -> None:
        itemsize = np.dtype(dtype).itemsize
        nbytes = max(1, count) * itemsize
        pages = -(-nbytes // mmap.PAGESIZE)
        self._map = mmap.mmap(-1, (pages + 1) * mmap.PAGESIZE)
        raw = np.frombuffer(self._map, dtype=np.uint8)
        guard = raw.ctypes.data + pages * mmap.PAGESIZE
        assert _libc.mprotect(guard, mmap.PAGESIZE, 0) == 0
        offset = pages * mmap.PAGESIZE - nbytes
        self.array = np.frombuffer(self._map, dtype=dtype, count=max(1, count), offset=offset)
        self.address = self.array.ctypes.data


def unread_value(dtype: DType):
    """What C holds where it must not be read (load_c == 0)."""
    return np.nan if dtype.kind == "float" else 12345


def padding_value(dtype: DType):
    if dtype is DType.BF16F32:
        return BF16_NAN
    return np.nan if dtype.kind == "float" else 100  # ints: a large value shows in the sum


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """Small integers as bf16 (exact: the top half of their float bits)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


class Operand:
    """A matrix (rows x cols) stored at base[r*rs + c*cs] in a guarded buffer; every other element of
    the buffer is padding."""

    def __init__(self, values: np.ndarray, rs: int, cs: int, dtype: DType, pad,
                 ctype: str = "") -> None:
        """`ctype`: the elements' type when it is not the GEMM's operand type (uint8 in an
        int8 buffer: the bits are stored as they are)."""
        rows, cols = values.shape
        self.rs, self.cs = rs, cs
        count = (rows - 1) * rs + (cols - 1) * cs + 1
        self.buffer = Guarded(count, np.uint8 if ctype == "unsigned char" else NUMPY[dtype])
        if dtype is DType.BF16F32:
            values = bf16_bits(values)
        self.buffer.array[:] = pad
        index = (np.arange(rows)[:, None] * rs + np.arange(cols)[None, :] * cs)
        self.buffer.array[index] = values
        self.index = index

    def pointer(self, ffi, ctype: str):
        return ffi.cast(f"{ctype} *", self.buffer.address)


def layout(rows: int, cols: int, transposed: bool, pad: int) -> tuple[int, int]:
    """(row stride, column stride) of a rows x cols matrix, leading dimension `pad` larger."""
    return (1, rows + pad) if transposed else (cols + pad, 1)


def random_ints(rng, shape, low=-3, high=4) -> np.ndarray:
    return rng.integers(low, high, size=shape).astype(np.int64)


def reference(a, b, c0, alpha, beta, load_c):
    acc = a.astype(np.int64) @ b.astype(np.int64)
    if load_c:
        return beta * c0 + alpha * acc
    return alpha * acc


class Library:
    def __init__(self, plan: KernelPlan, path: Path) -> None:
        import cffi
        self.plan = plan
        self.dtype = plan.dtype
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF.format(T=CDEF_T[plan.dtype], I=CDEF_I[plan.dtype]))
        self.lib = self.ffi.dlopen(str(path))

    @property
    def direct_calls(self) -> int:
        return self.lib.kernelfarer_direct_calls

    @property
    def thin_calls(self) -> int:
        return self.lib.kernelfarer_thin_calls

    def gemm(self, rng, m, n, k, *, ta=False, tb=False, pad=0, cpad=0, alpha=1, beta=1,
             load_c=1, nan_c=False, bpad=None, declined=False, epilogue=False, span=(-3, 4)):
        """One driver call on fresh operands; asserts the exact result (`declined`: that the
        driver declined, returning 0 with C untouched; `epilogue`: with an epilogue hook, C = 2 C
        + 1, which must have visited each element of C once, after its last update; "prog": the
        same as a tile program too, the hook visiting the elements the program did not).  `span`
        "full": each int8 operand over its type's whole range."""
        dt, T, I = self.dtype, CDEF_T[self.dtype], CDEF_I[self.dtype]
        span_a, span_b = (INT8_SPAN[dt.a_ctype], INT8_SPAN[dt.b_ctype]) if span == "full" \
            else (span, span)
        a, b = random_ints(rng, (m, k), *span_a), random_ints(rng, (k, n), *span_b)
        A = Operand(a, *layout(m, k, ta, pad), dt, padding_value(dt), dt.a_ctype)
        B = Operand(b, *layout(k, n, tb, pad if bpad is None else bpad), dt, padding_value(dt),
                    dt.b_ctype)
        ldc = n + cpad
        c0 = random_ints(rng, (m, n))
        C = Guarded(m * ldc, NUMPY_C[dt])
        C.array[:] = SENTINEL
        corner = C.array.reshape(m, ldc)[:, :n]
        if load_c and not nan_c:
            corner[:] = c0
        else:
            corner[:] = unread_value(dt)
        before = C.array.copy()
        seen = np.zeros(m * ldc, dtype=np.int32)
        entry = self.lib.t_driver_prog if epilogue == "prog" else self.lib.t_driver
        ok = entry(m, n, k, alpha, A.pointer(self.ffi, I), A.rs, A.cs,
                               B.pointer(self.ffi, I), B.rs, B.cs, beta, load_c,
                               self.ffi.cast(f"{T} *", C.address), ldc,
                               self.ffi.cast("int *", seen.ctypes.data) if epilogue
                               else self.ffi.NULL)
        what = (f"{self.plan.driver_name} m={m} n={n} k={k} ta={ta} tb={tb} pad={pad} "
                f"cpad={cpad} alpha={alpha} beta={beta} load_c={load_c} epilogue={epilogue}")
        if declined:
            assert ok == 0 and np.array_equal(C.array, before, equal_nan=True), what
            assert not seen.any(), what
            return
        if epilogue:
            visits = seen.reshape(m, ldc)
            once = visits[:, :n] <= 1 if epilogue == "prog" and self.plan.tile_prog \
                else visits[:, :n] == 1
            assert once.all() and not visits[:, n:].any(), what + f": epilogue visits\n{visits}"
            C.array.reshape(m, ldc)[:, :n] = (C.array.reshape(m, ldc)[:, :n] - 1) / 2
        assert ok == 1, what
        got = C.array.reshape(m, ldc)
        if nan_c and load_c:
            assert np.isnan(got[:, :n]).all(), what + ": beta * NaN must stay NaN"
        else:
            want = reference(a, b, c0, alpha, beta, load_c)
            assert np.array_equal(got[:, :n], want), what + f"\n{got[:, :n]}\n!=\n{want}"
        assert (got[:, n:] == SENTINEL).all(), what + ": C written outside the m x n corner"


NUMPY_C = {DType.F32: np.float32, DType.F64: np.float64, DType.I32: np.int32, DType.I64: np.int64,
           **{d: np.int32 for d in INT8}, DType.BF16F32: np.float32, DType.F16F32: np.float32}


# -- building -------------------------------------------------------------------------------------

# "x86-avx512-emulated": the AVX-512 templates rendered with plan.isa naming plain-C emulations
# of the vector operations (EMULATION), so their tile, edge, mask and variant logic runs on any host.
EMULATED = "x86-avx512-emulated"
RUN_TARGETS = ["generic", "x86-avx2", "x86-avx512", EMULATED]   # what this CPU lacks is skipped
X86 = ["x86-avx2", "x86-avx512"]
FLOATS = [DType.F32, DType.F64]

EMULATION = """
/* plain-C stand-ins for the AVX-512 operations the templates name (through plan.isa) */
typedef struct {{ {T} v[{L}]; }} kf_emu_vec;
typedef unsigned kf_emu_mask;
static inline kf_emu_vec kf_emu_load(const {T} *p)
{{ kf_emu_vec r; int i; for (i = 0; i < {L}; ++i) r.v[i] = p[i]; return r; }}
static inline void kf_emu_store({T} *p, kf_emu_vec a)
{{ int i; for (i = 0; i < {L}; ++i) p[i] = a.v[i]; }}
static inline kf_emu_vec kf_emu_maskload(kf_emu_mask k, const {T} *p)
{{ kf_emu_vec r; int i; for (i = 0; i < {L}; ++i) r.v[i] = (k >> i) & 1 ? p[i] : 0; return r; }}
static inline void kf_emu_maskstore({T} *p, kf_emu_mask k, kf_emu_vec a)
{{ int i; for (i = 0; i < {L}; ++i) if ((k >> i) & 1) p[i] = a.v[i]; }}
static inline __attribute__((unused)) {T} kf_emu_reduce(kf_emu_vec a)  /* the thin path only */
{{ {T} s = 0; int i; for (i = 0; i < {L}; ++i) s += a.v[i]; return s; }}
static inline kf_emu_vec kf_emu_fmadd(kf_emu_vec a, kf_emu_vec b, kf_emu_vec c)
{{ int i; for (i = 0; i < {L}; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }}
static inline kf_emu_vec kf_emu_mul(kf_emu_vec a, kf_emu_vec b)
{{ int i; for (i = 0; i < {L}; ++i) a.v[i] *= b.v[i]; return a; }}
static inline kf_emu_vec kf_emu_set1({T} x)
{{ kf_emu_vec r; int i; for (i = 0; i < {L}; ++i) r.v[i] = x; return r; }}
static inline kf_emu_vec kf_emu_setzero(void) {{ return kf_emu_set1(0); }}
static inline kf_emu_vec kf_emu_add(kf_emu_vec a, kf_emu_vec b)
{{ int i; for (i = 0; i < {L}; ++i) a.v[i] += b.v[i]; return a; }}
static inline kf_emu_vec kf_emu_sub(kf_emu_vec a, kf_emu_vec b)
{{ int i; for (i = 0; i < {L}; ++i) a.v[i] -= b.v[i]; return a; }}
/* lanes where `a pred b` holds take yes, the others no (the ordered quiet predicates) */
static inline kf_emu_vec kf_emu_select(kf_emu_vec a, kf_emu_vec b, int pred, kf_emu_vec no,
                                       kf_emu_vec yes)
{{
    int i;
    for (i = 0; i < {L}; ++i) {{
        /* immintrin.h's _CMP_GT_OQ, _CMP_GE_OQ, _CMP_LT_OQ and (the rest) _CMP_LE_OQ */
        int holds = pred == 0x1e ? a.v[i] > b.v[i] : pred == 0x1d ? a.v[i] >= b.v[i]
                    : pred == 0x11 ? a.v[i] < b.v[i] : a.v[i] <= b.v[i];
        no.v[i] = holds ? yes.v[i] : no.v[i];
    }}
    return no;
}}
"""


def emulated(plan: KernelPlan) -> KernelPlan:
    isa = {**plan.isa, **{name: f"kf_emu_{name}" for name in (
        "load", "store", "maskload", "maskstore", "fmadd", "mul", "set1", "setzero",
        "reduce", "add", "sub")},
        "vec": "kf_emu_vec", "mask": "kf_emu_mask",
        "select": "kf_emu_select({v}, {x}, {pred}, {no}, {yes})"}
    return replace(plan, isa=isa, attribute="")


def tiny_blocks(plan: KernelPlan) -> dict[str, int]:
    """Cache blocks that small sizes cross: two register tiles per mc and nc, kc = 2 k-unrolls + 1
    (not a multiple of the unroll: full kc blocks take the remainder loop)."""
    return {"mc": 2 * plan.mr, "kc": 2 * len(plan.k_unroll) + 1, "nc": 2 * plan.nr}


def variant_plan(target: str, dtype: DType, variant: str) -> KernelPlan:
    real = targets.TARGETS["x86-avx512" if target == EMULATED else target]
    plan = make_plan(real, dtype)
    if variant.startswith("tiny"):
        # tiny blocks: the epilogue panel by panel across many k and cache blocks
        plan = make_plan(real, dtype, overrides=tiny_blocks(plan))
    if variant == "tiny-chunks":
        # ... on panels of two register tiles' columns, three to a B panel
        plan = make_plan(real, dtype, overrides={**tiny_blocks(plan), "nc": 6 * plan.nr})
        plan = replace(plan, direct=False, thin_name="",
                       epi_panel_bytes=plan.mc * dtype.size * 2 * plan.nr)
        assert plan.epi_panel_cols == 2 * plan.nr
    if variant == "no-thin":
        plan = replace(plan, thin_name="")
    elif variant.endswith("packed"):
        plan = replace(plan, direct=False, thin_name="")
    elif variant.endswith("direct"):
        # every problem direct, the fused epilogue on its row walk whatever C's size; tiny: on
        # chunks of two register tiles' columns (an L1 of four tiles)
        policy = replace(plan.direct_policy, elems=1 << 60, c_elems=0)
        if variant == "tiny-direct":
            policy = replace(policy, l1_bytes=4 * plan.direct_mr * plan.nr * dtype.size)
        plan = replace(plan, direct_policy=policy, thin_name="")
        assert variant != "tiny-direct" or plan.epi_cols == 2 * plan.nr
    return emulated(plan) if target == EMULATED else plan


class Builds:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[tuple, Library] = {}

    def library(self, target: str, dtype: DType, variant: str, *,
                always_fast: bool = True) -> Library:
        """`always_fast` False: built without -DKERNELFARER_ALWAYS_FAST (the shape rule on)."""
        key = (target, dtype, variant, always_fast)
        if key not in self.cache:
            plan = variant_plan(target, dtype, variant)
            d = self.root / f"{target}-{dtype.letter}-{variant}{'' if always_fast else '-rule'}"
            d.mkdir(parents=True, exist_ok=True)
            src, lib = d / "lib.c", d / "lib.so"
            text = library_source(plan)
            if target == EMULATED:
                text = EMULATION.format(T=plan.ctype, L=plan.lanes) + text
            src.write_text(text)
            # -O0 for the emulation: optimising dozens of inlined struct-vector tiles takes long
            run([CLANG, "-O0" if target == EMULATED else "-O2", "-shared", "-fPIC",
                 *(TRACE_FLAGS if always_fast else ("-DKERNELFARER_TRACE",)), *WARN_FLAGS,
                 str(src), "-o", str(lib)])
            self.cache[key] = Library(plan, lib)
        return self.cache[key]


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> Builds:
    return Builds(tmp_path_factory.mktemp("kernels"))


def skip_unless_runs(target: str) -> None:
    if target != EMULATED and not host_runs(target):
        pytest.skip(f"this host does not run {target}")


# -- the micro-kernels, called directly ----------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_packed_kernel_every_corner(builds, target, dtype) -> None:
    """The packed micro-kernel on panels from the pack routines: every m x n corner, k around the
    unroll, load_c 0 / 1, alpha and beta."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default")
    plan, ffi, T, I = lib.plan, lib.ffi, CDEF_T[dtype], CDEF_I[dtype]
    rng = np.random.default_rng(1)
    unroll = len(plan.k_unroll)
    cases = 0
    for k in (1, unroll - 1 or 1, unroll, unroll + 1, 3 * unroll + 2):
        a, b = random_ints(rng, (plan.mr, k)), random_ints(rng, (k, plan.nr))
        ap = Guarded(plan.mr * k, NUMPY[dtype])
        bp = Guarded(plan.nr * k, NUMPY[dtype])
        A = Operand(a, k, 1, dtype, 0)
        B = Operand(b, plan.nr, 1, dtype, 0)
        for m, n in itertools.product(range(1, plan.mr + 1), range(1, plan.nr + 1)):
            # pack only the m x n corner: the routines zero-pad the rest of the panels
            lib.lib.t_pack_a(m, k, A.pointer(ffi, I), k, 1, ffi.cast(f"{I} *", ap.address))
            lib.lib.t_pack_b(k, n, B.pointer(ffi, I), plan.nr, 1, ffi.cast(f"{I} *", bp.address))
            load_c, alpha, beta = cases % 2, 1 + cases % 3 // 2, (0, 1, 3)[cases % 3]
            cases += 1
            ldc = n + 3
            C = Guarded(m * ldc, NUMPY_C[dtype])
            C.array[:] = SENTINEL
            c0 = random_ints(rng, (m, n))
            C.array.reshape(m, ldc)[:, :n] = c0 if load_c else np.nan
            lib.lib.t_kernel(k, ffi.cast(f"{I} *", ap.address), ffi.cast(f"{I} *", bp.address),
                             ffi.cast(f"{T} *", C.address), ldc, m, n, alpha, beta, load_c)
            got = C.array.reshape(m, ldc)
            want = reference(a[:m], b[:, :n], c0, alpha, beta, load_c)
            assert np.array_equal(got[:, :n], want), (m, n, k, alpha, beta, load_c)
            assert (got[:, n:] == SENTINEL).all(), (m, n, k)
    assert cases == 5 * plan.mr * plan.nr


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_direct_kernel_every_corner(builds, target, dtype) -> None:
    """The direct kernel on A and B in place: every tile height (each specialised variant) and
    width (the narrow, masked variants), A plain and transposed, NaN in every element it must not
    use, B's rows ending at a guard page (rounded up to the vector width, as the contract says)."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default")
    plan, ffi, T, I = lib.plan, lib.ffi, CDEF_T[dtype], CDEF_I[dtype]
    assert plan.direct and plan.direct_name.endswith("_direct")
    rng = np.random.default_rng(2)
    unroll = len(plan.k_unroll)
    cases = 0
    for k in (1, unroll, unroll + 1, 2 * unroll + 3):
        for m, n in itertools.product(range(1, plan.direct_mr + 1), range(1, plan.nr + 1)):
            ta = cases % 2 == 1
            load_c, alpha, beta = cases // 2 % 2, 1 + cases % 3 // 2, (0, 1, 3)[cases % 3]
            cases += 1
            a, b = random_ints(rng, (m, k)), random_ints(rng, (k, n))
            A = Operand(a, *layout(m, k, ta, 2), dtype, padding_value(dtype))
            width = -(-n // plan.lanes) * plan.lanes      # the kernel reads whole vectors
            B = Operand(np.pad(b, ((0, 0), (0, width - n))), width + 1, 1, dtype,
                        padding_value(dtype))
            B.buffer.array[B.index[:, n:]] = padding_value(dtype)
            ldc = n + 2
            C = Guarded(m * ldc, NUMPY_C[dtype])
            C.array[:] = SENTINEL
            c0 = random_ints(rng, (m, n))
            C.array.reshape(m, ldc)[:, :n] = c0 if load_c else np.nan
            lib.lib.t_direct(k, A.pointer(ffi, I), A.rs, A.cs, B.pointer(ffi, I), B.rs,
                             ffi.cast(f"{T} *", C.address), ldc, m, n, alpha, beta, load_c)
            got = C.array.reshape(m, ldc)
            want = reference(a, b, c0, alpha, beta, load_c)
            assert np.array_equal(got[:, :n], want), (m, n, k, ta, alpha, beta, load_c)
            assert (got[:, n:] == SENTINEL).all(), (m, n, k)
    assert cases == 4 * plan.direct_mr * plan.nr


# -- the drivers ----------------------------------------------------------------------------------

def edge_sizes(plan: KernelPlan) -> list[tuple[int, int, int]]:
    """m, n, k around every edge the plan has: odd small sizes, the register tile (mr, nr, and the
    direct kernel's rows), the k unroll, and the cache blocks mc, kc, nc."""
    unroll = len(plan.k_unroll)
    ms = sorted({1, 2, 3, 5, 7, 13, plan.mr - 1, plan.mr, plan.mr + 1,
                 (plan.direct_mr or plan.mr) + 1, plan.mc - 1, plan.mc + 1} - {0})
    ns = sorted({1, 3, 7, 13, plan.nr - 1, plan.nr, plan.nr + 1, plan.nc + 1} - {0})
    ks = sorted({1, 2, unroll + 1, 13, plan.kc - 1, plan.kc, plan.kc + 1} - {0})
    sizes = set()
    # every value of each dimension with a few of the others (all pairs would be thousands)
    for i, (m, n) in enumerate(itertools.product(ms, ns)):
        sizes.add((m, n, ks[i % len(ks)]))
    for i, (m, k) in enumerate(itertools.product(ms, ks)):
        sizes.add((m, ns[i % len(ns)], k))
    for i, (n, k) in enumerate(itertools.product(ns, ks)):
        sizes.add((ms[i % len(ms)], n, k))
    return sorted(s for s in sizes if s[0] * s[1] * s[2] <= 3_000_000)


SCALARS = [  # (alpha, beta, load_c)
    (1, 1, 1), (2, 3, 1), (1, 0, 1), (2, 1, 0), (1, 3, 0),
]


def check_driver(lib: Library, sizes, seed: int) -> int:
    rng = np.random.default_rng(seed)
    cases = 0
    for i, (m, n, k) in enumerate(sizes):
        ta, tb = bool(i & 1), bool(i & 2)
        alpha, beta, load_c = SCALARS[i % len(SCALARS)]
        pad = (0, 1, 3)[i % 3]
        lib.gemm(rng, m, n, k, ta=ta, tb=tb, pad=pad, cpad=i % 2, alpha=alpha, beta=beta,
                 load_c=load_c, epilogue=i % 3 == 1)
        cases += 1
    return cases


DTYPES_RUN = {"generic": [DType.F32, DType.F64, DType.I32, DType.I8I32],
              "x86-avx2": [DType.F32, DType.F64], "x86-avx512": [DType.F32, DType.F64],
              EMULATED: [DType.F32, DType.F64]}


@pytest.mark.parametrize("variant", ["default", "packed", "direct", "tiny", "tiny-packed",
                                     "tiny-direct"])
@pytest.mark.parametrize("target, dtype",
                         [(t, d) for t in RUN_TARGETS for d in DTYPES_RUN[t]],
                         ids=lambda v: v.letter if isinstance(v, DType) else v)
def test_driver_paths(builds, target, dtype, variant) -> None:
    skip_unless_runs(target)
    lib = builds.library(target, dtype, variant)
    sizes = edge_sizes(lib.plan)
    before, thin_before = lib.direct_calls, lib.thin_calls
    assert check_driver(lib, sizes, seed=len(sizes)) == len(sizes)
    direct, thin = lib.direct_calls - before, lib.thin_calls - thin_before
    if variant.endswith("packed"):
        assert direct == 0 and thin == 0
    elif variant.endswith("direct"):
        assert direct == len(sizes) and thin == 0
    else:
        # these sizes are small or narrow: direct (test_small_problem_switch crosses the line),
        # and with C of at most four rows or columns, thin where the target has that path
        assert direct > 0
        assert (thin > 0) == bool(lib.plan.thin_name)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", ["x86-avx2", "x86-avx512", EMULATED])
def test_tiny_problems_run_the_users_loops(builds, target, dtype) -> None:
    """The shape rule (ThinShape.decline_k, decline_n): C at most decline_n columns wide, k below
    decline_k, A's rows contiguous, k above 1, C's column strided (no thin form takes it) -> the
    driver declines, C untouched, and the call site runs the user's loops; a column more, a k at
    the line, A's columns contiguous (the transposed axpy form) or C's column contiguous (the
    short form) -> the fast path, exact."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default", always_fast=False)
    line, columns = lib.plan.thin.decline_k, lib.plan.thin.decline_n
    assert line > 2 and columns >= 1
    rng = np.random.default_rng(7)
    for m in (37, 300):
        for n in range(1, columns + 1):
            lib.gemm(rng, m, n, line - 1, cpad=1, declined=True)
            lib.gemm(rng, m, n, 2, cpad=1, declined=True)
            lib.gemm(rng, m, n, 2)                  # the short form takes it
            lib.gemm(rng, m, n, 1, cpad=1)          # k == 1: the axpy form takes it
            lib.gemm(rng, m, n, line, cpad=1)
            lib.gemm(rng, m, n, line - 1, ta=True, cpad=1)
        for n in (columns + 1, 4, 5, 9):            # the direct path, however narrow
            lib.gemm(rng, m, n, line - 1)
            lib.gemm(rng, m, n, 2)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", ["x86-avx2", "x86-avx512", EMULATED])
def test_short_dots_of_one_column_or_row(builds, target, dtype) -> None:
    """The short form (ThinShape.short_k): one column of C whose elements are dots of 2..short_k
    products with A's rows contiguous and C's column too (or, transposed, one row of C with B's
    columns side by side) runs as a loop over the elements: exact, on the thin path, for every
    k, alpha, beta and load_c; k = 1 and k past short_k, and a C column that is not contiguous,
    take the other paths, exact too."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default", always_fast=False)
    short = lib.plan.thin.short_k
    assert short >= 3
    rng = np.random.default_rng(11)
    for k in range(2, short + 1):
        for (m, n, ta, tb) in ((37, 1, False, False), (300, 1, False, True), (1, 41, False, True),
                               (1, 2, True, True), (5, 1, False, False)):
            for alpha, beta, load_c in ((1, 1, 1), (2, 0.5, 1), (-1, 0, 0)):
                before = lib.thin_calls
                lib.gemm(rng, m, n, k, ta=ta, tb=tb, alpha=alpha, beta=beta, load_c=load_c)
                assert lib.thin_calls == before + 1, (m, n, k, ta, tb)
    for k in (1, short + 1):
        lib.gemm(rng, 37, 1, k)
        lib.gemm(rng, 1, 41, k, tb=True)
    # C's column not contiguous: below the decline line the user's loops, else the direct path
    lib.gemm(rng, 37, 1, 2, cpad=1, declined=True)
    lib.gemm(rng, 37, 1, lib.plan.thin.decline_k, cpad=1)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_sums_of_negative_zeros_are_plus_zero(builds, target, dtype) -> None:
    """Products all -0 (-1 * 0) sum to +0 in the original, whose sum starts from +0 (`s = 0`,
    or C zeroed then +=): on every path (the short form, thin axpy and dot forms, direct rows
    and tiles, packed tiles; A and B either way round) C = A*B is +0, not -0."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default")
    ffi, T, I, plan = lib.ffi, CDEF_T[dtype], CDEF_I[dtype], lib.plan
    short = plan.thin.short_k if plan.thin_name else 2
    shapes = [(37, 1, 2), (9, 1, short), (1, 41, 3), (1, 100, 5), (3, 2, 40), (40, 64, 1),
              (40, 64, 3), (40, 64, 9), (2 * plan.mr + 1, 3 * plan.nr + 1, 300)]
    for (m, n, k), ta, tb in itertools.product(shapes, (False, True), (False, True)):
        A = Operand(-np.ones((m, k)), *layout(m, k, ta, 0), dtype, padding_value(dtype))
        B = Operand(np.zeros((k, n)), *layout(k, n, tb, 0), dtype, padding_value(dtype))
        C = Guarded(m * n, NUMPY_C[dtype])
        C.array[:] = np.nan
        ok = lib.lib.t_driver(m, n, k, 1, A.pointer(ffi, I), A.rs, A.cs, B.pointer(ffi, I),
                              B.rs, B.cs, 0, 0, ffi.cast(f"{T} *", C.address), n, ffi.NULL)
        assert ok == 1 and (C.array == 0).all(), (m, n, k, ta, tb)
        assert not np.signbit(C.array).any(), f"-0 in C = A*B, {m}x{n}x{k} ta={ta} tb={tb}"


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", ["x86-avx2", "x86-avx512", EMULATED])
def test_thin_axpy_blocks_of_k(builds, target, dtype) -> None:
    """The axpy form's k blocks: ThinShape.stream_block rows of B where C's rows fit
    plan.thin_c_bytes and are contiguous, k_block otherwise (C a column, seen transposed, is
    strided).  k one below and above each block's multiple, C's width at the line and one past it,
    every scalar case: exact, on the thin path."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default", always_fast=False)
    plan = lib.plan
    stream, long_block = plan.thin.stream_block, plan.thin.k_block
    assert plan.thin_c_bytes > 0 and 1 < stream < long_block
    rng = np.random.default_rng(13)
    ks = (stream - 1, stream + 1, 2 * stream + 3, long_block + 1)
    for rows in (1, 3):
        line = plan.thin_c_bytes // (rows * dtype.size)
        for i, k in enumerate(ks):
            alpha, beta, load_c = SCALARS[i % len(SCALARS)]
            for m, n, ta in ((rows, line, False), (rows, line + 1, False), (rows, 37, True),
                             (line // 4, rows, True)):
                before = lib.thin_calls
                lib.gemm(rng, m, n, k, ta=ta, alpha=alpha, beta=beta, load_c=load_c)
                assert lib.thin_calls == before + 1, (m, n, k)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_driver_layouts_and_scalars(builds, target, dtype) -> None:
    """Every combination of A and B transposed, leading-dimension padding, alpha, beta and load_c
    on a few shapes, through both paths."""
    skip_unless_runs(target)
    rng = np.random.default_rng(3)
    for variant in ("default", "packed", "direct"):
        lib = builds.library(target, dtype, variant)
        shapes = [(1, 1, 1), (lib.plan.mr + 1, lib.plan.nr - 1, 5), (13, 2 * lib.plan.nr + 3, 7)]
        for (m, n, k), ta, tb, pad, (alpha, beta, load_c) in itertools.product(
                shapes, (False, True), (False, True), (0, 2), SCALARS):
            lib.gemm(rng, m, n, k, ta=ta, tb=tb, pad=pad, cpad=pad, alpha=alpha, beta=beta,
                     load_c=load_c)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_beta_zero_keeps_nan(builds, target, dtype) -> None:
    """beta = 0 with load_c: C is read, and 0 * NaN stays NaN, like the original loop."""
    skip_unless_runs(target)
    rng = np.random.default_rng(4)
    for variant in ("default", "packed", "direct"):
        lib = builds.library(target, dtype, variant)
        for m, n, k in ((1, 1, 1), (3, 40, 20), (40, 2, 20), (7, 13, 5),
                        (lib.plan.mr, lib.plan.nr, 9)):
            lib.gemm(rng, m, n, k, alpha=1, beta=0, load_c=1, nan_c=True)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_small_problem_switch(builds, target, dtype) -> None:
    """Each rule of plan.direct_policy, just inside and just outside, with the others failing: A
    and B fit in L2 (`elems`), A's kc block fits a quarter of L2 (`a_elems`), a few column panels
    (`n_max`).  The cases come from the policy, so they hold for any cache geometry."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "no-thin")    # the thin path would take m == 1
    cases = policy_cases(lib.plan)
    rng = np.random.default_rng(5)
    for (m, n, k), direct in cases:
        before = lib.direct_calls
        lib.gemm(rng, m, n, k, alpha=2, beta=3, tb=m == 1)
        assert lib.direct_calls - before == int(direct), (m, n, k)


def is_small(plan: KernelPlan, m: int, n: int, k: int) -> bool:
    """plan.small_name's rule, in Python."""
    policy = plan.direct_policy
    return (m * k + k * n <= policy.elems or m * min(k, plan.direct_kc) <= policy.a_elems
            or n <= policy.n_max)


def policy_cases(plan: KernelPlan) -> list[tuple[tuple[int, int, int], bool]]:
    policy, kc = plan.direct_policy, plan.direct_kc
    wide = policy.n_max + 1                      # too wide for the n_max rule
    short = 8                                    # A: m*k + k*n <= elems with m*k > a_elems
    a_rows = (policy.elems - short * wide) // short
    long_k = 2 * kc                              # B: m * kc <= a_elems, with k*n > elems
    b_rows, b_cols = policy.a_elems // kc, max(wide, policy.elems // long_k + 1)
    c_rows = policy.elems // long_k + 1          # C: m*k > elems and m*kc > a_elems
    side = int((policy.elems / 2) ** 0.5)
    cases = [((a_rows, wide, short), True), ((a_rows + 1, wide, short), False),
             ((b_rows, b_cols, long_k), True), ((b_rows + 1, b_cols, long_k), False),
             ((c_rows, policy.n_max, long_k), True), ((c_rows, wide, long_k), False),
             ((side, side, side), True), ((1, 700, 700), True)]
    for (m, n, k), direct in cases:
        assert is_small(plan, m, n, k) == direct, ((m, n, k), direct, policy)
    return cases


@pytest.mark.parametrize("preset", sorted(hostinfo.PRESETS))
@pytest.mark.parametrize("target", X86)
def test_small_problem_rules_under_every_host(preset, target) -> None:
    """The policy cases isolate each rule on every preset's cache geometry too (planning only: the
    real CPU runs them in test_small_problem_switch)."""
    host = hostinfo.PRESETS[preset]
    for dtype in FLOATS:
        plan = make_plan(targets.TARGETS[target], dtype, host=host)
        assert plan.direct and plan.direct_policy.elems == host.caches.l2.size // dtype.in_size
        policy_cases(plan)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_direct_path_b_panels(builds, target, dtype) -> None:
    """The direct path reads B's micro-panels in place or copies them (transposed B, edge panels,
    panels reused by many rows whose row stride crowds L1 sets or whose band overflows L2): every
    case, with B's leading dimension a multiple of 4 KiB, odd, and tight."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "direct")
    plan, policy = lib.plan, lib.plan.direct_policy
    rng = np.random.default_rng(6)
    way = policy.l1_way // plan.dtype.in_size
    for m in (1, policy.copy_rows, policy.copy_rows + 1, 3 * policy.copy_rows + 1):
        for n, k, bpad in ((2 * plan.nr, 40, way - 2 * plan.nr), (2 * plan.nr + 3, 40, 1),
                           (3 * plan.nr, plan.kc + 3, 0), (plan.nr - 1, 17, way)):
            for tb in (False, True):
                lib.gemm(rng, m, n, k, tb=tb, bpad=bpad, alpha=2, beta=3)


# -- compile-only: warnings and AVX-512 ----------------------------------------------------------

ALL_TARGETS = ["generic", "x86-avx2", "x86-avx512", "x86-avx512-vnni", "x86-avx512-bf16",
               "x86-avxvnni", "x86-amx"]


WHOLE_FILE_ISA = {"generic": [], "x86-avx2": ["-mavx2", "-mfma"],
                  "x86-avx512": ["-mavx512f", "-mavx2", "-mfma"],
                  "x86-avx512-vnni": ["-mavx512f", "-mavx512vnni", "-mavx2", "-mfma"],
                  "x86-avx512-bf16": ["-mavx512f", "-mavx512bf16", "-mavx512bw", "-mavx512vl",
                                      "-mavx2", "-mfma"],
                  "x86-avxvnni": ["-mavx2", "-mfma", "-mavxvnni"],
                  "x86-amx": ["-mamx-tile", "-mamx-int8", "-mamx-bf16"],
                  "x86-auto": ["-mavx512f", "-mavx2", "-mfma"]}


def _gcc_knows_bf16(cc: str) -> bool:
    done = subprocess.run([cc, "-x", "c", "-fsyntax-only", "-"], input="__bf16 x;\n",
                          capture_output=True, text=True)
    return done.returncode == 0


@pytest.mark.parametrize("isa", [False, True], ids=["attributes", "whole-file-isa"])
@pytest.mark.parametrize("std", ["c99", "c11"])
@pytest.mark.parametrize("compiler", ["clang", "gcc"])
@pytest.mark.parametrize("target", ALL_TARGETS + ["x86-auto"])
def test_support_code_is_warning_free(tmp_path, target, compiler, std, isa) -> None:
    """The drivers of both float types (and the generic integer ones), compiled with -Wall -Wextra
    -Werror, with no -m flags (the ISA comes from the function attributes) and with the ISA
    enabled for the whole file (the entry points are then inlined into their callers)."""
    cc = CLANG if compiler == "clang" else GCC
    if not cc:
        pytest.skip(f"no {compiler}")
    from kernelfarer.plan import make_dispatch_plan
    t = targets.TARGETS[target]
    dtypes = [d for d in DType if d in t.kernels] if not t.dispatch else \
        [*FLOATS, DType.I8I32, DType.I16I32, DType.BF16F32, DType.F16F32]
    if compiler == "gcc" and not _gcc_knows_bf16(cc):
        # gcc 12 has no __bf16 type on x86: no bf16 GEMM of a user's compiles with it either
        dtypes = [d for d in dtypes if d is not DType.BF16F32]
        if not dtypes:
            pytest.skip(f"{cc} has no __bf16 type")
    plans = [make_dispatch_plan(t, d, targets.TARGETS) if t.dispatch else make_plan(t, d)
             for d in dtypes]
    text = emit.render_support(plans)
    for i, p in enumerate(plans):
        text += (f"int use{i}(const {p.dtype.in_ctype} *a, const {p.dtype.in_ctype} *b, "
                 f"{p.dtype.ctype} *c, long n) {{ return {p.driver_name}(n, n, n, 1, a, n, 1, "
                 f"b, n, 1, 1, 1, c, n, 0, 0, 0); }}\n")
    src = tmp_path / "support.c"
    src.write_text(text)
    flags = WHOLE_FILE_ISA[target] if isa else []
    run([cc, f"-std={std}", "-O2", *flags, "-c", *WARN_FLAGS, str(src), "-o",
         str(tmp_path / "s.o")])


_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*?)\s*$")
_BRANCH = re.compile(r"(?:0x)?([0-9a-f]+) <[^>]+>")


def k_loops(obj: Path, work: str, skip: str = r"_thin") -> list[list[str]]:
    """The innermost loops of the object that contain `work` instructions and no call, each with
    its stack accesses (rsp-relative, or rbp-relative in a function that keeps a frame pointer)
    first: ([stack accesses], [instructions]).  Functions whose name matches `skip` are left out
    (the thin path's C updates, laid out apart from its k loops, look like loops of their own)."""
    out = run([OBJDUMP, "-d", "--no-show-raw-insn", str(obj)]).stdout
    functions: list[list[tuple[int, str]]] = []
    keep = False
    for line in out.splitlines():
        if line.endswith(">:"):
            keep = not re.search(skip, line)
            functions.append([])
        elif not keep:
            continue
        elif (m := _INSN.match(line)) and functions:
            functions[-1].append((int(m.group(1), 16), f"{m.group(2)} {m.group(3)}".strip()))
    loops = []
    for body in functions:
        frame = any(re.match(r"movq?\s+%rsp, %rbp$", text) for _, text in body[:8])
        stack = r"\(%rsp\b" + (r"|\(%rbp\b" if frame else "")
        index = {addr: i for i, (addr, _) in enumerate(body)}
        spans = [(index[int(m.group(1), 16)], i) for i, (addr, text) in enumerate(body)
                 if (m := _BRANCH.search(text)) and int(m.group(1), 16) <= addr
                 and int(m.group(1), 16) in index]
        for s, e in spans:
            if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in spans):
                lp = [text for _, text in body[s:e + 1]]
                if any(re.search(work, i) for i in lp) and not any(
                        i.startswith("call") for i in lp):
                    loops.append(([i for i in lp if re.search(stack, i)], lp))
    return loops


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", X86)
def test_x86_k_loops_do_not_spill(tmp_path, target, dtype) -> None:
    """clang-19 -O3: no k loop of the packed or the direct kernel (every specialised variant)
    touches the stack, and the widest loops issue exactly the register tile's FMAs per k step."""
    plan = make_plan(targets.TARGETS[target], dtype)
    src = tmp_path / "lib.c"
    src.write_text(library_source(plan))
    obj = tmp_path / "lib.o"
    run([CLANG, "-O3", "-c", *WARN_FLAGS, str(src), "-o", str(obj)])
    reg = "zmm" if target == "x86-avx512" else "ymm"
    work = rf"^vfmadd\d+p{'s' if dtype is DType.F32 else 'd'}\s.*{reg}"
    loops = k_loops(obj, work)
    fmas = {sum(bool(re.search(work, i)) for i in lp) for _, lp in loops}
    unroll = len(plan.k_unroll)
    # the unrolled k loops of the packed kernel and of every direct variant (height x vectors)
    want = {plan.mr * len(plan.vectors) * unroll} | {
        h * v * unroll for h in plan.direct_heights for v in range(1, len(plan.vectors) + 1)}
    assert want <= fmas, sorted(fmas)
    for spills, lp in loops:
        assert not spills, "\n".join(lp)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
def test_avx512_runs_when_the_host_has_it(builds, dtype) -> None:
    skip_unless_runs("x86-avx512")
    for variant in ("default", "packed", "direct", "tiny"):
        lib = builds.library("x86-avx512", dtype, variant)
        check_driver(lib, edge_sizes(lib.plan), seed=7)


# -- constant sizes, end to end -----------------------------------------------------------------

CONST_SHAPES = [(0, 5, 5), (1, 1, 1), (2, 3, 5), (5, 7, 3), (7, 17, 13), (13, 33, 9),
                (24, 64, 64), (6, 16, 321), (64, 64, 64), (100, 100, 100)]
CONST_GEMM = """
void gemm_{m}x{n}x{k}(const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < {m}; i++)
        for (int j = 0; j < {n}; j++)
            for (int p = 0; p < {k}; p++)
                c[i * {n} + j] += a[i * {k} + p] * b[p * {n} + j];
}}
"""
ISA_FLAGS = {"generic": [], "x86-avx2": ["-mavx2", "-mfma"], "x86-avx512": ["-mavx512f", "-mavx2", "-mfma"]}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", list(ISA_FLAGS))
def test_constant_sizes(tmp_path, target, dtype) -> None:
    """GEMMs with constant sizes, rewritten by the CLI and compiled with the target's ISA enabled
    for the whole file (as -march=native does): every call site shares the one driver, small
    sizes take the direct path, results are exact, zero sizes are left to the original nest.
    gcc-12 compiles it warning-free too."""
    skip_unless_runs(target)
    from conftest import run_cli
    t = dtype.ctype
    src = tmp_path / "const.c"
    src.write_text("".join(CONST_GEMM.format(m=m, n=n, k=k, t=t) for m, n, k in CONST_SHAPES))
    out = tmp_path / "const_kf.c"
    done = run_cli("rewrite", src, "-o", out, "--target", target)
    assert done.returncode == 0, done.stderr
    flags = ["-O2", *ISA_FLAGS[target], *WARN_FLAGS, *TRACE_FLAGS]
    obj = tmp_path / "const_kf.o"
    run([CLANG, *flags, "-c", str(out), "-o", str(obj)])
    names = run([OBJDUMP or "llvm-objdump-19", "-t", str(obj)]).stdout
    # one copy of the support code for all the call sites
    assert sum(" kf_" in line and line.rstrip().endswith("_driver_direct")
               for line in names.splitlines()) <= 1
    if GCC:
        run([GCC, "-std=c99", *flags, "-c", str(out), "-o", str(tmp_path / "gcc.o")])
    lib_path = tmp_path / "const_kf.so"
    run([CLANG, *flags, "-shared", "-fPIC", str(out), "-o", str(lib_path)])
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("".join(f"void gemm_{m}x{n}x{k}(const {t} *, const {t} *, {t} *);\n"
                     for m, n, k in CONST_SHAPES)
             + "extern long kernelfarer_direct_calls; extern long kernelfarer_thin_calls;")
    lib = ffi.dlopen(str(lib_path))
    rng = np.random.default_rng(8)
    np_t = NUMPY[dtype]
    for m, n, k in CONST_SHAPES:
        a = random_ints(rng, (m, k)).astype(np_t)
        b = random_ints(rng, (k, n)).astype(np_t)
        c = random_ints(rng, (m, n)).astype(np_t)
        want = c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)
        before = lib.kernelfarer_direct_calls + lib.kernelfarer_thin_calls
        getattr(lib, f"gemm_{m}x{n}x{k}")(ffi.from_buffer(f"{t}[]", a),
                                          ffi.from_buffer(f"{t}[]", b),
                                          ffi.from_buffer(f"{t}[]", c))
        assert np.array_equal(c, want), (m, n, k)
        # small: the direct path, or the thin one for C of at most four rows or columns
        assert lib.kernelfarer_direct_calls + lib.kernelfarer_thin_calls - before == int(m > 0), \
            (m, n, k)


def test_driver_loops_from_the_schedule_cache_equal_a_fresh_build(tmp_path, monkeypatch) -> None:
    """The driver's loops are kept in the profile directory; a rewrite that finds them there
    prints exactly what building the schedule again prints, for the packed and the direct
    schedules, and a cache directory that cannot be written costs nothing but time."""
    avx2 = targets.TARGETS["x86-avx2"]
    plan = make_plan(avx2, DType.F32, overrides=tiny_blocks(make_plan(avx2, DType.F32)))
    monkeypatch.setenv("KERNELFARER_PROFILE_DIR", str(tmp_path / "profile"))
    kinds = [{}, {"direct": True}, {"direct": True, "rows_outer": True}]
    emit.schedule_loops.cache_clear()
    fresh = [emit.driver_loops(plan, **kind) for kind in kinds]
    assert len(list((tmp_path / "profile" / "schedules").iterdir())) == 3
    emit.schedule_loops.cache_clear()
    cached = [emit.driver_loops(plan, **kind) for kind in kinds]
    assert cached == fresh
    assert all(plan.kernel_name in fresh[0] and "for (" in text for text in fresh)
    assert plan.direct_name in fresh[1] and plan.direct_name in fresh[2] and fresh[1] != fresh[2]
    (tmp_path / "blocked").write_text("")
    monkeypatch.setenv("KERNELFARER_PROFILE_DIR", str(tmp_path / "blocked"))
    emit.schedule_loops.cache_clear()
    assert [emit.driver_loops(plan, **kind) for kind in kinds] == fresh
    emit.schedule_loops.cache_clear()


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_epilogue_panel_by_panel_and_after(builds, target, dtype) -> None:
    """A fused epilogue visits each element of C once, after its last k block, whether the driver
    applies it panel by panel (the packed path: chunks of columns of an A block's rows, whatever
    C's row stride; the direct path's walk by rows, k <= 16: chunks of a row of tiles) or in one
    pass at the end (the direct path's walk by columns, or C's rows a multiple of an L1 way
    apart: 4 KiB).  Tiny blocks: several k blocks and cache blocks per problem, chunks of two
    tiles (tiny-chunks: three to a B panel)."""
    skip_unless_runs(target)
    for variant in ("tiny-packed", "tiny-chunks", "tiny-direct", "default"):
        lib = builds.library(target, dtype, variant)
        rng = np.random.default_rng(7)
        way_elems = 4096 // np.dtype(NUMPY_C[dtype]).itemsize
        for m, n, k in ((37, 45, 29), (lib.plan.mr * 2 + 1, lib.plan.nr + 3, 2), (5, 70, 33),
                        (lib.plan.mr + 2, lib.plan.nr * 5 + 3, 9),
                        (lib.plan.mr + 1, lib.plan.nr * 13 + 5, 7)):
            for cpad in (1, way_elems - n):        # panel by panel; rows 4 KiB apart
                lib.gemm(rng, m, n, k, cpad=cpad, alpha=2, beta=3, load_c=1, epilogue=True)
                lib.gemm(rng, m, n, k, ta=True, cpad=cpad, load_c=0, epilogue=True)
                before = lib.lib.kernelfarer_tile_programs
                lib.gemm(rng, m, n, k, cpad=cpad, alpha=2, beta=3, load_c=1, epilogue="prog")
                lib.gemm(rng, m, n, k, ta=True, cpad=cpad, load_c=0, epilogue="prog")
                if variant in ("tiny-packed", "tiny-chunks") and lib.plan.tile_prog:
                    assert lib.lib.kernelfarer_tile_programs == before + 2, (variant, m, n, k)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.letter)
@pytest.mark.parametrize("target", RUN_TARGETS)
def test_short_k_streams_c_row_by_row(builds, target, dtype) -> None:
    """k of 1 .. stream_k on the direct path, B's rows contiguous, no epilogue: C updated a row
    at a time by plain loops (plan.direct_policy), C wider than a block of B's columns too;
    exact against the reference with alpha, beta, load_c (C not read without it: NaNs there),
    transposed and padded A, C's rows 4 KiB apart.
    One k past it, and B transposed (k > 1), take the register tiles as before."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, "default")
    stream_k = lib.plan.direct_policy.stream_k if lib.plan.direct else 0
    if not stream_k:
        pytest.skip(f"{target} {dtype.letter}: no direct path streaming C here")
    rng = np.random.default_rng(11)
    way_elems = 4096 // np.dtype(NUMPY_C[dtype]).itemsize
    shapes = [(5, 5, 1), (13, 17, 2), (lib.plan.mr + 1, lib.plan.nr * 3 + 5, 3), (40, 129, 4),
              (9, 67, stream_k), (9, 67, stream_k + 1), (31, 200, 1)]
    # B's rows taken a block of columns at a time where they overflow stream_b_bytes: across blocks
    for k in (1, stream_k):
        block = max(64, lib.plan.direct_policy.stream_b_bytes // (k * dtype.size)) & -16
        shapes += [(9, block + 1, k), (6, 2 * block - 1, k)]
    streamed = 0
    for m, n, k in shapes:
        for kw in ({}, dict(alpha=2, beta=3), dict(alpha=-1, beta=0, load_c=0, nan_c=True),
                   dict(ta=True, pad=3), dict(cpad=way_elems - n), dict(tb=True)):
            if kw.get("cpad", 0) < 0:
                continue                                       # (rows wider than 4 KiB)
            before = lib.lib.kernelfarer_stream_calls
            lib.gemm(rng, m, n, k, **kw)
            calls = lib.lib.kernelfarer_stream_calls - before
            contiguous = not kw.get("tb") or k == 1            # (B's rows: one element each)
            assert calls == int(k <= stream_k and contiguous), (m, n, k, kw)
            streamed += calls
    assert streamed > 0


# -- bf16 and fp16 on the float kernel (widened at packing) ------------------------------------------


@pytest.mark.parametrize("variant", ["default", "tiny"])
@pytest.mark.parametrize("dtype", [DType.BF16F32, DType.F16F32], ids=lambda d: d.letter)
@pytest.mark.parametrize("target", ["x86-avx512", "x86-avx2"])
def test_widened_half_kernel_every_edge(builds, target, dtype, variant) -> None:
    """bf16 and fp16 operands converted to float as they are packed, then the AVX-512 (AVX2)
    float kernel: exact against the int64 reference (small integers: exact products and sums) on
    every tile and block edge, transposed and padded operands, alpha, beta, load_c and the
    epilogue; padding NaNs next to the operands must not leak in."""
    skip_unless_runs(target)
    lib = builds.library(target, dtype, variant)
    assert lib.plan.shape.widen == 2 and not lib.plan.direct and not lib.plan.thin_name
    assert check_driver(lib, edge_sizes(lib.plan), seed=3) > 0


# -- int8 on AVX-512 VNNI ---------------------------------------------------------------------------

VNNI = "x86-avx512-vnni"


def vnni_library(builds: Builds, variant: str, dtype: DType = DType.I8I32) -> Library:
    """The VNNI kernel's driver; `tiny`: blocks that small sizes cross (kc a multiple of kr=4, so
    k blocks end inside a group of four only at the end of k)."""
    if not host_runs(VNNI):
        pytest.skip(f"this host does not run {VNNI} (no AVX512-VNNI): its code is compiled and "
                    "checked for warnings and vpdpbusd by the other tests, run where the CPU has it")
    if variant == "tiny":
        key = (VNNI, dtype, "tiny", True)
        if key not in builds.cache:
            plan = make_plan(targets.TARGETS[VNNI], dtype, overrides={"mc": 24, "kc": 12,
                                                                       "nc": 64})
            d = builds.root / f"vnni-{dtype.letter}-tiny"
            d.mkdir(parents=True, exist_ok=True)
            (d / "lib.c").write_text(library_source(plan))
            run([CLANG, "-O2", "-shared", "-fPIC", *TRACE_FLAGS, *WARN_FLAGS, str(d / "lib.c"),
                 "-o", str(d / "lib.so")])
            builds.cache[key] = Library(plan, d / "lib.so")
        return builds.cache[key]
    return builds.library(VNNI, dtype, variant)


@pytest.mark.parametrize("variant", ["default", "tiny"])
@pytest.mark.parametrize("dtype", INT8, ids=lambda d: d.letter)
def test_vnni_int8_every_edge_full_range(builds, variant, dtype) -> None:
    """int8 and uint8 -> int32 on the VNNI kernel, bit-exact against the int64 reference:
    operands over their types' full range (int8 -128 .. 127: A's +128 offset and the column-sum
    correction; uint8 0 .. 255: as vpdpbusd takes it, its operands swapped, or A - 128 and the
    other correction), every register-tile and cache-block edge, k not a multiple of four,
    transposed and padded operands, alpha, beta and load_c, with and without an epilogue."""
    lib = vnni_library(builds, variant, dtype)
    sizes = edge_sizes(lib.plan) + [(13, 35, 4 * 3 + 1), (12, 32, 4), (1, 1, 1)]
    rng = np.random.default_rng(11)
    for i, (m, n, k) in enumerate(sizes):
        alpha, beta, load_c = SCALARS[i % len(SCALARS)]
        lib.gemm(rng, m, n, k, ta=bool(i & 1), tb=bool(i & 2), pad=(0, 1, 3)[i % 3],
                 cpad=i % 2, alpha=alpha, beta=beta, load_c=load_c, epilogue=i % 3 == 1,
                 span="full")


def test_vnni_uint8_large_sums(builds) -> None:
    """uint8 x uint8 sums that need all of int32: k = 33000 products of 255 * 255 (2.146e9, just
    below 2^31): A's -128 flip and B's +128 correction cancel exactly."""
    lib = vnni_library(builds, "default", DType.U8I32)
    ffi, lib_c = lib.ffi, lib.lib
    m, n, k = 3, 17, 33000
    a = np.full((m, k), 255, dtype=np.uint8)
    b = np.full((k, n), 255, dtype=np.uint8)
    c = np.zeros((m, n), dtype=np.int32)
    ok = lib_c.t_driver(m, n, k, 1, ffi.cast("unsigned char *", a.ctypes.data), k, 1,
                        ffi.cast("unsigned char *", b.ctypes.data), n, 1, 0, 0,
                        ffi.cast("int *", c.ctypes.data), n, ffi.NULL)
    assert ok == 1
    assert (c == 255 * 255 * k).all(), c[0, :4]


def test_vnni_int8_large_sums(builds) -> None:
    """Sums that need all of int32: k = 40000 products of -128 * -128 (655 million), and of
    -128 * 127, in every column: the offset of A (+128) and the correction (-128 * column sum)
    cancel exactly."""
    lib = vnni_library(builds, "default")
    ffi, lib_c = lib.ffi, lib.lib
    for value_b in (-128, 127):
        m, n, k = 5, 33, 40000
        a = np.full((m, k), -128, dtype=np.int8)
        b = np.full((k, n), value_b, dtype=np.int8)
        c = np.zeros((m, n), dtype=np.int32)
        ok = lib_c.t_driver(m, n, k, 1, ffi.cast("signed char *", a.ctypes.data), k, 1,
                            ffi.cast("signed char *", b.ctypes.data), n, 1, 0, 0,
                            ffi.cast("int *", c.ctypes.data), n, ffi.NULL)
        assert ok == 1
        assert (c == -128 * value_b * k).all(), (value_b, c[0, :4])


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
def test_vnni_kernel_k_loop_is_dot_products(tmp_path) -> None:
    """The kernel's k loop is vpdpbusd on the packed panels: 24 per group of four k steps (12 rows x
    2 vectors; a multiple if the compiler unrolls), no widening or 32-bit multiplies (what the
    portable kernel runs), nothing on the stack.  Compiled only: any host checks it."""
    plan = make_plan(targets.TARGETS[VNNI], DType.I8I32)
    src = tmp_path / "vnni.c"
    src.write_text(library_source(plan))
    obj = tmp_path / "vnni.o"
    run([CLANG, "-O3", "-c", str(src), "-o", str(obj)])
    loops = k_loops(obj, r"vpdpbusd")
    assert loops, "no k loop with vpdpbusd in the VNNI kernel"
    stack, body = max(loops, key=lambda lp: len(lp[1]))
    text = "\n".join(body)
    per_group = plan.mr * len(plan.vectors)
    dots = sum(1 for i in body if i.startswith("vpdpbusd"))
    assert dots and dots % per_group == 0, text
    assert not any(re.match(r"vpmulld|vpmovsx|vpmaddwd", i) for i in body), text
    assert not stack, "the k loop touches the stack:\n" + "\n".join(stack)


# -- AVX-VNNI, emulated -------------------------------------------------------------------------------

EMULATED_DPBUSD = """
#include <string.h>
/* a plain-C stand-in for AVX-VNNI's vpdpbusd (ymm): each 32-bit lane plus the four products of
 * its unsigned bytes of a and signed bytes of b, wrapping */
static __inline__ __attribute__((target("avx2"))) __m256i kf_emu_dpbusd(__m256i acc, __m256i a,
                                                                         __m256i b)
{
    unsigned char ua[32];
    signed char sb[32];
    int r[8], i, t;
    memcpy(ua, &a, 32);
    memcpy(sb, &b, 32);
    memcpy(r, &acc, 32);
    for (i = 0; i < 8; ++i)
        for (t = 0; t < 4; ++t)
            r[i] = (int)((unsigned)r[i] + (unsigned)(ua[4 * i + t] * sb[4 * i + t]));
    memcpy(&acc, r, 32);
    return acc;
}
"""


@pytest.mark.parametrize("mode", ["emulated", "native"])
@pytest.mark.parametrize("variant", ["default", "tiny"])
@pytest.mark.parametrize("dtype", INT8, ids=lambda d: d.letter)
def test_avxvnni_kernel(tmp_path, variant, dtype, mode) -> None:
    """The AVX-VNNI kernel (x86-avxvnni: 256-bit vpdpbusd, A + 128 and B's column sums; uint8
    operands as the instruction takes them): bit-exact over the full int8 and uint8 ranges on every
    tile and block edge, natively where the CPU has AVX-VNNI (Zen 5, Alder Lake and later) and, on
    any AVX2 CPU, built from its template with vpdpbusd replaced by a plain-C stand-in."""
    if mode == "native" and not host_runs("x86-avxvnni"):
        pytest.skip("this host has no AVX-VNNI (the emulated run checks the template)")
    if not host_runs("x86-avx2"):
        pytest.skip("this host does not run AVX2")
    overrides = {"mc": 12, "kc": 8, "nc": 32} if variant == "tiny" else None
    plan = make_plan(targets.TARGETS["x86-avxvnni"], dtype, overrides=overrides)
    src, lib = tmp_path / "lib.c", tmp_path / "lib.so"
    if mode == "emulated":
        plan = replace(plan, isa={**plan.isa, "dot": "kf_emu_dpbusd"},
                       attribute='__attribute__((target("avx2,fma")))')
        text = library_source(plan)
        header_end = text.index("typedef __PTRDIFF_TYPE__ kf_index;")
        src.write_text(text[:header_end] + EMULATED_DPBUSD + text[header_end:])
    else:
        src.write_text(library_source(plan))
    run([CLANG, "-O2", "-shared", "-fPIC", *TRACE_FLAGS, *WARN_FLAGS, str(src), "-o", str(lib)])
    library = Library(plan, lib)
    rng = np.random.default_rng(5)
    sizes = edge_sizes(plan) + [(7, 17, 5), (6, 16, 4), (1, 1, 1)]
    for i, (m, n, k) in enumerate(sizes):
        alpha, beta, load_c = SCALARS[i % len(SCALARS)]
        library.gemm(rng, m, n, k, ta=bool(i & 1), tb=bool(i & 2), pad=(0, 1, 3)[i % 3],
                     cpad=i % 2, alpha=alpha, beta=beta, load_c=load_c, epilogue=i % 3 == 1,
                     span="full")


# -- AMX ---------------------------------------------------------------------------------------------

AMX_INSN = {DType.I8I32: "tdpbssd", DType.S8U8I32: "tdpbsud", DType.U8S8I32: "tdpbusd",
            DType.U8I32: "tdpbuud", DType.BF16F32: "tdpbf16ps"}


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("dtype", list(AMX_INSN), ids=lambda d: d.letter)
def test_amx_kernel_k_loop(tmp_path, dtype) -> None:
    """The AMX kernels' k loop (compiled only: any host checks it): per tile step, four tile loads
    (two A, two B tiles) and four products into the four accumulator tiles, of the instruction
    for the operands' types (a multiple of four when unrolled), and no register spilled."""
    plan = make_plan(targets.TARGETS["x86-amx"], dtype)
    src, obj = tmp_path / "amx.c", tmp_path / "amx.o"
    src.write_text(library_source(plan))
    run([CLANG, "-O3", "-c", str(src), "-o", str(obj)])
    loops = k_loops(obj, r"^tdp")
    assert loops, f"no k loop with tile products in the {dtype.label} kernel"
    _, body = loops[0]
    text = "\n".join(body)
    products = [i for i in body if i.startswith("tdp")]
    # (a multiple of four when the compiler unrolls)
    assert products and len(products) % 4 == 0, text
    assert all(i.startswith(AMX_INSN[dtype] + " ") for i in products), text
    assert sum(1 for i in body if i.startswith("tileloadd")) == len(products), text
    assert not any(re.match(r"mov\S*\s.*\(%r", i) for i in body), text   # no spills


# -- AMX, emulated ------------------------------------------------------------------------------------

EMULATED_AMX = """
#include <string.h>
/* plain-C stand-ins for the AMX tile operations the template names (through plan.isa): eight
 * tiles of 16 rows x 64 bytes, the configuration's rows and bytes per row */
static unsigned char kf_emu_tmm[8][16][64];
static unsigned char kf_emu_rows[8];
static unsigned short kf_emu_colsb[8];
static unsigned char kf_emu_config[64];     /* as loaded; all zero in the INIT state */
static void kf_emu_storeconfig(void *config) { memcpy(config, kf_emu_config, 64); }
static void kf_emu_loadconfig(const void *config)
{
    const unsigned char *cfg = (const unsigned char *)config;
    int t;
    memcpy(kf_emu_config, cfg, 64);
    for (t = 0; t < 8; ++t) {
        memcpy(&kf_emu_colsb[t], cfg + 16 + 2 * t, 2);
        kf_emu_rows[t] = cfg[48 + t];
    }
}
static void kf_emu_zero(int t) { memset(kf_emu_tmm[t], 0, sizeof kf_emu_tmm[t]); }
static void kf_emu_loadd(int t, const void *base, long stride)
{
    int r;
    for (r = 0; r < kf_emu_rows[t]; ++r)
        memcpy(kf_emu_tmm[t][r], (const unsigned char *)base + r * stride, kf_emu_colsb[t]);
}
static void kf_emu_stored(int t, void *base, long stride)
{
    int r;
    for (r = 0; r < kf_emu_rows[t]; ++r)
        memcpy((unsigned char *)base + r * stride, kf_emu_tmm[t][r], kf_emu_colsb[t]);
}
/* tdpb[su][su]d and tdpbf16ps: C (rows x colsb/4 of EMU_ACC) += A (rows x groups of 4 bytes) . B
 * (a row per group: colsb/4 groups), each group's EMU_PER products (EMU_MUL of the elements at
 * two addresses) added in turn (EMU_ADD) */
static void kf_emu_dp(int c, int a, int b)
{
    int m, n, g, t;
    for (m = 0; m < kf_emu_rows[c]; ++m)
        for (n = 0; n < kf_emu_colsb[c] / 4; ++n) {
            EMU_ACC acc;
            memcpy(&acc, &kf_emu_tmm[c][m][4 * n], 4);
            for (g = 0; g < kf_emu_colsb[a] / 4; ++g)
                for (t = 0; t < EMU_PER; ++t)
                    acc = EMU_ADD(acc, EMU_MUL(&kf_emu_tmm[a][m][4 * g + 4 / EMU_PER * t],
                                               &kf_emu_tmm[b][g][4 * n + 4 / EMU_PER * t]));
            memcpy(&kf_emu_tmm[c][m][4 * n], &acc, 4);
        }
}
"""
# the element types' side of kf_emu_dp: int8 / uint8 (wrapping int32 sums) and bf16 (exact for the
# small integers the test uses)
EMULATED_AMX_TYPES = {"int": """
#define EMU_ACC int
#define EMU_PER 4
#define EMU_MUL(p, q) ((EMU_A)*(p) * (EMU_B)*(q))
#define EMU_ADD(acc, x) (int)((unsigned)(acc) + (unsigned)(x))
""", "float": """
#define EMU_ACC float
#define EMU_PER 2
#define EMU_MUL(p, q) (kf_emu_bf16(p) * kf_emu_bf16(q))
#define EMU_ADD(acc, x) ((acc) + (x))
#include <string.h>
static float kf_emu_bf16(const unsigned char *p)
{
    unsigned u = (unsigned)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
"""}


@pytest.mark.parametrize("variant", ["default", "tiny"])
@pytest.mark.parametrize("dtype", [*INT8, DType.BF16F32], ids=lambda d: d.letter)
def test_amx_kernel_emulated(tmp_path, variant, dtype) -> None:
    """The AMX kernels (x86-amx: four 16x16 int32 or float tiles; tdpbssd, tdpbusd, tdpbsud or
    tdpbuud as A and B are int8 or uint8, tdpbf16ps for bf16) and their packing, from the
    template with the tile operations replaced by plain-C stand-ins (EMULATED_AMX), run here:
    bit-exact over the full int8 and uint8 ranges (bf16: small integers, exact sums) on every
    tile, k step (64 int8, 32 bf16) and block edge.  (No CPU here has AMX: the instructions'
    semantics are the stand-ins'; bench/int8.py measures it where one does.)"""
    overrides = {"mc": 64, "kc": 128, "nc": 64} if variant == "tiny" else None
    plan = make_plan(targets.TARGETS["x86-amx"], dtype, overrides=overrides)
    if dtype is DType.BF16F32:
        assert plan.isa["dp"] == "_tile_dpbf16ps"
    else:
        signs = re.fullmatch(r"_tile_dpb([su])([su])d", plan.isa["dp"])
        assert signs, plan.isa["dp"]
        kinds = {"s": "signed char", "u": "unsigned char"}
        assert (kinds[signs[1]], kinds[signs[2]]) == (dtype.a_ctype, dtype.b_ctype)
    plan = replace(plan, isa={**plan.isa, **{op: f"kf_emu_{op}" for op in (
        "loadconfig", "storeconfig", "zero", "loadd", "dp", "stored")}}, attribute="")
    src, lib = tmp_path / "lib.c", tmp_path / "lib.so"
    text = library_source(plan)
    header_end = text.index("typedef __PTRDIFF_TYPE__ kf_index;")
    emulation = (f"#define EMU_A {dtype.a_ctype}\n#define EMU_B {dtype.b_ctype}\n" +
                 EMULATED_AMX_TYPES[dtype.kind] + EMULATED_AMX)
    src.write_text(text[:header_end] + emulation + text[header_end:])
    run([CLANG, "-O1", "-shared", "-fPIC", *TRACE_FLAGS, *WARN_FLAGS, str(src), "-o", str(lib)])
    library = Library(plan, lib)
    rng = np.random.default_rng(9)
    sizes = [(1, 1, 1), (31, 33, 63), (32, 32, 64), (33, 31, 65), (65, 97, 130), (5, 70, 200),
             (70, 5, 129), (64, 64, 128), (97, 65, 257)]
    for i, (m, n, k) in enumerate(sizes):
        alpha, beta, load_c = SCALARS[i % len(SCALARS)]
        library.gemm(rng, m, n, k, ta=bool(i & 1), tb=bool(i & 2), pad=(0, 1, 3)[i % 3],
                     cpad=i % 2, alpha=alpha, beta=beta, load_c=load_c, epilogue=i % 3 == 1,
                     span="full" if dtype.kind == "int" else (-4, 5))
