"""The wrapper's first look at a file: can it hold a loop nest kernelfarer would replace?

A replaced nest is at least three loops deep (or two around the call of a function of the file
with a loop of products: a dot-product helper), and its loop keywords are in the file's own text
(a nest that comes from a macro expansion is never replaced: its text cannot be edited).  So a
token scan of the raw file, before any preprocessing or parsing, settles most files in a few
milliseconds: comments, string and character literals and preprocessor lines are skipped, and
the scan follows braces to find how deeply `for`, `while` and `do` loops nest.

The scan may say yes wrongly (the full rewrite then finds nothing), never no wrongly: a loop
whose body is a braced block ends at its brace, one whose body is an expression statement at its
semicolon, one whose body is a loop with it; any other body (an `if`, a statement expression) is
taken to run to the end of the enclosing block, and anything the scan cannot follow (unbalanced
braces or parentheses) counts as a candidate.
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
_WORD = re.compile(rb"[A-Za-z_]\w*")
_LOOP_WORD = re.compile(rb"\b(?:for|while|do)\b")
_STATEMENT = re.compile(rb"[;()\[\]{}]")
_STATEMENT_WORDS = {b"if", b"else", b"switch", b"case", b"default", b"return", b"break",
                    b"continue", b"goto", b"asm", b"__asm__", b"__asm"}


def _header_end(code: bytes, at: int) -> int:
    """The position after the parenthesized header starting at `at` (at a '('), or -1."""
    depth = 0
    for m in _PARENS.finditer(code, at):
        depth += 1 if m.group() == b"(" else -1
        if depth == 0:
            return m.end()
    return -1


def _blank(text: bytes) -> bytes:
    """`text` with comments, literals and directives turned into spaces (offsets kept)."""
    return _NOT_CODE.sub(lambda m: b" " * len(m.group()), text)


def _statement_end(code: bytes, at: int) -> int:
    """The position after the `;` that ends the expression statement starting at `at`, or -1
    when a brace comes first (a statement expression or compound literal may hold loops) or a
    loop keyword is in it."""
    depth = 0
    for m in _STATEMENT.finditer(code, at):
        tok = m.group()
        if tok in b"([":
            depth += 1
        elif tok in b")]":
            depth -= 1
        elif tok == b";":
            if depth <= 0:
                end = m.end()
                # a loop keyword inside (after a label, say) is a statement of its own
                return -1 if _LOOP_WORD.search(code, at, end) else end
        else:
            return -1
    return -1


_CHAIN = -1      # a loop whose body is a single loop: it ends when that one does


def loop_nests(text: bytes) -> list[tuple[int, int, int]] | None:
    """The outermost loops of `text` as (start, end, depth): where each begins and ends in the
    text with comments, literals and directives blanked (same offsets), and how many loops nest
    at its deepest point (over-estimates, see above); None when the text cannot be followed."""
    code = _blank(text)
    depth = 0                 # braces open
    # for each open loop: the brace depth below which it has ended, or _CHAIN
    ends: list[int] = []
    nests: list[list[int]] = []
    resume = 0                # tokens before this position are inside a loop header or statement

    def close(at: int) -> None:
        while ends and ends[-1] == _CHAIN:        # loops whose only statement just ended
            ends.pop()
        if not ends:
            nests[-1][1] = at

    for m in _TOKENS.finditer(code):
        if m.start() < resume:
            continue
        tok = m.group()
        if tok == b"{":
            depth += 1
        elif tok == b"}":
            depth -= 1
            if depth < 0:
                return None
            if ends and ends[-1] > depth:
                while ends and ends[-1] > depth:
                    ends.pop()
                close(m.end())
        else:
            after = _SPACE.match(code, m.end()).end()
            if tok != b"do":
                if code[after:after + 1] != b"(":
                    continue              # not a loop header (e.g. a macro argument)
                after = _header_end(code, after)
                if after < 0:
                    return None
                resume = after
                after = _SPACE.match(code, after).end()
                if tok == b"while" and code[after:after + 1] == b";":
                    continue              # the end of a do-while (or an empty loop)
            if not ends:
                nests.append([m.start(), len(code), 0])
            nests[-1][2] = max(nests[-1][2], len(ends) + 1)
            word = _WORD.match(code, after)
            word = word.group() if word else b""
            if code[after:after + 1] == b"{":
                ends.append(depth + 1)
            elif word in (b"for", b"while", b"do"):
                ends.append(_CHAIN)
            elif word in _STATEMENT_WORDS or code[after:after + 1] in (b"", b"}"):
                ends.append(depth)        # if, switch, ...: taken to run to the block's end
            else:                         # an expression statement (or an empty one)
                end = _statement_end(code, after)
                if end < 0:
                    ends.append(depth)
                else:
                    resume = end
                    ends.append(_CHAIN)   # ended with its statement
                    close(end)
    if depth != 0:
        return None
    return [(start, end, deepest) for start, end, deepest in nests]


def deepest_loop_nest(text: bytes) -> int:
    """How many loops nest at the deepest point of `text` (an over-estimate, see above); a large
    number when the text cannot be followed.  A nest that calls a function of the file with a
    loop of products in it (a dot-product helper, which the canonical form inlines) counts one
    deeper (looked for only where that could reach MIN_DEPTH: a file of shallow loops is not
    searched for helpers)."""
    code = _blank(text)
    nests = loop_nests(code)
    if nests is None:
        return _CANNOT_FOLLOW
    best = max((deepest for _, _, deepest in nests), default=0)
    around = [(start, end, deepest) for start, end, deepest in nests
              if deepest + 1 > best and deepest + 1 >= MIN_DEPTH]
    if not around:
        return best
    helpers = _loop_helpers(code)
    return max([best] + [deepest + 1 for start, end, deepest in around
                         if _calls(code[start:end], helpers)])


def _function_bodies(code: bytes) -> list[tuple[bytes, int, int]] | None:
    """(name, start, end) of each function body of blanked `code`: a brace block at file scope
    right after a parameter list; name is the word before that list ('' when there is none).
    None when the braces cannot be followed."""
    out = []
    depth, start, name = 0, -1, b""
    for m in _BRACES.finditer(code):
        if m.group() == b"{":
            if depth == 0:
                i = m.start() - 1
                while i >= 0 and code[i] in b" \t\r\n\f\v":
                    i -= 1
                start, name = -1, b""
                if code[i:i + 1] == b")":
                    start = m.end()
                    name = _called_name(code, i)
            depth += 1
            continue
        depth -= 1
        if depth < 0:
            return None
        if depth == 0 and start >= 0:
            out.append((name, start, m.start()))
            start = -1
    return out


def _called_name(code: bytes, close: int) -> bytes:
    """The word before the parenthesized list that ends at `close` (its ')')."""
    level = 0
    for i in range(close, -1, -1):
        level += {b")": 1, b"(": -1}.get(code[i:i + 1], 0)
        if level == 0:
            word = re.search(rb"([A-Za-z_]\w*)\s*$", code[max(0, i - 200):i])
            return word.group(1) if word else b""
    return b""


def _loop_helpers(code: bytes) -> frozenset[bytes]:
    """Names of the file's functions whose body holds a loop with a `*` in it."""
    out = set()
    for name, start, end in _function_bodies(code) or []:
        body = code[start:end]
        nests = loop_nests(body) if name and b"*" in body else []
        if nests is None or any(b"*" in body[a:b] for a, b, _ in nests):
            out.add(name)
    return frozenset(out)


