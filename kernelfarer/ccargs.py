"""The command line of a C compiler (clang / gcc conventions), parsed from a table of flags.

``kernelfarer-cc`` must know, for a command such as ``cc -O2 -MD -o k.o -c k.c``, what is being
compiled, where the outputs go and which flags matter to the preprocessor, without ever guessing:
every option is looked up in ``FLAGS`` (its spelling, how its argument is attached, and what it
means to us).  An option the table does not know makes the whole command pass through untouched.

Forms (as in clang's Options.td):

    FLAG                ``-c``                        exact spelling, no argument
    SEPARATE            ``-Xclang ARG``               exact spelling, the argument is the next word
    JOINED              ``-std=c99``, ``-Wl,-z``      the spelling is a prefix, the rest is the value
    JOINED_OR_SEPARATE  ``-I dir`` / ``-Idir``        either of the two
    FAMILY              ``-f...``, ``-W...``          any word with this prefix, no argument

Lookup: an exact spelling first, then the longest matching prefix among JOINED,
JOINED_OR_SEPARATE and FAMILY entries (a FAMILY also matches its bare spelling: ``-g``, ``-O``).
"""

from __future__ import annotations

import enum
import os
from collections import namedtuple


class Form(enum.Enum):
    FLAG = "flag"
    SEPARATE = "separate"
    JOINED = "joined"
    JOINED_OR_SEPARATE = "joined-or-separate"
    FAMILY = "family"


class Role(enum.Enum):
    COMPILE = "-c"
    ASSEMBLY = "-S"
    PREPROCESS = "-E"
    SYNTAX_ONLY = "-fsyntax-only"
    DEPS_ONLY = "-M/-MM"
    DEPFILE = "-MD/-MMD"            # write a dependency file as a side effect of compiling
    DEPFILE_NAME = "-MF"
    OUTPUT = "-o"
    LANGUAGE = "-x"
    DEBUG_MAP = "-fdebug-prefix-map"
    MACRO_MAP = "-fmacro-prefix-map"
    FILE_MAP = "-ffile-prefix-map"
    END_OF_OPTIONS = "--"
    KEEP = "keep"                   # passed to the compiler as it is
    PASS = "pass"                   # the whole command passes through untouched


# A flag's spelling, form and role, and whether the rewriter's preprocessor is given it too.
# (Plain tuples and classes here and in cc.py: `dataclasses` costs every start-up of the wrapper
# 8 ms, most of what it spends on a file it passes straight to the compiler.)
Flag = namedtuple("Flag", "spelling form role cpp", defaults=(Role.KEEP, False))


def _flags(form: Form, role: Role, *spellings: str, cpp: bool = False) -> list[Flag]:
    return [Flag(s, form, role, cpp) for s in spellings]


F, S, J, JS, FAM = Form.FLAG, Form.SEPARATE, Form.JOINED, Form.JOINED_OR_SEPARATE, Form.FAMILY

