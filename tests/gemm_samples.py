"""What the GEMM functions of samples/positive compute and how to call them, for the recognizer and
differential tests.

Each function is described by its parameters as tokens (M N K: sizes; lda ldb ldc: leading
dimensions; alpha beta: scalars; A B C: matrices) and by the layout of each operand, so that one
generic routine can build its arguments for any sizes and leading dimensions, and compute what it
must return with numpy.  Functions whose parameters do not fit that mould have their own builder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from conftest import POSITIVE
from kernelfarer.targets import DType


@dataclass(frozen=True)
class ElemType:
    """Element types of one GEMM: C's (and the sums'), and the operands'."""
    ctype: str              # C's C type
    np: type                # C's numpy type
    in_ctype: str           # A's and B's C type
    in_np: type
    dtype: DType            # kernelfarer's name for it
    report: str             # how the report names it


TYPES = {
    "f32": ElemType("float", np.float32, "float", np.float32, DType.F32, "float"),
    "f64": ElemType("double", np.float64, "double", np.float64, DType.F64, "double"),
    "i32": ElemType("int", np.int32, "int", np.int32, DType.I32, "int"),
    "i64": ElemType("long", np.int64, "long", np.int64, DType.I64, "long"),
    "i8i32": ElemType("int", np.int32, "signed char", np.int8, DType.I8I32, "signed char->int"),
}
CTYPE = {name: t.ctype for name, t in TYPES.items()}      # C's C type, by TYPES key
C_OF_NUMPY = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
              np.dtype(np.int32): "int", np.dtype(np.int64): "long",
              np.dtype(np.int8): "signed char"}
SENTINEL = 99            # padding between rows: a read of it would show in the result
POISON = -7777           # integer C's "NaN": what an overwritten C holds before the call


@dataclass(frozen=True)
class GemmFunc:
    name: str
    dtype: str                         # a key of TYPES: "f32", "f64", "i32", "i64", "i8i32"
    params: tuple[str, ...] = ()       # tokens, in the C parameter order
    op: str = "acc"                    # acc: C += AB; sub: C -= AB; over: C = AB; alpha_acc:
                                       # C += alpha AB; alpha_sub: C -= alpha AB;
                                       # scale: C = alpha AB + beta C; beta0: C = AB + 0 C
    layout: str = "rrr"                # A, B, C: r = row-major (r, c) at r*ld + c; c = column-major
    size_type: str = "int"             # C type of M, N, K
    builder: str = "standard"          # or the name of a custom builder below
    xfail: str = ""                    # a known bug: the differential test must fail with it
    returns: str = "void"              # C return type (compared between original and rewrite)
    after: str = ""                    # an `int f(void)` to call afterwards, result compared
    alpha: float | None = None         # alpha fixed by the function (not a parameter)
    guard_bug: str = ""                # a known bug makes a run-time check fail spuriously: the
                                       # fast path may not run (results are still compared)

    @property
    def overwrites(self) -> bool:
        return self.op == "over"

    def has_ld(self) -> bool:
        return self.builder in ("struct", "rowptr") or any(t.startswith("ld") for t in self.params)

    @property
    def types(self) -> ElemType:
        return TYPES[self.dtype]

    def cdef(self) -> str:
        ct, it = self.types.ctype, self.types.in_ctype
        after = f"\nint {self.after}(void);" if self.after else ""
        if self.builder == "globals":
            return f"{self.returns} {self.name}(void);" + after
        if self.builder in CUSTOM_CDEF:
            return CUSTOM_CDEF[self.builder].format(name=self.name, T=ct) + after
        star = "**" if self.builder == "rowptr" else "*"
        types = {"M": self.size_type, "N": self.size_type, "K": self.size_type,
                 "lda": "int", "ldb": "int", "ldc": "int", "alpha": ct, "beta": ct,
                 "A": f"{it} {star}", "B": f"{it} {star}", "C": f"{ct} {star}"}
        return f"{self.returns} {self.name}({', '.join(types[t] for t in self.params)});" + after