def _calls(code: bytes, helpers: frozenset[bytes]) -> bool:
    return any(re.search(rb"\b" + re.escape(name) + rb"\s*\(", code) for name in helpers)


def may_hold_product_nest(preprocessed: str) -> bool:
    """False only when no loop nest of a preprocessed file (headers included, macros expanded)
    is three deep with a `*` in it, or calling a function of the file with one in its body or a
    fused multiply-add: a GEMM multiplies, and the recognizer sees a product as the `*`
    operator, through the calls it reads through.  The full parse of such a file is skipped."""
    text = preprocessed.encode("utf-8", "surrogateescape")
    if b"*" not in text:
        return False
    return _has_product_nest(_blank(text))


def may_hold_nest(path: str) -> bool:
    """False only when the file surely holds no replaceable nest (or cannot be read)."""
    try:
        raw = open(path, "rb").read()
    except OSError:
        return False
    if raw.count(b"for") + raw.count(b"while") + raw.count(b"do") < MIN_DEPTH:
        return False       # (a dot-product helper's loop and the two around its call: three)
    return deepest_loop_nest(raw) >= MIN_DEPTH


_BRACES = re.compile(rb"[{}]")
_BLANK_LINE_PART = re.compile(rb"[^\n]")
KEEP_BODY_BYTES = 512      # short bodies stay: helpers an epilogue or a tile bound may call