FLAGS: tuple[Flag, ...] = tuple([
    # what the driver is asked to do
    Flag("-c", F, Role.COMPILE),
    Flag("-S", F, Role.ASSEMBLY),
    Flag("-E", F, Role.PREPROCESS),
    Flag("-fsyntax-only", F, Role.SYNTAX_ONLY),
    *_flags(F, Role.DEPS_ONLY, "-M", "-MM"),
    *_flags(F, Role.DEPFILE, "-MD", "-MMD"),
    Flag("-MF", JS, Role.DEPFILE_NAME),
    *_flags(JS, Role.KEEP, "-MT", "-MQ"),
    *_flags(F, Role.KEEP, "-MP", "-MG"),
    Flag("-o", JS, Role.OUTPUT),
    Flag("-x", JS, Role.LANGUAGE),
    Flag("--", F, Role.END_OF_OPTIONS),
    # preprocessor: also given to the rewriter
    *_flags(JS, Role.KEEP, "-D", "-U", "-I", "-iquote", "-isystem", "-idirafter", "-include",
            "-imacros", "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-isysroot",
            "-isystem-after", "-A", "-F", cpp=True),
    *_flags(F, Role.KEEP, "-nostdinc", "-nostdlibinc", "-undef", "-trigraphs", "-ansi",
            "-pthread", "-fopenmp", "-fopenmp-simd", "-fno-openmp", "-ffast-math",
            "-fno-fast-math", "-ffinite-math-only", "-fno-finite-math-only", "-fno-math-errno",
            "-fmath-errno", "-funsigned-char", "-fsigned-char", "-fno-signed-char",
            "-fno-unsigned-char", "-fshort-wchar", "-fgnu89-inline", "-fpic", "-fPIC", "-fpie",
            "-fPIE", "-fno-pic", "-fno-PIC", "-fno-pie", "-fno-PIE", "-m32", "-m64", "-mx32",
            cpp=True),
    *_flags(J, Role.KEEP, "-std=", "--std=", "--target=", "--sysroot=", "-march=", "-mcpu=",
            "-mfpu=", "-mfloat-abi=", "-mabi=", cpp=True),
    *_flags(S, Role.KEEP, "-target", "--sysroot", cpp=True),
    # instruction-set switches define macros (__AVX2__, __ARM_NEON...): the rewriter sees them too
    *_flags(FAM, Role.KEEP, "-msse", "-mno-sse", "-mavx", "-mno-avx", "-mfma", "-mno-fma",
            "-mf16c", "-mbmi", "-mpopcnt", "-maes", "-mpclmul", "-mamx", "-mvsx", "-mno-vsx",
            "-maltivec", "-mno-altivec", "-mmma", "-mneon", cpp=True),
    Flag("-O", FAM, Role.KEEP, cpp=True),
    # compile, debug and warning options the rewriter does not need
    *_flags(FAM, Role.KEEP, "-f", "-m", "-W", "-g", "-Q"),
    Flag("-fdebug-prefix-map=", J, Role.DEBUG_MAP),
    Flag("-fmacro-prefix-map=", J, Role.MACRO_MAP),
    Flag("-ffile-prefix-map=", J, Role.FILE_MAP),
    *_flags(F, Role.KEEP, "-w", "-pedantic", "-pedantic-errors", "-pipe", "-p", "-pg", "-P",
            "-C", "-CC", "-H", "-save-temps", "-emit-llvm", "-integrated-as",
            "-no-integrated-as", "-no-canonical-prefixes", "-time", "-Qunused-arguments"),
    *_flags(J, Role.KEEP, "-save-temps=", "-specs=", "--specs=", "--param=", "-stdlib=",
            "-rtlib=", "--rtlib=", "-unwindlib=", "--gcc-toolchain=", "-resource-dir=",
            "--config=", "--ld-path="),
    *_flags(S, Role.KEEP, "-Xclang", "-mllvm", "--param", "-aux-info", "-dumpbase",
            "-dumpdir", "-dumpbase-ext", "-gcc-toolchain", "-resource-dir", "-arch", "--config",
            "-wrapper", "-Xassembler", "-Xlinker", "-framework"),
    # linking
    *_flags(JS, Role.KEEP, "-l", "-L", "-T", "-u", "-e", "-B", "-z"),
    *_flags(J, Role.KEEP, "-Wl,", "-Wa,"),
    *_flags(F, Role.KEEP, "-shared", "-static", "-static-pie", "-static-libgcc", "-shared-libgcc",
            "-static-libstdc++", "-rdynamic", "-s", "-r", "-nostdlib", "-nodefaultlibs",
            "-nostartfiles", "-nolibc", "-pie", "-no-pie"),
    # commands that pass through untouched
    *_flags(F, Role.PASS, "--version", "-v", "-###", "--help", "-help", "-dumpversion",
            "-dumpmachine", "-dumpfullversion", "-dumpspecs", "-fpreprocessed",
            "-fdirectives-only", "--analyze", "-traditional", "-traditional-cpp", "-I-"),
    # coverage builds count the user's lines as the plain build does: compiled as they are
    *_flags(F, Role.PASS, "--coverage", "-fprofile-arcs", "-ftest-coverage", "-fcoverage-mapping"),
    *_flags(FAM, Role.PASS, "-print-", "--print-", "-d"),
    Flag("-Wp,", J, Role.PASS),           # -Wp,-MD,file writes a dependency file of its own
    Flag("-MJ", JS, Role.PASS),           # clang's compilation-database fragment
    Flag("-Xpreprocessor", S, Role.PASS),
])

_EXACT: dict[str, Flag] = {f.spelling: f for f in FLAGS if f.form is not Form.FAMILY}
_PREFIXED: tuple[Flag, ...] = tuple(sorted(
    (f for f in FLAGS if f.form in (Form.JOINED, Form.JOINED_OR_SEPARATE, Form.FAMILY)),
    key=lambda f: -len(f.spelling)))

# Languages by file extension (-x none); anything else is a linker input.
_EXTENSIONS = {
    ".c": "c", ".i": "cpp-output", ".h": "c-header",
    ".cc": "c++", ".cp": "c++", ".cxx": "c++", ".cpp": "c++", ".CPP": "c++", ".c++": "c++",
    ".C": "c++", ".ii": "c++-cpp-output", ".hh": "c++-header", ".hpp": "c++-header",
    ".H": "c++-header", ".m": "objective-c", ".mm": "objective-c++",
    ".s": "assembler", ".S": "assembler-with-cpp", ".sx": "assembler-with-cpp",
    ".f": "f77", ".f90": "f95", ".cu": "cuda", ".cl": "cl",
}
SOURCE_EXTENSIONS = frozenset(_EXTENSIONS)


