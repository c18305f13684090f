"""Names the generated code introduces, chosen so that they never capture or shadow the user's.

A call site declares locals (the sizes, row spacings of row tables) in a block that also evaluates
the user's own expressions (sizes, strides, bases): a local named like a user identifier would make
those expressions read the local.  The recognizer therefore writes such locals as placeholders,
``$m`` or ``$rs_A`` (``$`` never occurs in an identifier of a file pycparser parses), and each call
site binds them to names no identifier or macro of the translation unit uses (``kf_m``, else
``kf_m_2``, ...).

The support code's own file-scope names (``kf_index``, ``kf_min``, the drivers) cannot move that
way, so a file that already uses one of them is left as it is (`collisions`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelfarer.scan import identifiers as _identifiers

PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def placeholder(name: str) -> str:
    """The placeholder of a call-site local (`name` as it would read without a clash)."""
    return "$" + name


@dataclass(frozen=True)
class Names:
    """The identifiers a translation unit uses (its tokens after preprocessing, and its macros)."""

    used: frozenset[str]

    def fresh(self, base: str, taken: set[str] | None = None) -> str:
        """`base` unless the file (or `taken`) uses it; else base_2, base_3, ..."""
        taken = taken or set()
        name, n = base, 1
        while name in self.used or name in taken:
            n += 1
            name = f"{base}_{n}"
        return name

    def bind(self, text: str) -> str:
        """`text` with every placeholder replaced by its fresh name (the same placeholder, the same
        name, within one text)."""
        chosen: dict[str, str] = {}

        def replace(match: re.Match) -> str:
            key = match.group(1)
            if key not in chosen:
                chosen[key] = self.fresh("kf_" + key, set(chosen.values()))
            return chosen[key]

        return PLACEHOLDER.sub(replace, text)

    def collisions(self, support: str) -> list[str]:
        """File-scope names of the support code the file already uses."""
        ours = {name for name in _identifiers(support)
                if name.startswith(("kf_", "KF_", "kernelfarer_"))}
        return sorted(ours & self.used)


def identifiers(text: str) -> frozenset[str]:
    """The identifiers of a (preprocessed) C text (and the words of its directives)."""
    return _identifiers(text)
