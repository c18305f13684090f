"""Planning: resolve a target's kernel and the host's caches into a KernelPlan.

The plan holds every name, size and list the templates need, so that templates only substitute.
Cache blocking follows the analytical model of Low et al. ("Analytical Modeling Is Enough for
High-Performance BLIS"): the B micro-panel (kc x nr) lives in L1 next to streaming A micro-panels,
the packed A block (mc x kc) in L2, the packed B panel (kc x nc) in L3.  The same geometry decides
where packing stops paying (`direct_policy`): small, short and narrow problems run the target's
direct kernel on A and B in place, when the target has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.hostinfo import CacheLevel, Caches, Host, current_host
from kernelfarer.targets import TILE_PROGRAM_TEMPLATES, DType, KernelShape, Target


@dataclass(frozen=True)
class Blocking:
    mc: int
    kc: int
    nc: int


@dataclass(frozen=True)
class AccTile:
    """One accumulator register of an outer-product kernel (POWER10 MMA): it sums A register
    `a` times B vector `b`; its disassembled vectors are rows `rows` of the C tile, columns
    `col` .. `col` + lanes - 1."""

    index: int
    a: int
    b: int
    rows: tuple[int, ...]
    col: int


@dataclass(frozen=True)
class DirectPolicy:
    """When the driver runs the direct kernel instead of packing, and when the direct path copies a
    B micro-panel instead of reading it in place (see `direct_policy`).  All sizes in elements of
    the operands, except the L1 geometry in bytes."""

    elems: int          # A and B together fit in L2: m*k + k*n <= elems
    a_elems: int        # A's kc block fits a quarter of L2: m * min(k, kc) <= a_elems
    n_max: int          # a few column panels: n <= n_max (A is read only n / nr times)
    copy_rows: int      # B micro-panels are read in place when at most this many rows use them...
    band_elems: int     # ... or when B's kc-row band fits half of L2 (kb * n <= band_elems) and
    l1_bytes: int       # the panel's rows do not crowd few L1 sets: kb * max(2^t, line) <= l1_bytes,
    l1_line: int        # 2^t the largest power of two dividing B's row stride in bytes (capped at
    l1_way: int         # one way, l1_way bytes)
    rows_outer_k: int   # k blocks up to this long walk C by row panels (B read in place)
    stream_k: int = 0   # k up to this (float types): C updated a row at a time, no register tiles
    stream_b_bytes: int = 0  # ... B's k rows a block of columns at a time, the block's rows this
                             # many bytes in all (two thirds of L1: they stay there)
    c_elems: int = 0    # the fused epilogue pays where C has more elements (L2; driver.c.j2)


# The fused epilogue of the packed path runs on panels of about this many bytes of C: the mc rows
# of an A block and as many columns (a multiple of nr) as fit.  A call per column of register
# tiles (mc x nr) costs more than the pass over C it saves when mc is small (Zen 5, mc = 24, f32,
# Y = relu(X W + bias) against the GEMM: 4000 x 4000 x 64 1.39x, the pass 1.24x); panels of
# 256, 1024 and 4096 columns (24, 96 and 384 KiB) measured 1.09x, 1.07x and 1.09x there, and
# 1.05x, 1.04x, 1.04x at x 256 (the pass 1.08x).
EPI_PANEL_BYTES = 64 << 10


@dataclass(frozen=True)
class KernelPlan:
    target: Target
    dtype: DType
    shape: KernelShape
    blocking: Blocking
    blocking_source: str = "model"      # "model", "tuned (...)", or the --mc/--kc/--nc overrides
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
    # Kernels that load a k step of packed A whole (shape.a_width elements per register):
    a_regs: tuple[int, ...] = ()        # 0 .. mr/a_width-1
    a_offsets: tuple[int, ...] = ()     # a_width * i for each A register
    row_reg: tuple[int, ...] = ()       # for each row of C: the A register that holds it
    row_lane: tuple[int, ...] = ()      # ... and its lane there
    tiles: tuple[AccTile, ...] = ()     # outer-product kernels: an accumulator per A register x
                                        # B vector
    vector_ends: tuple[int, ...] = ()   # lanes * (v + 1) for each vector: columns up to its end
    # Packing buffers of at most this many elements come from the stack (no malloc per call):
    stack_elems: int = 0
    # The direct kernel (shape.direct; templates/kernels/README.md): A and B read in place.
    direct: bool = False
    direct_kc: int = 0                  # its k block (l1_kc: B micro-panels stay in L1)
    direct_name: str = ""
    direct_driver_name: str = ""        # the direct path of the driver
    small_name: str = ""                # the predicate that picks it
    direct_mr: int = 0                  # rows of its register tile (its columns: nr)
    direct_heights: tuple[int, ...] = ()    # direct_mr .. 1: a variant of the kernel for each
                                            # (splitting a tile would re-read B's micro-panel,
                                            # which thin problems stream from memory)
    direct_rows_ids: tuple[int, ...] = ()   # 0 .. direct_mr-1
    # Row r of A is read at row_base[r] + row_scale[r] * (row stride): one pointer per
    # DIRECT_ROWS_PER_BASE rows (x86 addressing scales the stride by 1 or 2), so the k loop keeps
    # few pointers in registers.  direct_bases: 0 .. number of pointers - 1; base_rows: the first
    # row of each.
    direct_row_base: tuple[int, ...] = ()
    direct_row_scale: tuple[int, ...] = ()
    direct_bases: tuple[int, ...] = ()
    direct_base_rows: tuple[int, ...] = ()
    direct_policy: DirectPolicy | None = None
    thin_name: str = ""                 # the thin path (shape.thin), or ""
    thin_c_bytes: int = 0               # C's rows of at most this many bytes (half of L1): the
                                        # axpy form's k blocks are thin.stream_block rows of B
    # Threads of the packed path (OpenMP, when the file is compiled with it): 0, none (no OpenMP
    # code at all); THREADS_AUTO, as many as OpenMP offers (OMP_NUM_THREADS); n > 1, at most n.
    threads: int = 0
    epi_panel_bytes: int = EPI_PANEL_BYTES   # the fused epilogue's panels (epi_panel_cols)
    tile_prog: bool = False  # the kernel has a <name>_prog variant (a fused epilogue as a program)
    # fp16 sums (DType.F16): the register tile starts from C (when load_c) and takes the products
    # in k order, so each element is the original's chain of steps, rounded as the file's
    # compile rounds `c + a * b` (the kernels spell it so; the recognizer takes no alpha or beta)
    seed_c: bool = False

    @property
    def l1_way(self) -> int:
        """Bytes of one L1 way (rows of C that far apart share L1 sets: driver.c.j2's epilogue
        rule)."""
        return self.direct_policy.l1_way if self.direct_policy else 4096

    @property
    def epi_panel_cols(self) -> int:
        """Columns of C per call of the fused epilogue on the packed path: a multiple of nr whose
        mc rows take epi_panel_bytes, at most nc."""
        cols = self.epi_panel_bytes // (self.mc * self.dtype.size) // self.nr * self.nr
        return max(self.nr, min(cols, self.nc))

    @property
    def epi_cols(self) -> int:
        """Columns of C per call of the fused epilogue on the direct path's row walk: a multiple
        of nr whose direct_mr rows take half of L1."""
        half_l1 = self.direct_policy.l1_bytes // 2
        return max(self.nr, half_l1 // (self.direct_mr * self.dtype.size) // self.nr * self.nr)

    @property
    def thin(self):
        """The target's thin-path shape (targets.ThinShape), or None."""
        return self.shape.thin

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


