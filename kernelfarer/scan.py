"""A tokenizer for the user's original (unpreprocessed) C text.

It only needs to be right about what matters for finding statement boundaries: comments, string
and character literals, preprocessor directives (a whole logical line, continuations included),
identifiers, numbers and punctuators.  Every token keeps its offset, line and column.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_PUNCT3 = ("<<=", ">>=", "...")
_PUNCT2 = ("->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "*=", "/=", "%=",
           "+=", "-=", "&=", "^=", "|=", "##")


class Token(NamedTuple):
    kind: str      # "ident", "number", "string", "char", "punct", "directive"
    text: str
    offset: int
    end: int
    line: int
    column: int


# One step of the scan: what starts at a position (whitespace first skipped).  Identifier
# characters are ASCII letters, digits and '_' and every non-ASCII character.
_IDENT = r"[A-Za-z_\x80-\U0010ffff][0-9A-Za-z_\x80-\U0010ffff]*"
_STEP = re.compile(r"""[ \t\r\f\v]*(?:
      (?P<newline>\n)
    | \\\n                                                   # a line continuation
    | /\*[\s\S]*?(?:\*/|\Z)                                  # a block comment
    | //(?:[^\\\n]|\\\n?)*                                   # a line comment (a backslash continues it)
    | (?P<hash>\#)
    | (?P<lit>(?:L|u8|u|U)?(?P<quote>["'])(?:[^"'\\\n]|\\[\s\S]?|(?!(?P=quote))["'])*["'\n]?)
    | (?P<ident>""" + _IDENT + r""")
    | (?P<number>(?:[0-9]|\.[0-9])(?:[0-9A-Za-z_\x80-\U0010ffff.]|(?<=[eEpP])[+-])*)
    | (?P<punct>""" + "|".join(re.escape(p) for p in _PUNCT3 + _PUNCT2) + r"""|[^ \t\r\f\v])
)""", re.X)
# A directive: the rest of its logical line, block comments (even over several lines) and a
# trailing line comment included.
_DIRECTIVE = re.compile(r"\#(?:[^\n\\/]|\\\n|\\|/\*[\s\S]*?(?:\*/|\Z)|//[^\n]*|/)*")


def tokenize(text: str) -> list[Token]:
    """The tokens of `text`, with 1-based lines and columns (counted in characters)."""
    tokens: list[Token] = []
    append = tokens.append
    step = _STEP.match
    n = len(text)
    pos = 0
    line, line_start, counted = 1, 0, 0      # the newlines before `counted` are in `line`
    at_line_start = True                     # only whitespace and comments since the last newline
    while pos < n:
        m = step(text, pos)
        if m is None:                         # trailing whitespace
            break
        kind = m.lastgroup
        if kind is None or kind == "newline":  # a comment, a continuation, a newline
            at_line_start = at_line_start or kind == "newline"
            pos = m.end()
            continue
        start = m.start(kind)
        if kind == "hash":
            if at_line_start:
                end = _DIRECTIVE.match(text, start).end()
                kind = "directive"
            else:                             # "#" or "##" in a line: a punctuator
                end = start + (2 if text.startswith("##", start) else 1)
                kind = "punct"
        else:
            end = m.end()
            if kind in ("lit", "quote"):      # prefixed literals (L'x', u8"...") count as strings
                prefixed = m.start("quote") != start
                kind = "char" if text[start] == "'" and not prefixed else "string"
        at_line_start = at_line_start and kind == "directive"
        if start > counted:
            newlines = text.count("\n", counted, start)
            if newlines:
                line += newlines
                line_start = text.rfind("\n", counted, start) + 1
            counted = start
        append(Token(kind, text[start:end], start, end, line, start - line_start + 1))
        pos = end
    return tokens


_NOT_CODE = re.compile(r"""
      /\*[\s\S]*?(?:\*/|\Z)
    | //(?:[^\\\n]|\\\n?)*
    | (?:\b(?:L|u8|u|U))?"(?:[^"\\\n]|\\[\s\S]?)*"?
    | (?:\b(?:L|u8|u|U))?'(?:[^'\\\n]|\\[\s\S]?)*'?
""", re.X)
_WORD = re.compile(r"\b[^\W\d]\w*")


def identifiers(text: str) -> frozenset[str]:
    """The identifiers of `text`, comments and literals left out: those of its tokens, plus the
    words of its directives and a few number suffixes (`1.f`) — a superset, found about ten
    times faster than by `tokenize`, for when only the names matter (which names are taken)."""
    return frozenset(_WORD.findall(_NOT_CODE.sub(" ", text)))


# Identifiers with characters beyond ASCII (C99 allows them; pycparser's lexer does not): spelled
# with an escape for the analysis, and spelled back in what is generated (`plain_names`).
_ESCAPED = re.compile(r"_kfU([0-9a-f]{6})_")


def ascii_name(name: str) -> str:
    return "".join(c if c.isascii() else f"_kfU{ord(c):06x}_" for c in name)


# The parser's names of the half-precision types (cpp.py), as C spells them.
_HALF_TYPES = re.compile(r"\b__kf_(b?)float16\b")


def plain_names(text: str) -> str:
    """`text` (generated from the analysis) with the identifiers `ascii_name` escaped, and the
    half-precision types, spelled as the user wrote them."""
    if "__kf_" in text:
        text = _HALF_TYPES.sub(lambda m: "__bf16" if m[1] else "_Float16", text)
    return _ESCAPED.sub(lambda m: chr(int(m[1], 16)), text) if "_kfU" in text else text
