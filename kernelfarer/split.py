"""Split compiles: kernelfarer-cc compiles the support code once per build configuration.

A file with replaced nests holds, in one translation unit, its call sites and a few hundred
kilobytes of kernels, packing routines and drivers; compiling those is most of what the wrapper
adds to a build (several seconds per file, for code that is the same in every file of the build).
So the wrapper compiles the call sites' unit (the user's file, its nests replaced by calls to
drivers it declares), and the support code as units of their own (one per kernel driver, one for
the dispatchers: emit.render_split_support), which it keeps in the profile directory (`objects/`)
under a hash of each unit's text, the compiler and the compile's options; then it links them into
the object the build asked for (`cc -r`).  Every object still carries its own copy of the code:
nothing is needed at run time.  The drivers are weak, hidden and named with their unit's hash, so
objects built from different support code or options never share one.

The units a compile lacks are compiled in parallel (one compile per CPU), beside the user's own
file; a lock per unit makes the other compiles of a build that need the same unit wait for it
instead of compiling it again, and each compile first takes the units nobody else is compiling.

Only plain compiles to an object split (no LTO, coverage, profiling, sanitizers, foreign targets
or launchers); anything that fails along the way falls back to the original compile, as every
failure of the wrapper does.  KERNELFARER_SPLIT=0 turns it off.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess

from kernelfarer import ccargs

# The support units' drivers: their linkage, and the word in their assembler names that the
# compile replaces by the tag of the unit that defines them (templates/entry.c.j2).
SPLIT_LINKAGE = '__attribute__((weak, visibility("hidden")))'
SPLIT_DECLARATION = 'extern __attribute__((visibility("hidden")))'   # ... and how others see them
SPLIT_TAG = "KERNELFARER_SPLIT_TAG"
SUPPORT_DIRECTORY = "/kernelfarer"    # where debug information says the support units were built

# Options the support unit's compile leaves out: its input, output and dependency file are its
# own, and it includes nothing of the user's (it is compiled in the cache directory, where the
# user's relative include paths mean nothing).
NOT_FOR_SUPPORT = frozenset({"-o", "-MD", "-MMD", "-MF", "-MT", "-MQ", "-MP", "-MG", "-x", "-c",
                             "-I", "-iquote", "-idirafter", "-include", "-imacros", "-iprefix",
                             "-iwithprefix", "-iwithprefixbefore"})
# Options under which a compile does not split (the object is not plain machine code, or its
# parts must see the whole file, or it is built for another machine or through a launcher).
NO_SPLIT = ("-flto", "-ffat-lto", "-fembed-bitcode", "-emit-llvm", "-save-temps", "--coverage",
            "-fprofile", "-ftest-coverage", "-fcoverage", "-pg", "-fsanitize", "-m16", "-m32",
            "-mx32", "--target", "-target", "-B", "-gsplit-dwarf", "-fdump", "-fsave-optimization")


# Options that change what a compile says, never the object it writes: left out of the support
# units' compiles (and hashes), so that builds with different warning flags share the units.
QUIET_OPTIONS = ("-W", "-w", "-pedantic", "-fdiagnostics-", "-fcolor-diagnostics",
                 "-fno-color-diagnostics", "-fmessage-length", "-fno-diagnostics-", "-pipe")
NOT_QUIET = ("-Wa,", "-Wl,", "-Wp,")

# The support code is compiled at one optimization level whatever the compile's (-O1, -O3, -Os,
# -Og...: it only splits when optimizing; its kernels run alike at -O2 and -O3, within 1% on a
# Zen 5, and compile 5% faster at -O2), and in the compiler's own language level (it is GNU C
# that every -std accepts): neither is the user's code, and builds that differ only there share
# the units.  -Ofast keeps its -ffast-math.
SUPPORT_LEVEL = "-O2"
LEVEL_OPTIONS = frozenset({"-O", "-std=", "--std=", "-ansi"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def support_options(cmd: ccargs.Command, units: list[tuple[tuple[str, ...], str]] | None = None,
                    compiler: list[str] | None = None,
                    env: dict[str, str] | None = None) -> list[str]:
    """The options a support unit is compiled with: the compile's own, but its input, output,
    dependency files, include paths and diagnostic options (unless the compile asks to see the
    support code's warnings, -DKERNELFARER_SUPPORT_WARNINGS), its optimization and language level
    (SUPPORT_LEVEL instead), and the macros that cannot reach the units `units`: a macro changes
    code only where its name is written, so a -D or -U whose name is not a word of the units'
    text or of the system headers they include (`compiler` tells which; unknown: every macro is
    kept) is left out."""
    options = cmd.options_without(NOT_FOR_SUPPORT)
    if any("KERNELFARER_SUPPORT_WARNINGS" in word for word in options):
        return options
    kept: list[list[str]] = []
    fast = False
    for index, words, spelling in cmd.spans:                # whole options, values too
        first = cmd.args[index]
        if spelling in NOT_FOR_SUPPORT or (first.startswith(QUIET_OPTIONS)
                                           and not first.startswith(NOT_QUIET)):
            continue
        if spelling in LEVEL_OPTIONS:
            fast = first == "-Ofast" if spelling == "-O" else fast
            continue
        kept.append(cmd.args[index:index + words])
    names = None
    if units is not None and compiler is not None:
        names = _reachable_names(units, compiler, [w for option in kept for w in option
                                                   if _macro_name(option) is None], env)
    out = [SUPPORT_LEVEL, *(["-ffast-math"] if fast else [])]
    for option in kept:
        name = _macro_name(option)
        if name is None or names is None or name in names:
            out += option
    return out


def _macro_name(option: list[str]) -> str | None:
    """The name a -D or -U option defines or undefines (None: another option)."""
    first = option[0]
    if first[:2] not in ("-D", "-U"):
        return None
    value = first[2:] if len(first) > 2 else (option[1] if len(option) > 1 else "")
    match = _NAME.match(value)
    return match.group(0) if match else ""


def _reachable_names(units: list[tuple[tuple[str, ...], str]], compiler: list[str],
                     options: list[str], env: dict[str, str] | None) -> frozenset[str] | None:
    """The words of the units' text and of every header they include (comments too: more names
    only keep more macros), or None when the headers cannot be listed.  The headers' words are
    kept in the profile directory (`headers/`) under the compiler, its options and the units'
    #include lines."""
    from kernelfarer.hostinfo import cache_subdir, keep_cached
    texts = [text for _, text in units]
    includes = sorted({line.strip() for text in texts for line in text.splitlines()
                       if line.lstrip().startswith("#include")})
    names = {word for text in texts for word in _NAME.findall(text)}
    if not includes:
        return frozenset(names)
    memo = cache_subdir("headers") / digest("\0".join([*compiler_identity(compiler), "\1",
                                                       *options, "\1", *includes]))
    try:
        return frozenset(names | set(memo.read_text(encoding="utf-8").split()))
    except OSError:
        pass
    try:
        done = subprocess.run([*compiler, *options, "-M", "-x", "c", "-"], input="\n".join(includes),
                              capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    header_names: set[str] = set()
    rule = done.stdout.replace("\\\n", " ").split(":", 1)[-1]
    for path in rule.replace("\\ ", "\0").split():
        try:
            with open(path.replace("\0", " "), encoding="utf-8", errors="replace") as f:
                header_names.update(_NAME.findall(f.read()))
        except OSError:
            return None
    keep_cached(memo, "\n".join(sorted(header_names)) + "\n")
    return frozenset(names | header_names)


def refusal(cmd: ccargs.Command, chain: list[str]) -> str | None:
    """Why this compile does not split (None: it does)."""
    if os.environ.get("KERNELFARER_SPLIT", "1") == "0":
        return "KERNELFARER_SPLIT=0"
    if chain:
        return "a launcher runs the compiler"
    if cmd.mode is not ccargs.Mode.COMPILE or len(cmd.inputs) != 1 or cmd.output == "-":
        return "not a compile of one source to an object file"
    output = object_path(cmd)
    if os.path.lexists(output) and not os.path.isfile(output) or os.path.islink(output):
        return "the output is not a regular file"       # /dev/null, say: never replaced
    for word in cmd.args:
        if word.startswith(NO_SPLIT):
            return f"option {word}"
    if not optimizing(cmd.args):
        return "not optimizing (the kernels are left out: the call sites run their loops)"
    return None


def optimizing(args: list[str]) -> bool:
    """Does the compile define __OPTIMIZE__?  The last -O option decides; none means -O0.  (The
    support code of a compile that does not is a set of drivers that decline, compiled with the
    call sites: templates/unoptimized.c.j2.)"""
    level = "0"
    for word in args:
        if word.startswith("-O"):
            level = word[2:]
    return level != "0"


def object_path(cmd: ccargs.Command) -> str:
    """The object the compile writes: -o, else the source's stem + .o in the working directory."""
    if cmd.output is not None:
        return cmd.output
    stem = os.path.splitext(os.path.basename(cmd.inputs[0].path))[0]
    return stem + ".o"


def compiler_identity(compiler: list[str]) -> list[str]:
    """The compiler's real path, size and mtime (a different file or an upgrade: a new identity),
    and the rest of its command."""
    path = os.path.realpath(compiler[0])
    try:
        info = os.stat(path)
        return [path, str(info.st_size), str(info.st_mtime_ns), *compiler[1:]]
    except OSError:
        return [path, *compiler[1:]]


def tag(unit: str, compiler: list[str], options: list[str]) -> str:
    """The hash that names a support unit's entry drivers and its cached object."""
    return "kf" + digest("\0".join([unit, *compiler_identity(compiler), "\1", *options]))


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def resolve(units, compiler: list[str], options: list[str]) -> tuple[dict[str, str], list]:
    """The tag of each driver of `units` ((names it defines, text) pairs, a unit referring only to
    drivers of the units before it), and the units as (tag, text) with every SPLIT_TAG replaced."""
    tags: dict[str, str] = {}
    out = []
    for names, text in units:
        text = resolved(text, tags)              # the drivers it calls in the units before it
        unit_tag = tag(text, compiler, options)
        tags.update((name, unit_tag) for name in names)
        out.append((unit_tag, resolved(text, tags)))
    return tags, out


_LABEL = re.compile(r"\b(\w+)_" + SPLIT_TAG + r"\b")


def resolved(text: str, tags: dict[str, str]) -> str:
    """`text` with the assembler names of the drivers in `tags` carrying their unit's tag."""
    return _LABEL.sub(lambda m: f"{m[1]}_{tags[m[1]]}" if m[1] in tags else m[0], text)


class SupportBuild:
    """The objects of a compile's support units: those cached are taken as they are, the others
    compiled, in parallel, from the moment it is made, while the caller compiles the user's file;
    wait() gives the objects.  A unit another compile is building (its lock is taken) is waited
    for, after this compile's own units are done, and compiled here only if that compile failed.
    The source of each unit stays beside its object, and is compiled there under its own name:
    the object (its debug information too) depends on nothing else, whichever compile of the
    build got to it first."""

    def __init__(self, units: list[tuple[str, str]], compiler: list[str], options: list[str],
                 env: dict[str, str]) -> None:
        from kernelfarer.hostinfo import cache_subdir
        self.command = [*compiler, *options]
        self.env = env
        self.directory = str(cache_subdir("objects"))
        self.paths = [self._file(name, ".o") for name, _ in units]
        self.problem: str | None = None
        self.queue: list[tuple[str, str, int | None]] = []    # (tag, text, lock) to compile here
        self.others: list[tuple[str, str]] = []                # being compiled by someone else
        self.running: list[tuple[subprocess.Popen, str, int | None]] = []
        missing = [(name, text) for (name, text), path in zip(units, self.paths)
                   if not os.path.exists(path)]
        if not missing:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            self.problem = f"cannot make {self.directory}: {exc.strerror}"
            return
        for name, text in sorted(missing, key=lambda unit: -len(unit[1])):   # longest first
            lock = _try_lock(self._file(name, ".lock"))
            if lock is False:
                self.others.append((name, text))
            else:
                self.queue.append((name, text, lock))
        self._launch()

    def wait(self) -> list[str] | str:
        """The support objects, or why they could not be had."""
        while self.running:
            proc, name, lock = self.running.pop(0)
            _, err = proc.communicate()
            self._finish(proc.returncode, err, name, lock)
            self._launch()
        for name, text in self.others:
            lock = _try_lock(self._file(name, ".lock"), wait=True)
            if not os.path.exists(self._file(name, ".o")) and self.problem is None:
                proc = self._start(name, text)
                _, err = proc.communicate()
                self._finish(proc.returncode, err, name, lock)
            else:
                _unlock(lock)
        return self.problem or self.paths

    def abandon(self) -> None:
        """Stop what still runs (the compile failed or was interrupted): nothing half-made stays."""
        for proc, name, lock in self.running:
            proc.kill()
            proc.wait()
            _remove(self._file(name, self._partial))
            _unlock(lock)
        for _, _, lock in self.queue:
            _unlock(lock)
        self.running, self.queue, self.others = [], [], []

    @property
    def _partial(self) -> str:
        """The suffix of an object this process is still writing."""
        return f".o.{os.getpid()}.tmp"

    def _file(self, name: str, suffix: str) -> str:
        return os.path.join(self.directory, name + suffix)

    def _launch(self) -> None:
        """Start queued compiles while fewer than one per CPU run."""
        while self.queue and len(self.running) < _cpus() and self.problem is None:
            name, text, lock = self.queue.pop(0)
            if os.path.exists(self._file(name, ".o")):
                _unlock(lock)           # done by another compile since we looked
                continue
            self.running.append((self._start(name, text), name, lock))
        if self.problem is not None:
            for _, _, lock in self.queue:
                _unlock(lock)
            self.queue.clear()

    def _start(self, name: str, text: str) -> subprocess.Popen:
        written = self._file(name, f".c.{os.getpid()}.tmp")
        with open(written, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        os.replace(written, self._file(name, ".c"))
        # the unit's debug information names its directory as SUPPORT_DIRECTORY, not the
        # profile's: an object is the same whoever builds it, wherever their cache is
        return subprocess.Popen([*self.command, f"-fdebug-prefix-map={self.directory}="
                                 f"{SUPPORT_DIRECTORY}", "-c", "-x", "c", name + ".c", "-o",
                                 name + self._partial],
                                stderr=subprocess.PIPE, env=self.env, cwd=self.directory)

    def _finish(self, returncode: int, err: bytes, name: str, lock: int | None) -> None:
        temporary = self._file(name, self._partial)
        try:
            if returncode != 0:
                _remove(temporary)
                errors = err.decode("utf-8", "replace").splitlines()
                self.problem = self.problem or next((ln for ln in errors if "error" in ln),
                                                    "the support code did not compile")
            else:       # atomic: concurrent builds may race to the same name
                os.replace(temporary, self._file(name, ".o"))
        finally:
            _unlock(lock)


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _try_lock(path: str, wait: bool = False) -> int | None | bool:
    """An exclusive lock on `path` (its descriptor); False: another process holds it (and `wait`
    is not set); None: locks do not work here (the unit is then compiled without one)."""
    import fcntl
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError:
        os.close(fd)
        return None


def _unlock(lock: int | None | bool) -> None:
    if isinstance(lock, int) and not isinstance(lock, bool):
        os.close(lock)          # closing the descriptor releases the lock


def link(compiler: list[str], output: str, support: list[str],
         env: dict[str, str]) -> str | None:
    """Put the support objects into `output` (a relocatable link); None, or what went wrong."""
    if not os.path.isfile(output) or os.path.islink(output):
        return f"{output} is not a regular file"
    temporary = f"{output}.kf{os.getpid()}.tmp"
    done = subprocess.run([*compiler, "-r", "-nostdlib", "-o", temporary, output, *support],
                          stderr=subprocess.PIPE, env=env)
    if done.returncode != 0:
        _remove(temporary)
        errors = done.stderr.decode("utf-8", "replace").splitlines()
        return next((ln for ln in errors if ln.strip()), "the relocatable link failed")
    os.replace(temporary, output)
    return None


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
