"""kernelfarer-cc: a drop-in C compiler wrapper that rewrites GEMM loop nests on the way through.

    make CC=kernelfarer-cc                              # real compiler: $KERNELFARER_CC or clang-19
    make CC="kernelfarer-cc gcc"                        # launcher form
    cmake -DCMAKE_C_COMPILER_LAUNCHER=kernelfarer-cc ...
    CC="ccache kernelfarer-cc clang-19"

For each C source of a compile command, the source is rewritten (by a forked child, under a time
limit) and the rewritten text is compiled from a temporary file with the same base name.  The
temporary file starts with ``#line 1 "<the user's path>"`` and has a ``#line`` directive after every
replaced region (kernelfarer.linemap), so __FILE__, __LINE__, diagnostics and debug information name the user's file and
its own line numbers; ``-iquote <source dir>`` keeps quoted includes resolving as before; the
dependency file's mention of the temporary file is replaced by the user's path.

It must never be the reason a build fails: whatever goes wrong on our side, the original command
runs unchanged (after one ``file:line:col: kernelfarer-cc: warning: ...; compiled unchanged`` line on
stderr), and
the real compiler's exit code is the exit code.  The wrapper writes nothing on stdout.
"""

from __future__ import annotations

import os
import re
import sys

from kernelfarer import ccargs
from kernelfarer.linemap import compile_text
from kernelfarer.prefilter import may_hold_nest
# targets, split (and hashlib, json, shlex) are imported where they are used: most files of a build
# are never rewritten, and the wrapper's own start-up is most of what it costs them.

PROG = "kernelfarer-cc"
GUARD = "KERNELFARER_CC_ACTIVE"          # set for the real compiler: we never wrap ourselves
DEFAULT_COMPILER = "clang-19"
DEFAULT_TIMEOUT = 60.0
_OBJECT_EXTENSIONS = (".o", ".a", ".so", ".obj", ".lo", ".la", ".dylib")


def _say(message: str) -> None:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()


def _warn(where: str | None, why: str) -> None:
    """One line, compiler style: ``file[:line:col]: kernelfarer-cc: warning: why; compiled
    unchanged``."""
    why = " ".join(why.split())
    sys.stderr.write(f"{where + ': ' if where else ''}{PROG}: warning: {why}; compiled unchanged\n")
    sys.stderr.flush()


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0", "no", "false")


# -- finding the real compiler ---------------------------------------------------------------------

class CompilerNotFound(Exception):
    pass


# Programs that run the compiler named after them, caching or distributing its work: in
# `kernelfarer-cc distcc clang-19 -c x.c` the compiler is clang-19, reached through distcc.
LAUNCHERS = frozenset({"ccache", "sccache", "buildcache", "distcc", "icecc", "pump"})
# ... of which these compile elsewhere, from the text preprocessed here.
DISTRIBUTORS = frozenset({"distcc", "icecc", "pump"})


class Invocation:
    def __init__(self, compiler: str, prefix: list[str], args: list[str]) -> None:
        self.compiler = compiler    # absolute path of what runs: the compiler or its first launcher
        self.prefix = prefix        # words that follow it: launchers' compilers, $KERNELFARER_CC's
        self.args = args            # the command line as given, after the compiler

    @property
    def original(self) -> list[str]:
        return [self.compiler, *self.prefix, *self.args]

    @property
    def chain(self) -> list[str]:
        """The launchers in front of the compiler (base names), in order."""
        out = []
        for word in [self.compiler, *self.prefix]:
            if os.path.basename(word) not in LAUNCHERS:
                break
            out.append(os.path.basename(word))
        return out

    @property
    def real_compiler(self) -> str:
        """The compiler itself, behind any launchers."""
        words = [self.compiler, *self.prefix]
        word = words[min(len(self.chain), len(words) - 1)]
        return _which(word, set()) or word


def _own_paths(argv0: str) -> set[str]:
    own = {os.path.realpath(argv0)} if os.sep in argv0 else set()
    found = _which(PROG, set())
    if found:
        own.add(os.path.realpath(found))
    return own


def _which(word: str, own: set[str]) -> str | None:
    """Absolute path of `word` (a path, or a name searched in PATH), never ourselves, and never
    through a ccache masquerade directory (a `gcc` that is really ccache)."""
    if os.sep in word:
        path = os.path.abspath(word)
        if os.path.realpath(path) in own:
            return None
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", word)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        real = os.path.realpath(candidate)
        base = os.path.basename(real)
        if real in own or base == PROG or (base == "ccache" and word != "ccache"):
            continue
        return os.path.abspath(candidate)
    return None