@dataclass(frozen=True)
class Sample:
    file: str
    functions: tuple[GemmFunc, ...]
    # Sizes fixed at compile time by the macros NI, NJ, NK: the (M, N, K) sets to build.
    fixed_sizes: tuple[tuple[int, int, int], ...] = ()
    not_replaced: int = 0              # nests the file holds that are not GEMMs (e.g. in main)
    extra_replaced: int = 0            # GEMM nests beyond one per listed function
    xfail: str = ""                    # a known bug: every test of the sample must fail with it

    @property
    def path(self):
        return POSITIVE / self.file

    @property
    def replaced(self) -> int:
        return len(self.functions) + self.extra_replaced

    def variants(self) -> list[tuple[str, ...]]:
        """-D flags of each build of the sample."""
        if not self.fixed_sizes:
            return [()]
        return [(f"-DNI={m}", f"-DNJ={n}", f"-DNK={k}") for m, n, k in self.fixed_sizes]

    def dtypes(self) -> set[str]:
        """Keys of TYPES of its GEMMs."""
        return {f.dtype for f in self.functions}


FIXED = ((61, 37, 31), (7, 17, 5))
STD = ("M", "N", "K", "A", "lda", "B", "ldb", "C", "ldc")

SAMPLES: tuple[Sample, ...] = (
    Sample("loop_orders_f32.c", tuple(
        GemmFunc(f"mm_{order}", "f32", ("C", "A", "B"), builder="fixed")
        for order in ("ijk", "ikj", "jik", "jki", "kij", "kji")), fixed_sizes=FIXED),
    Sample("loop_orders_f64_globals.c", tuple(
        GemmFunc(f"dgemm_{order}", "f64", builder="globals")
        for order in ("ijk", "ikj", "jik", "jki", "kij", "kji")), fixed_sizes=FIXED),
    Sample("vla.c", (
        GemmFunc("sgemm_vla", "f32", ("M", "N", "K", "C", "A", "B")),
        GemmFunc("dgemm_vla", "f64", ("M", "N", "K", "C", "A", "B"), size_type="long"),
    )),
    Sample("flat_ld.c", (
        GemmFunc("sgemm_rm", "f32", STD),
        GemmFunc("dgemm_rm", "f64", STD),
        GemmFunc("sgemm_macro", "f32", STD),
    )),
    Sample("colmajor.c", (
        GemmFunc("dgemm_cm", "f64", ("M", "N", "K", "alpha", "A", "lda", "B", "ldb", "C", "ldc"),
                 op="alpha_acc", layout="ccc"),
        GemmFunc("sgemm_cm_dot", "f32",
                 ("M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"),
                 op="scale", layout="ccc"),
    )),
    Sample("transposed.c", (
        GemmFunc("sgemm_tn", "f32", ("M", "N", "K", "C", "A", "B"), layout="crr"),
        GemmFunc("dgemm_nt", "f64", STD, layout="rcr"),
        GemmFunc("sgemm_tt", "f32", ("M", "N", "K", "C", "A", "B"), layout="ccr"),
    )),
    Sample("accumulator.c", (
        GemmFunc("dgemm_dot", "f64", ("M", "N", "K", "A", "B", "C"), op="over"),
        GemmFunc("sgemm_dot_ab", "f32", ("M", "N", "K", "alpha", "A", "B", "beta", "C"),
                 op="scale"),
        GemmFunc("dgemm_dot_outer", "f64", STD, op="over"),
    )),
    Sample("zero_init.c", (
        GemmFunc("sgemm_zero", "f32", ("M", "N", "K", "C", "A", "B"), op="over"),
        GemmFunc("dgemm_zero", "f64", STD, op="over"),
    )),
    Sample("alpha_minus.c", (
        GemmFunc("sgemm_alpha", "f32", ("M", "N", "K", "alpha", "C", "A", "B"), op="alpha_acc"),
        GemmFunc("dgemm_minus", "f64", STD, op="sub"),
        GemmFunc("sgemm_minus_alpha", "f32", ("M", "N", "K", "alpha", "C", "A", "B"),
                 op="alpha_sub"),
    )),
    Sample("restrict_ptrs.c", (
        GemmFunc("sgemm_restrict", "f32", STD),
        GemmFunc("dgemm_restrict", "f64", ("M", "N", "K", "A", "B", "C"), op="over"),
    )),
    Sample("with_headers.c", (
        GemmFunc("matmul", "f64", ("M", "N", "K", "A", "B", "C"), size_type="size_t"),
    ), not_replaced=2),
    Sample("overlap.c", (GemmFunc("g", "f32", STD),)),
    Sample("submatrix.c", (
        GemmFunc("sgemm_block", "f32", builder="block"),
        GemmFunc("dgemm_rows", "f64", builder="rows"),
    )),
    Sample("batched.c", (GemmFunc("sgemm_batched", "f32", builder="batched"),), not_replaced=1),
    Sample("loop_vars_after.c", (
        GemmFunc("gemm_count", "f32", ("M", "N", "K", "C", "A", "B"), returns="int"),
        GemmFunc("gemm_globals", "f64", ("M", "N", "K", "C", "A", "B"),
                 after="gemm_globals_state"),
    )),
    Sample("int_matrices.c", (
        GemmFunc("igemm", "i32", ("M", "N", "K", "C", "A", "B")),
        GemmFunc("lgemm", "i64", STD),
        GemmFunc("i8gemm", "i8i32", ("M", "N", "K", "A", "B", "C"), op="over"),
    )),
    Sample("row_pointers.c", (
        GemmFunc("gemm_rows", "f32", ("M", "N", "K", "C", "A", "B"), builder="rowptr"),
        GemmFunc("dgemm_rows", "f64", ("M", "N", "K", "A", "B", "C"), builder="rowptr"),
    )),
    Sample("openmp.c", (GemmFunc("gemm_omp", "f32", ("M", "N", "K", "C", "A", "B")),)),
    Sample("scalar_alias.c", (
        GemmFunc("sgemm_global_alpha", "f32", ("M", "N", "K", "A", "B", "C"), op="alpha_acc",
                 alpha=2),
        GemmFunc("igemm_global_alpha", "i32", ("M", "N", "K", "A", "B", "C"), op="alpha_acc",
                 alpha=2),
    )),
    Sample("gram.c", (
        GemmFunc("gram", "f64", builder="gram"),
        GemmFunc("square", "f32", builder="square"),
    )),
    Sample("program_local_arrays.c", (), not_replaced=4, extra_replaced=2),
    Sample("program_hoisted_reads.c", (), not_replaced=5, extra_replaced=3),
    Sample("program_epilogue_state.c", (), not_replaced=5, extra_replaced=3),
    Sample("struct_matrix.c", (GemmFunc("matrix_mul_add", "f64", builder="struct"),)),
    Sample("beta_zero_literal.c", (
        GemmFunc("sgemm_beta0", "f32", ("M", "N", "K", "C", "A", "B"), op="beta0"),
    )),
    Sample("with_intrinsics.c", (
        GemmFunc("sgemm_naive", "f32", ("M", "N", "K", "A", "B", "C")),
    )),
)

