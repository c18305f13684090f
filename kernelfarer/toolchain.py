"""Finding and running the C compiler."""

from __future__ import annotations

import functools
import os
import shutil

from kernelfarer.diagnostics import KernelfarerError

_CANDIDATES = ("clang-19", "clang")


@functools.lru_cache(maxsize=None)
def clang_path() -> str:
    """The clang used for preprocessing: $KERNELFARER_CLANG, else clang-19, else clang."""
    wanted = os.environ.get("KERNELFARER_CLANG")
    for name in ((wanted,) if wanted else _CANDIDATES):
        found = shutil.which(name)
        if found:
            return found
    raise KernelfarerError(
        f"cannot find {wanted or ' or '.join(_CANDIDATES)} (install clang-19, or set KERNELFARER_CLANG)")
