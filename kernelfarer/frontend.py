"""Frontend: preprocess with clang, parse with pycparser, and map AST nodes back to the original text.

pycparser parses preprocessed C; clang's line markers keep every node's coordinate in terms of the
user's file.  Real system headers (glibc, clang's own) use GNU extensions pycparser does not know,
so they are neutralized with macro definitions given to the preprocessor only: the text that is
rewritten is always the user's original file, untouched.

pycparser gives start positions only.  The end of a statement is found from the tokens of the
original text (see ``scan``), guided by the AST's shape: a nest ends at the brace or semicolon that
closes its innermost body.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pycparser import c_ast

from kernelfarer.diagnostics import KernelfarerError, SourceLocation
from kernelfarer import parsefix
from kernelfarer.scan import Token, tokenize

from kernelfarer.cpp import defined_macros, preprocess  # noqa: F401 (frontend's API)


def parse(text: str, path: str) -> c_ast.FileAST:
    """The AST of a preprocessed file (what cannot be parsed is an error: see `load`, which
    leaves such functions out instead)."""
    return parsefix.parse(text, path)[0]



def marker_name(name: str) -> str:
    """A file name as a line marker spells it, unescaped: the preprocessor writes the bytes of a
    path that are not printable ASCII as octal escapes ("jos\\303\\251/k.c")."""
    if "\\" not in name:
        return name
    raw = name.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 1 < len(raw):
            digits = re.match(rb"[0-7]{1,3}", raw[i + 1:i + 4])
            if digits:
                out.append(int(digits[0], 8) & 0xFF)
                i += 1 + len(digits[0])
                continue
            out.append(raw[i + 1])
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Span:
    start: int     # byte offset of the first character
    end: int       # offset one past the last character


class SourceText:
    """The user's original file: its text, its tokens, and positions of AST nodes in it."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text

    # The tokens are read when a nest is to be located in the text: most files of a build (and
    # most nests) never are, and tokenizing a large file takes seconds (sqlite3.c: 2 s).
    @functools.cached_property
    def tokens(self) -> list[Token]:
        return tokenize(self.text)

    @functools.cached_property
    def _by_line(self) -> dict[int, list[int]]:
        by_line: dict[int, list[int]] = {}
        for index, tok in enumerate(self.tokens):
            by_line.setdefault(tok.line, []).append(index)
        return by_line

    @classmethod
    def read(cls, path: str) -> "SourceText":
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            raise KernelfarerError(f"no such file: {path}") from None
        except OSError as exc:
            raise KernelfarerError(f"cannot read {path}: {exc.strerror}") from None
        if b"\0" in raw:
            raise KernelfarerError(f"{path} is not C source (it holds binary data)")
        # Bytes that are not UTF-8 survive as surrogate escapes and are written back unchanged.
        text = raw.decode("utf-8", errors="surrogateescape")
        return cls(path, text)

    def is_here(self, coord) -> bool:
        return coord is not None and \
            os.path.normpath(marker_name(str(coord.file))) == os.path.normpath(self.path)

    def location(self, coord) -> SourceLocation:
        return SourceLocation(self.path, coord.line, coord.column or 1)

    # -- finding statements in the original tokens ------------------------------------------------

    def token_index(self, keyword: str, line: int, rank: int) -> int | None:
        """The rank-th token spelled `keyword` on `line` (0-based rank), or None."""
        hits = [i for i in self._by_line.get(line, []) if self.tokens[i].text == keyword]
        return hits[rank] if 0 <= rank < len(hits) else None

    def statement_span(self, node: c_ast.Node, first_token: int) -> Span | None:
        """Span of statement `node` whose first token is tokens[first_token]; None if the tokens
        do not have the shape the AST says (for instance when the statement comes from a macro)."""
        end = self._statement_end(node, first_token)
        if end is None:
            return None
        return Span(self.tokens[first_token].offset, self.tokens[end].end)

    def _statement_end(self, node: c_ast.Node, i: int) -> int | None:
        toks = self.tokens
        if i >= len(toks):
            return None
        if isinstance(node, c_ast.Compound):
            items = node.block_items or []
            if toks[i].kind == "directive" and len(items) == 2 and \
                    isinstance(items[0], c_ast.Pragma):
                # `for (...) #pragma X  for (...)`: the parser's block of the pragma and the
                # statement it applies to, without braces in the text
                return self._statement_end(items[1], i + 1)
            return self._matching(i, "{", "}")
        if isinstance(node, (c_ast.For, c_ast.While)):
            keyword = "for" if isinstance(node, c_ast.For) else "while"
            if toks[i].text != keyword:
                return None
            close = self._matching(i + 1, "(", ")")
            if close is None or node.stmt is None:
                return None
            return self._statement_end(node.stmt, close + 1)
        if isinstance(node, c_ast.DoWhile):        # do <statement> while (<condition>);
            if toks[i].text != "do" or node.stmt is None:
                return None
            end = self._statement_end(node.stmt, i + 1)
            if end is None or end + 1 >= len(toks) or toks[end + 1].text != "while":
                return None
            close = self._matching(end + 2, "(", ")")
            if close is None or close + 1 >= len(toks) or toks[close + 1].text != ";":
                return None
            return close + 1
        if isinstance(node, c_ast.If):
            if toks[i].text != "if":
                return None
            close = self._matching(i + 1, "(", ")")
            if close is None:
                return None
            end = self._statement_end(node.iftrue, close + 1)
            if end is None or node.iffalse is None:
                return end
            if end + 1 >= len(toks) or toks[end + 1].text != "else":
                return None
            return self._statement_end(node.iffalse, end + 2)
        return self._simple_end(i)

    def _matching(self, i: int, open_: str, close: str) -> int | None:
        toks = self.tokens
        if i >= len(toks) or toks[i].text != open_:
            return None
        depth = 0
        for j in range(i, len(toks)):
            if toks[j].text == open_:
                depth += 1
            elif toks[j].text == close:
                depth -= 1
                if depth == 0:
                    return j
        return None

    def _simple_end(self, i: int) -> int | None:
        """The ';' that ends an expression statement or declaration starting at token i."""
        depth = 0
        for j in range(i, len(self.tokens)):
            text = self.tokens[j].text
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                depth -= 1
                if depth < 0:
                    return None
            elif text == ";" and depth == 0:
                return j
        return None

    def definition_start(self, name_line: int, name: str) -> int | None:
        """Offset of the start of the line on which the file-scope definition of `name` begins:
        the line after the previous top-level `;`, `}` or directive."""
        hits = [i for i in self._by_line.get(name_line, []) if self.tokens[i].text == name]
        if not hits:
            return None
        depth = 0
        j = hits[0] - 1
        while j >= 0:
            tok = self.tokens[j]
            if tok.kind == "directive":
                break
            if tok.text in (")", "]"):
                depth += 1
            elif tok.text in ("(", "["):
                depth -= 1
            elif depth == 0 and tok.text in (";", "}"):
                break
            j -= 1
        if j < 0:
            first = self.tokens[0]
            return self.text.rfind("\n", 0, first.offset) + 1
        boundary = self.tokens[j]
        newline = self.text.find("\n", boundary.end - 1 if boundary.kind == "directive" else boundary.end)
        start = len(self.text) if newline < 0 else newline + 1
        first = self.tokens[j + 1].offset          # the definition's first token
        # `static int calls; void mm(...)` on one line: insert right after the `;`, not inside
        # the function.
        return boundary.end if start > first else start

    def line_start(self, offset: int) -> int:
        return self.text.rfind("\n", 0, offset) + 1

    def indentation(self, offset: int) -> str:
        start = self.line_start(offset)
        k = start
        while k < len(self.text) and self.text[k] in " \t":
            k += 1
        return self.text[start:k]


