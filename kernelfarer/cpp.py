"""The preprocessor run of the frontend: clang -E with the user's flags, before any parse.

Light on purpose (no parser imported): kernelfarer-cc preprocesses every candidate file and parses
only those whose loop nests can hold a GEMM (prefilter.may_hold_product_nest).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess

from kernelfarer.diagnostics import KernelfarerError, SourceLocation
from kernelfarer.toolchain import clang_path

# Spelled for the preprocessor only: GNU/clang extensions in real headers that pycparser rejects.
_EXTENSION_DEFINES = (
    "-D__attribute__(x)=__kf_attribute(x)",     # dropped by parsefix, which reads vector_size
    "-D__extension__=",
    # offsetof (clang's <stddef.h> spells it __builtin_offsetof), __builtin_types_compatible_p,
    # __builtin_choose_expr take types or commas inside braces: values the analysis never knows
    "-D__builtin_offsetof(...)=__kf_opaque_value()",
    "-D__builtin_types_compatible_p(...)=__kf_opaque_value()",
    "-D__builtin_choose_expr(...)=__kf_opaque_value()",
    "-D__real__=*(__kf_auto*)&",      # a part of a complex number: an opaque lvalue
    "-D__imag__=*(__kf_auto*)&",
    "-D__alignof__=sizeof",           # type or expression, as sizeof takes them (never evaluated)
    "-D__alignof=sizeof",
    "-D_Alignof=sizeof",
    "-D_BitInt(x)=__kf_auto",         # an integer of another width: opaque
    "-D__fp16=__kf_auto",             # Arm's storage-only half (clang takes it on x86 too)
    "-D__auto_type=__kf_auto",        # an opaque type (kf_parse_stubs.h): never taken for a number
    "-Dtypeof(x)=__kf_auto",          # types the parser cannot work out: opaque too
    "-D__typeof(x)=__kf_auto",
    "-D__restrict=restrict",
    "-D__restrict__=restrict",
    "-D__inline=inline",
    "-D__inline__=inline",
    "-D__builtin_va_list=void*",
    "-D__volatile__=volatile",
    "-D__signed__=signed",
    "-D__const=const",
    "-D__typeof__(x)=__kf_auto",
    "-D_Nullable=",
    "-D_Nonnull=",
    "-D__declspec(x)=",
    "-D_Float16=__kf_float16",      # typedefs of kf_parse_stubs.h: the recognizer sees what
    "-D__bf16=__kf_bfloat16",       # they are (ctype.py), and refuses them by name
    "-D__KERNELFARER__=1",
)

_CPP_TIMEOUT = 120


_STUBS = os.path.join(os.path.dirname(__file__), "include", "kf_parse_stubs.h")


def preprocess(path: str, cppflags: tuple[str, ...] = ()) -> str:
    """Run clang -E on the user's file with the user's flags; errors come back in clang's words."""
    return _run(path, cppflags, ())


def preprocess_with_macros(path: str, cppflags: tuple[str, ...] = ()) -> tuple[str, frozenset[str]]:
    """`preprocess` and (nearly) `defined_macros` from one run of the preprocessor (-dD): the text,
    its #define/#undef lines left blank (the same code on the same lines as `preprocess` gives,
    with other line markers); and every name those lines define or undefine (a superset of the
    macros defined at the end, which is what hygiene needs: names to stay away from)."""
    text = _run(path, cppflags, ("-dD",))
    names = set()

    def blank(match: re.Match) -> str:
        names.add(match[1])
        return ""

    return _DIRECTIVE.sub(blank, text), frozenset(names)


_DIRECTIVE = re.compile(r"^#(?:define|undef) ([A-Za-z_$][\w$]*)[^\n]*", re.M)


def user_code(text: str) -> list[str]:
    """The tokens of a preprocessed text that come from the user's own files (not from system
    headers, line marker flag 3, nor from the compiler's built-in lines), directives with their
    spaces collapsed, string literals without their text (__FILE__ is "./k.h" to clang and "k.h"
    to gcc), integers by value and type: what two preprocessors must agree on for one's analysis
    to hold for the other's compile."""
    from kernelfarer.scan import tokenize
    out: list[str] = []
    own = True
    # Whether a file is a system header, as the marker that enters it (flag 1) or returns to it
    # (flag 2) says: other markers may leave the flag out (gcc, in a system header) or add it
    # (gcc, where user code expands a system header's macro: still the user's code).
    system: dict[str, bool] = {}
    for chunk in _MARKER.split(text):
        if chunk.startswith("#"):
            m = _MARKER_PARTS.match(chunk)
            if m is None:
                own = False
                continue
            flags = m[2].split()
            if "1" in flags or "2" in flags:
                system[m[1]] = "3" in flags
            own = not system.get(m[1], "3" in flags) and not m[1].startswith("<")
            continue
        if own:
            out += [" ".join(t.text.split()) if t.kind == "directive" else
                    '""' if t.kind == "string" else _number(t.text) if t.kind == "number" else
                    t.text for t in tokenize(chunk)]
    return _without_loopless_bodies(out)