def _looks_like_compiler(word: str, own: set[str]) -> bool:
    if word.startswith(("-", "@")) or word.endswith(_OBJECT_EXTENSIONS):
        return False
    if os.path.splitext(word)[1] in ccargs.SOURCE_EXTENSIONS:
        return False
    return _which(word, own) is not None


def invocation(argv: list[str]) -> Invocation:
    name = os.path.basename(argv[0])
    args = list(argv[1:])
    own = _own_paths(argv[0])
    if not name.startswith(PROG) and name not in ("cc.py", "__main__.py"):
        word, prefix = name, []                     # a symlink named like a compiler
    elif args and _looks_like_compiler(args[0], own):
        word, prefix, args = args[0], [], args[1:]  # launcher form
        last = word
        while os.path.basename(last) in LAUNCHERS and args and _looks_like_compiler(args[0], own):
            last = args[0]                          # ... of a chain: distcc clang-19
            prefix.append(last)
            args = args[1:]
    else:
        import shlex
        words = shlex.split(os.environ.get("KERNELFARER_CC") or DEFAULT_COMPILER)
        word, prefix = words[0], words[1:]
    compiler = _which(word, own)
    if compiler is None:
        raise CompilerNotFound(f"cannot find the compiler '{word}' (other than {PROG} itself); "
                               "set KERNELFARER_CC or name it: CC=\"kernelfarer-cc gcc\"")
    return Invocation(compiler, prefix, args)


def _child_env() -> dict[str, str]:
    return dict(os.environ, **{GUARD: "1"})


def _exec(cmd: list[str]) -> int:
    """Replace this process by the real compiler (its exit code is ours)."""
    sys.stderr.flush()
    try:
        os.execve(cmd[0], cmd, _child_env())
    except OSError as exc:
        _say(f"error: cannot run {cmd[0]}: {exc.strerror}")
    return 127


# -- rewriting, in a forked child under a time limit -----------------------------------------------

class Outcome:
    """What the rewriter made of one source (plain data: the parent never imports the rewriter)."""

    def __init__(self, path: str, *, error: str | None = None, where: str | None = None,
                 remarks: list[str] | None = None, notes: list[str] | None = None,
                 nests: list[dict] | None = None) -> None:
        self.path = path
        self.error = error
        self.where = where                      # the error's file:line:col, when it has one
        self.compile_text: str | None = None    # None: nothing was replaced
        self.support_units = None               # a split compile's support code (split.py)
        self.remarks = remarks or []
        self.notes = notes or []
        self.nests = nests or []


def _rewrite_one(path: str, cppflags: tuple[str, ...], target: str, quick: bool,
                 split: bool = False, threads: int | None = None,
                 compiler: str | None = None) -> Outcome:
    """`compiler`: the build's compiler when its preprocessor is not the one the analysis runs
    (clang_path): a rewrite holds only if it gives the file the same code (_same_code)."""
    from kernelfarer.diagnostics import KernelfarerError
    from kernelfarer import cpp, prefilter
    try:
        text, macros = cpp.preprocess_with_macros(path, cppflags)
        if quick and not prefilter.may_hold_product_nest(text):
            return Outcome(path, notes=["no loop nest three deep with a product: not parsed"])
        key = _outcome_key(path, text, macros, (cppflags, target, quick, split, threads,
                                                compiler))
        cached = _cached_outcome(key)
        if cached is not None:
            return cached
        from kernelfarer.frontend import SourceText   # the parser and the rest: only now
        from kernelfarer.rewrite import RewriteOptions, rewrite_file
        result = rewrite_file(path, RewriteOptions(target=target, cppflags=cppflags, verify=False,
                                                   split=split, hollow=quick, threads=threads),
                              preprocessed=text, macros=macros)
    except KernelfarerError as exc:
        return Outcome(path, error=exc.message,
                       where=str(exc.location) if exc.location is not None else None)
    outcome = Outcome(path, remarks=[r.message() for r in result.remarks], notes=list(result.notes),
                      nests=[r.to_json() for r in result.remarks])
    if result.edits and compiler is not None and not _same_code(path, cppflags, text, compiler):
        why = (f"not rewritten: {os.path.basename(compiler)}'s preprocessor gives the file other "
               "code than clang's (its own predefined macros, version checks or headers): the "
               "analysis would not hold for the compile")
        outcome = Outcome(path, notes=[why], nests=[dict(n, replaced=False, reason=why)
                                                    for n in outcome.nests])
        _store_outcome(key, outcome)
        return outcome
    if result.edits:
        original = SourceText.read(path).text     # non-UTF-8 bytes as surrogate escapes
        edits = [(e.start, e.end, e.text) for e in result.edits]
        spliced, pos = [], 0
        for start, end, text in edits:
            spliced += [original[pos:start], text]
            pos = end
        if "".join(spliced) + original[pos:] != result.text:
            return Outcome(path, error="the file changed while it was being rewritten")
        outcome.compile_text = compile_text(original, edits, path)
        outcome.support_units = result.support_units
    _store_outcome(key, outcome)
    return outcome


