"""The target registry: the only module that knows target names, ISA features and register blocks.

A target is one declarative entry.  Everything the planner and the templates need to know about an
instruction set lives here: which CPU features it requires (checked on the host for ``--target auto``
and again at run time by the emitted code), the function-level ``target`` attribute that lets the
generated functions use the ISA without global compiler flags, the headers the kernels include, and,
per element type, the register block (``mr`` x ``nr``), the micro-kernel template and the names of the
vector operations that template spells with.  Targets for other machines (Arm, POWER) also say how to
build for them (``compile_flags``: clang's cross-compilation flags), how to run such a binary here
(``emulator``: qemu-user) and the cache geometry of a typical machine (their blocking defaults).

The core never branches on a target name: it asks the registry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.hostinfo import CacheLevel, Caches


# What generated code calls a bf16 element (DType.BF16F32's operands; the prelude's typedef).
BF16_CTYPE = "kf_bf16"


class DType(enum.Enum):
    """Element types of a GEMM: C and the accumulation (ctype), and the operands A, B (in_ctype,
    also the type of the packed panels and of the drivers' pointers to A and B).  An operand whose
    values are read as another type of the same size says so (a_ctype, b_ctype: unsigned and
    signed int8).  Named the BLAS way (s, d) for floating point.  These are the names generated
    code spells: bf16 elements are `kf_bf16`, which the prelude defines as `__bf16` where the
    target's compiler has that type and as a struct of the 16 bits where it has not (POWER:
    Target.bf16_bits); `source` names the type as the user's code does."""

    F32 = ("s", "float", 4, "float", 4, "float")
    F64 = ("d", "double", 8, "double", 8, "float")
    I32 = ("i32", "int", 4, "int", 4, "int")
    I64 = ("i64", "long", 8, "long", 8, "int")
    I8I32 = ("i8i32", "int", 4, "signed char", 1, "int")    # int8 operands, int32 sums
    U8I32 = ("u8i32", "int", 4, "unsigned char", 1, "int")  # uint8 operands, int32 sums
    U8S8I32 = ("u8s8i32", "int", 4, "unsigned char", 1, "int", "signed char")  # A uint8, B int8
    S8U8I32 = ("s8u8i32", "int", 4, "signed char", 1, "int", "unsigned char")  # A int8, B uint8
    BF16F32 = ("bf16f32", "float", 4, "kf_bf16", 2, "float")  # bf16 operands, float sums
    I16I32 = ("i16i32", "int", 4, "short", 2, "int")         # int16 operands, int32 sums
    F16F32 = ("f16f32", "float", 4, "_Float16", 2, "float")  # fp16 operands, float sums
    F16 = ("h", "_Float16", 2, "_Float16", 2, "float")       # fp16 operands, fp16 sums

    def __init__(self, letter: str, ctype: str, size: int, in_ctype: str, in_size: int,
                 kind: str, b_ctype: str = "") -> None:
        self.letter = letter
        self.ctype = ctype
        self.size = size
        self.in_ctype = in_ctype
        self.in_size = in_size
        self.kind = kind
        self.a_ctype = in_ctype
        self.b_ctype = b_ctype or in_ctype

    @classmethod
    def int8_types(cls) -> tuple["DType", ...]:
        """The int8 -> int32 GEMMs: int8 and uint8 operands, either or both."""
        return (cls.I8I32, cls.U8I32, cls.U8S8I32, cls.S8U8I32)

    @classmethod
    def int8(cls, a_unsigned: bool, b_unsigned: bool) -> "DType":
        """The int8 -> int32 GEMM of operands of these signednesses."""
        return {(False, False): cls.I8I32, (True, True): cls.U8I32,
                (True, False): cls.U8S8I32, (False, True): cls.S8U8I32}[a_unsigned, b_unsigned]

    @staticmethod
    def source(ctype: str) -> str:
        """The type generated code calls `ctype` as the user's code spells it (kf_bf16: __bf16)."""
        return "__bf16" if ctype == BF16_CTYPE else ctype

    @property
    def label(self) -> str:
        """A short name: the type of C, or the operands' types and C's (uint8 x int8->int)."""
        short = {"signed char": "int8", "unsigned char": "uint8", "short": "int16",
                 BF16_CTYPE: "bf16", "_Float16": "fp16"}
        if self.a_ctype == self.b_ctype == self.ctype:
            return short.get(self.ctype, self.ctype)
        a, b = short[self.a_ctype], short[self.b_ctype]
        return f"{a if a == b else f'{a} x {b}'}->{self.ctype}"

    @property
    def operands(self) -> str:
        """The operands' types, as remarks and reports name them (the user's spelling)."""
        a, b = self.source(self.a_ctype), self.source(self.b_ctype)
        return a if a == b else f"{a} x {b}"

    def is_result(self, kind: str, bits: int, signed: bool = True, spelling: str = "") -> bool:
        """Whether C (or a scalar of C's precision) may hold `kind`/`bits`: integers of C's width
        signed or unsigned alike, as sums and products of them wrap alike (modulo 2^bits: the
        kernels' integer arithmetic is exactly that).  16-bit floats are two types (_Float16,
        __bf16): `spelling` says which (none given: neither matches)."""
        return kind == self.kind and bits == self.size * 8 and (
            bits != 16 or kind != "float" or spelling == self.ctype)

    def is_operand(self, kind: str, bits: int, signed: bool = True, spelling: str = "") -> bool:
        """Whether an operand may hold `kind`/`bits`: unsigned integers as narrow types that say
        so (uint8), or of C's own width (the same bits modulo 2^bits); a 16-bit float only as
        the operands' own type (`spelling`)."""
        return kind == self.kind and bits == self.in_size * 8 and (
            signed or self.kind == "float" or self.in_size == self.size
            or "unsigned" in self.a_ctype + self.b_ctype) and (
            bits != 16 or kind != "float"
            or spelling in (self.source(self.a_ctype), self.source(self.b_ctype)))

    @classmethod
    def for_result(cls, kind: str, bits: int, signed: bool = True,
                   spelling: str = "") -> "DType | None":
        """The type of a GEMM whose C holds `kind`/`bits` (operands of the same type)."""
        for member in (cls.F32, cls.F64, cls.I32, cls.I64, cls.F16):
            if member.is_result(kind, bits, signed, spelling):
                return member
        return None


@dataclass(frozen=True)
class ThinShape:
    """The thin path of a target (kernels/x86_thin.c.j2): C of at most four rows, read as a GEMV.
    Register budgets and break-even points are per ISA; bench/thin_shapes.py measures them."""

    axpy_vectors: int            # vectors of a B row per axpy step (rows x this accumulators)
    dot_columns: tuple[int, int]  # B columns per dot step for 1-2 rows and for 3-4 rows of C
    dot_min_k: int               # the dot form from this k on: each element's sum of lanes
                                 # costs more than a shorter dot saves
    k_block: int = 256           # k rows of B per axpy block (C is updated once per block)
    stream_block: int = 8        # ... where C's rows fit half of L1 (plan.thin_c_bytes): B's rows
                                 # read as this many streams, not k_block (Zen 5, f32, 1 x 2048 x
                                 # 2048: 25.9 -> 40.4 GFLOP/s; 3 x 1024 x 4096: 84 -> 134)
    decline_k: int = 0           # problems no form takes whose C has at most decline_n columns
    decline_n: int = 3           # and k below decline_k run the user's loops: the register tiles
                                 # of the other paths are mostly empty there (decline_k 0: never)
    short_k: int = 0             # one row of C whose elements are dots of 2..short_k products,
                                 # B's columns side by side: a plain loop the compiler vectorizes
                                 # across the elements (interleaved loads) beats a dot per element
    lane_sum: tuple[str, ...] = ()  # C statements summing the lanes of `v` (a shuffle tree) when
                                    # the ISA has no reduce intrinsic (isa["reduce"]); () and no
                                    # reduce: the lanes are stored and added one by one