def hollow_bodies(preprocessed: str) -> str:
    """A preprocessed file with the bodies of the functions that cannot hold a GEMM (no loop nest
    three deep with a `*`) blanked out, lines kept: what the parser then reads is mostly the
    declarations, the functions that matter and short helpers (kept whole: the analysis reads
    them to tell which calls are pure).  An emptied body reads as a function doing nothing but
    returning nothing either, which no analysis takes for a pure helper."""
    text = preprocessed.encode("utf-8", "surrogateescape")
    code = _blank(text)
    bodies = _function_bodies(code)
    if bodies is None:
        return preprocessed                                      # cannot follow: leave it
    helpers = _loop_helpers(code)
    starred = _starred_functions(code)
    # (those that two loops call are kept whole: a GEMM may call them per element)
    called = frozenset(name for name in helpers if any(
        deepest >= MIN_DEPTH - 1 and _calls(code[start:end], frozenset([name]))
        for start, end, deepest in loop_nests(code) or []))
    out: list[bytes] = []
    pos = 0
    for name, start, end in bodies:
        body = code[start:end]
        if len(body) > KEEP_BODY_BYTES and name not in called and \
                not _has_product_nest(body, helpers, starred):
            out += [text[pos:start], _BLANK_LINE_PART.sub(b" ", text[start:end])]
            pos = end
    out.append(text[pos:])
    return b"".join(out).decode("utf-8", "surrogateescape")


def _has_product_nest(code: bytes, helpers: frozenset[bytes] | None = None,
                      starred: frozenset[bytes] | None = None) -> bool:
    """A nest three deep with a `*` in it or calling one of `starred` (the file's functions with
    a `*` in their body, and the fused multiply-adds: an element accessor's index arithmetic,
    `fmaf(at(A, lda, i, k), at(B, ldb, k, j), s)`, hides every `*` of the nest), or two deep
    calling one of `helpers` (the file's functions with a loop of products); both of `code`
    when not given."""
    nests = loop_nests(code)
    if nests is None:
        return True
    if any(deepest >= MIN_DEPTH and b"*" in code[start:end] for start, end, deepest in nests):
        return True
    starred = _starred_functions(code) if starred is None else starred
    if any(deepest >= MIN_DEPTH and not starred.isdisjoint(_CALLED.findall(code[start:end]))
           for start, end, deepest in nests):
        return True
    helpers = _loop_helpers(code) if helpers is None else helpers
    return any(deepest >= MIN_DEPTH - 1 and _calls(code[start:end], helpers)
               for start, end, deepest in nests)


_CALLED = re.compile(rb"\b([A-Za-z_]\w*)\s*\(")
_FUSED = frozenset([b"fma", b"fmaf", b"fmal", b"__builtin_fma", b"__builtin_fmaf"])


def _starred_functions(code: bytes) -> frozenset[bytes]:
    """The fused multiply-adds and the names of the file's functions with a `*` in their body."""
    return _FUSED | frozenset(name for name, start, end in _function_bodies(code) or []
                              if name and b"*" in code[start:end])