class Mode(enum.Enum):
    PREPROCESS = "preprocess only (-E, -M, -MM)"
    SYNTAX_ONLY = "syntax check only (-fsyntax-only)"
    ASSEMBLY = "compile to assembly (-S)"
    COMPILE = "compile (-c)"
    LINK = "compile and link"


# A source or linker input: its position in Command.args, its path and language ("c", "c++",
# "c-header", "assembler", "object" for a linker input...).
Input = namedtuple("Input", "index path language")


class Command:
    """A parsed compiler command line (without the compiler itself)."""

    def __init__(self, args: list[str], response_file: bool = False) -> None:
        self.args = args                                # after @file expansion
        self.response_file = response_file              # the original used @file
        self.mode = Mode.LINK
        self.inputs: list[Input] = []
        self.output: str | None = None
        self.depfile = False                            # -MD or -MMD
        self.depfile_name: str | None = None            # -MF
        self.cppflags: list[str] = []
        self.debug_maps: list[tuple[str, str]] = []     # incl. -ffile-prefix-map
        self.macro_maps: list[tuple[str, str]] = []     # incl. -ffile-prefix-map
        self.end_of_options: int | None = None          # index of "--" in args
        self.passthrough: str | None = None     # why the command is not rewritten (None: it may be)
        self.spans: list[tuple[int, int, str]] = []     # (index, words, spelling) of each option

    @property
    def c_sources(self) -> list[Input]:
        return [i for i in self.inputs if i.language == "c"]

    def options_without(self, spellings: frozenset[str]) -> list[str]:
        """The options (no inputs) but those spelled as in `spellings`, with their values."""
        out: list[str] = []
        for index, words, spelling in self.spans:
            if spelling not in spellings:
                out += self.args[index:index + words]
        return out

    def dependency_file(self, source: Input) -> str | None:
        """Where the compiler writes -MD/-MMD output for `source` (clang and gcc agree): -MF, else
        the -o name with its extension replaced by .d, else the source's stem + .d in the cwd."""
        if not self.depfile:
            return None
        if self.depfile_name is not None:
            return self.depfile_name
        if self.output is not None:
            head, tail = os.path.split(self.output)
            stem = tail.rsplit(".", 1)[0] if "." in tail.lstrip(".") else tail
            return os.path.join(head, stem + ".d")
        return _stem(source.path) + ".d"


class CommandLineError(Exception):
    """A response file that cannot be read or tokenized."""


# -Wp,-Dname[=value],-Uname...: only macros for the preprocessor, kept (any other -Wp, passes
# the command through: -Wp,-MD,file writes a dependency file of its own).
_WP_DEFINES = Flag("-Wp,", Form.JOINED, Role.KEEP, cpp=True)


def lookup(word: str) -> Flag | None:
    """The table entry for an option word, or None when the table does not know it."""
    flag = _EXACT.get(word)
    if flag is not None:
        return flag
    for flag in _PREFIXED:
        if word.startswith(flag.spelling) and (len(word) > len(flag.spelling)
                                               or flag.form is Form.FAMILY):
            return flag
    return None


# -- response files ------------------------------------------------------------------------------