KC_MAX = 512            # k steps per kernel call at most (packing buffers and the C tile's reuse)
A_PANEL_L1 = 3 / 4      # the A micro-panel (mr x kc) fills this much of L1
A_BLOCK_L2 = 1 / 4      # the packed A block (mc x kc) fills this much of L2


def analytical_blocking(shape: KernelShape, dtype: DType, caches: Caches,
                        arrangement: str = "goto") -> Blocking:
    """kc, mc, nc from the cache geometry and the host's arrangement (Host.arrangement).

    kc: every kernel call loads and stores its mr x nr tile of C and sets up its registers; kc k
    steps of FMAs pay for that, so kc should be long.  What bounds it is L1: a call reads its A
    micro-panel (mr x kc, one broadcast or load per element, the operand the k loop touches most
    often) and its B micro-panel (kc x nr, a few vector loads per k step, streamed from L2 by the
    prefetcher when it does not fit).  kc is the largest multiple of the k step whose A micro-panel
    fills A_PANEL_L1 of L1, at most KC_MAX.  Measured on Zen 4 (32 KiB L1, 1 MiB L2, kernel
    tune, N = 1000-2048): f32 12x32 kc = 160 (the earlier model: A and B micro-panels both in L1)
    90-95 GFLOP/s, 320: 98-99, 480: 100-103, 720: 102; f64 12x16 kc = 128: 46-49, 256: 51,
    384: 50, 512: 46.  On an Intel Xeon (48 KiB L1, 2 MiB L2, AVX-512 on two FMA ports) f32
    kc = 128 / 256 / 512 gave 117 / 160 / 188 GFLOP/s (DESIGN.md).  The same budget puts the
    AVX2 6x16 f32 kernel at KC_MAX (its A micro-panel is half the size); there it was measured
    only against kc = 170 (kc = 320: 4% faster).
    mc: the packed A block (mc x kc) stays in L2 while all of B's micro-panels stream past; it
    gets A_BLOCK_L2 of L2 (the B micro-panels, C tiles and page-colour conflicts of a physically
    indexed L2 take the rest).  Zen 4 was flat from A blocks of 2 micro-panels to half of L2 (within
    2%); the Xeon's best measured, mc = 240 at kc = 512, is 23% of its L2.
    nc: the packed B panel (kc x nc) in L3 (two ways left for A and C), capped at 4096 so buffers
    stay modest.
    kc is a multiple of the kernel's k unroll (and of kr), so full kc blocks skip the remainder loop.
    `kernelfarer tune` measures around these blocks on the machine itself.

    "a-in-l1" (AMD Zen 4 and Zen 5, for the kernels the registry marks, KernelShape.a_in_l1: the
    AVX-512 float ones): the A block is two micro-panels (mc = 2 mr), kept in L1 whole (kc: the A
    micro-panel fills L1) while every B micro-panel streams past from L3, which these cores feed
    fast.  On Zen 5 (48 KiB L1, 1 MiB L2; GFLOP/s, N = 1024 and 2048, `kernelfarer tune --try`,
    one run): f32 mc=24 kc=1024 234 against the Goto blocks' (mc=120 kc=512) 222, f64 mc=24
    kc=512 115 against (mc=84 kc=384) 100; tuned on Zen 4 (32 KiB L1): f32 mc=12 kc=1024 108
    against 104, f64 mc=12 kc=512 54 against 50; the VNNI int8 kernel on Zen 5 (`bench/int8.py`,
    against oneDNN in the same run, N = 1024 / 2048): mc=24 kc=4096 0.95x / 0.94x, against Goto's
    mc=120 kc=2048 0.93x / 0.89x.  The AVX2 kernels lose there (Zen 5: f32 mc=12 kc=1024 119
    against mc=60 kc=512 124; f64 53 against 57), so they keep Goto's blocks.
    """
    l1, l2, l3 = caches.l1d, caches.l2, caches.l3
    mr, nr, size = shape.mr, shape.nr, dtype.in_size
    step = math.lcm(shape.kr, shape.unroll)
    if arrangement == "a-in-l1" and shape.a_in_l1:
        kc = _round_down(min(l1.size // (mr * size), 2 * KC_MAX * shape.kr), step)
        return Blocking(mc=2 * mr, kc=kc, nc=_panel_columns(kc, size, nr, l3))
    # KC_MAX counts the kernel's steps: a kernel that takes kr k steps per instruction (VNNI: 4)
    # pays for its C tile over kr times as many.  int8 12x32 on Zen 4 (N = 1024 / 2048, GOP/s):
    # kc = 512 (mc 504) 377 / 391, 1024 (mc 240) 440 / 422, 2048 (mc 120) 411 / 440; oneDNN 416 / 429.
    kc = _round_down(min(int(A_PANEL_L1 * l1.size) // (mr * size), KC_MAX * shape.kr), step)
    mc = _round_down(int(A_BLOCK_L2 * l2.size) // (kc * size), mr)
    return Blocking(mc=mc, kc=kc, nc=_panel_columns(kc, size, nr, l3))


def _panel_columns(kc: int, size: int, nr: int, l3) -> int:
    """nc: the packed B panel (kc x nc) in L3, two ways left for A and C, at most 4096."""
    if l3 is not None:
        ways_l3 = max(1, l3.ways - 2)
        nc = _round_down(ways_l3 * l3.sets * l3.line // (kc * size), nr)
    else:
        nc = 4096
    return _round_down(min(nc, 4096), nr)


def l1_kc(shape: KernelShape, dtype: DType, caches: Caches) -> int:
    """The k block of the direct (unpacked) path: its B micro-panel (kc x nr) stays in L1 while
    register tiles of A rows stream past, each taking whole ways, one way left for C: the largest
    multiple of the k step with ways(A micro-panel) + ways(B micro-panel) <= W1 - 1.  (The direct
    path's copied B micro-panels live in an L1-sized stack buffer.)"""
    l1 = caches.l1d
    mr, nr, size = shape.mr, shape.nr, dtype.in_size
    step = math.lcm(shape.kr, shape.unroll)
    kc = (l1.ways - 1) * l1.sets * l1.line // ((mr + nr) * size)   # the bound without whole ways
    kc = min(kc, 1024) // step * step
    while kc > step and _ways(mr * kc * size, l1) + _ways(nr * kc * size, l1) > l1.ways - 1:
        kc -= step
    return max(kc, step)


def target_caches(target: Target, host: Host | None = None) -> Caches:
    """The caches to block for: the host's (KERNELFARER_HOST's description, else this machine's),
    unless the target is another machine's and the registry describes a typical one."""
    host = host or current_host()
    if _cross(target, host):
        return target.caches
    return host.caches


def _cross(target: Target, host: Host) -> bool:
    return target.caches is not None and target.arch not in (None, host.arch)


def planned_blocking(target: Target, dtype: DType, *, caches: Caches | None = None,
                     host: Host | None = None) -> tuple[Blocking, str]:
    """The cache blocks of a kernel and where they come from: the host's tuned profile
    (`kernelfarer tune`), when it has valid blocks for this kernel and the caches are the host's,
    else the analytical model."""
    host = host or current_host()
    shape = target.kernel(dtype)
    if caches is None:
        caches = target_caches(target, host)
        tuned = None if _cross(target, host) else host.tuned(target.name, dtype.letter)
        if tuned is not None:
            blocking = Blocking(**{n: int(tuned[n]) for n in ("mc", "kc", "nc")})
            if blocking_error(blocking, shape) is None:
                return blocking, f"tuned ({host.source})"
    arrangement = "goto" if _cross(target, host) else host.arrangement
    return analytical_blocking(shape, dtype, caches, arrangement), "model"


def _a_registers(shape: KernelShape, vector_offsets: tuple[int, ...]) -> dict:
    if not shape.a_width:
        return {}
    a_regs = tuple(range(shape.mr // shape.a_width))
    tiles = tuple(
        AccTile(index=i * len(vector_offsets) + v, a=i, b=v,
                rows=tuple(range(i * shape.a_width, (i + 1) * shape.a_width)), col=col)
        for i in a_regs for v, col in enumerate(vector_offsets)) if shape.outer_product else ()
    return dict(a_regs=a_regs, a_offsets=tuple(i * shape.a_width for i in a_regs),
                row_reg=tuple(r // shape.a_width for r in range(shape.mr)),
                row_lane=tuple(r % shape.a_width for r in range(shape.mr)),
                tiles=tiles)


DIRECT_PANELS = 4      # n <= DIRECT_PANELS * nr: A is read at most this many times in place
ROWS_OUTER_K = 16      # k blocks up to this long: tiles bound by C's traffic, walk C by row panels
STREAM_K = 4           # k up to this: C streamed a row at a time (float and double)


def direct_policy(dtype: DType, caches: Caches, *, nr: int, direct_mr: int) -> DirectPolicy:
    """Where packing stops paying, from the cache geometry (the paper this product follows measured
    tiling without packing winning below L2-sized problems).  The direct path reads A in place,
    k blocked by kc but with no mc block, and B's micro-panels in place or copied one at a time to
    a stack buffer (the copy is what the packed path does for all of B, without the allocation).
    It wins when

    - A and B fit in L2 together (measured on Zen 3, 512 KiB L2: up to N = 256 f32 and N = 181 f64,
      1.03-1.5x the packed path);
    - A's kc block fits a quarter of L2, like the packed A block it replaces (m <= ~100 f32 at
      kc = 320, ~64 f64): it stays there while B streams past once (64x2048x64: 1.14x; 96 rows:
      1.06x; at 204 rows packing won by 2%);
    - n is a few register tiles wide, so A is read only a few times (1024 x 4 nr x 1024: 1.05-1.1x;
      at 8 nr the two paths were level, at 12 nr packing won).

    A B micro-panel read in place stays in L1 only if its kb rows do not crowd a few L1 sets: with a
    row stride of 2^t bytes times an odd number, the rows fall into l1_way / 2^t sets, so the panel
    behaves like kb * 2^t bytes (4 KiB strides: every row in the same set).  When more than two
    register tiles reuse a panel and it would crowd L1, or B's kc-row band overflows half of L2, it
    is copied (f64 N = 128: 1.09x vs 1.02x in place; 64 x 2048 x 64: 0.97x vs 0.54x); otherwise
    in place (f32 N = 32: 1.43x vs 1.34x copied; GEMV-like 1 x 2048 x 2048: 1.66x vs 1.19x).

    k blocks of at most ROWS_OUTER_K steps leave each tile bound by C's traffic rather than its
    FMAs; C is then walked row panel by row panel (contiguous rows, few pages): 2048 x 2048 x k
    f32 at k = 1, 4, 8 went from 0.43x, 0.52x, ~0.7x OpenBLAS to 2.4x, 2.1x, 1.6x; at k = 32 the
    column-panel walk was better (1.00x vs 0.61x).

    Up to STREAM_K steps, where C is out of cache the row panels' eight rows at once are eight
    streams through memory (and, with C's rows 4 KiB apart, in the same cache sets): one row at a
    time in plain vectorized C, a single stream, measured faster (Zen 5, f64, C 64-byte aligned,
    4096 x 4096 x k at k = 1, 2, 3, 4: 8.4, 11.6, 10.8, 10.8 ms -> 5.1, 7.0, 7.8, 8.2; 2048 x 2048 x
    k: 1.8, 3.0, 3.5, 2.4 -> 0.84, 1.3, 1.8, 2.0; at k = 6 the two were level, at 8 the panels
    won)."""
    l1, l2, size = caches.l1d, caches.l2, dtype.in_size
    return DirectPolicy(
        elems=l2.size // size,
        a_elems=l2.size // 4 // size,
        n_max=DIRECT_PANELS * nr,
        copy_rows=2 * direct_mr,
        band_elems=l2.size // 2 // size,
        l1_bytes=l1.size,
        l1_line=l1.line,
        l1_way=l1.sets * l1.line,
        rows_outer_k=ROWS_OUTER_K,
        stream_k=STREAM_K if dtype in (DType.F32, DType.F64) else 0,
        stream_b_bytes=l1.size * 2 // 3,
        c_elems=l2.size // dtype.size,
    )


def stack_buffer_elems(dtype: DType, caches: Caches) -> int:
    """Packing buffers up to the size of L1 come from the stack (no allocation per call); larger
    problems amortise a malloc."""
    return caches.l1d.size // dtype.in_size


DIRECT_ROWS_PER_BASE = 3


def _direct_rows(mr: int) -> dict:
    bases = tuple(range(-(-mr // DIRECT_ROWS_PER_BASE)))
    return dict(
        direct_mr=mr,
        direct_heights=tuple(range(mr, 0, -1)),
        direct_rows_ids=tuple(range(mr)),
        direct_row_base=tuple(r // DIRECT_ROWS_PER_BASE for r in range(mr)),
        direct_row_scale=tuple(r % DIRECT_ROWS_PER_BASE for r in range(mr)),
        direct_bases=bases,
        direct_base_rows=tuple(b * DIRECT_ROWS_PER_BASE for b in bases),
    )


THREADS_AUTO = -1
# Products of fewer multiply-adds (m*n*k) than this run on one thread: starting a parallel region,
# its barriers and the packing cost more than the second thread gains (bench/threads.py, Zen 4,
# 2 threads, f32 squares forced onto the threads: 160^3 0.79x, 192^3 1.09x, 256^3 1.57x).
THREAD_MIN_WORK = 6 << 20

# Products with M, N and K all at most this run the user's loops: the call site's checks and the
# driver call cost more than such a product (bench/tiny.py, Zen 5: 2x2x2 19 ns against the loop's
# 8, 4x4x4 0.76-0.94x; 5x5x5 1.25-1.40x).  The call site tests it before anything else.
TINY_SIZE = 4


def parse_threads(text: str) -> int:
    """`--threads` and KERNELFARER_THREADS: "auto" (THREADS_AUTO) or a count (0 and 1: none)."""
    if text.strip().lower() == "auto":
        return THREADS_AUTO
    count = int(text)
    if count < 0:
        raise ValueError(f"a thread count is 0 or more, or 'auto' (not {text})")
    return count


def threads_suffix(threads: int) -> str:
    """What a threaded plan's names end with (its kernels are its own: a file may hold both)."""
    return "" if threads in (0, 1) else "_mt" if threads == THREADS_AUTO else f"_t{threads}"


def make_plan(target: Target, dtype: DType, *, caches: Caches | None = None,
              overrides: Mapping[str, int] | None = None, host: Host | None = None,
              threads: int = 0) -> KernelPlan:
    """The plan of `target`'s `dtype` kernel for the host (KERNELFARER_HOST, else this machine);
    `caches` replaces the host's cache geometry, `overrides` (--mc/--kc/--nc) the blocks."""
    shape = target.kernel(dtype)
    host = host or current_host()
    blocking, source = planned_blocking(target, dtype, caches=caches, host=host)
    caches = caches or target_caches(target, host)
    given = {k: v for k, v in (overrides or {}).items() if v}
    if given:
        blocking = replace(blocking, **given)
        source = "--" + " --".join(f"{k} {v}" for k, v in sorted(given.items())) + \
            f" (others: {source})"
        if shape.kr > 1:
            # the blocks given suit the float kernels; a dot-product kernel (k in groups of kr,
            # tiles of its own) takes the nearest larger ones that suit it
            fitted = replace(blocking, mc=-(-blocking.mc // shape.mr) * shape.mr,
                             kc=-(-blocking.kc // shape.kr) * shape.kr,
                             nc=-(-blocking.nc // shape.nr) * shape.nr)
            if fitted != blocking and min(fitted.mc, fitted.kc, fitted.nc) > 0:
                source += f", rounded up to mc={fitted.mc} kc={fitted.kc} nc={fitted.nc}"
                blocking = fitted
    error = blocking_error(blocking, shape)
    if error:
        raise KernelfarerError(error)
    tag = target.name.replace("-", "_")
    suffix = threads_suffix(threads)
    base = f"kf_{dtype.letter}gemm_{tag}_{shape.mr}x{shape.nr}{suffix}"
    attribute = f'__attribute__((target("{target.attribute}")))' if target.attribute else ""
    vectors = tuple(range(shape.nr // shape.lanes))
    # The direct path copies B micro-panels (kc x nr) it cannot read in place to the stack buffer.
    direct_kc = min(blocking.kc, l1_kc(shape, dtype, caches))
    direct = shape.direct and direct_kc * shape.nr <= stack_buffer_elems(dtype, caches)
    return KernelPlan(
        target=target, dtype=dtype, shape=shape, blocking=blocking, blocking_source=source,
        ctype=dtype.ctype, in_ctype=dtype.in_ctype, mr=shape.mr, nr=shape.nr, lanes=shape.lanes,
        attribute=attribute, isa=MappingProxyType(dict(shape.isa)),
        kernel_name=base,
        pack_a_name=f"kf_{dtype.letter}pack_a_{tag}_{shape.mr}{suffix}",
        pack_b_name=f"kf_{dtype.letter}pack_b_{tag}_{shape.nr}{suffix}",
        driver_name=f"{base}_driver",
        cpu_check_name=f"kf_cpu_{tag}",
        rows=tuple(range(shape.mr)),
        vectors=vectors,
        vector_offsets=tuple(v * shape.lanes for v in vectors),
        columns=tuple(range(shape.nr)),
        k_unroll=tuple(range(shape.unroll)),
        **_a_registers(shape, tuple(v * shape.lanes for v in vectors)),
        vector_ends=tuple((v + 1) * shape.lanes for v in vectors),
        stack_elems=stack_buffer_elems(dtype, caches),
        direct=direct,
        direct_kc=direct_kc if direct else 0,
        direct_name=f"{base}_direct" if direct else "",
        direct_driver_name=f"{base}_driver_direct" if direct else "",
        small_name=f"{base}_small" if direct else "",
        **(_direct_rows(shape.direct_mr or shape.mr) if direct else {}),
        direct_policy=direct_policy(dtype, caches, nr=shape.nr,
                                    direct_mr=shape.direct_mr or shape.mr) if direct else None,
        thin_name=f"{base}_thin" if shape.thin else "",
        thin_c_bytes=caches.l1d.size // 2 if shape.thin else 0,
        threads=0 if threads == 1 else threads,
        tile_prog=shape.template in TILE_PROGRAM_TEMPLATES and dtype.kind == "float"
        and dtype.size >= 4,           # fp16 sums: no epilogue is taken (recognize.py)
        seed_c=dtype is DType.F16,
    )


def blocking_error(blocking: Blocking, shape: KernelShape) -> str | None:
    """Why the blocks do not suit the kernel, or None."""
    if blocking.mc % shape.mr or blocking.mc <= 0:
        return f"--mc {blocking.mc} must be a positive multiple of mr={shape.mr}"
    if blocking.nc % shape.nr or blocking.nc <= 0:
        return f"--nc {blocking.nc} must be a positive multiple of nr={shape.nr}"
    if blocking.kc <= 0 or blocking.kc % shape.kr:
        return f"--kc {blocking.kc} must be a positive multiple of kr={shape.kr}"
    return None


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

    @property
    def conditions(self) -> tuple[str, ...]:
        """For each plan, the C preprocessor condition under which the program may still take it:
        a file compiled for a better plan's ISA (say -march=native on an AVX-512 machine) only
        runs on CPUs that have that ISA, so the plans below it are not emitted at all.  A plan
        whose kernel flushes denormals hides none: the next one runs the data it declines."""
        out = []
        for i in range(len(self.plans)):
            better = [p.target.isa_macro for p in self.plans[:i]
                      if p.target.isa_macro != "0" and not p.shape.flushes]
            out.append(" && ".join(f"!({m})" for m in better) or "1")
        return tuple(out)

    @property
    def blocking_source(self) -> str:
        return self.plans[0].blocking_source

    threads = property(lambda self: self.plans[0].threads)
    mc = property(lambda self: self.plans[0].mc)
    kc = property(lambda self: self.plans[0].kc)
    nc = property(lambda self: self.plans[0].nc)


def make_dispatch_plan(target: Target, dtype: DType, registry: Mapping[str, Target], *,
                       caches: Caches | None = None,
                       overrides: Mapping[str, int] | None = None,
                       threads: int = 0) -> "DispatchPlan | KernelPlan":
    """Plans for every dispatched target that has a kernel for `dtype` (a single plan when only
    one has)."""
    plans = tuple(make_plan(registry[name], dtype, caches=caches, overrides=overrides,
                            threads=threads)
                  for name in target.dispatch if dtype in registry[name].kernels)
    if not plans:
        raise KernelfarerError(f"target '{target.name}' has no {dtype.ctype} kernel")
    if len(plans) == 1:
        return plans[0]
    tag = target.name.replace("-", "_")
    base = f"kf_{dtype.letter}gemm_{tag}{threads_suffix(threads)}"
    return DispatchPlan(target=target, dtype=dtype, plans=plans, driver_name=f"{base}_driver",
                        cpu_check_name="kf_cpu_any", pick_name=f"{base}_pick")
