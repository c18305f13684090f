"""The host kernelfarer plans for: its architecture, CPU features and cache geometry.

By default that is the machine kernelfarer runs on, read from /proc and sysfs (`real_host`).
``KERNELFARER_HOST`` describes another one instead, so that a rewrite (and the test suite) can plan
for a machine it is not running on:

- a preset name: ``zen3`` (AMD Zen 3, AVX2, 512 KiB L2), ``zen4`` (AMD Zen 4, AVX-512 double-pumped,
  1 MiB L2), ``sapphirerapids`` (Intel Xeon, AVX-512 on two FMA ports, AMX, 2 MiB L2);
- or a JSON file (``kernelfarer tune`` writes one)::

      {"name": "my box", "base": "zen4",            # fields not given come from the base preset,
       "flags": ["avx2", "fma", "avx512f"],        # or, without a base, from this machine
       "caches": {"l1d": "48K/12", "l2": "2M/16", "l3": "105M/15"},   # size/ways[/line]
       "blocking": {"x86-avx512/f32": {"mc": 240, "kc": 512, "nc": 2048}}}

The described host decides what ``--target auto`` picks and the cache blocks; what a test may
*execute* is always decided by the real CPU (`real_host`).  Tuned blocks (``kernelfarer tune``) are
stored per machine in the profile directory (``KERNELFARER_PROFILE_DIR``, default
``~/.cache/kernelfarer``) and used automatically on the machine they were measured on.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from kernelfarer.diagnostics import KernelfarerError

_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
HOST_ENV = "KERNELFARER_HOST"
PROFILE_DIR_ENV = "KERNELFARER_PROFILE_DIR"


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


@dataclass(frozen=True)
class Host:
    """A machine to plan for."""

    name: str                            # preset name, file name, or "this machine"
    arch: str                            # as `uname -m` spells it
    flags: frozenset[str]                # CPU features, named as /proc/cpuinfo names them
    caches: Caches
    cpu_model: str = ""                  # /proc/cpuinfo's "model name"
    mca_cpu: str = ""                    # llvm-mca's -mcpu model of the core ("" if none fits)
    # Tuned cache blocks, "target/dtype" (e.g. "x86-avx512/f32") -> {"mc", "kc", "nc"}
    blocking: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    source: str = "this machine"         # where the description came from (remarks, tune)
    # How the model arranges the packed operands in the caches (plan.analytical_blocking):
    # "goto" (an A block in L2, micro-panels streamed past it) or "a-in-l1" (one or two A
    # micro-panels held in L1 while B streams from L3: what AMD's Zen 4 and Zen 5 run best)
    arrangement: str = "goto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "flags", frozenset(self.flags))
        object.__setattr__(self, "blocking", MappingProxyType(
            {key: MappingProxyType(dict(value)) for key, value in dict(self.blocking).items()}))

    def tuned(self, target: str, dtype_letter: str) -> Mapping[str, int] | None:
        """Tuned blocks of one kernel (dtype_letter as in DType.letter: s, d, ...)."""
        return self.blocking.get(f"{target}/{_DTYPE_KEYS.get(dtype_letter, dtype_letter)}")

    def key(self) -> str:
        """Identifies the machine (model, features, caches) for the stored tuned profile."""
        text = json.dumps([self.arch, self.cpu_model, sorted(self.flags), _caches_json(self.caches)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        return {"name": self.name, "arch": self.arch, "cpu_model": self.cpu_model,
                "mca_cpu": self.mca_cpu, "arrangement": self.arrangement,
                "flags": sorted(self.flags),
                "caches": _caches_json(self.caches),
                "blocking": {k: dict(v) for k, v in sorted(self.blocking.items())}}


_DTYPE_KEYS = {"s": "f32", "d": "f64"}


def _caches_json(caches: Caches) -> dict:
    out = {}
    for name in ("l1d", "l2", "l3"):
        level = getattr(caches, name)
        if level is not None:
            out[name] = {"size": level.size, "ways": level.ways, "line": level.line}
    return out


def _parse_size(text: str) -> int:
    text = text.strip()
    scale = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KMGkmg")) * scale


def _level(level: int, text: str) -> CacheLevel:
    size, ways, *line = text.split("/")
    return CacheLevel(level, _parse_size(size), int(ways), int(line[0]) if line else 64)


_X86_BASE = ("sse", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx", "avx2", "fma", "f16c",
             "bmi1", "bmi2")
_AVX512 = ("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_vnni",
           "avx512_bf16", "avx512ifma", "avx512vbmi", "avx512_vbmi2")

# The machines this project is built and tested on (DESIGN.md); caches per core.
PRESETS: Mapping[str, Host] = MappingProxyType({h.name: h for h in (
    Host(name="zen3", arch="x86_64", flags=frozenset(_X86_BASE),
         caches=Caches(_level(1, "32K/8"), _level(2, "512K/8"), _level(3, "32M/16")),
         cpu_model="AMD Zen 3 (preset)", mca_cpu="znver3", source="preset zen3"),
    Host(name="zen4", arch="x86_64", flags=frozenset(_X86_BASE + _AVX512),
         caches=Caches(_level(1, "32K/8"), _level(2, "1M/8"), _level(3, "32M/16")),
         cpu_model="AMD Zen 4 (preset)", mca_cpu="znver4", source="preset zen4",
         arrangement="a-in-l1"),
    # llvm-mca-19's sapphirerapids model issues 512-bit FMAs on port 0 only (the client core);
    # skylake-avx512 models the Xeon's two 512-bit FMA ports (0+1 and 5).
    Host(name="sapphirerapids", arch="x86_64",
         flags=frozenset(_X86_BASE + _AVX512 + ("avx512_fp16", "avx_vnni", "amx_tile", "amx_int8",
                                                "amx_bf16")),
         caches=Caches(_level(1, "48K/12"), _level(2, "2M/16"), _level(3, "105M/15")),
         cpu_model="Intel Xeon Sapphire Rapids (preset)", mca_cpu="skylake-avx512",
         source="preset sapphirerapids"),
)})


class HostError(KernelfarerError):
    """KERNELFARER_HOST names no preset and no readable host file."""


@functools.lru_cache(maxsize=None)
def real_host() -> Host:
    """This machine, as /proc and sysfs describe it (never a preset): what code may run here."""
    arch = machine()
    return Host(name="this machine", arch=arch, flags=real_cpu_flags(), caches=read_caches(),
                cpu_model=_cpu_model(), mca_cpu=_mca_cpu(arch, real_cpu_flags()),
                arrangement=_arrangement(arch, real_cpu_flags()))


_OVERRIDE: list[Host] = []


def current_host() -> Host:
    """The host to plan for: KERNELFARER_HOST's description, else this machine with its tuned
    profile (if `kernelfarer tune` stored one)."""
    if _OVERRIDE:
        return _OVERRIDE[-1]
    return _host_for(os.environ.get(HOST_ENV, "").strip(),
                     os.environ.get(PROFILE_DIR_ENV, ""))


def this_machine() -> Host:
    """This machine with its tuned profile, whatever KERNELFARER_HOST says: the host of commands
    that run what they build here (compare, tune)."""
    return _host_for("", os.environ.get(PROFILE_DIR_ENV, ""))


@contextlib.contextmanager
def planning_for(host: Host):
    """Plan for `host` inside the block (commands that run their code here use this_machine())."""
    _OVERRIDE.append(host)
    try:
        yield host
    finally:
        _OVERRIDE.pop()


@functools.lru_cache(maxsize=None)
def _host_for(spec: str, profile_dir: str) -> Host:
    if not spec:
        host = real_host()
        stored = load_profile(profile_path(host, profile_dir or None))
        if stored is not None:
            return replace(host, blocking=stored.blocking, source=stored.source)
        return host
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise HostError(f"{HOST_ENV}={spec}: no such preset ({', '.join(PRESETS)}) or file")
    return load_host_file(path)


def load_host_file(path: Path) -> Host:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HostError(f"{HOST_ENV}={path}: cannot read a host description: {exc}") from None
    if not isinstance(data, dict):
        raise HostError(f"{path}: a host description is a JSON object")
    base_name = data.get("base")
    if base_name is not None and base_name not in PRESETS:
        raise HostError(f"{path}: unknown base preset '{base_name}' ({', '.join(PRESETS)})")
    base = PRESETS[base_name] if base_name else real_host()
    try:
        caches = base.caches
        if "caches" in data:
            levels = {}
            for number, name in enumerate(("l1d", "l2", "l3"), 1):
                value = data["caches"].get(name)
                if isinstance(value, str):
                    levels[name] = _level(number, value)
                elif isinstance(value, dict):
                    levels[name] = CacheLevel(number, _parse_size(str(value["size"])),
                                              int(value["ways"]), int(value.get("line", 64)))
                else:
                    levels[name] = getattr(base.caches, name)
            caches = Caches(**levels)
        blocking = {str(k): {n: int(v[n]) for n in ("mc", "kc", "nc")}
                    for k, v in dict(data.get("blocking", {})).items()}
        return Host(name=str(data.get("name", path.stem)), arch=str(data.get("arch", base.arch)),
                    flags=frozenset(data["flags"]) if "flags" in data else base.flags,
                    caches=caches, cpu_model=str(data.get("cpu_model", base.cpu_model)),
                    mca_cpu=str(data.get("mca_cpu", base.mca_cpu)), blocking=blocking,
                    source=f"host file {path}",
                    arrangement=_checked_arrangement(str(data.get("arrangement",
                                                                  base.arrangement))))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise HostError(f"{path}: malformed host description ({exc!r})") from None


def profile_dir(directory: str | None = None) -> Path:
    if directory:
        return Path(directory)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "kernelfarer"


def cache_subdir(name: str) -> Path:
    """A directory of the profile (KERNELFARER_PROFILE_DIR, else the user's cache) that keeps
    what a run may reuse: compiled templates, schedules, support objects, rewrites..."""
    return profile_dir(os.environ.get(PROFILE_DIR_ENV) or None) / name


def keep_cached(path: str | os.PathLike, data: str | bytes) -> bool:
    """Write `data` to `path` in the profile, whole or not at all (a temporary file renamed over
    it: a reader never sees part of it); False when it cannot be written, which only costs the
    next run the work again."""
    path = Path(path)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            temporary.write_bytes(data)
        else:
            temporary.write_text(data, encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return False
    return True


def profile_path(host: Host, directory: str | None = None) -> Path:
    """Where `kernelfarer tune` stores the tuned profile of `host` (one file per machine)."""
    return profile_dir(directory or os.environ.get(PROFILE_DIR_ENV) or None) / \
        f"host-{host.key()}.json"


def load_profile(path: Path) -> Host | None:
    """A stored tuned profile, or None (missing, unreadable or malformed: the model's blocks are
    used then)."""
    if not path.is_file():
        return None
    try:
        return load_host_file(path)
    except HostError:
        return None


def reset() -> None:
    """Forget cached host descriptions (tests change KERNELFARER_HOST and profiles)."""
    _host_for.cache_clear()


# -- reading this machine ----------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def real_cpu_flags() -> frozenset[str]:
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


def cpu_flags() -> frozenset[str]:
    """The CPU features of the host planned for (KERNELFARER_HOST, else this machine)."""
    return current_host().flags


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "cpu"):
                return value.strip()
    except OSError:
        pass
    return ""


ARRANGEMENTS = ("goto", "a-in-l1")


def _checked_arrangement(name: str) -> str:
    if name not in ARRANGEMENTS:
        raise ValueError(f"arrangement '{name}' is none of {', '.join(ARRANGEMENTS)}")
    return name


def _arrangement(arch: str, flags: frozenset[str]) -> str:
    """AMD cores with AVX-512 (Zen 4, Zen 5; clzero is AMD's alone) run the float kernels best with
    one or two A micro-panels held in L1 and B streamed from their L3 (`kernelfarer tune` on both:
    1.04x-1.09x over the Goto arrangement, which an Intel Xeon runs best)."""
    return "a-in-l1" if arch == "x86_64" and {"avx512f", "clzero"} <= flags else "goto"


def _mca_cpu(arch: str, flags: frozenset[str]) -> str:
    if arch != "x86_64":
        return ""
    if "avx512f" in flags:
        return "znver4" if "clzero" in flags else "skylake-avx512"
    return "znver3" if "clzero" in flags else "haswell"


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
    """This machine's architecture as `uname -m` spells it on Linux (x86_64, aarch64, ppc64le)."""
    import platform
    return canonical_arch(platform.machine())


def host_arch() -> str:
    """The architecture of the host planned for."""
    return current_host().arch


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


def host_caches() -> Caches:
    """The caches of the host planned for."""
    return current_host().caches