@dataclass
class TranslationUnit:
    source: SourceText
    ast: c_ast.FileAST
    identifiers: frozenset[str] = frozenset()   # every identifier of the preprocessed file
    skipped: tuple = ()      # parsefix.Skipped: functions the parser could not read, left out
    char_unsigned: bool = False    # plain char is unsigned in the compile (__CHAR_UNSIGNED__)
    weak: frozenset[str] = frozenset()  # functions declared weak: another definition may win


def load(path: str, cppflags: tuple[str, ...] = (), *, preprocessed: str | None = None,
         hollow: bool = False) -> TranslationUnit:
    """The file parsed (`preprocessed`: its text after `preprocess`, when already at hand).
    `hollow`: the bodies of functions that cannot hold a GEMM are not parsed
    (prefilter.hollow_bodies); their nests are then not in the AST at all."""
    from kernelfarer.hygiene import identifiers
    from kernelfarer.prefilter import hollow_bodies
    source = SourceText.read(path)
    text = preprocessed if preprocessed is not None else preprocess(path, cppflags)
    ast, skipped, weak = parsefix.parse(hollow_bodies(text) if hollow else text, path)
    return TranslationUnit(source=source, ast=ast, identifiers=identifiers(text),
                           skipped=tuple(skipped), weak=weak)
