"""What the parser is given: the preprocessed file, with the GNU C that pycparser does not know
spelled in a way it does, and the functions it still cannot parse left out one by one.

Only kernelfarer's own analysis reads this text; the file that is rewritten and compiled is the
user's, untouched.  Every spelling keeps the program's meaning visible to the recognizer where it
matters: an inline `asm` statement becomes a call of an unknown function (so a nest holding one
is never taken for pure arithmetic), a label whose address is taken counts as a goto target.

- comments (C89 files see `//` in system headers) are dropped, lines kept;
- imaginary constants (`1.0iF`, what <complex.h>'s `I` expands to) become `__kf_imaginary(1.0)`;
- `asm` / `__asm__` with qualifiers and operands: a statement becomes `__kf_asm()`, a
  declaration's assembler name is dropped;
- computed goto: `&&label` becomes `__kf_label_address(label)`, `goto *p;` becomes
  `__kf_computed_goto(p);`;
- GNU case ranges `case a ... b:` become `case a:` (a switch is never rewritten), range
  designators `[a ... b] = x` become `[a] = x`;
- identifiers beyond ASCII are escaped (`ascii_name`; `plain_names` spells them back);
- C23 attributes `[[...]]` are dropped; `x ?: y` becomes `x ? 0 : y` (a conditional expression
  is never part of a rewritten nest).

Of the attributes dropped, `weak` is read first (`parse` returns the names declared weak): a weak
function's body is not what its calls run where another file defines it, so it is never inlined
nor read as pure.

`parse` parses that text; when a function still does not parse, its body is emptied (its
declaration stays for the rest of the file) and the parse is tried again, so every other nest of
the file is still considered.  What was left out is reported with its line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pycparser import c_ast, c_parser

from kernelfarer.diagnostics import KernelfarerError, SourceLocation
from kernelfarer.scan import Token, ascii_name, tokenize

_ASM = {"asm", "__asm__", "__asm"}
_ASM_QUALIFIERS = {"volatile", "__volatile__", "__volatile", "inline", "__inline__", "__inline",
                   "goto"}
_CONTROL = {"if", "while", "for", "switch"}
_UNARY_BEFORE = {"(", ",", "=", "{", "return", "?", ":", "[", "&&", "||", "!", "+", "-", "*"}
MAX_SKIPPED = 200


@dataclass(frozen=True)
class Skipped:
    """A function (or declaration) the parser could not read, left out of the analysis."""

    location: SourceLocation
    name: str                     # the function's name, or "" for a declaration
    reason: str


def for_parser(text: str, weak: set[str] | None = None) -> str:
    """The text pycparser is given (see above); the names declared weak go into `weak`."""
    tokens = tokenize(text)
    out: list[str] = []
    pos = 0
    closers = _control_closers(tokens)
    retyped = _retyped(tokens)          # base types of declarations a vector/mode attribute changes
    goto_ends: set[int] = set()         # the ';' of computed gotos: `)` goes before them
    depths: list[int] | None = None     # braces open before each token (found at the first asm)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        out.append(_blank(text[pos:tok.offset]))
        pos = tok.end
        before = i - 1                            # the code token before (line markers are not)
        while before >= 0 and tokens[before].kind == "directive":
            before -= 1
        prev = tokens[before] if before >= 0 else None
        if weak is not None and tok.kind == "directive" and \
                (pragma := _PRAGMA_WEAK.match(tok.text.lstrip())):
            weak.add(pragma.group(1))
        if i in retyped:
            out.append(retyped[i])
        elif tok.text == "__kf_attribute" and i + 1 < len(tokens) and tokens[i + 1].text == "(" \
                and (close := _matching(tokens, i + 1)) is not None:
            if weak is not None:
                weak.update(_weak_declarators(tokens, i, close))
            pos = tokens[close].end                 # __attribute__((...)): dropped
            i = close
        elif tok.kind == "number" and _imaginary(tok.text):
            out.append(f"__kf_imaginary({_digits(tok.text)})")
        elif tok.kind == "ident" and tok.text in _ASM:
            j = i + 1
            while j < len(tokens) and tokens[j].text in _ASM_QUALIFIERS:
                j += 1
            close = _matching(tokens, j) if j < len(tokens) and tokens[j].text == "(" else None
            if close is None:
                out.append(tok.text)
            else:
                if depths is None:
                    depths = _brace_depths(tokens)
                statement = depths[i] > 0 and (      # at file scope asm is a declaration
                    prev is None or prev.text in (";", "{", "}", ":", "else") or (
                        prev.text == ")" and before in closers))
                out.append("__kf_asm()" if statement else "")
                pos = tokens[close].end
                i = close
        elif tok.text == "&&" and tok.kind == "punct" and i + 1 < len(tokens) and \
                tokens[i + 1].kind == "ident" and (prev is None or prev.text in _UNARY_BEFORE):
            out.append(f"__kf_label_address({tokens[i + 1].text})")
            pos = tokens[i + 1].end
            i += 1
        elif tok.text == "goto" and i + 1 < len(tokens) and tokens[i + 1].text == "*":
            end = next((k for k in range(i + 2, len(tokens)) if tokens[k].text == ";"), None)
            if end is None:
                out.append(tok.text)
            else:       # its target expression is read on (it may hold label addresses)
                out.append("__kf_computed_goto(")
                pos = tokens[i + 1].end
                goto_ends.add(end)
                i += 1
        elif i in goto_ends:
            out.append(");")
        elif tok.text == "[" and i + 1 < len(tokens) and tokens[i + 1].text == "[" \
                and (close := _attribute_end(tokens, i)) is not None:
            if weak is not None:
                weak.update(_weak_declarators(tokens, i, close))
            pos = tokens[close].end                 # a C23 attribute [[...]]: dropped
            i = close
        elif tok.text == "..." and tok.kind == "punct" and prev is not None and \
                (close := _designator_end(tokens, i)) is not None:
            pos = tokens[close].offset              # [a ... b] = x  ->  [a] = x
            i = close - 1
        elif tok.text == "?" and i + 1 < len(tokens) and tokens[i + 1].text == ":":
            out.append("? 0")                       # x ?: y  ->  x ? 0 : y (never evaluated)
        elif tok.text == "case":
            # `case a ... b:` -> `case a:`
            j, depth, dots = i + 1, 0, None
            while j < len(tokens):
                t = tokens[j]
                if t.kind == "punct":
                    if t.text in ("(", "[", "{"):
                        depth += 1
                    elif t.text in (")", "]", "}"):
                        depth -= 1
                    elif depth == 0 and t.text == ":":
                        break
                    elif depth == 0 and t.text == "...":
                        dots = j
                j += 1
            out.append(tok.text)
            if dots is not None and j < len(tokens):
                out.append(text[tok.end:tokens[dots].offset])
                pos = tokens[j].offset
                i = j - 1
        elif tok.kind == "ident" and not tok.text.isascii():
            out.append(ascii_name(tok.text))
        else:
            out.append(text[tok.offset:tok.end])
        i += 1
    out.append(_blank(text[pos:]))
    return "".join(out)


# Attributes that make a declaration's type another one: a vector of its base type, or an
# integer or float of another width (`mode(DI)`, glibc's register_t).
_RETYPING = {"vector_size", "__vector_size__", "ext_vector_type", "__ext_vector_type__", "mode",
             "__mode__"}
_BASE_TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed",
                    "unsigned", "_Bool", "__int128"}
_QUALIFIERS = {"const", "volatile"}
_SPECIFIER_WORDS = {"typedef", "const", "volatile", "static", "extern", "register", "__kf_attribute",
                    "restrict", "inline", "_Thread_local", "__thread"}


def _retyped(tokens: list[Token]) -> dict[int, str]:
    """Token index -> replacement text for the base type of each declaration with a retyping
    attribute (`typedef float v4f __attribute__((vector_size(16)));`): its type becomes opaque
    (`__kf_auto`), so that arrays of such vectors are never taken for arrays of numbers."""
    out: dict[int, str] = {}
    for i, tok in enumerate(tokens):
        if tok.text != "__kf_attribute" or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        close = _matching(tokens, i + 1)
        if close is None or not any(t.text in _RETYPING for t in tokens[i + 2:close]):
            continue
        start = i
        while start > 0 and tokens[start - 1].text not in (";", "{", "}") and \
                tokens[start - 1].kind != "directive":
            start -= 1
        j = start
        while j < len(tokens) and tokens[j].text in _SPECIFIER_WORDS:
            end = _matching(tokens, j + 1) if tokens[j].text == "__kf_attribute" else None
            j = (end if end is not None else j) + 1
        run = []
        while j < len(tokens) and tokens[j].text in _BASE_TYPE_WORDS | _QUALIFIERS:
            run.append(j)
            j += 1
        if not run and j < len(tokens) and tokens[j].kind == "ident":
            run = [j]                               # a typedef name as the base type
        words = [k for k in run if tokens[k].text not in _QUALIFIERS]
        if words:
            out[words[0]] = "__kf_auto"
            out.update({k: "" for k in words[1:]})
    return out


# -- weak definitions ---------------------------------------------------------------------------
#
# A weak function's body in this file need not be what its calls run: a strong definition in
# another file replaces it at link time.  Its body is never inlined nor trusted to be pure.

_WEAK = frozenset(["weak", "__weak__", "weakref", "__weakref__"])
_PRAGMA_WEAK = re.compile(r"#\s*pragma\s+weak\s+([A-Za-z_]\w*)")


def _weak_declarators(tokens: list[Token], first: int, last: int) -> list[str]:
    """For an attribute tokens[first:last] holding `weak`, the functions of its declaration
    (every one: `void f(void), g(void) __attribute__((weak));` counts both): the names followed
    by `(` from the `;`, `{` or `}` before it to the `;` or `{` after it, parentheses skipped
    over.  For another attribute, none."""
    if not any(t.text in _WEAK for t in tokens[first:last]):
        return []
    start = first
    while start > 0 and tokens[start - 1].text not in (";", "{", "}"):
        start -= 1
    end, depth = last + 1, 0
    while end < len(tokens) and not (depth == 0 and tokens[end].text in (";", "{")):
        depth += {"(": 1, ")": -1}.get(tokens[end].text, 0)
        end += 1
    return [tokens[k].text for k in range(start, min(end, len(tokens) - 1))
            if tokens[k].kind == "ident" and tokens[k + 1].text == "(" and
            not first <= k <= last and tokens[k].text != "__kf_attribute"]


def _attribute_end(tokens: list[Token], i: int) -> int | None:
    """The second ']' of a C23 attribute `[[ ... ]]` opening at tokens[i], or None."""
    j, depth = i + 2, 0
    while j < len(tokens):
        t = tokens[j].text
        if t in ("(", "["):
            depth += 1
        elif t in (")", "]"):
            if depth == 0:
                return j + 1 if t == "]" and j + 1 < len(tokens) and \
                    tokens[j + 1].text == "]" else None
            depth -= 1
        elif t in (";", "{", "}"):
            return None
        j += 1
    return None


def _designator_end(tokens: list[Token], i: int) -> int | None:
    """The ']' of a GNU range designator `[a ... b]` whose `...` is tokens[i], or None (a
    variadic parameter list, say)."""
    depth = 0
    for j in range(i - 1, -1, -1):          # back to the unmatched bracket before it
        t = tokens[j].text
        if t in (")", "]"):
            depth += 1
        elif t in ("(", "["):
            if depth == 0:
                if t != "[":
                    return None
                break
            depth -= 1
        elif t in (";", "{", "}"):
            return None
    else:
        return None
    for k in range(i + 1, len(tokens)):     # and on to the one that closes it
        t = tokens[k].text
        if t in ("(", "["):
            depth += 1
        elif t in (")", "]"):
            if depth == 0:
                return k if t == "]" else None
            depth -= 1
        elif t in (";", "{", "}"):
            return None
    return None


def _blank(gap: str) -> str:
    """Whitespace between tokens (comments dropped), its newlines kept."""
    if not gap.strip():
        return gap
    return "".join(c if c == "\n" else " " for c in gap)


def _imaginary(text: str) -> bool:
    body = text.rstrip("fFlL")
    return body[-1:] in ("i", "j", "I", "J") and not text.lower().startswith("0x")


def _digits(text: str) -> str:
    return text.rstrip("fFlL").rstrip("ijIJ").rstrip("fFlL") or "0"


def _matching(tokens: list[Token], i: int) -> int | None:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].kind != "punct":
            continue
        if tokens[j].text == "(":
            depth += 1
        elif tokens[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def _brace_depths(tokens: list[Token]) -> list[int]:
    """For each token, how many braces are open before it (0: file scope)."""
    depths, depth = [], 0
    for tok in tokens:
        if tok.text == "}" and tok.kind == "punct":
            depth = max(depth - 1, 0)
        depths.append(depth)
        if tok.text == "{" and tok.kind == "punct":
            depth += 1
    return depths


def _control_closers(tokens: list[Token]) -> set[int]:
    """Indices of the ')' that close an if/while/for/switch header (a statement follows)."""
    out = set()
    for i, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text in _CONTROL and i + 1 < len(tokens) \
                and tokens[i + 1].text == "(":
            close = _matching(tokens, i + 1)
            if close is not None:
                out.add(close)
    return out


# -- parsing, a function at a time where it must -------------------------------------------------

def parse(text: str, path: str) -> tuple[c_ast.FileAST, list[Skipped], frozenset[str]]:
    """The AST of the (preprocessed) text, what had to be left out of it, and the functions
    declared weak in it."""
    skipped: list[Skipped] = []
    weak: set[str] = set()
    text = for_parser(text, weak)
    for _ in range(MAX_SKIPPED):
        parser = c_parser.CParser()
        try:
            return parser.parse(text, path), skipped, frozenset(weak)
        except c_parser.ParseError as exc:
            message, location = _error(str(exc), parser)
        except RecursionError:
            message, location = "the code is nested too deeply", _last_coord(parser)
        if location is None:
            raise KernelfarerError(f"cannot parse: {message}", SourceLocation(path, 0, 0))
        offset = _offset_of(text, location)
        chunk = _top_level_chunk(text, offset) if offset is not None else None
        if chunk is None:
            raise KernelfarerError(f"cannot parse: {message}", location)
        start, body, end, name = chunk
        if body is not None and offset > body:     # in a function's body: keep its declaration
            text = text[:body + 1] + _blank(text[body + 1:end - 1]) + text[end - 1:]
        else:                       # a declaration, or a function's own (an unknown type name)
            text = text[:start] + _blank(text[start:end]) + text[end:]
        skipped.append(Skipped(location, name, message))
    raise KernelfarerError("cannot parse: too many functions the parser cannot read",
                           SourceLocation(path, 0, 0))


def _error(message: str, parser: c_parser.CParser) -> tuple[str, SourceLocation | None]:
    """pycparser says "file:line:col: message" (or "file: message": the failing token then says
    where it is)."""
    parts = message.split(":", 3)
    if len(parts) == 4 and parts[1].isdigit() and parts[2].strip().isdigit():
        return _readable(parts[3].strip()), SourceLocation(parts[0], int(parts[1]), int(parts[2]))
    return _readable(message.split(": ", 1)[-1]), _last_coord(parser)


def _readable(message: str) -> str:
    """pycparser's "before: x" as a sentence."""
    if message.startswith("before: "):
        return f"syntax error before '{message[len('before: '):]}'"
    return message[:1].lower() + message[1:]