# Micro-kernel templates that also render <kernel>_prog for float results: the kernel whose last
# store runs a fused epilogue's program on the register tile (kernelfarer/tileprog.py, the kernels'
# README).  Other kernels leave the epilogue to the driver's panels (the hook).
TILE_PROGRAM_TEMPLATES = frozenset({
    "kernels/generic.c.j2", "kernels/x86_avx512.c.j2", "kernels/x86_avx2.c.j2",
    "kernels/neon.c.j2", "kernels/power10_mma.c.j2", "kernels/power9_vsx.c.j2",
})


@dataclass(frozen=True)
class Decline:
    """Problems a kernel leaves to the user's loop where that loop is the faster (the file built
    with `when`, a C preprocessor condition): fewer rows of C than `rows` (unless exactly mr), k
    below `k`, or rows x k below `area` (0: no such bound)."""

    rows: int
    k: int
    area: int = 0
    when: str = "1"


@dataclass(frozen=True)
class KernelShape:
    """One micro-kernel of a target for one element type."""

    mr: int                      # rows of C held in registers
    nr: int                      # columns of C held in registers
    template: str                # micro-kernel template, relative to templates/
    lanes: int = 1               # elements per vector register
    kr: int = 1                  # k steps the kernel consumes at once: the packed panels hold k in
                                 # groups of kr (zero-padded), e.g. 4 int8 per 32-bit lane (VNNI)
    b_extra: int = 0             # elements after each column of a packed B micro-panel (the VNNI
                                 # kernel's column sums)
    own_packing: bool = False    # the kernel's template renders the pack routines (its layout is
                                 # not pack.c.j2's)
    widen: int = 1               # packed elements are this many times the operand's size (int8
                                 # packed as int16 for vpmaddwd)
    unroll: int = 4              # k steps per iteration of the kernel's main loop (any k is handled)
    isa: Mapping[str, str] = field(default_factory=dict)  # names the template spells with
    a_width: int = 0             # elements of one k step of packed A that one register (or
                                 # register pair) holds: by-lane FMA and outer-product kernels
                                 # load A whole; 0 when the kernel broadcasts A element by element
    outer_product: bool = False  # accumulators are matrix registers (plan.tiles), each updated by
                                 # one outer product of an A register and a B vector per k step
    direct: bool = False         # the template also renders the direct kernel (A and B read in
                                 # place, nothing packed; templates/kernels/README.md): the driver
                                 # then runs small and narrow problems without packing
    direct_mr: int = 0           # rows of the direct kernel's register tile (default: mr); it
                                 # has its own code for every height 1..direct_mr
    thin: ThinShape | None = None  # the driver's thin path (kernels/x86_thin.c.j2) for C of
                                   # at most four rows or columns
    a_in_l1: bool = False        # blocked as hosts of Host.arrangement "a-in-l1" run it best
                                 # (plan.analytical_blocking); measured where set
    decline: Decline | None = None  # problems the driver leaves to the user's loop (fp16 sums
                                 # where the file has F16C: its loop then converts in vectors and
                                 # beats mostly empty tiles: _fp16_sums)
    flushes: bool = False        # denormal inputs and results are zero (vdpbf16ps, tdpbf16ps,
                                 # bfmmla): its driver declines data where a product or a sum
                                 # could be denormal (flushes.c.j2), which then takes the next
                                 # dispatched path or the user's loops

    def __post_init__(self) -> None:
        if self.nr % self.lanes:
            raise ValueError(f"nr={self.nr} is not a multiple of the vector width {self.lanes}")
        if self.a_width and self.mr % self.a_width:
            raise ValueError(f"mr={self.mr} is not a multiple of the A register width "
                             f"{self.a_width}")
        object.__setattr__(self, "isa", MappingProxyType(dict(self.isa)))


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    cpu_features: tuple[str, ...]    # names understood by __builtin_cpu_supports and /proc/cpuinfo
                                     # (or the host's hwcaps, see hostinfo.real_cpu_flags)
    attribute: str                   # function-level target attribute ("" when none is needed)
    headers: tuple[str, ...]         # system headers the kernels need
    kernels: Mapping[DType, KernelShape]
    priority: int                    # --target auto picks the highest-priority target the host runs
    cpuinfo_flags: tuple[str, ...] = ()  # spelling of cpu_features in /proc/cpuinfo, when it differs
    dispatch: tuple[str, ...] = ()   # a run-time dispatching target: the targets it picks from,
                                     # best first (the last one must run everywhere)
    arch: str | None = None          # the machine (as `uname -m` says) the code runs on; None: any
    cpu_check: str = "1"             # C expression: does the running CPU have the features?
                                     # (the emitted run-time check returns it)
    compile_flags: tuple[str, ...] = ()  # clang flags that build code for the target's machine
                                         # (cross targets: --target=<triple>, -march / -mcpu)
    emulator: tuple[str, ...] = ()   # command prefix that runs such a binary on an x86-64 host
    caches: Caches | None = None     # cache geometry of a typical machine, for the blocking
                                     # defaults when the code is built on another machine
    isa_macro: str = "0"             # C preprocessor condition: the whole file is compiled for the
                                     # ISA (e.g. -march=native); the program then runs only on CPUs
                                     # that have it, so a dispatching target emits no path below it
    os_request: str = ""             # C expression the run-time check also needs true: what the OS
                                     # must grant the process (AMX's tile state), asked once there
    file_macro: str = ""             # C preprocessor condition without which the kernels do not run
                                     # (the run-time check fails): what they compute depends on how
                                     # the file itself is built ("": none)
    bf16_bits: bool = False          # the target's compiler has no __bf16 (clang 19 for POWER):
                                     # bf16 elements are their bits (the prelude's kf_bf16), which
                                     # only this target's own bf16 kernel takes (it moves bits);
                                     # the portable kernel, which converts them, does not

    def kernel(self, dtype: DType) -> KernelShape:
        try:
            return self.kernels[dtype]
        except KeyError:
            raise KernelfarerError(f"target '{self.name}' has no {dtype.ctype} kernel") from None

    def host_flags(self) -> tuple[str, ...]:
        return self.cpuinfo_flags or self.cpu_features


def _x86_check(*features: str) -> str:
    """The run-time check of x86 features (libgcc / compiler-rt's CPU model)."""
    tests = " && ".join(f'__builtin_cpu_supports("{f}")' for f in features)
    return f"(__builtin_cpu_init(), {tests})"


def _hwcap_check(*features: str) -> str:
    """The run-time check of POWER features: glibc's copy of the hwcaps (no __builtin_cpu_init)."""
    return " && ".join(f'__builtin_cpu_supports("{f}")' for f in features)