def _same_code(path: str, cppflags: tuple[str, ...], analysed: str, compiler: str) -> bool:
    """Does the build's compiler preprocess the file to the code that was analysed (the same
    tokens from the user's own files)?  A file that chooses its types by compiler (#ifdef
    __clang__, __GNUC__ >= 5) is rewritten only where the two agree."""
    from kernelfarer import cpp
    from kernelfarer.diagnostics import KernelfarerError
    try:
        theirs = cpp.preprocess_as(compiler, path, cppflags)
    except KernelfarerError:
        return False
    return cpp.user_code(theirs) == cpp.user_code(analysed)


# -- the rewrite cache: a rebuild does not parse, match and render again ---------------------------

def _outcome_key(path: str, text: str, macros: frozenset[str], options: tuple) -> str | None:
    """What a rewrite's outcome depends on, hashed: the file's own bytes (the edits are offsets
    into them) and its preprocessed text (every header and macro expansion), the options, the
    KERNELFARER_ variables, the host planned for (a tuned profile included) and kernelfarer's
    own code (the size and time of each of its files).  None: the file cannot be read."""
    import hashlib
    import json
    from kernelfarer import hostinfo
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError:
        return None
    host = hostinfo.current_host()
    digest = hashlib.sha256()
    for part in (repr((path, options, sorted(macros), _code_fingerprint(),
                       json.dumps([host.to_json(), host.source], sort_keys=True),
                       sorted((k, v) for k, v in os.environ.items()
                              if k.startswith("KERNELFARER_")))).encode("utf-8", "replace"),
                 source, text.encode("utf-8", "surrogateescape")):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()[:32]


def _code_fingerprint() -> list:
    """The size and modification time of each file of kernelfarer's (modules, templates, headers)."""
    import importlib.util
    import kernelfarer
    out = [kernelfarer.__version__]
    tops = [os.path.dirname(kernelfarer.__file__)] + [
        importlib.util.find_spec(f"kernelfarer.{sub}").submodule_search_locations[0]
        for sub in ("transforms", "templates")]
    for top in dict.fromkeys(tops):
        for directory, _, files in sorted(os.walk(top)):
            if "__pycache__" in directory or os.path.basename(directory).startswith("."):
                continue
            for name in sorted(files):
                if name.endswith((".py", ".j2", ".h")):
                    info = os.stat(os.path.join(directory, name))
                    out.append((directory, name, info.st_size, info.st_mtime_ns))
    return out


def _cache_path(key: str) -> str:
    from kernelfarer.hostinfo import cache_subdir
    return str(cache_subdir("rewrites") / key)


def _cached_outcome(key: str | None) -> Outcome | None:
    """The outcome a rewrite of the same input had, or None."""
    import pickle
    import zlib
    if key is None or os.environ.get("KERNELFARER_REWRITE_CACHE", "1") == "0":
        return None
    try:
        with open(_cache_path(key), "rb") as f:
            outcome = pickle.loads(zlib.decompress(f.read()))
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, zlib.error, AttributeError,
            TypeError):
        return None
    return outcome if isinstance(outcome, Outcome) else None


def _store_outcome(key: str | None, outcome: Outcome) -> None:
    """Keep `outcome` (compressed) for the next rewrite of the same input; never an error."""
    import pickle
    import zlib
    if key is None or outcome.error is not None or \
            os.environ.get("KERNELFARER_REWRITE_CACHE", "1") == "0":
        return
    from kernelfarer.hostinfo import keep_cached
    path = _cache_path(key)
    if keep_cached(path, zlib.compress(pickle.dumps(outcome), 1)):
        try:
            _prune(os.path.dirname(path))
        except OSError:             # another compile pruned (or removed) it meanwhile
            pass


