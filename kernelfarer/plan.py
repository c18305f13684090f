"""Planning: resolve a target's kernel and the host's caches into a KernelPlan.

The plan holds every name, size and list the templates need, so that templates only substitute.
Cache blocking follows the analytical model of Low et al. ("Analytical Modeling Is Enough for
High-Performance BLIS"): the B micro-panel (kc x nr) lives in L1 next to streaming A micro-panels,
the packed A block (mc x kc) in L2, the packed B panel (kc x nc) in L3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.hostinfo import CacheLevel, Caches, read_caches
from kernelfarer.targets import DType, KernelShape, Target


@dataclass(frozen=True)
class Blocking:
    mc: int
    kc: int
    nc: int


@dataclass(frozen=True)
class KernelPlan:
    target: Target
    dtype: DType
    shape: KernelShape
    blocking: Blocking
    # Resolved for the templates:
    ctype: str = ""
    in_ctype: str = ""                  # operands A and B (and the packed panels)
    mr: int = 0
    nr: int = 0
    lanes: int = 1
    attribute: str = ""
    isa: Mapping[str, str] = field(default_factory=dict)
    kernel_name: str = ""
    pack_a_name: str = ""
    pack_b_name: str = ""
    driver_name: str = ""
    cpu_check_name: str = ""
    rows: tuple[int, ...] = ()          # 0 .. mr-1
    vectors: tuple[int, ...] = ()       # 0 .. nr/lanes-1
    vector_offsets: tuple[int, ...] = ()  # lanes * v for each vector
    columns: tuple[int, ...] = ()       # 0 .. nr-1
    k_unroll: tuple[int, ...] = ()      # 0 .. shape.unroll-1: k steps written out per main-loop trip

    @property
    def mc(self) -> int:
        return self.blocking.mc

    @property
    def kc(self) -> int:
        return self.blocking.kc

    @property
    def nc(self) -> int:
        return self.blocking.nc


def _round_down(value: int, multiple: int) -> int:
    return max(multiple, value // multiple * multiple)


def _ways(nbytes: int, level: CacheLevel) -> int:
    """Whole ways of `level` that `nbytes` of contiguous data occupy."""
    return -(-nbytes // (level.sets * level.line))


def analytical_blocking(shape: KernelShape, dtype: DType, caches: Caches) -> Blocking:
    """kc, mc, nc from the cache geometry (Low et al.'s model, ways counted whole).

    L1: the B micro-panel (kc x nr) stays while A micro-panels (mr x kc) stream past it; each takes
    whole ways and one way is left for C, so kc is the largest multiple of the k step with
    ways(A micro-panel) + ways(B micro-panel) <= W1 - 1.  (Low et al.'s closed form, which sizes A's
    ways as floor((W1 - 1) / (1 + nr/mr)), leaves most of L1 unused when nr > mr: for 6x16 f32 on a
    32 KiB 8-way L1 it gives kc = 170, measured ~4% slower than the kc = 320 chosen here.)
    L2: the packed A block (mc x kc) gets half the ways; the other half holds the B micro-panels and
    C tiles streaming through and absorbs conflicts (L2 is physically indexed, so a block spread over
    4 KiB pages does not map evenly to sets).  Measured on Zen 3 (512 KiB 8-way), A blocks of 25-50%
    of L2 ran 2-4% faster than 75%.
    L3: the packed B panel (kc x nc), two ways left for A and C; capped so buffers stay modest.
    kc is a multiple of the kernel's k unroll (and of kr), so full kc blocks skip the remainder loop.
    """
    l1, l2, l3 = caches.l1d, caches.l2, caches.l3
    mr, nr, size = shape.mr, shape.nr, dtype.in_size
    step = math.lcm(shape.kr, shape.unroll)
    kc = (l1.ways - 1) * l1.sets * l1.line // ((mr + nr) * size)   # the bound without whole ways
    kc = min(kc, 1024) // step * step
    while kc > step and _ways(mr * kc * size, l1) + _ways(nr * kc * size, l1) > l1.ways - 1:
        kc -= step
    kc = max(kc, step)
    ways_l2 = max(1, l2.ways // 2)
    mc = _round_down(ways_l2 * l2.sets * l2.line // (kc * size), mr)
    if l3 is not None:
        ways_l3 = max(1, l3.ways - 2)
        nc = _round_down(ways_l3 * l3.sets * l3.line // (kc * size), nr)
    else:
        nc = 4096
    nc = _round_down(min(nc, 4096), nr)
    return Blocking(mc=mc, kc=kc, nc=nc)


def make_plan(target: Target, dtype: DType, *, caches: Caches | None = None,
              overrides: Mapping[str, int] | None = None) -> KernelPlan:
    shape = target.kernel(dtype)
    blocking = analytical_blocking(shape, dtype, caches or read_caches())
    if overrides:
        blocking = replace(blocking, **{k: v for k, v in overrides.items() if v})
    _check_blocking(blocking, shape)
    tag = target.name.replace("-", "_")
    base = f"kf_{dtype.letter}gemm_{tag}_{shape.mr}x{shape.nr}"
    attribute = f'__attribute__((target("{target.attribute}")))' if target.attribute else ""
    vectors = tuple(range(shape.nr // shape.lanes))
    return KernelPlan(
        target=target, dtype=dtype, shape=shape, blocking=blocking,
        ctype=dtype.ctype, in_ctype=dtype.in_ctype, mr=shape.mr, nr=shape.nr, lanes=shape.lanes,
        attribute=attribute, isa=MappingProxyType(dict(shape.isa)),
        kernel_name=base,
        pack_a_name=f"kf_{dtype.letter}pack_a_{tag}_{shape.mr}",
        pack_b_name=f"kf_{dtype.letter}pack_b_{tag}_{shape.nr}",
        driver_name=f"{base}_driver",
        cpu_check_name=f"kf_cpu_{tag}",
        rows=tuple(range(shape.mr)),
        vectors=vectors,
        vector_offsets=tuple(v * shape.lanes for v in vectors),
        columns=tuple(range(shape.nr)),
        k_unroll=tuple(range(shape.unroll)),
    )


def _check_blocking(blocking: Blocking, shape: KernelShape) -> None:
    if blocking.mc % shape.mr or blocking.mc <= 0:
        raise KernelfarerError(f"--mc {blocking.mc} must be a positive multiple of mr={shape.mr}")
    if blocking.nc % shape.nr or blocking.nc <= 0:
        raise KernelfarerError(f"--nc {blocking.nc} must be a positive multiple of nr={shape.nr}")
    if blocking.kc <= 0 or blocking.kc % shape.kr:
        raise KernelfarerError(f"--kc {blocking.kc} must be a positive multiple of kr={shape.kr}")


@dataclass(frozen=True)
class DispatchPlan:
    """Several plans for one element type, one picked at run time by the CPU that runs the code.

    It answers to the names the call site uses (driver, CPU check) like a KernelPlan does."""

    target: Target
    dtype: DType
    plans: tuple[KernelPlan, ...]         # best first; the last runs everywhere
    driver_name: str
    cpu_check_name: str
    pick_name: str

    @property
    def kernel_name(self) -> str:
        return " | ".join(p.kernel_name for p in self.plans)

    @property
    def blocking(self) -> Blocking:
        return self.plans[0].blocking

    @property
    def last_index(self) -> int:
        return len(self.plans) - 1

    mc = property(lambda self: self.plans[0].mc)
    kc = property(lambda self: self.plans[0].kc)
    nc = property(lambda self: self.plans[0].nc)


def make_dispatch_plan(target: Target, dtype: DType, registry: Mapping[str, Target], *,
                       caches: Caches | None = None,
                       overrides: Mapping[str, int] | None = None) -> "DispatchPlan | KernelPlan":
    """Plans for every dispatched target that has a kernel for `dtype` (a single plan when only
    one has)."""
    plans = tuple(make_plan(registry[name], dtype, caches=caches, overrides=overrides)
                  for name in target.dispatch if dtype in registry[name].kernels)
    if not plans:
        raise KernelfarerError(f"target '{target.name}' has no {dtype.ctype} kernel")
    if len(plans) == 1:
        return plans[0]
    tag = target.name.replace("-", "_")
    base = f"kf_{dtype.letter}gemm_{tag}"
    return DispatchPlan(target=target, dtype=dtype, plans=plans, driver_name=f"{base}_driver",
                        cpu_check_name="kf_cpu_any", pick_name=f"{base}_pick")