# The short form (ThinShape.short_k) against the user's loop and the dot form, one column of C
# (4096 x 1 x k, A row-major), Zen 5, clang-19, GFLOP/s: f32 k = 2..8 54-66 / 41 at 8 (the loop
# 3.0-5.7; the dot form 11 at 8), 9 falls to 9 (dot 14); f64 k = 2..7 18-35 (loop 3.2-5.3), 8
# falls to 8 (dot 13): the vectorizer's interleaved groups stop at eight floats, seven doubles.
_SHORT_K = {4: 8, 8: 7}             # by the element's size in bytes


def _avx512_thin(lanes: int) -> ThinShape:
    # 32 registers: 4 rows x 4 vectors of accumulators, 4 x 4 dot accumulators.  A dot of half a
    # vector (masked) still beats the direct kernel on C one or two columns wide.  The direct
    # kernel loses to the user's loop only on a single column of C with k of 2 or 3 (Zen 5, f32
    # and f64: 0.88x-0.93x at k = 2, 1.00x-1.02x at 3; bench/thin_shapes.py), which the short
    # form takes where C's column and A's rows are contiguous.
    return ThinShape(axpy_vectors=4, dot_columns=(4, 4), dot_min_k=lanes // 2,
                     decline_k=4, decline_n=1, short_k=_SHORT_K[64 // lanes])


# AVX2's sums of lanes: the two 128-bit halves added, then within the half.
_AVX2_LANE_SUM = {
    8: ("__m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));",
        "x = _mm_add_ps(x, _mm_movehl_ps(x, x));",
        "return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));"),
    4: ("__m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));",
        "return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));"),
}


def _avx2_thin(lanes: int) -> ThinShape:
    # 16 registers: 4 rows x 2 vectors, and 2 dot columns for 3-4 rows.  Declined: a single
    # column of C with k = 2 (Zen 5: 1.03x-1.04x the user's loop, too close to call).
    return ThinShape(axpy_vectors=2, dot_columns=(4, 2), dot_min_k=lanes, decline_k=3,
                     decline_n=1, short_k=_SHORT_K[32 // lanes], lane_sum=_AVX2_LANE_SUM[lanes])


# fp16 sums (fp16 x fp16 -> fp16), started from C (plan.seed_c): x86_avx512.c.j2 on vectors of
# _Float16 in C (isa.cvec: no intrinsics), each step spelled as the loop's `c + a * b`, so that
# it rounds as the file's compile rounds the original: in a file built for AVX512-FP16 one
# vfmadd231ph per step (x86-avx512-fp16's 12x64: 24 zmm accumulators of 32 lanes), elsewhere
# through float as _Float16's excess precision has it, on vectors of 16 (AVX-512: 12x32, each
# accumulator a ymm of fp16, a zmm in float for the step) or 8 (AVX2: 6x16) lanes.
# Against an ikj loop built -march=native (Zen 5; the spelling the compiler vectorizes best, along
# C's rows), kernel speed / loop speed: 12x32 at m = 2 0.12x-0.63x, m = 4 0.88x, m = 8 and k = 16
# 0.78x-0.85x, k = 4 (m = 32) 0.28x-0.88x, m = 5..16 x 256 x 256 1.08x-2.62x, m = 32 and k >= 16
# 0.95x-2.59x, 1000^3 3.0x; 6x16 at m = 2 0.28x-0.87x, m = 7, 8 (a tile of 6 rows and one of 1
# or 2) 0.79x-0.95x, m = 5, 9, 13 1.01x-1.02x, m = 6, 12 1.27x-1.38x, m = 32 1.03x-4.35x, 1000^3
# 1.5x.  Hence `decline` (rows: below it, unless m is mr, the loop runs).  Built without F16C
# the loop converts each element in a call, and the kernels win at every size.
def _fp16_sums(mr: int, nr: int, lanes: int, rows: int, k: int, area: int = 0) -> KernelShape:
    return KernelShape(mr=mr, nr=nr, lanes=lanes, template="kernels/x86_avx512.c.j2",
                       isa=dict(cvec="1", ready="_ready"),
                       decline=Decline(rows, k, area, when="defined(__F16C__)"))


_AVX512_F32_ISA = dict(vec="__m512", load="_mm512_loadu_ps", store="_mm512_storeu_ps",
                       fmadd="_mm512_fmadd_ps", mul="_mm512_mul_ps", add="_mm512_add_ps",
                       sub="_mm512_sub_ps",
                       select="_mm512_mask_blend_ps(_mm512_cmp_ps_mask({v}, {x}, {pred}), {no}, {yes})",
                       set1="_mm512_set1_ps", setzero="_mm512_setzero_ps",
                       maskload="_mm512_maskz_loadu_ps", maskstore="_mm512_mask_storeu_ps",
                       mask="__mmask16", reduce="_mm512_reduce_add_ps", maskload_mask_first="1")
_AVX512 = {
    DType.F32: KernelShape(
        mr=12, nr=32, lanes=16, template="kernels/x86_avx512.c.j2", isa=_AVX512_F32_ISA,
        direct=True, thin=_avx512_thin(16), direct_mr=8, a_in_l1=True,
    ),
    # fp16 (and bf16 without AVX512-BF16) summed in float: the operands converted to float as they
    # are packed (vcvtph2ps; bf16: a shift), then the float kernel: a product of two is exact in
    # float, so the sums are the float loop's (no direct or thin path: those read A and B in place)
    **{dtype: KernelShape(mr=12, nr=32, lanes=16, widen=2, template="kernels/x86_avx512.c.j2",
                          isa=_AVX512_F32_ISA)
       for dtype in (DType.F16F32, DType.BF16F32)},
    # fp16 sums where the file is not built for AVX512-FP16 (_fp16_sums)
    DType.F16: _fp16_sums(12, 32, 16, rows=5, k=8, area=512),
    DType.F64: KernelShape(
        mr=12, nr=16, lanes=8, template="kernels/x86_avx512.c.j2",
        isa=dict(vec="__m512d", load="_mm512_loadu_pd", store="_mm512_storeu_pd",
                 fmadd="_mm512_fmadd_pd", mul="_mm512_mul_pd", add="_mm512_add_pd",
                 sub="_mm512_sub_pd",
                 select="_mm512_mask_blend_pd(_mm512_cmp_pd_mask({v}, {x}, {pred}), {no}, {yes})",
                 set1="_mm512_set1_pd", setzero="_mm512_setzero_pd",
                 maskload="_mm512_maskz_loadu_pd", maskstore="_mm512_mask_storeu_pd",
                 mask="__mmask8", reduce="_mm512_reduce_add_pd", maskload_mask_first="1"),
        direct=True, thin=_avx512_thin(8), direct_mr=8, a_in_l1=True,
    ),
}

_AVX512_FP16 = {DType.F16: _fp16_sums(12, 64, 32, rows=5, k=8, area=512)}

# AVX-512 VNNI: int8 x int8 -> int32 with vpdpbusd (64 multiply-adds per instruction), k in
# groups of four per 32-bit lane; 12 x 32 like the f32 kernel: 24 accumulators + 2 B + 1 broadcast.
def _dpbusd_kernels(mr: int, nr: int, lanes: int, template: str,
                    dot: str, a_in_l1: bool = False) -> dict[DType, KernelShape]:
    """vpdpbusd's kernels for the four int8 GEMMs: its product is uint8 x int8, so int8 A is
    flipped to a + 128 and uint8 x uint8's A to a - 128 (both corrected by B's column sums at the
    end of a B micro-panel, b_extra), and int8 A x uint8 B swaps the instruction's operands
    (isa.swap), as uint8 x uint8 does (kernels/x86_vnni.c.j2)."""
    def shape(sum_scale: str, swap: bool) -> KernelShape:
        # sum_scale: what B's column sums are multiplied by to take A's flip back (-128 for
        # int8 A flipped to a + 128, +128 for uint8 A flipped to a - 128); "": no flip
        isa = dict(raw="unsigned char", dot=dot)
        if sum_scale:
            isa.update(a_flip="0x80808080", sum_scale=sum_scale)
        if swap:
            isa.update(swap="1")
        return KernelShape(mr=mr, nr=nr, lanes=lanes, kr=4, b_extra=4 if sum_scale else 0,
                           own_packing=True, template=template, isa=isa, a_in_l1=a_in_l1)
    return {DType.I8I32: shape("0xffffff80u", False), DType.U8S8I32: shape("", False),
            DType.S8U8I32: shape("", True), DType.U8I32: shape("128u", True)}


_AVX512_VNNI = {
    **_dpbusd_kernels(12, 32, 16, "kernels/x86_vnni.c.j2", "_mm512_dpbusd_epi32", a_in_l1=True),
    # vpdpwssd: pairs of int16, signed by signed (no offset, no correction)
    DType.I16I32: KernelShape(mr=12, nr=32, lanes=16, kr=2, own_packing=True,
                              template="kernels/x86_vnni.c.j2",
                              isa=dict(raw="unsigned short", dot="_mm512_dpwssd_epi32")),
}

# AVX512-BF16: bf16 x bf16 -> float with vdpbf16ps (32 multiply-adds per instruction: pairs of k
# per 32-bit lane), laid out like the VNNI kernel (kernels/pack_groups.c.j2) with kr = 2.
_AVX512_BF16 = {
    DType.BF16F32: KernelShape(mr=12, nr=32, lanes=16, kr=2, own_packing=True,
                               template="kernels/x86_bf16.c.j2", isa=dict(raw="unsigned short"),
                               flushes=True),
}

# AVX-VNNI (VEX, 256-bit: Alder Lake and later clients, Zen 5): vpdpbusd on ymm, 6x16, with the
# AVX512-VNNI kernel's offset and correction (x86_avx2_madd.c.j2).
_AVX_VNNI = _dpbusd_kernels(6, 16, 8, "kernels/x86_avx2_madd.c.j2", "_mm256_dpbusd_avx_epi32")

# Intel AMX: tdpbssd on 16x16 int32 tiles, 32x32 from four of them, k padded to 64 per tile step
# (kr = 64; x86_amx.c.j2 packs for it).
# One instruction per signedness of A and B: tdpbssd, tdpbsud, tdpbusd, tdpbuud; bf16 with
# tdpbf16ps (k padded to 32 per tile step: 64 bytes).
def _amx(kr: int, dp: str, raw: str) -> KernelShape:
    return KernelShape(
        mr=32, nr=32, lanes=16, kr=kr, own_packing=True, template="kernels/x86_amx.c.j2",
        flushes=dp == "_tile_dpbf16ps",
        isa=dict(loadconfig="_tile_loadconfig", storeconfig="_tile_storeconfig", zero="_tile_zero",
                 loadd="_tile_loadd", dp=dp, stored="_tile_stored", raw=raw))


_AMX = {
    **{dtype: _amx(64, f"_tile_dpb{signs}d", "unsigned char")
       for dtype, signs in ((DType.I8I32, "ss"), (DType.S8U8I32, "su"), (DType.U8S8I32, "us"),
                            (DType.U8I32, "uu"))},
    DType.BF16F32: _amx(32, "_tile_dpbf16ps", "unsigned short"),
}

_AVX2_F32_ISA = dict(vec="__m256", load="_mm256_loadu_ps", store="_mm256_storeu_ps",
                     fmadd="_mm256_fmadd_ps", mul="_mm256_mul_ps", add="_mm256_add_ps",
                     sub="_mm256_sub_ps",
                     select="_mm256_blendv_ps({no}, {yes}, _mm256_cmp_ps({v}, {x}, {pred}))",
                     set1="_mm256_set1_ps", setzero="_mm256_setzero_ps",
                     broadcast="_mm256_broadcast_ss",
                     maskload="_mm256_maskload_ps", maskstore="_mm256_maskstore_ps",
                     mask="__m256i", mask_set1="_mm256_set1_epi32",
                     mask_cmpgt="_mm256_cmpgt_epi32", mask_int="int",
                     mask_iota="_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)")
_AVX2 = {
    DType.F32: KernelShape(
        mr=6, nr=16, lanes=8, template="kernels/x86_avx2.c.j2", isa=_AVX2_F32_ISA,
        direct=True, thin=_avx2_thin(8),
    ),
    # bf16 and fp16 as on AVX-512: converted to float as they are packed (fp16 with F16C's
    # vcvtph2ps, one of the target's features)
    **{dtype: KernelShape(mr=6, nr=16, lanes=8, widen=2, template="kernels/x86_avx2.c.j2",
                          isa=_AVX2_F32_ISA)
       for dtype in (DType.F16F32, DType.BF16F32)},
    # int8 and uint8 without VNNI: vpmaddwd on int8 widened to int16 pairs at packing
    # (x86_avx2_madd.c.j2)
    **{dtype: KernelShape(mr=6, nr=16, lanes=8, kr=2, widen=2, own_packing=True,
                          template="kernels/x86_avx2_madd.c.j2", isa=dict(raw="unsigned char"))
       for dtype in DType.int8_types()},
    # int16 without vpdpwssd: the portable kernel, vectorized for AVX2
    DType.I16I32: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2", direct=True),
    # fp16 sums (_fp16_sums): each step through float with F16C's conversions
    DType.F16: _fp16_sums(6, 16, 8, rows=10, k=4),
    DType.F64: KernelShape(
        mr=6, nr=8, lanes=4, template="kernels/x86_avx2.c.j2",
        isa=dict(vec="__m256d", load="_mm256_loadu_pd", store="_mm256_storeu_pd",
                 fmadd="_mm256_fmadd_pd", mul="_mm256_mul_pd", add="_mm256_add_pd",
                 sub="_mm256_sub_pd",
                 select="_mm256_blendv_pd({no}, {yes}, _mm256_cmp_pd({v}, {x}, {pred}))",
                 set1="_mm256_set1_pd", setzero="_mm256_setzero_pd",
                 broadcast="_mm256_broadcast_sd",
                 maskload="_mm256_maskload_pd", maskstore="_mm256_maskstore_pd", mask="__m256i",
                 mask_set1="_mm256_set1_epi64x", mask_cmpgt="_mm256_cmpgt_epi64",
                 mask_int="long long", mask_iota="_mm256_setr_epi64x(0, 1, 2, 3)"),
        direct=True, thin=_avx2_thin(4),
    ),
}

def _tile_prog_isa(family: str, suffix: str) -> dict[str, str]:
    """What a kernel's tile program (kernels/tile_prog.c.j2) spells with, on NEON ("neon", f32 or
    f64) or VSX ("vsx", POWER9 and POWER10): lane-wise add and subtract (multiply: isa.mul), a
    splat, a load, and a select on an ordered comparison (>, >=, <, <=: false on NaN, like C's)."""
    if family == "neon":
        return dict(add=f"vaddq_{suffix}", sub=f"vsubq_{suffix}", prog_set1=f"vdupq_n_{suffix}",
                    prog_load=f"vld1q_{suffix}({{p}})", preds="gt ge lt le",
                    select=f"vbslq_{suffix}(vc{{pred}}q_{suffix}({{v}}, {{x}}), {{yes}}, {{no}})")
    return dict(add="vec_add", sub="vec_sub", prog_set1="vec_splats", prog_load="vec_xl(0L, {p})",
                preds="gt ge lt le", select="vec_sel({no}, {yes}, vec_cmp{pred}({v}, {x}))")


# Arm NEON (AArch64, 32 x 128-bit registers): by-lane FMA, A loaded whole per k step.  f32 8x12 is
# BLIS's Cortex-A57 block: 24 accumulators + 2 A + 3 B = 29 registers; f64 6x8: 24 + 3 + 4 = 31.
_NEON_F32_ISA = dict(vec="float32x4_t", load="vld1q_f32", store="vst1q_f32",
                     fma_lane="vfmaq_laneq_f32", fma="vfmaq_f32", mul="vmulq_f32",
                     dup="vdupq_n_f32", **_tile_prog_isa("neon", "f32"))
_NEON = {
    DType.F32: KernelShape(mr=8, nr=12, lanes=4, a_width=4, template="kernels/neon.c.j2",
                           isa=_NEON_F32_ISA),
    # fp16 and bf16 summed in float on CPUs without FEAT_FHM / FEAT_BF16: converted to float as
    # they are packed (fcvt; bf16 a shift), then the float kernel (as x86-avx512 does)
    **{dtype: KernelShape(mr=8, nr=12, lanes=4, a_width=4, widen=2,
                          template="kernels/neon.c.j2", isa=_NEON_F32_ISA)
       for dtype in (DType.F16F32, DType.BF16F32)},
    DType.F64: KernelShape(
        mr=6, nr=8, lanes=2, a_width=2, template="kernels/neon.c.j2",
        isa=dict(vec="float64x2_t", load="vld1q_f64", store="vst1q_f64",
                 fma_lane="vfmaq_laneq_f64", fma="vfmaq_f64", mul="vmulq_f64",
                 dup="vdupq_n_f64", **_tile_prog_isa("neon", "f64")),
    ),
}

# Arm's dot-product extension (sdot): int8 x int8 -> int32, four k per 32-bit lane, 8x12 like the
# float kernel (24 accumulators + 2 A + 3 B registers).
_NEON_INT8 = dict(raw="unsigned char", vec="int32x4_t", dup="vdupq_n_s32", load="vld1q_s32",
                  store="vst1q_s32", mul_n="vmulq_n_s32", mla_n="vmlaq_n_s32")
# the operand vectors of uint8 and int8 panels (whose elements are the GEMM's in_ctype)
_NEON_U8 = dict(vec="uint8x16_t", load="vld1q_u8", cast="(const uint8_t *)")
_NEON_S8 = dict(vec="int8x16_t", load="vld1q_s8", cast="(const int8_t *)")
_NEON_BF16_OPERAND = dict(vec="bfloat16x8_t", load="vld1q_bf16", cast="")


def _neon_operands(a: Mapping[str, str], b: Mapping[str, str]) -> dict[str, str]:
    return {f"{role}_{key}": value for role, keys in (("a", a), ("b", b))
            for key, value in keys.items()}


_NEON_DOTPROD = {
    DType.I8I32: KernelShape(
        mr=8, nr=12, lanes=4, kr=4, own_packing=True, template="kernels/neon_dotprod.c.j2",
        isa=dict(_NEON_INT8, dot_name="sdot", dot="vdotq_laneq_s32", in_vec="int8x16_t",
                 in_load="vld1q_s8")),
    # udot: unsigned accumulators (the same bits as int32 ones), read as int32 for the store
    DType.U8I32: KernelShape(
        mr=8, nr=12, lanes=4, kr=4, own_packing=True, template="kernels/neon_dotprod.c.j2",
        isa=dict(_NEON_INT8, dot_name="udot", dot="vdotq_laneq_u32", acc_vec="uint32x4_t",
                 acc_dup="vdupq_n_u32", to_vec="vreinterpretq_s32_u32",
                 **_neon_operands(_NEON_U8, _NEON_U8))),
}

# FEAT_I8MM's matrix multiplies: 2x8 by 8x2 blocks of 8-bit integers into 2x2 int32, eight k per
# 64-bit unit; 8x8 (16 accumulators, 4 A and 4 B registers).  smmla for int8 x int8, ummla for
# uint8 x uint8, usmmla (unsigned by signed) for uint8 x int8, and for int8 x uint8 with its
# operands swapped (each 2x2 block then comes out transposed: isa.swap).  Twice the multiply-adds
# per instruction of the dot products by lane (sdot, udot, usdot, sudot).
# (to64 / from64: a row of the C tile viewed as two 64-bit halves, for the gather of its blocks)
_I8MM_STORE = dict(_NEON_INT8, unit_bits="64", acc_dup="vdupq_n_s32",
                   to64="vreinterpretq_s64_s32", from64="vreinterpretq_s32_s64")


def _i8mm(name: str, intrinsic: str, a: Mapping[str, str], b: Mapping[str, str],
          kr: int = 8, **isa: object) -> KernelShape:
    return KernelShape(mr=8, nr=8, lanes=4, kr=kr, own_packing=True,
                       template="kernels/neon_i8mm.c.j2",
                       isa={**_I8MM_STORE, "mmla_name": name, "mmla": intrinsic,
                            **_neon_operands(a, b), **isa})


_NEON_I8MM = {
    DType.I8I32: _i8mm("smmla", "vmmlaq_s32", _NEON_S8, _NEON_S8),
    DType.U8I32: _i8mm("ummla", "vmmlaq_u32", _NEON_U8, _NEON_U8, acc_vec="uint32x4_t",
                       acc_dup="vdupq_n_u32", to_vec="vreinterpretq_s32_u32"),
    DType.U8S8I32: _i8mm("usmmla", "vusmmlaq_s32", _NEON_U8, _NEON_S8),
    DType.S8U8I32: _i8mm("usmmla", "vusmmlaq_s32", _NEON_S8, _NEON_U8, swap=True),
}

# FEAT_FHM's fmlal / fmlal2: fp16 x fp16 widened into float accumulators (exact products, fused
# sums), by lane like the float kernel; the shared packing (pack.c.j2) of fp16 elements; 8x8: 16
# accumulators, one A column and one B row of eight fp16 per k step.
_NEON_FHM = {
    DType.F16F32: KernelShape(
        mr=8, nr=8, lanes=4, template="kernels/neon_fhm.c.j2",
        isa=dict(vec="float32x4_t", load="vld1q_f32", store="vst1q_f32", mul_n="vmulq_n_f32",
                 mla_n="vmlaq_n_f32")),
}

# FEAT_FP16's half-precision arithmetic: fp16 x fp16 -> fp16 on the float kernel's by-lane FMA
# (fmla v.8h, v, a.h[l]), eight lanes: one A register holds the 8 rows of a k step; 8x24 is 24
# accumulators + 1 A + 3 B registers, started from C (plan.seed_c).  The step is spelled in C
# (fma_lane "": neon.c.j2's helper), so it contracts as the file's compile does; but whether the
# original rounds once or twice also depends on FEAT_FP16 in the file's own build (without it
# the compiler does fp16 arithmetic through float), so the kernels run only in files built for
# it (Target.file_macro); elsewhere the portable kernel or the original loops run.
_NEON_FP16 = {
    DType.F16: KernelShape(mr=8, nr=24, lanes=8, a_width=8, template="kernels/neon.c.j2",
                           isa=dict(vec="float16x8_t", load="vld1q_f16", store="vst1q_f16",
                                    fma_lane="", fma="vfmaq_f16", mul="vmulq_f16",
                                    dup="vdupq_n_f16")),
}

# FEAT_BF16's bfmmla: 2x4 by 4x2 blocks of bf16 into 2x2 float, four k per 64-bit unit, on the
# i8mm kernel's 8x8 (16 multiply-adds per instruction, twice bfdot's: llvm-mca-19 models the k
# loop at 50.6 multiply-adds per cycle on Neoverse V1 and 31.8 on N2, against 23.8 and 12.0 for
# the 8x12 bfdot kernel it replaces).
_NEON_BF16 = {
    DType.BF16F32: replace(
        _i8mm("bfmmla", "vbfmmlaq_f32", _NEON_BF16_OPERAND, _NEON_BF16_OPERAND, kr=4,
              raw="unsigned short", vec="float32x4_t", acc_dup="vdupq_n_f32",
              load="vld1q_f32", store="vst1q_f32", mul_n="vmulq_n_f32",
              mla_n="vmlaq_n_f32", to64="vreinterpretq_s64_f32",
              from64="vreinterpretq_f32_s64"),
        # without FEAT_EBF16 (or with FPCR.EBF clear, as Linux leaves it) bfmmla flushes
        # denormal inputs and results to zero, and rounds its sums to odd
        flushes=True),
}

# POWER10 Matrix-Multiply Assist: 8 accumulators (each 4 VSX registers) as a 2 x 4 grid of outer
# products per k step.  f32: xvf32gerpp, 4x4 per accumulator (A vector x B vector) -> 8x16;
# f64: xvf64gerpp, 4x2 per accumulator (A vector pair x B vector) -> 8x8.  A operand loads spell
# `a_load(0L, (const a_elem *)p)`; `a_cast` turns an A operand into the builtin's argument type.
_MMA = {
    DType.F32: KernelShape(
        mr=8, nr=16, lanes=4, a_width=4, outer_product=True,
        template="kernels/power10_mma.c.j2",
        isa=dict(vec="__vector float", a_type="__vector float", a_load="vec_xl", a_elem="float",
                 a_cast="(__vector unsigned char)", ger="__builtin_mma_xvf32gerpp",
                 load="vec_xl", store="vec_xst", madd="vec_madd", mul="vec_mul",
                 splats="vec_splats", **_tile_prog_isa("vsx", "")),
    ),
    DType.F64: KernelShape(
        mr=8, nr=8, lanes=2, a_width=4, outer_product=True,
        template="kernels/power10_mma.c.j2",
        isa=dict(vec="__vector double", a_type="__vector_pair", a_load="__builtin_vsx_lxvp",
                 a_elem="__vector_pair", a_cast="", ger="__builtin_mma_xvf64gerpp",
                 load="vec_xl", store="vec_xst", madd="vec_madd", mul="vec_mul",
                 splats="vec_splats", **_tile_prog_isa("vsx", "")),
    ),
}

# ... and its rank-4 int8 updates on group-packed panels (kernels/power10_mma_groups.c.j2):
# xvi8ger4pp, 4x4 int32 per accumulator, 8x16; rank-2 updates of int16 (xvi16ger2pp) and bf16
# (xvbf16ger2pp: exact products, their pair's sum rounded to float's significand, then added to
# the accumulator with one rounding to nearest; denormals kept, as the ISA defines it).  clang 19
# has no __bf16 for POWER: its bf16 GEMMs are the user's bits (bf16 kept in uint16_t and widened
# by a helper of the file, widen.py), which the packing moves as bits.
_MMA_GROUPS = {
    DType.BF16F32: KernelShape(
        mr=8, nr=16, lanes=4, a_width=4, outer_product=True, kr=2, own_packing=True,
        template="kernels/power10_mma_groups.c.j2",
        isa=dict(raw="unsigned short", vec="__vector float", ger="__builtin_mma_xvbf16ger2pp",
                 load="vec_xl", store="vec_xst", madd="vec_madd", mul="vec_mul",
                 splats="vec_splats"),
    ),
    DType.I16I32: KernelShape(
        mr=8, nr=16, lanes=4, a_width=4, outer_product=True, kr=2, own_packing=True,
        template="kernels/power10_mma_groups.c.j2",
        isa=dict(raw="unsigned short", vec="__vector signed int", ger="__builtin_mma_xvi16ger2pp",
                 load="vec_xl", store="vec_xst", mul="vec_mul", splats="vec_splats"),
    ),
    # int8 x uint8 is xvi8ger4pp's own product; uint8 x int8 swaps its operands (B's signed
    # bytes first: each accumulator comes out transposed, turned back before the store)
    **{dtype: KernelShape(
        mr=8, nr=16, lanes=4, a_width=4, outer_product=True, kr=4, own_packing=True,
        template="kernels/power10_mma_groups.c.j2",
        isa=dict(raw="unsigned char", vec="__vector signed int",
                 ger="__builtin_mma_xvi8ger4pp", load="vec_xl", store="vec_xst",
                 mul="vec_mul", splats="vec_splats", **signs),  # madd: the kernel's own (int)
    ) for dtype, signs in ((DType.I8I32, dict(b_flip="0x80808080")), (DType.S8U8I32, {}),
                           (DType.U8S8I32, dict(swap="1")),
                           (DType.U8I32, dict(a_flip="0x80808080", b_colsums="1")))},
}

# POWER9 VSX (64 x 128-bit registers): one load-and-splat of each packed A element, vec_madd with
# the B row.  8x16 f32 and 8x8 f64: 32 accumulators + 4 B vectors + splats.
_VSX = {
    DType.F32: KernelShape(
        mr=8, nr=16, lanes=4, template="kernels/power9_vsx.c.j2",
        isa=dict(vec="__vector float", load="vec_xl", store="vec_xst", madd="vec_madd",
                 mul="vec_mul", splats="vec_splats", **_tile_prog_isa("vsx", "")),
    ),
    DType.F64: KernelShape(
        mr=8, nr=8, lanes=2, template="kernels/power9_vsx.c.j2",
        isa=dict(vec="__vector double", load="vec_xl", store="vec_xst", madd="vec_madd",
                 mul="vec_mul", splats="vec_splats", **_tile_prog_isa("vsx", "")),
    ),
}

# Cache geometry of typical machines of the cross targets (the host's caches say nothing of them).
# Arm: Neoverse N1 (64 KiB 4-way L1d, 1 MiB 8-way L2, 32 MiB 16-way system cache).
_ARM_CACHES = Caches(l1d=CacheLevel(1, 64 * 1024, 4, 64), l2=CacheLevel(2, 1024 * 1024, 8, 64),
                     l3=CacheLevel(3, 32 * 1024 * 1024, 16, 64))
# POWER10: 32 KiB 8-way L1d, 1 MiB 8-way L2, 4 MiB L3 region per core; 128-byte lines.
_POWER10_CACHES = Caches(l1d=CacheLevel(1, 32 * 1024, 8, 128),
                         l2=CacheLevel(2, 1024 * 1024, 8, 128),
                         l3=CacheLevel(3, 4 * 1024 * 1024, 16, 128))
# POWER9: 32 KiB 8-way L1d, 512 KiB 8-way L2, 10 MiB 20-way L3 per core pair; 128-byte lines.
_POWER9_CACHES = Caches(l1d=CacheLevel(1, 32 * 1024, 8, 128),
                        l2=CacheLevel(2, 512 * 1024, 8, 128),
                        l3=CacheLevel(3, 10 * 1024 * 1024, 20, 128))

_GENERIC = {
    DType.F32: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2", direct=True),
    DType.F64: KernelShape(mr=4, nr=4, template="kernels/generic.c.j2", direct=True),
    DType.I32: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2", direct=True),
    DType.I64: KernelShape(mr=4, nr=4, template="kernels/generic.c.j2", direct=True),
    **{dtype: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2", direct=True)
       for dtype in (*DType.int8_types(), DType.BF16F32, DType.I16I32, DType.F16F32)},
    # fp16 sums: _Float16 arithmetic as C compiles it for the file (natively with AVX512-FP16 or
    # FEAT_FP16, else each step in float, rounded to fp16 as the step's assignment does)
    DType.F16: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2", direct=True),
}

def _x86_target(name: str, description: str, features: tuple[str, ...],
                cpuinfo: tuple[str, ...] | None, attribute: str,
                kernels: Mapping[DType, KernelShape], priority: int, isa_macro: str,
                headers: tuple[str, ...] = (), file_macro: str = "",
                os_request: str = "") -> "Target":
    """An x86-64 target: `features` as __builtin_cpu_supports spells them (checked at run time),
    `cpuinfo` as /proc/cpuinfo does when it differs, `attribute` the kernels' target attribute,
    `isa_macro` the condition under which the whole file is compiled for it, `headers` any the
    kernels need besides <immintrin.h>."""
    return Target(name=name, description=description, cpu_features=features,
                  cpuinfo_flags=cpuinfo or (), attribute=attribute,
                  headers=("immintrin.h", *headers),
                  kernels=kernels, priority=priority, arch="x86_64",
                  cpu_check=_x86_check(*features), isa_macro=isa_macro, file_macro=file_macro,
                  os_request=os_request)


def _arm_feature_target(name: str, description: str, feature: str, hwcap: str, bit: int,
                        kernels: Mapping[DType, KernelShape], priority: int,
                        file_macro: str = "") -> "Target":
    """An AArch64 target for an optional extension (`feature`, as /proc/cpuinfo and the function
    attribute spell it): its kernels carry target("<feature>"), the rest of the file stays
    ARMv8.2-A, and the call sites check the extension's bit of the auxiliary vector at run time."""
    cpuinfo = {"dotprod": "asimddp", "fp16fml": "asimdfhm", "fullfp16": "asimdhp"}.get(feature,
                                                                                    feature)
    return Target(
        name=name, description=description, cpu_features=(cpuinfo,), attribute=feature,
        headers=("arm_neon.h", "sys/auxv.h"), kernels=kernels, priority=priority,
        arch="aarch64", cpu_check=f"((getauxval({hwcap}) & (1UL << {bit})) != 0)",
        compile_flags=("--target=aarch64-linux-gnu", "-march=armv8.2-a"),
        emulator=("qemu-aarch64", "-cpu", "max", "-L", "/usr/aarch64-linux-gnu"),
        caches=_ARM_CACHES, file_macro=file_macro)


TARGETS: Mapping[str, Target] = MappingProxyType({
    t.name: t for t in (
        _x86_target("x86-avx512", "x86-64 with AVX-512F (32 zmm registers, FMA)", ("avx512f",),
                    None, "avx512f,avx2,fma", _AVX512, 30,
                    "defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)"),
        _x86_target("x86-avx512-vnni", "x86-64 with AVX-512 VNNI: int8 GEMMs with vpdpbusd "
                    "(other types: x86-avx512)", ("avx512f", "avx512vnni"),
                    ("avx512f", "avx512_vnni"), "avx512f,avx512vnni,avx2,fma", _AVX512_VNNI, 31,
                    "defined(__AVX512F__) && defined(__AVX512VNNI__)"),
        # AVX-512 for the kernels' edge blocks (every AMX CPU has it); isa_macro "0": a file
        # built for AMX still keeps the paths below it, for a process Linux refuses the tiles
        _x86_target("x86-amx", "x86-64 with AMX (tile registers, tdpbssd, tdpbf16ps): int8 and "
                    "bf16 GEMMs (other types: x86-avx512)",
                    ("amx-tile", "amx-int8", "amx-bf16", "avx512f"),
                    ("amx_tile", "amx_int8", "amx_bf16", "avx512f"),
                    "amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx2,fma", _AMX, 32,
                    "0",
                    # Linux lends the tile state only when asked (x86-auto then takes VNNI)
                    os_request="syscall(158 /* SYS_arch_prctl */, 0x1023 /* ARCH_REQ_XCOMP_PERM */"
                               ", 18 /* XFEATURE_XTILEDATA */) == 0"),
        _x86_target("x86-avx512-bf16", "x86-64 with AVX512-BF16: bf16 GEMMs summed in float with "
                    "vdpbf16ps (other types: x86-avx512)", ("avx512f", "avx512bf16"),
                    ("avx512f", "avx512_bf16"), "avx512f,avx512bf16,avx512bw,avx512vl,avx2,fma",
                    _AVX512_BF16, 31, "defined(__AVX512F__) && defined(__AVX512BF16__)"),
        _x86_target("x86-avx512-fp16", "x86-64 with AVX512-FP16: fp16 GEMMs summed in fp16 "
                    "with vfmadd231ph (other types: x86-avx512)", ("avx512f", "avx512fp16"),
                    ("avx512f", "avx512_fp16"), "avx512f,avx512fp16,avx512bw,avx512vl,avx2,fma",
                    _AVX512_FP16, 31, "defined(__AVX512F__) && defined(__AVX512FP16__)",
                    # elsewhere the step goes through float, on x86-avx512's better shape for it
                    file_macro="defined(__AVX512FP16__)"),
        _x86_target("x86-avxvnni", "x86-64 with AVX-VNNI (256-bit vpdpbusd, no AVX-512): int8 "
                    "GEMMs (other types: x86-avx2)", ("avx2", "avxvnni"), ("avx2", "avx_vnni"),
                    "avx2,fma,avxvnni", _AVX_VNNI, 21,
                    "defined(__AVX2__) && defined(__AVXVNNI__)"),
        _x86_target("x86-avx2", "x86-64 with AVX2, FMA3 and F16C (16 ymm registers)",
                    ("avx2", "fma", "f16c"), None, "avx2,fma,f16c", _AVX2, 20,
                    "defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)"),
        Target(
            name="x86-auto",
            description="x86-64: AVX-512 and AVX2 kernels, chosen at the first call by the CPU "
                        "that runs the program (without AVX2 the original loops run; "
                        "KERNELFARER_PATH=<target> forces one)",
            cpu_features=(),
            attribute="",
            headers=(),
            kernels={},
            priority=-1,
            cpuinfo_flags=("sse2",),
            dispatch=("x86-amx", "x86-avx512-vnni", "x86-avx512-bf16", "x86-avx512-fp16",
                      "x86-avx512",
                      "x86-avxvnni", "x86-avx2"),
            arch="x86_64",
        ),
        Target(
            name="neon",
            description="AArch64 with Advanced SIMD (32 128-bit registers, by-lane FMA)",
            cpu_features=(),             # NEON is part of the AArch64 base architecture
            attribute="",
            headers=("arm_neon.h",),
            kernels=_NEON,
            priority=10,
            cpuinfo_flags=("asimd",),
            arch="aarch64",
            compile_flags=("--target=aarch64-linux-gnu", "-march=armv8.2-a"),
            emulator=("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"),
            caches=_ARM_CACHES,
        ),
        _arm_feature_target("neon-dotprod", "AArch64 with the dot-product extension (sdot): int8 "
                            "GEMMs (other types: neon)", "dotprod", "AT_HWCAP", 20,
                            _NEON_DOTPROD, 11),
        _arm_feature_target("neon-i8mm", "AArch64 with the int8 matrix multiply (FEAT_I8MM, "
                            "smmla): int8 GEMMs (other types: neon)", "i8mm", "AT_HWCAP2", 13,
                            _NEON_I8MM, 12),
        _arm_feature_target("neon-fhm", "AArch64 with the fp16 multiply-add long (FEAT_FHM, "
                            "fmlal): fp16 GEMMs summed in float (other types: neon)", "fp16fml",
                            "AT_HWCAP", 23, _NEON_FHM, 11),
        _arm_feature_target("neon-fp16", "AArch64 with half-precision arithmetic (FEAT_FP16, "
                            "fmla .8h): fp16 GEMMs summed in fp16 (other types: neon)", "fullfp16",
                            "AT_HWCAP", 10, _NEON_FP16, 11,
                            file_macro="defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)"),
        _arm_feature_target("neon-bf16", "AArch64 with bf16 instructions (FEAT_BF16, bfmmla): "
                            "bf16 GEMMs summed in float (other types: neon)", "bf16",
                            "AT_HWCAP2", 14, _NEON_BF16, 11),
        Target(
            name="power10-mma",
            description="POWER10 Matrix-Multiply Assist (8 512-bit accumulators, outer products)",
            cpu_features=("arch_3_1", "mma"),
            # htm: POWER10 dropped it, but a POWER8/9 file's altivec.h inlines carry it (clang
            # inlines only into functions with a superset of their features)
            attribute="arch=pwr10,htm",
            headers=("altivec.h",),
            kernels={**_MMA, **_MMA_GROUPS},
            priority=20,
            arch="ppc64le",
            cpu_check=_hwcap_check("arch_3_1", "mma"),
            compile_flags=("--target=powerpc64le-linux-gnu", "-mcpu=power10"),
            emulator=("qemu-ppc64le", "-cpu", "power10", "-L", "/usr/powerpc64le-linux-gnu"),
            caches=_POWER10_CACHES,
            bf16_bits=True,
        ),
        Target(
            name="power9-vsx",
            description="POWER9 VSX (64 128-bit registers, vec_madd), for POWER without MMA",
            cpu_features=("arch_3_00",),
            # no attribute: VSX is ppc64le's baseline, and the kernels are built for the file's
            # own -mcpu (POWER9 with compile_flags: lxvwsx splats); so nothing to check at run time
            attribute="",
            headers=("altivec.h",),
            kernels=_VSX,
            priority=10,
            arch="ppc64le",
            compile_flags=("--target=powerpc64le-linux-gnu", "-mcpu=power9"),
            emulator=("qemu-ppc64le", "-cpu", "power9", "-L", "/usr/powerpc64le-linux-gnu"),
            caches=_POWER9_CACHES,
            bf16_bits=True,
        ),
        Target(
            name="generic",
            description="portable C (auto-vectorized by the compiler); runs everywhere",
            cpu_features=(),
            attribute="",
            headers=(),
            kernels=_GENERIC,
            priority=0,
            isa_macro="1",
        ),
    )
})

GENERIC = "generic"


def get_target(name: str, *, host_flags: frozenset[str] | None = None) -> Target:
    """Look a target up by name; ``auto`` picks the best one the host can run."""
    if name == "auto":
        return best_for_host(host_flags)
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join(["auto", *TARGETS])
        raise KernelfarerError(f"unknown target '{name}' (known targets: {known})") from None


def best_for_host(host_flags: frozenset[str] | None = None,
                  host_arch: str | None = None, dtype: DType | None = None) -> Target:
    """The highest-priority target the host planned for runs (never a cross target, never a
    dispatcher) that has a kernel for `dtype` (None: for float, the general-purpose targets;
    x86-avx512-vnni, which has int8 kernels only, is picked for int8)."""
    wanted = dtype or DType.F32
    runnable = [t for t in TARGETS.values()
                if host_can_run(t, host_flags, host_arch) and not t.dispatch
                and (wanted in t.kernels or t.name == GENERIC)]
    return best_of(runnable, dtype)


def best_of(candidates, dtype: DType | None = None) -> Target:
    """The candidate with a kernel for `dtype` (None: a float one, the general-purpose targets'
    mark) and the highest priority: the int8- or bf16-only targets win only their own types.  A
    target whose kernels run only in files built for it (file_macro) comes after the others: how
    the file will be built is not known here, and elsewhere it would run the original loops (an
    fp16 sum on an AVX512-FP16 host takes x86-avx512's kernel, exact in every build)."""
    wanted = dtype or DType.F32
    return max(candidates, key=lambda t: (wanted in t.kernels, not t.file_macro, t.priority))


def host_can_run(target: Target, host_flags: frozenset[str] | None = None,
                 host_arch: str | None = None) -> bool:
    """Does the host planned for (KERNELFARER_HOST, else this machine: its architecture and CPU
    features) run the target's code natively?"""
    from kernelfarer import hostinfo
    if host_flags is None:
        host_flags = hostinfo.cpu_flags()
    if host_arch is None:
        host_arch = hostinfo.host_arch()
    if target.arch is not None and target.arch != host_arch:
        return False
    return set(target.host_flags()) <= host_flags


def has_kernel(target: Target, dtype: DType) -> bool:
    """Does the target (or, for a dispatching one, any target it picks from) have a kernel for
    this element type?"""
    return dtype in target.kernels or any(dtype in TARGETS[name].kernels
                                          for name in target.dispatch)


def real_host_runs(target: Target) -> bool:
    """Does the CPU kernelfarer is running on execute the target's code (whatever host
    KERNELFARER_HOST describes)?  What a test may run natively."""
    from kernelfarer import hostinfo
    real = hostinfo.real_host()
    return host_can_run(target, real.flags, real.arch)


def cross_targets() -> tuple[Target, ...]:
    """Targets whose code is built with their own compile_flags (clang --target=...: Arm, POWER),
    run here under their emulator."""
    return tuple(t for t in TARGETS.values() if t.compile_flags)