REWRITE_CACHE_ENTRIES = 1000     # the most recent rewrites kept (tens of KB each)


def _prune(directory: str) -> None:
    """Remove the oldest entries of the rewrite cache past REWRITE_CACHE_ENTRIES."""
    entries = list(os.scandir(directory))
    if len(entries) <= REWRITE_CACHE_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for entry in entries[:len(entries) - REWRITE_CACHE_ENTRIES // 2]:
        try:
            os.remove(entry.path)
        except OSError:
            pass


def rewrite_sources(paths: list[str], cppflags: tuple[str, ...], target: str,
                    timeout: float, quick: bool = True, split: bool = False,
                    threads: int | None = None, compiler: str | None = None) -> list[Outcome]:
    """Rewrite each file in a forked child (a crash or a hang of the rewriter cannot take the
    build with it); on timeout the child and its preprocessors are killed.  `quick`: files
    without a loop nest that multiplies are not parsed, and of the others only the functions
    that can hold a GEMM (RewriteOptions.hollow)."""
    import pickle
    import select
    import signal
    import time
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: no output but the pipe
        try:
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.close(read_fd)
            results = []
            for path in paths:
                try:
                    results.append(_rewrite_one(path, cppflags, target, quick, split, threads,
                                                compiler))
                except Exception as exc:          # a bug of ours: reported, never fatal
                    results.append(Outcome(path, error=f"internal error ({type(exc).__name__}: "
                                                       f"{exc})"))
            data = pickle.dumps(results)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    chunks, deadline, finished = [], time.monotonic() + timeout, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                break
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        if not finished:
            for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    kill()
                    break
                except OSError:
                    pass
        _, status = os.waitpid(pid, 0)
    if not finished:
        why = f"the rewrite took longer than {timeout:g} s"
        return [Outcome(p, error=why) for p in paths]
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not chunks:
        why = "the rewriter died" + (f" (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else "")
        return [Outcome(p, error=why) for p in paths]
    return pickle.loads(b"".join(chunks))


# -- the job ---------------------------------------------------------------------------------------

def _make_escape(path: str) -> str:
    """A path as clang and gcc write it in a dependency file."""
    return path.replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def _remap(path: str, maps: list[tuple[str, str]]) -> str:
    """A path after the user's -f*-prefix-map options (the last matching one wins)."""
    for old, new in reversed(maps):
        if path.startswith(old):
            return new + path[len(old):]
    return path


_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*(?:include|include_next|import)[ \t]*[^<\s]'
                             r'|__has_include(?:_next)?[ \t]*\([ \t]*[^<\s]', re.M)


def _may_include_quoted(text: str) -> bool:
    """Whether `text` may include a file by a quoted name (or a macro that could expand to one):
    only then does its copy need the source's directory on the quoted search path."""
    return _QUOTED_INCLUDE.search(text) is not None


def _other_preprocessor(inv: Invocation) -> str | None:
    """The build's compiler, when it is not the clang the analysis preprocesses with."""
    from kernelfarer.diagnostics import KernelfarerError
    from kernelfarer.toolchain import clang_path
    try:
        ours = os.path.realpath(clang_path())
    except KernelfarerError:
        return inv.real_compiler
    return None if os.path.realpath(inv.real_compiler) == ours else inv.real_compiler


def _compiler_family(compiler: str) -> str:
    """clang, gcc or other, from the compiler's banner; remembered in the profile directory under
    the compiler's identity (path, size, mtime), so that a build asks each compiler once."""
    import subprocess
    from kernelfarer import split
    from kernelfarer.hostinfo import cache_subdir, keep_cached
    identity = split.compiler_identity([compiler])
    memo = str(cache_subdir("compilers") / split.digest("\0".join(identity)))
    try:
        with open(memo, encoding="utf-8") as f:
            known = f.read().strip()
        if known in ("clang", "gcc", "other"):
            return known
    except OSError:
        pass
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                              timeout=20, env=_child_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return "other"
    banner = done.stdout.lower()
    family = "clang" if "clang" in banner else "gcc" if "free software foundation" in banner else "other"
    if done.returncode == 0 and len(identity) > 1:     # only a compiler that ran, and is a file
        keep_cached(memo, family + "\n")
    return family


def _temp_dir(key: str) -> str:
    """A private directory whose name depends only on the command (so that nothing random can
    reach an object file, e.g. through __BASE_FILE__); a numbered variant if it is in use."""
    import hashlib
    import stat
    import tempfile
    base = os.path.join(tempfile.gettempdir(), f"{PROG}-{os.getuid()}")
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return tempfile.mkdtemp(prefix=f"{PROG}-")
    name = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    for suffix in ("", *(f"-{n}" for n in range(1, 8))):
        try:
            os.mkdir(os.path.join(base, name + suffix), 0o700)
            return os.path.join(base, name + suffix)
        except FileExistsError:
            continue
    return tempfile.mkdtemp(prefix="job-", dir=base)


def _env_threads() -> int | None:
    """KERNELFARER_THREADS: the fast path's threads (rewrite --threads); unset: what each nest's
    OpenMP pragmas ask for."""
    text = os.environ.get("KERNELFARER_THREADS")
    if not text:
        return None
    from kernelfarer.plan import parse_threads
    try:
        return parse_threads(text)
    except ValueError:
        sys.stderr.write(f"{PROG}: warning: KERNELFARER_THREADS={text} is not a thread count or "
                         "'auto'; ignored\n")
        return None


class _DependencyFileError(Exception):
    pass


def _regular_file(path: str) -> bool:
    """Is `path` a regular file (or missing: the compiler says so)?"""
    import stat
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


class Job:
    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.report_dir = os.environ.get("KERNELFARER_REPORT_DIR") or None
        self.remarks = _env_on("KERNELFARER_REMARKS")

    def run(self) -> int:
        inv = self.inv
        try:
            cmd = ccargs.parse(inv.args, allow_assembly=_env_on("KERNELFARER_ASM"))
        except ccargs.CommandLineError as exc:
            _warn(None, str(exc))
            return _exec(inv.original)
        self.cmd = cmd
        if cmd.passthrough is not None:
            if self.remarks:
                for src in cmd.c_sources:
                    _say(f"remark: {src.path}: not rewritten: {cmd.passthrough}")
            return _exec(inv.original)
        sources = cmd.c_sources
        if not all(_regular_file(s.path) for s in sources):
            # a pipe (`-x c <(gen)`, a FIFO) can be read once, and that read is the compiler's
            if self.remarks:
                _say("remark: not rewritten: a source is not a regular file (a pipe?)")
            return _exec(inv.original)
        todo = [s for s in sources if may_hold_nest(s.path)]
        for src in sources:
            if src not in todo:
                self._report(Outcome(src.path), rewritten=False)
        if not todo:
            return _exec(inv.original)
        import signal                    # a terminated job still kills its rewriter and cleans up
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        timeout = float(os.environ.get("KERNELFARER_TIMEOUT") or DEFAULT_TIMEOUT)
        target = os.environ.get("KERNELFARER_TARGET") or default_build_target(cmd.cppflags)
        # remarks and reports describe every nest: only without them are files skimmed
        quick = not (self.remarks or self.report_dir)
        from kernelfarer import split
        self.split = split.refusal(cmd, inv.chain) is None
        outcomes = rewrite_sources([s.path for s in todo], tuple(cmd.cppflags), target, timeout,
                                   quick, self.split, _env_threads(), _other_preprocessor(inv))
        chosen = []
        for src, outcome in zip(todo, outcomes):
            if outcome.error is not None:
                _warn(outcome.where or src.path, outcome.error)
                self._report(outcome, rewritten=False, fallback=outcome.error)
                continue
            if self.remarks:
                for line in [f"{PROG}: {n}" for n in outcome.notes] + outcome.remarks:
                    sys.stderr.write(line + "\n")
            if outcome.compile_text is None:
                self._report(outcome, rewritten=False)
            else:
                chosen.append((src, outcome))
        if not chosen:
            return _exec(inv.original)
        return self._compile(chosen)

    def _report(self, outcome: Outcome, *, rewritten: bool, fallback: str | None = None) -> None:
        if not self.report_dir:
            return
        import hashlib
        import json
        key = os.path.abspath(outcome.path) + "\0" + os.path.abspath(self.cmd.output or "")
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        name = os.path.join(self.report_dir, f"{os.path.basename(outcome.path)}.{digest}.json")
        nests = outcome.nests
        if not rewritten:      # "replaced" means replaced in what was compiled
            why = fallback or "the file was compiled unchanged"
            nests = [dict(n, replaced=False, reason=n.get("reason") or why) for n in nests]
        report = {"file": outcome.path, "output": self.cmd.output, "compiler": self.inv.real_compiler,
                  "launchers": self.inv.chain,
                  "rewritten": rewritten, "fallback": fallback, "notes": outcome.notes,
                  "nests": nests}
        os.makedirs(self.report_dir, exist_ok=True)
        tmp = f"{name}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, name)

    def _compile(self, chosen: list[tuple[ccargs.Input, Outcome]]) -> int:
        import shutil
        import subprocess
        from kernelfarer import split
        cmd, inv = self.cmd, self.inv
        family = _compiler_family(inv.real_compiler)
        tmp = _temp_dir("\0".join([os.getcwd(), inv.compiler, *inv.prefix, *inv.args]))
        support = None              # a split compile's support objects, being built (split.py)
        try:
            texts = [outcome.compile_text for _, outcome in chosen]
            units = [outcome.support_units for _, outcome in chosen]
            if len(units) == 1 and units[0] is not None:
                compiler = [inv.compiler, *inv.prefix]
                options = split.support_options(cmd, units[0], compiler, _child_env())
                tags, resolved = split.resolve(units[0], compiler, options)
                texts = [split.resolved(texts[0], tags)]
                support = split.SupportBuild(resolved, compiler, options, _child_env())
                if support.problem is not None:
                    return self._fallback(chosen, f"its support code did not compile "
                                                  f"({support.problem})")
            args = list(cmd.args)
            front: list[str] = []
            back: list[str] = []
            temps: list[tuple[str, str]] = []           # (temporary path, user's path)
            quoted: set[str] = set()
            for k, ((src, outcome), text) in enumerate(zip(chosen, texts)):
                os.mkdir(os.path.join(tmp, str(k)))
                path = os.path.join(tmp, str(k), os.path.basename(src.path))
                with open(path, "wb") as f:
                    f.write(text.encode("utf-8", errors="surrogateescape"))
                try:       # __TIMESTAMP__ gives the source's time, as in the plain build
                    info = os.stat(src.path)
                    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
                except OSError:
                    pass
                args[src.index] = path
                temps.append((path, src.path))
                directory = os.path.dirname(src.path) or "."
                if directory not in quoted and _may_include_quoted(text):
                    quoted.add(directory)
                    front += ["-iquote", directory]
                    if family == "gcc" and directory == ".":   # gcc spells "k.h", not "./k.h"
                        front += ["-fmacro-prefix-map=./=", "-fdebug-prefix-map=./="]
                back.append(f"-fdebug-prefix-map={path}={_remap(src.path, cmd.debug_maps)}")
                if family == "gcc" or (family == "clang" and cmd.macro_maps):
                    back.append(f"-fmacro-prefix-map={path}={_remap(src.path, cmd.macro_maps)}")
            if quoted and family == "clang" and DISTRIBUTORS & set(inv.chain):
                # distcc and icecc hand -iquote to the remote compile of preprocessed text, where
                # clang calls it unused; the plain build has no such flag to warn about.
                back.append("-Wno-unused-command-line-argument")
            if sys.stderr.isatty() and not any("color" in a for a in args):
                front.append("-fdiagnostics-color=always")
            at = cmd.end_of_options if cmd.end_of_options is not None else len(args)
            args = front + args[:at] + back + args[at:]
            if cmd.response_file:
                rsp = os.path.join(tmp, "args.rsp")
                with open(rsp, "w", encoding="utf-8") as f:
                    f.write("\n".join(ccargs.quote_response_word(a) for a in args) + "\n")
                args = ["@" + rsp]
            done = subprocess.run([inv.compiler, *inv.prefix, *args], stderr=subprocess.PIPE,
                                  env=_child_env())
            if done.returncode < 0:                     # interrupted: no second attempt
                sys.stderr.buffer.write(done.stderr)
                return 128 - done.returncode
            problem = None
            if done.returncode != 0:
                errors = done.stderr.decode("utf-8", "replace").splitlines()
                problem = next((ln for ln in errors if "error" in ln),
                               next((ln for ln in errors if ln.strip()), "it failed"))
            else:
                try:
                    self._fix_dependency_files(chosen, temps)
                except (OSError, _DependencyFileError) as exc:
                    problem = f"dependency file: {exc}"
                if problem is None and support is not None:
                    objects = support.wait()
                    if isinstance(objects, str):
                        return self._fallback(chosen, f"its support code did not compile "
                                                      f"({objects})")
                    problem = split.link([inv.compiler, *inv.prefix], split.object_path(cmd),
                                         objects, _child_env())
            if problem is not None:
                return self._fallback(chosen, problem)
            stderr = done.stderr
            for path, user_path in temps:
                stderr = stderr.replace(path.encode(), user_path.encode())
            sys.stderr.buffer.write(stderr)
            sys.stderr.flush()
            for _, outcome in chosen:
                self._report(outcome, rewritten=True)
            return 0
        finally:
            if support is not None:
                support.abandon()
            shutil.rmtree(tmp, ignore_errors=True)

    def _fix_dependency_files(self, chosen, temps) -> None:
        for (src, _), (path, user_path) in zip(chosen, temps):
            depfile = self.cmd.dependency_file(src)
            if depfile is None:
                continue
            ours = _make_escape(path)
            # distcc writes -MD output for an unnamed dependency file as <source stem>.d in the
            # working directory, whatever -o says; the plain build's file is there too then.
            stem_d = os.path.splitext(os.path.basename(src.path))[0] + ".d"
            for candidate in dict.fromkeys([depfile, stem_d]):
                try:
                    with open(candidate, encoding="utf-8", errors="surrogateescape") as f:
                        text = f.read()
                except FileNotFoundError:
                    continue
                if ours in text:
                    depfile = candidate
                    break
            else:
                raise _DependencyFileError(f"{depfile} does not name the compiled file")
            with open(depfile, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text.replace(ours, _make_escape(user_path)))

    def _fallback(self, chosen, problem: str) -> int:
        """The rewritten sources did not compile: compile the original command.  Its result is
        the result; the warning is printed only when the original compiles, i.e. when we were
        the problem."""
        import subprocess
        done = subprocess.run(self.inv.original, env=_child_env())
        if done.returncode == 0:
            why = f"the rewritten file did not compile ({problem})"
            for src, outcome in chosen:
                _warn(src.path, why)
                self._report(outcome, rewritten=False, fallback=why)
        return done.returncode if done.returncode >= 0 else 128 - done.returncode


def cross_build_target(flags: list[str] | tuple[str, ...] = ()) -> str | None:
    """For a cross compile (`--target=<triple>` or `-target <triple>` for another machine than
    this one), that machine's best registry target (generic when it has none); else None."""
    from kernelfarer import targets
    triple = None
    for i, flag in enumerate(flags):
        if flag.startswith("--target="):
            triple = flag.split("=", 1)[1]
        elif flag == "-target" and i + 1 < len(flags):
            triple = flags[i + 1]
    if not triple:
        return None
    from kernelfarer.hostinfo import canonical_arch, host_arch
    arch = canonical_arch(triple.split("-", 1)[0])
    if arch == host_arch():
        return None
    same = [t for t in targets.TARGETS.values() if t.arch == arch and not t.dispatch]
    return targets.best_of(same).name if same else targets.GENERIC


def default_build_target(flags: list[str] | tuple[str, ...] = ()) -> str:
    """The target a build uses unless told otherwise.  A cross compile (`--target=<triple>` for
    another machine) gets that machine's best registry target; a native build a dispatching target
    when one covers this host's ISA (a binary built here must also run, and run fast, on other
    machines of the same ISA), else the best target for the host."""
    from kernelfarer import targets
    cross = cross_build_target(flags)
    if cross:
        return cross
    for target in targets.TARGETS.values():
        if target.dispatch and targets.host_can_run(target):
            return target.name
    return "auto"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    try:
        inv = invocation(argv)
    except CompilerNotFound as exc:
        _say(f"error: {exc}")
        return 127
    if os.environ.get(GUARD) or _env_on("KERNELFARER_DISABLE"):
        return _exec(inv.original)
    try:
        return Job(inv).run()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:                      # any bug of ours: the original command runs
        first = next((a for a in inv.args if a.endswith(".c")), None)
        _warn(first, f"internal error ({type(exc).__name__}: {exc})")
        return _exec(inv.original)


if __name__ == "__main__":
    sys.exit(main())