def _last_coord(parser: c_parser.CParser) -> SourceLocation | None:
    try:                   # pycparser's token stream: the token it stopped at
        tok = parser._peek()                           # noqa: SLF001
        return SourceLocation(tok.filename, tok.lineno, tok.column)
    except Exception:      # noqa: BLE001 - any other pycparser: no location
        return None


def _offset_of(text: str, location: SourceLocation) -> int | None:
    """Where `location` (a file and line, as the line markers say) is in the preprocessed text."""
    current_file, current_line, offset = None, 0, 0
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            words = stripped[1:].split()
            if words and words[0] == "line":
                words = words[1:]
            if words and words[0].isdigit():
                current_line = int(words[0])
                if len(words) > 1 and words[1].startswith('"'):
                    current_file = words[1].strip('"')
                offset += len(line) + 1
                continue
        if current_file == location.file and current_line == location.line:
            return offset + max(0, min(location.column - 1, len(line)))
        current_line += 1
        offset += len(line) + 1
    return None


def _top_level_chunk(text: str, offset: int) -> tuple[int, int | None, int, str] | None:
    """(start, offset of the body's '{' or None, end, name) of the top-level declaration or
    function definition that holds `offset`."""
    tokens = [t for t in tokenize(text) if t.kind != "directive"]
    depth, start, body, name = 0, 0, None, ""
    last_ident = ""
    for i, tok in enumerate(tokens):
        if depth == 0 and start is None:
            start = tok.offset
        if tok.kind == "punct" and tok.text in "([{":
            if tok.text == "{" and depth == 0 and i > 0 and tokens[i - 1].text == ")":
                body = tok.offset
            if tok.text == "(" and depth == 0 and not name:
                name = last_ident
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
            if depth == 0 and tok.text == "}" and body is not None:
                if start <= offset < tok.end:
                    return start, body, tok.end, name
                start, body, name = None, None, ""
        elif tok.kind == "punct" and tok.text == ";" and depth == 0:
            if start <= offset < tok.end:
                return start, None, tok.end, ""
            start, body, name = None, None, ""
        if tok.kind == "ident":
            last_ident = tok.text
    return None
