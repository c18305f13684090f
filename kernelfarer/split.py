"""Split compiles: kernelfarer-cc compiles the support code once per build configuration.

A file with replaced nests holds, in one translation unit, its call sites and a few hundred
kilobytes of kernels, packing routines and drivers; compiling those is most of what the wrapper
adds to a build (several seconds per file, for code that is the same in every file of the build).
So the wrapper compiles the call sites' unit (the user's file, its nests replaced by calls to
drivers it declares), and the support code as a unit of its own, which it keeps in the profile
directory (`objects/`) under a hash of that unit's text, the compiler and the compile's options;
then it links the two into the object the build asked for (`cc -r`).  Every object still carries
its own copy of the code: nothing is needed at run time.  The entry drivers are weak, hidden and
named with that hash, so objects built from different support code or options never share one.

Only plain compiles to an object split (no LTO, coverage, profiling, sanitizers, foreign targets
or launchers); anything that fails along the way falls back to the original compile, as every
failure of the wrapper does.  KERNELFARER_SPLIT=0 turns it off.
"""

from __future__ import annotations

import hashlib
import os
import subprocess

from kernelfarer import ccargs

# The support unit's entry drivers: their linkage, and the word in their assembler names that the
# compile replaces by its tag (templates/entry.c.j2).
SPLIT_LINKAGE = '__attribute__((weak, visibility("hidden")))'
SPLIT_TAG = "KERNELFARER_SPLIT_TAG"

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
            "-mx32", "--target", "-target", "-B", "-gsplit-dwarf", "-fdump", "-fsave-optimization",
            "-Wp,")


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
    return None


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


def cache_dir() -> str:
    from kernelfarer.hostinfo import PROFILE_DIR_ENV, profile_dir
    return str(profile_dir(os.environ.get(PROFILE_DIR_ENV) or None) / "objects")


def support_object(unit: str, compiler: list[str], options: list[str],
                   env: dict[str, str]) -> tuple[str, str] | str:
    """The compiled support unit: (its tag, its object's path), compiled now unless cached; or
    why it could not be had.  The unit's source stays beside its object, and is compiled there
    under its own name: the object (its debug information too) depends on nothing else, whichever
    compile of the build got to it first."""
    name = tag(unit, compiler, options)
    directory = cache_dir()
    path = os.path.join(directory, name + ".o")
    if os.path.exists(path):
        return name, path
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        return f"cannot make {directory}: {exc.strerror}"
    source = f"{name}.c"
    written = os.path.join(directory, f"{source}.{os.getpid()}.tmp")
    with open(written, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(unit.replace(SPLIT_TAG, name))
    os.replace(written, os.path.join(directory, source))
    temporary = f"{name}.o.{os.getpid()}.tmp"
    done = subprocess.run([*compiler, *options, "-c", "-x", "c", source, "-o", temporary],
                          stderr=subprocess.PIPE, env=env, cwd=directory)
    temporary = os.path.join(directory, temporary)
    if done.returncode != 0:
        _remove(temporary)
        errors = done.stderr.decode("utf-8", "replace").splitlines()
        return next((ln for ln in errors if "error" in ln), "the support code did not compile")
    os.replace(temporary, path)           # atomic: concurrent builds may race to the same name
    return name, path


def link(compiler: list[str], output: str, support: str, env: dict[str, str]) -> str | None:
    """Put the support object into `output` (a relocatable link); None, or what went wrong."""
    if not os.path.isfile(output) or os.path.islink(output):
        return f"{output} is not a regular file"
    temporary = f"{output}.kf{os.getpid()}.tmp"
    done = subprocess.run([*compiler, "-r", "-nostdlib", "-o", temporary, output, support],
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
