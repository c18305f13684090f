"""A tokenizer for the user's original (unpreprocessed) C text.

It only needs to be right about what matters for finding statement boundaries: comments, string
and character literals, preprocessor directives (a whole logical line, continuations included),
identifiers, numbers and punctuators.  Every token keeps its offset, line and column.
"""

from __future__ import annotations

from dataclasses import dataclass

_PUNCT3 = ("<<=", ">>=", "...")
_PUNCT2 = ("->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "*=", "/=", "%=",
           "+=", "-=", "&=", "^=", "|=", "##")


@dataclass(frozen=True)
class Token:
    kind: str      # "ident", "number", "string", "char", "punct", "directive"
    text: str
    offset: int
    end: int
    line: int
    column: int


def _is_ident_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_" or ord(ch) > 127


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or ord(ch) > 127


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    n = len(text)
    pos = 0
    line = 1
    line_start = 0
    at_line_start = True

    while pos < n:
        ch = text[pos]
        if ch == "\n":
            line += 1
            pos += 1
            line_start = pos
            at_line_start = True
            continue
        if ch in " \t\r\f\v":
            pos += 1
            continue
        if ch == "\\" and pos + 1 < n and text[pos + 1] == "\n":
            pos += 2
            line += 1
            line_start = pos
            continue
        if text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            close = n if close < 0 else close + 2
            line_count = text.count("\n", pos, close)
            if line_count:
                line += line_count
                line_start = text.rfind("\n", pos, close) + 1
            pos = close
            continue
        if text.startswith("//", pos):
            while pos < n and text[pos] != "\n":
                if text[pos] == "\\" and pos + 1 < n and text[pos + 1] == "\n":
                    pos += 1
                    line += 1
                    line_start = pos + 1
                pos += 1
            continue
        column = pos - line_start + 1
        start = pos
        start_line = line
        if ch == "#" and at_line_start:
            # A directive runs to the end of its logical line (comments inside it are skipped).
            while pos < n and text[pos] != "\n":
                if text[pos] == "\\" and pos + 1 < n and text[pos + 1] == "\n":
                    pos += 2
                    line += 1
                    line_start = pos
                    continue
                if text.startswith("/*", pos):
                    close = text.find("*/", pos + 2)
                    close = n if close < 0 else close + 2
                    line_count = text.count("\n", pos, close)
                    if line_count:
                        line += line_count
                        line_start = text.rfind("\n", pos, close) + 1
                    pos = close
                    continue
                if text.startswith("//", pos):
                    while pos < n and text[pos] != "\n":
                        pos += 1
                    break
                pos += 1
            tokens.append(Token("directive", text[start:pos], start, pos, start_line, column))
            continue
        at_line_start = False
        if ch in "\"'":
            pos += 1
            while pos < n and text[pos] != ch and text[pos] != "\n":
                pos += 2 if text[pos] == "\\" else 1
            pos = min(pos + 1, n)
            kind = "string" if ch == '"' else "char"
            tokens.append(Token(kind, text[start:pos], start, pos, start_line, column))
            continue
        if _is_ident_start(ch):
            while pos < n and _is_ident_char(text[pos]):
                pos += 1
            # String/char literal prefixes (L"", u8"", ...) belong to the literal.
            if pos < n and text[pos] in "\"'" and text[start:pos] in ("L", "u", "U", "u8"):
                quote = text[pos]
                pos += 1
                while pos < n and text[pos] != quote and text[pos] != "\n":
                    pos += 2 if text[pos] == "\\" else 1
                pos = min(pos + 1, n)
                tokens.append(Token("string", text[start:pos], start, pos, start_line, column))
                continue
            tokens.append(Token("ident", text[start:pos], start, pos, start_line, column))
            continue
        if ch.isdigit() or (ch == "." and pos + 1 < n and text[pos + 1].isdigit()):
            pos += 1
            while pos < n and (_is_ident_char(text[pos]) or text[pos] == "."
                               or (text[pos] in "+-" and text[pos - 1] in "eEpP")):
                pos += 1
            tokens.append(Token("number", text[start:pos], start, pos, start_line, column))
            continue
        for group in (_PUNCT3, _PUNCT2):
            hit = next((p for p in group if text.startswith(p, pos)), None)
            if hit:
                break
        else:
            hit = ch
        pos += len(hit)
        tokens.append(Token("punct", hit, start, pos, start_line, column))
    return tokens
