"""The wrapper's first look at a file: can it hold a loop nest kernelfarer would replace?

A replaced nest is at least three loops deep, and its loop keywords are in the file's own text
(a nest that comes from a macro expansion is never replaced: its text cannot be edited).  So a
token scan of the raw file, before any preprocessing or parsing, settles most files in a few
milliseconds: comments, string and character literals and preprocessor lines are skipped, and
the scan follows braces to find how deeply `for`, `while` and `do` loops nest.

The scan may say yes wrongly (the full rewrite then finds nothing), never no wrongly: a loop
whose body is not a braced block is taken to run to the end of the enclosing block, and anything
the scan cannot follow (unbalanced braces or parentheses) counts as a candidate.
"""

from __future__ import annotations

import re

MIN_DEPTH = 3

_NOT_CODE = re.compile(rb"""
      /\*.*?(?:\*/|\Z)                         # block comment
    | //(?:[^\n\\]|\\.)*                       # line comment (with continuations)
    | "(?:[^"\\\n]|\\.)*"                      # string literal
    | '(?:[^'\\\n]|\\.)*'                      # character literal
    | ^[ \t]*\#(?:[^\n\\/]|\\.|/(?![*/]))*     # preprocessor line (up to a comment)
""", re.X | re.S | re.M)
_TOKENS = re.compile(rb"\b(?:for|while|do)\b|[{}]")
_PARENS = re.compile(rb"[()]")
_SPACE = re.compile(rb"\s*")
_CANNOT_FOLLOW = 1 << 20


def _header_end(code: bytes, at: int) -> int:
    """The position after the parenthesized header starting at `at` (at a '('), or -1."""
    depth = 0
    for m in _PARENS.finditer(code, at):
        depth += 1 if m.group() == b"(" else -1
        if depth == 0:
            return m.end()
    return -1


def deepest_loop_nest(text: bytes) -> int:
    """How many loops nest at the deepest point of `text` (an over-estimate, see above); a large
    number when the text cannot be followed."""
    code = _NOT_CODE.sub(b" ", text)
    depth = 0                 # braces open
    ends: list[int] = []      # for each open loop: the brace depth below which it has ended
    deepest = 0
    resume = 0                # tokens before this position are inside a loop header
    for m in _TOKENS.finditer(code):
        if m.start() < resume:
            continue
        tok = m.group()
        if tok == b"{":
            depth += 1
        elif tok == b"}":
            depth -= 1
            if depth < 0:
                return _CANNOT_FOLLOW
            while ends and ends[-1] > depth:
                ends.pop()
        else:
            after = _SPACE.match(code, m.end()).end()
            if tok != b"do":
                if code[after:after + 1] != b"(":
                    continue              # not a loop header (e.g. a macro argument)
                after = _header_end(code, after)
                if after < 0:
                    return _CANNOT_FOLLOW
                resume = after
                after = _SPACE.match(code, after).end()
                if tok == b"while" and code[after:after + 1] == b";":
                    continue              # the end of a do-while (or an empty loop)
            ends.append(depth + 1 if code[after:after + 1] == b"{" else depth)
            deepest = max(deepest, len(ends))
    return deepest if depth == 0 else _CANNOT_FOLLOW


def may_hold_nest(path: str) -> bool:
    """False only when the file surely holds no replaceable nest (or cannot be read)."""
    try:
        raw = open(path, "rb").read()
    except OSError:
        return False
    if raw.count(b"for") + raw.count(b"while") + raw.count(b"do") < MIN_DEPTH:
        return False
    return deepest_loop_nest(raw) >= MIN_DEPTH