SAMPLE_BY_FILE = {s.file: s for s in SAMPLES}


def nest_entry(report: dict, sample: Sample, fn: GemmFunc) -> dict:
    """The report entry of the (outermost) nest in function `fn` of the sample."""
    lines = sample.path.read_text().splitlines()
    starts = {}
    for number, line in enumerate(lines, 1):
        for f in sample.functions:
            if f"{f.name}(" in line and not line.startswith((" ", "\t")) and f.name not in starts:
                starts[f.name] = number
    begin = starts[fn.name]
    end = min([n for n in starts.values() if n > begin], default=len(lines) + 1)
    inside = [e for e in report["nests"] if begin < e["line"] < end]
    assert inside, f"no nest of {fn.name} in the report"
    return inside[-1] if fn.builder == "batched" else inside[0]


# -- building a call ------------------------------------------------------------------------------

@dataclass
class Call:
    """One call of a sample function: its arguments (numpy arrays are passed by pointer), the
    arrays to compare afterwards, what they must hold, and how often the fast path must run."""

    args: list
    outputs: list[str]                         # names of arrays in `arrays` checked after the call
    arrays: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    driver_calls: int                          # how often the generated driver must run
    globals_: dict[str, tuple[int, ...]] = field(default_factory=dict)   # name -> C array shape
    label: str = ""


