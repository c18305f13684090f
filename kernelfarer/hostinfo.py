"""What the host offers: CPU feature flags and cache geometry, read from /proc and sysfs."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CacheLevel:
    level: int
    size: int            # bytes
    ways: int
    line: int            # bytes

    @property
    def sets(self) -> int:
        return max(1, self.size // (self.ways * self.line))


@dataclass(frozen=True)
class Caches:
    l1d: CacheLevel
    l2: CacheLevel
    l3: CacheLevel | None


# Used when sysfs says nothing (containers, other OSes): a modest, common x86 geometry.
DEFAULT_CACHES = Caches(
    l1d=CacheLevel(1, 32 * 1024, 8, 64),
    l2=CacheLevel(2, 512 * 1024, 8, 64),
    l3=CacheLevel(3, 8 * 1024 * 1024, 16, 64),
)


@functools.lru_cache(maxsize=None)
def cpu_flags() -> frozenset[str]:
    """The CPU's features: /proc/cpuinfo's flags (x86) or Features (Arm); on POWER, whose cpuinfo
    lists none, the AT_HWCAP2 bits under the names __builtin_cpu_supports uses."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    if machine().startswith("ppc64"):
        try:
            return power_hwcap2_flags(Path("/proc/self/auxv").read_bytes())
        except OSError:
            return frozenset()
    return frozenset()


_AT_HWCAP2 = 26
# Linux's PPC_FEATURE2_* bits (arch/powerpc/include/uapi/asm/cputable.h).
_PPC_HWCAP2 = {"arch_3_00": 0x00800000, "arch_3_1": 0x00040000, "mma": 0x00020000}


def power_hwcap2_flags(auxv: bytes) -> frozenset[str]:
    """POWER feature names from this process's ELF auxiliary vector (native 64-bit entries)."""
    import struct
    for offset in range(0, len(auxv) - 15, 16):
        key, value = struct.unpack_from("=QQ", auxv, offset)
        if key == _AT_HWCAP2:
            return frozenset(name for name, bit in _PPC_HWCAP2.items() if value & bit)
    return frozenset()


_ARCH_SPELLINGS = {"amd64": "x86_64", "arm64": "aarch64", "powerpc64le": "ppc64le"}


def canonical_arch(name: str) -> str:
    """An architecture name (from `uname -m` or a target triple) as Linux's `uname -m` spells it."""
    name = name.lower()
    return _ARCH_SPELLINGS.get(name, name)


def machine() -> str:
    """The host's architecture as `uname -m` spells it on Linux (x86_64, aarch64, ppc64le)."""
    import platform
    return canonical_arch(platform.machine())


def _parse_size(text: str) -> int:
    text = text.strip()
    scale = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KMGkmg")) * scale


def read_caches(root: Path = _SYSFS_CACHE) -> Caches:
    """Data/unified caches of cpu0 from sysfs; DEFAULT_CACHES for any level that is missing."""
    found: dict[int, CacheLevel] = {}
    try:
        entries = sorted(p for p in root.iterdir() if p.name.startswith("index"))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if (entry / "type").read_text().strip() not in ("Data", "Unified"):
                continue
            level = int((entry / "level").read_text())
            size = _parse_size((entry / "size").read_text())
            ways = int((entry / "ways_of_associativity").read_text() or 0) or 8
            line = int((entry / "coherency_line_size").read_text() or 0) or 64
        except (OSError, ValueError):
            continue
        found[level] = CacheLevel(level, size, ways, line)
    return Caches(
        l1d=found.get(1, DEFAULT_CACHES.l1d),
        l2=found.get(2, DEFAULT_CACHES.l2),
        l3=found.get(3, DEFAULT_CACHES.l3),
    )

