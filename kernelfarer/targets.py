"""The target registry: the only module that knows target names, ISA features and register blocks.

A target is one declarative entry.  Everything the planner and the templates need to know about an
instruction set lives here: which CPU features it requires (checked on the host for ``--target auto``
and again at run time by the emitted code), the function-level ``target`` attribute that lets the
generated functions use the ISA without global compiler flags, the headers the kernels include, and,
per element type, the register block (``mr`` x ``nr``), the micro-kernel template and the names of the
vector operations that template spells with.

The core never branches on a target name: it asks the registry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from kernelfarer.diagnostics import KernelfarerError


class DType(enum.Enum):
    """Element types of a GEMM: C and the accumulation (ctype), and the operands A, B (in_ctype).
    Named the BLAS way (s, d) for floating point."""

    F32 = ("s", "float", 4, "float", 4, "float")
    F64 = ("d", "double", 8, "double", 8, "float")
    I32 = ("i32", "int", 4, "int", 4, "int")
    I64 = ("i64", "long", 8, "long", 8, "int")
    I8I32 = ("i8i32", "int", 4, "signed char", 1, "int")    # int8 operands, int32 sums

    def __init__(self, letter: str, ctype: str, size: int, in_ctype: str, in_size: int,
                 kind: str) -> None:
        self.letter = letter
        self.ctype = ctype
        self.size = size
        self.in_ctype = in_ctype
        self.in_size = in_size
        self.kind = kind

    @property
    def exact(self) -> bool:
        """Integer GEMMs give bit-identical results whatever the summation order."""
        return self.kind == "int"

    def is_result(self, kind: str, bits: int, signed: bool = True) -> bool:
        return kind == self.kind and bits == self.size * 8 and (signed or self.kind == "float")

    def is_operand(self, kind: str, bits: int, signed: bool = True) -> bool:
        return kind == self.kind and bits == self.in_size * 8 and (signed or self.kind == "float")

    @classmethod
    def for_result(cls, kind: str, bits: int, signed: bool = True) -> "DType | None":
        """The type of a GEMM whose C holds `kind`/`bits` (operands of the same type)."""
        for member in (cls.F32, cls.F64, cls.I32, cls.I64):
            if member.is_result(kind, bits, signed):
                return member
        return None


@dataclass(frozen=True)
class KernelShape:
    """One micro-kernel of a target for one element type."""

    mr: int                      # rows of C held in registers
    nr: int                      # columns of C held in registers
    template: str                # micro-kernel template, relative to templates/
    lanes: int = 1               # elements per vector register
    kr: int = 1                  # k steps the kernel consumes at once (unroll granularity)
    unroll: int = 4              # k steps per iteration of the kernel's main loop (any k is handled)
    isa: Mapping[str, str] = field(default_factory=dict)  # names the template spells with

    def __post_init__(self) -> None:
        if self.nr % self.lanes:
            raise ValueError(f"nr={self.nr} is not a multiple of the vector width {self.lanes}")
        object.__setattr__(self, "isa", MappingProxyType(dict(self.isa)))


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    cpu_features: tuple[str, ...]    # names understood by __builtin_cpu_supports and /proc/cpuinfo
    attribute: str                   # function-level target attribute ("" when none is needed)
    headers: tuple[str, ...]         # system headers the kernels need
    kernels: Mapping[DType, KernelShape]
    priority: int                    # --target auto picks the highest-priority target the host runs
    cpuinfo_flags: tuple[str, ...] = ()  # spelling of cpu_features in /proc/cpuinfo, when it differs
    dispatch: tuple[str, ...] = ()   # a run-time dispatching target: the targets it picks from,
                                     # best first (the last one must run everywhere)

    def kernel(self, dtype: DType) -> KernelShape:
        try:
            return self.kernels[dtype]
        except KeyError:
            raise KernelfarerError(f"target '{self.name}' has no {dtype.ctype} kernel") from None

    def host_flags(self) -> tuple[str, ...]:
        return self.cpuinfo_flags or self.cpu_features


_AVX512 = {
    DType.F32: KernelShape(
        mr=12, nr=32, lanes=16, template="kernels/x86_avx512.c.j2",
        isa=dict(vec="__m512", load="_mm512_loadu_ps", store="_mm512_storeu_ps",
                 fmadd="_mm512_fmadd_ps", mul="_mm512_mul_ps", add="_mm512_add_ps",
                 set1="_mm512_set1_ps", setzero="_mm512_setzero_ps",
                 maskload="_mm512_maskz_loadu_ps", maskstore="_mm512_mask_storeu_ps",
                 mask="__mmask16"),
    ),
    DType.F64: KernelShape(
        mr=12, nr=16, lanes=8, template="kernels/x86_avx512.c.j2",
        isa=dict(vec="__m512d", load="_mm512_loadu_pd", store="_mm512_storeu_pd",
                 fmadd="_mm512_fmadd_pd", mul="_mm512_mul_pd", add="_mm512_add_pd",
                 set1="_mm512_set1_pd", setzero="_mm512_setzero_pd",
                 maskload="_mm512_maskz_loadu_pd", maskstore="_mm512_mask_storeu_pd",
                 mask="__mmask8"),
    ),
}

_AVX2 = {
    DType.F32: KernelShape(
        mr=6, nr=16, lanes=8, template="kernels/x86_avx2.c.j2",
        isa=dict(vec="__m256", load="_mm256_loadu_ps", store="_mm256_storeu_ps",
                 fmadd="_mm256_fmadd_ps", mul="_mm256_mul_ps", add="_mm256_add_ps",
                 set1="_mm256_set1_ps", setzero="_mm256_setzero_ps",
                 broadcast="_mm256_broadcast_ss"),
    ),
    DType.F64: KernelShape(
        mr=6, nr=8, lanes=4, template="kernels/x86_avx2.c.j2",
        isa=dict(vec="__m256d", load="_mm256_loadu_pd", store="_mm256_storeu_pd",
                 fmadd="_mm256_fmadd_pd", mul="_mm256_mul_pd", add="_mm256_add_pd",
                 set1="_mm256_set1_pd", setzero="_mm256_setzero_pd",
                 broadcast="_mm256_broadcast_sd"),
    ),
}

_GENERIC = {
    DType.F32: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2"),
    DType.F64: KernelShape(mr=4, nr=4, template="kernels/generic.c.j2"),
    DType.I32: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2"),
    DType.I64: KernelShape(mr=4, nr=4, template="kernels/generic.c.j2"),
    DType.I8I32: KernelShape(mr=4, nr=8, template="kernels/generic.c.j2"),
}

TARGETS: Mapping[str, Target] = MappingProxyType({
    t.name: t for t in (
        Target(
            name="x86-avx512",
            description="x86-64 with AVX-512F (32 zmm registers, FMA)",
            cpu_features=("avx512f",),
            attribute="avx512f,avx2,fma",
            headers=("immintrin.h",),
            kernels=_AVX512,
            priority=30,
        ),
        Target(
            name="x86-avx2",
            description="x86-64 with AVX2 and FMA3 (16 ymm registers)",
            cpu_features=("avx2", "fma"),
            attribute="avx2,fma",
            headers=("immintrin.h",),
            kernels=_AVX2,
            priority=20,
        ),
        Target(
            name="x86-auto",
            description="x86-64: AVX-512, AVX2 and generic kernels, chosen at the first call by "
                        "the CPU that runs the program (KERNELFARER_PATH=<target> forces one)",
            cpu_features=(),
            attribute="",
            headers=(),
            kernels={},
            priority=-1,
            cpuinfo_flags=("sse2",),
            dispatch=("x86-avx512", "x86-avx2", "generic"),
        ),
        Target(
            name="generic",
            description="portable C (auto-vectorized by the compiler); runs everywhere",
            cpu_features=(),
            attribute="",
            headers=(),
            kernels=_GENERIC,
            priority=0,
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


def best_for_host(host_flags: frozenset[str] | None = None) -> Target:
    if host_flags is None:
        from kernelfarer.hostinfo import cpu_flags
        host_flags = cpu_flags()
    runnable = [t for t in TARGETS.values()
                if set(t.host_flags()) <= host_flags and not t.dispatch]
    return max(runnable, key=lambda t: t.priority)


def host_can_run(target: Target, host_flags: frozenset[str] | None = None) -> bool:
    if host_flags is None:
        from kernelfarer.hostinfo import cpu_flags
        host_flags = cpu_flags()
    return set(target.host_flags()) <= host_flags