def _ints(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    return rng.integers(-3, 4, size=shape).astype(dtype)


def _operand(rng, rows: int, cols: int, layout: str, pad: int, dtype, fill_nan: bool = False):
    """A matrix stored row- or column-major with `pad` extra elements per stored line.
    Returns (flat buffer, leading dimension, the math view as a 2-D float64 array)."""
    lines, length = (rows, cols) if layout == "r" else (cols, rows)
    ld = length + pad
    store = np.full((lines, ld), SENTINEL, dtype=dtype)
    poison = np.nan if np.issubdtype(dtype, np.floating) else POISON
    store[:, :length] = poison if fill_nan else _ints(rng, (lines, length), dtype)
    flat = store.reshape(-1)
    if flat.size == 0:
        flat = np.full(1, SENTINEL, dtype=dtype)      # a valid pointer for empty matrices
    view = store[:, :length].astype(np.float64)
    return flat, ld, (view if layout == "r" else view.T)


def _write_back(flat: np.ndarray, rows: int, cols: int, layout: str, ld: int,
                value: np.ndarray) -> np.ndarray:
    out = flat.copy()
    if rows and cols:
        lines, length = (rows, cols) if layout == "r" else (cols, rows)
        store = out[:lines * ld].reshape(lines, ld)
        store[:, :length] = value if layout == "r" else value.T
    return out


def reference(op: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float,
              beta: float) -> np.ndarray:
    ab = a @ b if a.shape[1] else np.zeros((a.shape[0], b.shape[1]))
    with np.errstate(invalid="ignore"):
        return {
            "acc": lambda: c + ab,
            "sub": lambda: c - ab,
            "over": lambda: ab,
            "alpha_acc": lambda: c + alpha * ab,
            "alpha_sub": lambda: c - alpha * ab,
            "scale": lambda: alpha * ab + beta * c,
            "beta0": lambda: ab + 0.0 * c,
        }[op]()


def standard_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *, seed: int = 0,
                  alpha: float = 2.0, beta: float = -3.0, nan_c: bool | None = None) -> Call:
    """Arguments for a function in the standard mould (or a fixed-size / global one)."""
    rng = np.random.default_rng(seed + 1000003 * m + 1009 * n + k)
    dt, it = fn.types.np, fn.types.in_np
    if np.issubdtype(dt, np.integer):
        alpha, beta = int(alpha), int(beta)
    if not fn.has_ld():
        pads = (0, 0, 0)
    la, lb, lc = fn.layout
    nan_c = fn.overwrites if nan_c is None else nan_c
    if fn.alpha is not None:
        alpha = fn.alpha
    a, lda, av = _operand(rng, m, k, la, pads[0], it)
    b, ldb, bv = _operand(rng, k, n, lb, pads[1], it)
    c, ldc, cv = _operand(rng, m, n, lc, pads[2], dt, fill_nan=nan_c)
    want = reference(fn.op, av, bv, cv, alpha, beta).astype(dt)
    arrays = {"A": a, "B": b, "C": c}
    expected = {"A": a.copy(), "B": b.copy(), "C": _write_back(c, m, n, lc, ldc, want)}
    values = {"M": m, "N": n, "K": k, "lda": lda, "ldb": ldb, "ldc": ldc,
              "alpha": alpha, "beta": beta}
    call = Call(args=[arrays[t] if t in arrays else values[t] for t in fn.params],
                outputs=["C", "A", "B"], arrays=arrays, expected=expected,
                driver_calls=int(m > 0 and n > 0 and k > 0),
                label=f"M={m} N={n} K={k} lda={lda} ldb={ldb} ldc={ldc} alpha={alpha} beta={beta}")
    if fn.builder == "globals":
        call.args = []
        call.globals_ = {"A": (m, k), "B": (k, n), "C": (m, n)}
    return call