def split_response_file(text: str) -> list[str]:
    """GNU rules (libiberty's buildargv, clang's TokenizeGNUCommandLine): whitespace separates,
    single and double quotes group, a backslash escapes the next character."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    quote = None
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and quote != "'":
            current.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if quote:
            if ch == quote:
                quote = None
            else:
                current.append(ch)
        elif ch in "'\"":
            quote = ch
            in_word = True
        elif ch.isspace():
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(ch)
            in_word = True
        i += 1
    if quote:
        raise CommandLineError("unterminated quote in response file")
    if in_word:
        words.append("".join(current))
    return words


def quote_response_word(word: str) -> str:
    """A word written so that split_response_file (and gcc, and clang) read it back unchanged."""
    if word == "":
        return '""'
    return "".join("\\" + ch if ch in " \t\n\r\v\f'\"\\" else ch for ch in word)


def expand_response_files(args: list[str], depth: int = 0) -> tuple[list[str], bool]:
    """Arguments with every readable @file replaced by its words (recursively, as the compilers
    do); an @word that names no file stays a plain word.  Returns (words, any file expanded)."""
    if depth > 16:
        raise CommandLineError("response files nested too deeply")
    out: list[str] = []
    used = False
    for word in args:
        if word.startswith("@") and len(word) > 1 and os.path.isfile(word[1:]):
            try:
                with open(word[1:], encoding="utf-8") as f:
                    inner = split_response_file(f.read())
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandLineError(f"cannot read response file {word[1:]}: {exc}") from None
            out.extend(expand_response_files(inner, depth + 1)[0])
            used = True
        else:
            out.append(word)
    return out, used


# -- the parser ------------------------------------------------------------------------------------

def _language_of(path: str, forced: str | None) -> str:
    if forced is not None:
        return forced
    return _EXTENSIONS.get(_suffix(path), "object")


# pathlib's suffix and stem of a file name (pathlib itself costs every compile 7 ms to import)
def _suffix(path: str) -> str:
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def _stem(path: str) -> str:
    name = os.path.basename(path)
    return name[:len(name) - len(_suffix(name))]


def _split_map(value: str) -> tuple[str, str] | None:
    if "=" not in value:
        return None
    old, new = value.split("=", 1)
    return old, new


def parse(argv: list[str], *, allow_assembly: bool = False) -> Command:
    """Parse the arguments that follow the compiler's name."""
    args, used_rsp = expand_response_files(list(argv))
    cmd = Command(args=args, response_file=used_rsp)
    roles: set[Role] = set()
    forced: str | None = None
    why: str | None = None
    i = 0
    while i < len(args):
        word = args[i]
        if cmd.end_of_options is not None or word == "-" or not word.startswith("-"):
            language = "stdin" if word == "-" else _language_of(word, forced)
            cmd.inputs.append(Input(i, word, language))
            i += 1
            continue
        flag = lookup(word)
        if flag is None:
            why = why or f"option {word} is not in kernelfarer-cc's table"
            i += 1
            continue
        value: str | None = None
        if flag.form is Form.SEPARATE or (flag.form is Form.JOINED_OR_SEPARATE
                                          and word == flag.spelling):
            if i + 1 >= len(args):
                why = why or f"option {word} lacks its argument"
                i += 1
                continue
            value = args[i + 1]
            consumed = 2
        else:
            if flag.form in (Form.JOINED, Form.JOINED_OR_SEPARATE):
                value = word[len(flag.spelling):]
            consumed = 1
        if flag.spelling == "-Wp," and value and all(
                part.startswith(("-D", "-U")) and len(part) > 2 for part in value.split(",")):
            flag = _WP_DEFINES          # defines for the preprocessor (Fedora's -Wp,-D_FORTIFY_...)
        roles.add(flag.role)
        cmd.spans.append((i, consumed, flag.spelling))
        if flag.role is Role.PASS:
            why = why or f"option {word}"
        elif flag.role is Role.OUTPUT:
            cmd.output = value
        elif flag.role is Role.DEPFILE:
            cmd.depfile = True
        elif flag.role is Role.DEPFILE_NAME:
            cmd.depfile_name = value
        elif flag.role is Role.LANGUAGE:
            forced = None if value == "none" else value
        elif flag.role is Role.END_OF_OPTIONS:
            cmd.end_of_options = i
        elif flag.role in (Role.DEBUG_MAP, Role.MACRO_MAP, Role.FILE_MAP):
            pair = _split_map(value or "")
            if pair is None:
                why = why or f"option {word} has no '='"
            else:
                if flag.role is not Role.MACRO_MAP:
                    cmd.debug_maps.append(pair)
                if flag.role is not Role.DEBUG_MAP:
                    cmd.macro_maps.append(pair)
        if flag.cpp:
            cmd.cppflags.extend(args[i:i + consumed])
        i += consumed

    if Role.PREPROCESS in roles or Role.DEPS_ONLY in roles:
        cmd.mode = Mode.PREPROCESS
    elif Role.SYNTAX_ONLY in roles:
        cmd.mode = Mode.SYNTAX_ONLY
    elif Role.ASSEMBLY in roles:
        cmd.mode = Mode.ASSEMBLY
    elif Role.COMPILE in roles:
        cmd.mode = Mode.COMPILE
    cmd.passthrough = why or _why_not(cmd, allow_assembly)
    return cmd


def _why_not(cmd: Command, allow_assembly: bool) -> str | None:
    """Why a command that parsed cleanly is still passed through untouched (None: rewrite it)."""
    languages = {i.language for i in cmd.inputs}
    if cmd.mode in (Mode.PREPROCESS, Mode.SYNTAX_ONLY):
        return cmd.mode.value
    if cmd.mode is Mode.ASSEMBLY and not allow_assembly:
        return cmd.mode.value
    if "stdin" in languages:
        return "the source is read from standard input"
    if not cmd.c_sources:
        return "no C source to compile" if cmd.inputs else "no input files"
    if languages & {"c-header", "c++-header"}:
        return "a header is being precompiled"
    if cmd.depfile and (cmd.mode is Mode.LINK or len(cmd.inputs) > 1):
        return "a dependency file for several inputs or for a compile-and-link command"
    if cmd.mode is not Mode.LINK and cmd.output is not None and len(cmd.inputs) > 1:
        return "-o with several inputs"
    return None
