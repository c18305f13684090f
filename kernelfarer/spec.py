"""GemmSpec: what the recognizer proved a loop nest computes, as a small frozen value.

All sizes, strides and scalars are C expressions (text over the user's own identifiers, already
checked to be side-effect free and invariant in the nest), so the emitter can evaluate them at the
call site.  Every operand is normalized to the BLAS view

    C[m, n] (row stride ldc, unit column stride) = beta * C + alpha * sum_k A[m, k] * B[k, n]

where A and B have arbitrary element strides.  A column-major C is handled by the recognizer by
exchanging the roles of A and B (C^T = B^T A^T), so a spec is always row-major in C.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from typing import TYPE_CHECKING

from kernelfarer.diagnostics import SourceLocation
from kernelfarer.targets import DType

if TYPE_CHECKING:      # the recognizer's modules import this one
    from kernelfarer.epilogue import Epilogue, Fusion
    from kernelfarer.fission import Around


# Names under which the call site holds the sizes; guards may use them.  Placeholders: each call
# site binds them to names its file does not use (hygiene.py).
SIZE_NAMES = ("$m", "$n", "$k")


class CInit(enum.Enum):
    """How the nest treats C's old value."""

    ACCUMULATE = "accumulate"    # C += alpha * A.B            (beta is exactly 1)
    SCALE = "scale"              # C = beta * C + alpha * A.B  (beta applied even when it is 0)
    OVERWRITE = "overwrite"      # C = alpha * A.B             (C's old value is never read)


@dataclass(frozen=True)
class Operand:
    name: str          # the user's array, as written (for remarks)
    base: str          # C expression of the address of element (0, 0) of the GEMM view
    row_stride: str    # C expression, in elements
    col_stride: str    # C expression, in elements
    access: str        # for remarks: the element accessed, delinearized: "A[i*lda + k]"


@dataclass(frozen=True)
class Guard:
    """A condition the fast path needs at run time; when it is false the original nest runs."""

    expr: str
    why: str


@dataclass(frozen=True)
class Conversion:
    """How a nest converts its integer sums into C's floating-point elements, once each, after
    the k loop: C = (c_store)((scale_type)(cast)(sum_type)sum * scale), the product only with a
    scale (e.g. `c[i][j] = (float)acc * s;`: sum_type int, cast float, scale_type float), C's old
    value added first with add_c (`c[i][j] += acc * s;`, in the common type, as C adds)."""

    sum_type: str           # the accumulator's type (the kernels' int32 sums are its bits)
    cast: str               # the sum converted to this first (an explicit cast, else the type of
                            # the product, or C's)
    scale: str = ""         # a C expression read once at the call site (empty: no product)
    scale_type: str = ""    # the type the product is computed in
    add_c: bool = False     # C = (c_store)(C + that)


@dataclass(frozen=True)
class GemmSpec:
    dtype: DType
    m: str
    n: str
    k: str
    a: Operand
    b: Operand
    c: Operand
    alpha: str                      # "1" when absent
    beta: str                       # "1" for ACCUMULATE, "0" for OVERWRITE
    init: CInit
    guards: tuple[Guard, ...]       # run-time conditions for the fast path
    location: SourceLocation
    loop_order: str                 # e.g. "ijk" in the user's names, outermost first
    shape: str                      # for remarks: "M=n N=m K=p" in the user's terms
    description: str                # one line for remarks: the user's statement shape
    finals: tuple[str, ...] = ()    # C statements run after the fast path: loop variables and
                                    # bound temporaries get the values the original leaves
    epilogue: "Epilogue | None" = None  # element-wise code applied to the GEMM's result
    fusion: "Fusion | None" = None  # ... as a hook the driver applies panel by panel
    fusion_refusal: str = ""        # why the epilogue is not fused (runs as a separate pass)
    tile_steps: tuple = ()          # ... as a program the kernels run on the register tile
                                    # (tileprog.Step, reads resolved; () when it is not one)
    tile_refusal: str = ""          # why the fused epilogue is not a tile program
    setup: tuple[str, ...] = ()     # C declarations the guards and the call need (row strides)
    around: "Around | None" = None  # independent code of the outer loop, run after the GEMM
    side: tuple[tuple[str, str], ...] = ()  # (loop headers, statement): independent statements
                                    # of the nest, run after the GEMM in a copy of their loops
    load_c: str = ""                # C condition under which C's old value is read (empty: the
                                    # init says; reference BLAS reads C only when beta != 0)
    canonical: tuple[str, ...] = () # what canonicalization did to the nest (for remarks)
    c_store: str = ""               # C's element type where it is not the sums' (a 16-bit
                                    # float summed in float, a float of int sums): the GEMM runs
                                    # on a copy of C of the sums' type, converted into C once
                                    # (emit.render_converted)
    conversion: Conversion | None = None  # ... from int sums: how (None: a plain conversion)
    offsets: tuple[str, ...] = ()   # ... and zero points (za, zb: C int expressions) the nest
                                    # adds to A's and B's elements, (a + za) * (b + zb): the copy
                                    # gets zb * A's row sums + za * B's column sums + k za zb