def block_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *, seed: int = 0) -> Call:
    """sgemm_block(i0, i1, j0, j1, k0, k1, ld, C, A, B): a sub-block of square-ish storage."""
    rng = np.random.default_rng(seed + 7 * m + 11 * n + k)
    dt = fn.types.np
    i0, j0, k0 = 2, 1, 3
    i1, j1, k1 = i0 + m, j0 + n, k0 + k
    ld = max(j1, k1) + pads[0] + 1
    rows = max(i1, k1) + 1
    c = _ints(rng, (rows, ld), dt)
    a = _ints(rng, (rows, ld), dt)
    b = _ints(rng, (rows, ld), dt)
    want = c.astype(np.float64)
    if m and n and k:
        want[i0:i1, j0:j1] += a[i0:i1, k0:k1].astype(np.float64) @ b[k0:k1, j0:j1]
    arrays = {"C": c.reshape(-1), "A": a.reshape(-1), "B": b.reshape(-1)}
    expected = {"C": want.astype(dt).reshape(-1), "A": arrays["A"].copy(),
                "B": arrays["B"].copy()}
    return Call(args=[i0, i1, j0, j1, k0, k1, ld, arrays["C"], arrays["A"], arrays["B"]],
                outputs=["C", "A", "B"], arrays=arrays, expected=expected,
                driver_calls=int(m > 0 and n > 0 and k > 0),
                label=f"rows {i0}..{i1} cols {j0}..{j1} k {k0}..{k1} ld={ld}")


def rows_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *, seed: int = 0) -> Call:
    """dgemm_rows(first, last, N, K, A, B, C): rows first..last (inclusive) of C."""
    rng = np.random.default_rng(seed + 13 * m + 17 * n + k)
    dt = fn.types.np
    first = 3
    last = first + m - 1
    rows = first + m + 2
    a = _ints(rng, (rows, k), dt)
    b = _ints(rng, (k, n), dt)
    c = _ints(rng, (rows, n), dt)
    want = c.astype(np.float64)
    if m and n and k:
        want[first:last + 1] += a[first:last + 1].astype(np.float64) @ b
    arrays = {"A": a.reshape(-1), "B": b.reshape(-1), "C": c.reshape(-1)}
    for name in arrays:
        if arrays[name].size == 0:
            arrays[name] = np.zeros(1, dtype=dt)
    expected = {"C": want.astype(dt).reshape(-1) if c.size else arrays["C"].copy(),
                "A": arrays["A"].copy(), "B": arrays["B"].copy()}
    return Call(args=[first, last, n, k, arrays["A"], arrays["B"], arrays["C"]],
                outputs=["C", "A", "B"], arrays=arrays, expected=expected,
                driver_calls=int(m > 0 and n > 0 and k > 0),
                label=f"rows {first}..{last} N={n} K={k}")


def batched_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *, seed: int = 0) -> Call:
    """sgemm_batched(batch, M, N, K, C, A, B) with a batch of 3."""
    rng = np.random.default_rng(seed + 19 * m + 23 * n + k)
    dt = fn.types.np
    batch = 3
    a = _ints(rng, (batch, m, k), dt)
    b = _ints(rng, (batch, k, n), dt)
    c = _ints(rng, (batch, m, n), dt)
    want = c.astype(np.float64) + (a.astype(np.float64) @ b if k else 0)
    arrays = {"C": c.reshape(-1), "A": a.reshape(-1), "B": b.reshape(-1)}
    for name in arrays:
        if arrays[name].size == 0:
            arrays[name] = np.zeros(1, dtype=dt)
    expected = {"C": want.astype(dt).reshape(-1) if c.size else arrays["C"].copy(),
                "A": arrays["A"].copy(), "B": arrays["B"].copy()}
    return Call(args=[batch, m, n, k, arrays["C"], arrays["A"], arrays["B"]],
                outputs=["C", "A", "B"], arrays=arrays, expected=expected,
                driver_calls=batch if m and n and k else 0,
                label=f"batch=3 M={m} N={n} K={k}")


