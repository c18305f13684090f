"""Line directives for rewritten text: the user's file name and line numbers survive the rewrite.

kernelfarer-cc compiles the rewritten text from a temporary file.  ``compile_text`` puts
``#line 1 "<the user's path>"`` on top and a ``#line`` directive after every replaced or inserted
region, at the first line start that is outside comments, literals and continued lines, so every
line the rewrite did not touch keeps its number; the original nest kept inside a call site (the
fallback path) keeps its own lines too.  The user's own ``#line`` directives are followed.

Generated code never borrows the user's line numbers: the support code (kernels, drivers) is
numbered in a file of its own, ``<kernelfarer>`` (debuggers, coverage tools and profilers see it
apart from the user's lines), and every generated line of a call site (the run-time checks, the
driver call) is the nest's first line, so a breakpoint on that line stops where the nest runs and
coverage counts the user's lines only.
"""

from __future__ import annotations

import bisect


def clean_lines(text: str) -> list[bool]:
    """clean[n] is True when line n (1-based) starts outside comments, literals and continued
    lines, so that a directive may be put in front of it."""
    clean = [False, True]
    state, quote, i, n = "code", "", 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and (text.startswith("\n", i + 1) or text.startswith("\r\n", i + 1)):
            i += 2 if text[i + 1] == "\n" else 3
            clean.append(False)
            continue
        if ch == "\n":
            if state != "block":
                state = "code"
            clean.append(state == "code")
        elif state == "code":
            if text.startswith("/*", i):
                state, i = "block", i + 1
            elif text.startswith("//", i):
                state = "line"
            elif ch in "\"'":
                state, quote = "literal", ch
        elif state == "block":
            if text.startswith("*/", i):
                state, i = "code", i + 1
        elif state == "literal":
            if ch == "\\":
                i += 1
            elif ch == quote:
                state = "code"
        i += 1
    return clean


def _line_directive(line: int, name: str, *, escaped: bool = False) -> str:
    if any(ord(c) < 32 for c in name):
        raise ValueError("the file name has control characters")
    if not escaped:
        name = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'#line {line} "{name}"\n'


class _Presumed:
    """The (line, file) the compiler would report for each line of the original text, following
    the user's own #line directives if there are any."""

    def __init__(self, text: str, name: str, clean: list[bool]) -> None:
        self.name = name
        self.newlines = [i for i, c in enumerate(text) if c == "\n"]
        self.marks: list[tuple[int, int, str | None]] = []  # (line, next line's number, file)
        if "#" not in text:
            return
        current = None                                  # None: the user's file (escaped later)
        for number, line in enumerate(text.split("\n"), start=1):
            if number >= len(clean) or not clean[number] or not line.lstrip().startswith("#"):
                continue
            words = line.strip()[1:].split()
            if words and words[0] == "line":
                words = words[1:]
            if words and words[0].isdigit():
                if '"' in line:
                    current = line[line.index('"') + 1:].split('"')[0]
                self.marks.append((number, int(words[0]), current))

    def line_of(self, offset: int) -> int:
        return bisect.bisect_left(self.newlines, offset) + 1

    def directive(self, line: int) -> str:
        k = bisect.bisect_left(self.marks, (line,)) - 1
        if k < 0:
            return _line_directive(line, self.name)
        at, number, name = self.marks[k]
        if name is None:
            return _line_directive(number + line - at - 1, self.name)
        return _line_directive(number + line - at - 1, name, escaped=True)


GENERATED = "<kernelfarer>"


def compile_text(original: str, edits: list[tuple[int, int, str]], name: str) -> str:
    """The rewritten text with #line directives: every line the rewrite did not touch keeps its
    original number, and the original nest kept inside a call site keeps its lines too."""
    clean = clean_lines(original)
    presumed = _Presumed(original, name, clean)
    starts = [0] + [i + 1 for i in presumed.newlines]
    bom = "\ufeff" if original.startswith("\ufeff") else ""
    out = [bom, _line_directive(1, name)]
    pos = len(bom)
    for k, (start, end, text) in enumerate(edits):
        out.append(original[pos:start])
        if start == end:          # inserted support code: numbered in a file of its own
            out.append(_line_directive(1, GENERATED) + text)
        else:
            out.append(_keep_nest_lines(original, start, end, text, presumed))
        pos = end
        limit = edits[k + 1][0] if k + 1 < len(edits) else len(original)
        s = bisect.bisect_left(starts, pos)
        while s < len(starts) and starts[s] <= limit and not clean[s + 1]:
            s += 1
        if s < len(starts) and starts[s] <= limit and starts[s] < len(original):
            out.append(original[pos:starts[s]])
            out.append(presumed.directive(s + 1))
            pos = starts[s]
    out.append(original[pos:])
    return "".join(out)


def _keep_nest_lines(original: str, start: int, end: int, text: str, presumed: _Presumed) -> str:
    """A call site: its generated lines all on the nest's first line, the original nest it keeps
    on its own lines."""
    first = presumed.directive(presumed.line_of(start))
    nest = original[start:end]
    at = text.rfind(nest) if nest.strip() else -1
    line_start = text.rfind("\n", 0, at) + 1 if at > 0 else 0
    if at <= 0 or line_start == 0 or text[line_start:at].strip():
        return _on_one_line(text, first)
    indent = original[original.rfind("\n", 0, start) + 1:start]
    if indent.strip():
        indent = text[line_start:at]
    after = at + len(nest)
    return (_on_one_line(text[:line_start], first) + presumed.directive(presumed.line_of(start))
            + indent + nest + _on_one_line(text[after:], first))


def _on_one_line(text: str, directive: str) -> str:
    """Generated lines, each after a directive that gives it the same line (the first line
    continues where the text starts; one inside a comment continues it)."""
    lines = text.split("\n")
    clean = clean_lines(text)
    out = [lines[0]]
    for number, line in enumerate(lines[1:], start=2):
        last = number == len(lines)
        out.append(directive + line if clean[number] and not (last and not line.strip())
                   else line)
    return "\n".join(out)