SHORT_BODY = 64     # tokens


def _without_loopless_bodies(tokens: list[str]) -> list[str]:
    """`tokens` with the bodies of functions that cannot hold a nest of three loops emptied (but
    short ones, which an epilogue may call): what they expand (DBL_EPSILON is
    `((double)2.22...e-16L)` to gcc) changes no rewrite."""
    out: list[str] = []
    level = 0               # of the braces outside function bodies (structs, initializers)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "{" and level == 0 and out and out[-1] in (")", ";"):
            depth, j = 0, i
            while j < len(tokens):
                depth += tokens[j] == "{"
                depth -= tokens[j] == "}"
                if depth == 0:
                    break
                j += 1
            body = tokens[i:j + 1]
            # short bodies stay: an epilogue's helper is read for its purity
            if len(body) > SHORT_BODY and sum(t in ("for", "while", "do") for t in body) < 3:
                body = ["{", "}"]
            out += body
            i = j + 1
            continue
        level += (tok == "{") - (tok == "}")
        out.append(tok)
        i += 1
    return out


def _number(text: str) -> str:
    """A number by its value and type (INT_MAX is 0x7fffffff to gcc and 2147483647 to clang, the
    same int; FLT_MAX has more digits to gcc, the same float); as written if it cannot say."""
    low = text.lower()
    if low.startswith("0x") or not any(c in low for c in ".ep"):
        body = text.rstrip("uUlL")
        suffix = "".join(sorted(text[len(body):].lower()))
        try:
            value = int(body, 8) if len(body) > 1 and body[0] == "0" and body.isdigit() else \
                int(body, 0)
        except ValueError:
            return text
        # past its suffix's signed type, a decimal is the next wider one, a hex one unsigned
        limit = 0x7FFFFFFFFFFFFFFF if "l" in suffix else 0x7FFFFFFF
        past = "u" not in suffix and value > limit
        return f"{value}{suffix}" + (("d" if body.isdigit() else "x") if past else "")
    body = text.rstrip("fFlL")
    suffix = text[len(body):].lower()
    if suffix not in ("", "f") or low.startswith("0x"):
        return text
    try:
        value = float(body)
    except ValueError:
        return text
    if suffix == "f":
        value = struct.unpack("f", struct.pack("f", value))[0]
    return f"{value!r}{suffix}"


_MARKER = re.compile(r'^(#(?:line)? \d+ "[^\n]*"[^\n]*)$', re.M)
_MARKER_PARTS = re.compile(r'#(?:line)? \d+ "((?:[^"\\]|\\.)*)"(.*)')


def preprocess_as(compiler: str, path: str, cppflags: tuple[str, ...] = ()) -> str:
    """`preprocess` by another compiler's preprocessor (gcc's, when the build compiles with gcc:
    what its predefined macros, version checks and headers select)."""
    return _run(path, cppflags, (), compiler)


def _run(path: str, cppflags: tuple[str, ...], extra: tuple[str, ...],
         compiler: str | None = None) -> str:
    # `-x c`: the build may compile a file of another suffix as C (a unity build's .inc)
    cmd = [compiler or clang_path(), "-E", *extra, *_EXTENSION_DEFINES, "-include", _STUBS,
           *cppflags, "-x", "c", path]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=_CPP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise KernelfarerError("preprocessing timed out", SourceLocation(path, 0, 0)) from None
    stdout = done.stdout.decode("utf-8", errors="surrogateescape")
    stderr = done.stderr.decode("utf-8", errors="replace")
    if done.returncode != 0:
        first = next((ln for ln in stderr.splitlines() if "error" in ln), stderr.strip())
        where = re.match(r"(.+?):(\d+):(\d+): (?:fatal )?error: (.*)", first)
        if where:
            raise KernelfarerError(f"does not preprocess: {where[4]}", SourceLocation(
                where[1], int(where[2]), int(where[3])))
        raise KernelfarerError(f"does not preprocess: {first}", SourceLocation(path, 0, 0))
    return stdout


def defined_macros(path: str, cppflags: tuple[str, ...] = ()) -> frozenset[str]:
    """Names of the macros defined at the end of the user's file (user and system ones)."""
    cmd = [clang_path(), "-E", "-dM", *_EXTENSION_DEFINES, *cppflags, "-x", "c", path]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=_CPP_TIMEOUT)
    names = set()
    for line in done.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] == "#define":
            names.add(parts[1].split("(", 1)[0])
    return frozenset(names)