@dataclass(frozen=True)
class StructArg:
    """A pointer to a `struct matrix {int rows, cols, ld; T *data;}` built at call time around
    one of the call's arrays."""
    rows: int
    cols: int
    ld: int
    data: str          # name of the array in Call.arrays


def struct_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *, seed: int = 0) -> Call:
    """matrix_mul_add(struct matrix *c, const struct matrix *a, const struct matrix *b)."""
    rng = np.random.default_rng(seed + 29 * m + 31 * n + k)
    dt = fn.types.np
    a, lda, av = _operand(rng, m, k, "r", pads[0], dt)
    b, ldb, bv = _operand(rng, k, n, "r", pads[1], dt)
    c, ldc, cv = _operand(rng, m, n, "r", pads[2], dt)
    want = reference("acc", av, bv, cv, 1.0, 1.0).astype(dt)
    arrays = {"A": a, "B": b, "C": c}
    expected = {"A": a.copy(), "B": b.copy(), "C": _write_back(c, m, n, "r", ldc, want)}
    return Call(args=[StructArg(m, n, ldc, "C"), StructArg(m, k, lda, "A"),
                      StructArg(k, n, ldb, "B")],
                outputs=["C", "A", "B"], arrays=arrays, expected=expected,
                driver_calls=int(m > 0 and n > 0 and k > 0),
                label=f"M={m} N={n} K={k} lda={lda} ldb={ldb} ldc={ldc}")


@dataclass(frozen=True)
class RowPointers:
    """An array of row pointers (T **) into one of the call's arrays, built at call time."""
    data: str                      # name of the array in Call.arrays
    offsets: tuple[int, ...]       # element offset of each row


ARRANGEMENTS = ("even", "shared", "shuffled")


def rowptr_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *, seed: int = 0,
                arrangement: str = "even") -> Call:
    """A function taking row-pointer matrices.  even: rows `cols + pad` apart (fast path);
    shared: every row of A is the same row (stride 0, fast path); shuffled: C's rows out of order
    (no common stride: the original nest must run)."""
    rng = np.random.default_rng(seed + 37 * m + 41 * n + k)
    dt, it = fn.types.np, fn.types.in_np

    def matrix(rows, cols, pad, dtype, order=None, shared=False):
        ld = cols + pad
        flat = np.full(max(1, rows * ld), SENTINEL, dtype=dtype)
        store = flat[:rows * ld].reshape(rows, ld)
        store[:, :cols] = _ints(rng, (rows, cols), dtype)
        order = list(range(rows)) if order is None else order
        offsets = tuple(0 if shared else order[r] * ld for r in range(rows))
        view = np.array([flat[o:o + cols] for o in offsets], dtype=np.float64).reshape(rows, cols)
        return flat, offsets, view

    order = None
    if arrangement == "shuffled":
        order = list(rng.permutation(m))
        if m >= 2 and order == sorted(order):
            order[0], order[1] = order[1], order[0]
    a, oa, av = matrix(m, k, pads[0], it, shared=arrangement == "shared")
    b, ob, bv = matrix(k, n, pads[1], it)
    c, oc, cv = matrix(m, n, pads[2], dt, order=order)
    want = cv + (av @ bv if k else 0)
    expected_c = c.copy()
    for r, o in enumerate(oc):
        expected_c[o:o + n] = want[r]
    arrays = {"A": a, "B": b, "C": c}
    ptrs = {"A": RowPointers("A", oa), "B": RowPointers("B", ob), "C": RowPointers("C", oc)}
    fast = m > 0 and n > 0 and k > 0 and (arrangement != "shuffled" or m < 2)
    return Call(args=[ptrs[t] if t in ptrs else {"M": m, "N": n, "K": k}[t] for t in fn.params],
                outputs=["C", "A", "B"], arrays=arrays,
                expected={"A": a.copy(), "B": b.copy(), "C": expected_c},
                driver_calls=int(fast), label=f"M={m} N={n} K={k} pads={pads} {arrangement} rows")


def one_operand_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), *,
                     seed: int = 0) -> Call:
    """gram(int m, int n, T G[n][n], const T A[m][n]): G += A^T A (n = the call's M, m = its K);
    square(int n, T C[n][n], const T A[n][n]): C += A A (n = the call's M)."""
    rng = np.random.default_rng(seed + 43 * m + 47 * n + k)
    dt = fn.types.np
    rows = k if fn.builder == "gram" else m
    a = _ints(rng, (rows, m), dt)
    c = _ints(rng, (m, m), dt)
    a64 = a.astype(np.float64)
    want = c.astype(np.float64) + (a64.T @ a64 if fn.builder == "gram" else a64 @ a64)
    arrays = {"C": c.reshape(-1) if c.size else np.zeros(1, dt),
              "A": a.reshape(-1) if a.size else np.zeros(1, dt)}
    expected = {"C": want.astype(dt).reshape(-1) if c.size else arrays["C"].copy(),
                "A": arrays["A"].copy()}
    args = [k, m] if fn.builder == "gram" else [m]
    return Call(args=args + [arrays["C"], arrays["A"]], outputs=["C", "A"], arrays=arrays,
                expected=expected, driver_calls=int(m > 0 and rows > 0),
                label=f"n={m}" + (f" m={k}" if fn.builder == "gram" else ""))


CUSTOM_CDEF = {
    "gram": "void {name}(int, int, {T} *, {T} *);",
    "square": "void {name}(int, {T} *, {T} *);",
    "struct": "struct matrix {{ int rows, cols, ld; {T} *data; }};\n"
              "void {name}(struct matrix *, const struct matrix *, const struct matrix *);",
    "block": "void {name}(int, int, int, int, int, int, int, {T} *, {T} *, {T} *);",
    "rows": "void {name}(int, int, int, int, {T} *, {T} *, {T} *);",
    "batched": "void {name}(int, int, int, int, {T} *, {T} *, {T} *);",
}

BUILDERS: dict[str, Callable[..., Call]] = {
    "standard": standard_call, "fixed": standard_call, "globals": standard_call,
    "block": block_call, "rows": rows_call, "batched": batched_call, "struct": struct_call,
    "rowptr": rowptr_call, "gram": one_operand_call, "square": one_operand_call,
}


def make_call(fn: GemmFunc, m: int, n: int, k: int, pads=(0, 0, 0), **kw) -> Call:
    return BUILDERS[fn.builder](fn, m, n, k, pads, **kw)


def calls_for(fn: GemmFunc, sizes, pads_list) -> list[Call]:
    """Every size with every padding (paddings only where the function takes leading
    dimensions), plus, for C = alpha AB + beta C, beta = 0 on a NaN-filled C (the NaN must stay:
    beta is applied even when it is zero)."""
    out = []
    for m, n, k in sizes:
        for pads in (pads_list if fn.has_ld() else [(0, 0, 0)]):
            out.append(make_call(fn, m, n, k, pads))
        if fn.builder == "rowptr":
            out += [make_call(fn, m, n, k, pads_list[-1], arrangement=arrangement)
                    for arrangement in ARRANGEMENTS[1:]]
        if fn.op == "beta0":
            out.append(make_call(fn, m, n, k, nan_c=True))
        if fn.op == "scale":
            out.append(make_call(fn, m, n, k, alpha=1.0, beta=0.0, nan_c=True))
            out.append(make_call(fn, m, n, k, alpha=0.0, beta=1.0))
    return out
