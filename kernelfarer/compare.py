"""`kernelfarer compare`: the paper's comparison (Pluto, tiling, tiling + packing, BLAS) on the
user's own loop nest.

Every variant is the user's whole file with the nest in that variant's form (a rewrite backend,
kernelfarer/backends.py), plus a generated harness (kernelfarer/harness.py) that calls the
function holding the nest on arrays of small integers.  The user's own `main`, if any, is renamed
away.

    original      the nest as written (clang -O3 -march=native)
    interchange   the nest's loops in the best order (Pluto-style's point order), no tiling
    pluto-style   Pluto's rectangular tiling of the permutable band (kernelfarer/plutostyle.py)
    tiled         blocking and the intrinsic register tile, no packing (templates/tiled.c.j2)
    tiled+packed  kernelfarer's rewrite
    blas          a cblas_?gemm call (rewrite --backend blas), OpenBLAS, single-threaded
    polly         the nest as written, clang -O3 -mllvm -polly (Polly, in the same clang), its GEMM
                  path off (-polly-pattern-matching-based-opts=false): Polly's scheduling alone
    polly-gemm    ... with Polly's GEMM path (pattern matching; what clang-19's -polly does)
    polycc        real Pluto (polycc --tile --intratileopt), when polycc is on PATH

With `threads` (--threads N > 1), these also run on N threads, beside their single-thread rows:
pluto-style (Pluto's --parallel: `omp parallel for` on the outermost loop when it carries no
dependence), tiled+packed (rewrite --threads N, -fopenmp), blas (OPENBLAS_NUM_THREADS=N) and
polly-parallel (-polly-parallel on OpenMP); their names end in "xN".

Each variant's result is compared exactly with the original's before anything is timed; timing
follows kernelfarer/timing.py.  Results: a Markdown table (stdout), CSV and a PNG plot
(kernelfarer/compare_report.py).
"""

from __future__ import annotations

import array
import os
import resource
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field, replace

from kernelfarer.backends import Backend, Call, Site
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.emit import SUPPORT_MARK
from kernelfarer.harness import Subject, load_subjects, render_harness
from kernelfarer.plutostyle import PlutoOptions, PlutoStyleBackend
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from kernelfarer.timing import Job, Progress, median_interval, run_rounds
from kernelfarer.toolchain import clang_path

VARIANTS = ("original", "interchange", "pluto-style", "tiled", "tiled+packed", "blas", "polly",
            "polly-gemm", "polycc")
# Variants that also run on threads (with --threads N), as "<name> xN".
THREADED = ("pluto-style", "tiled+packed", "blas", "polly-parallel")
# Compiler options of the variants compiled by Polly (the nest as written).
# clang-19's -mllvm -polly turns Polly's GEMM path (pattern matching) on by itself: "polly" turns it
# off, to show what Polly's own scheduling and tiling do; "polly-gemm" is what -mllvm -polly gives.
POLLY = {
    "polly": ("-mllvm", "-polly", "-mllvm", "-polly-pattern-matching-based-opts=false"),
    "polly-gemm": ("-mllvm", "-polly", "-mllvm", "-polly-pattern-matching-based-opts=true"),
    "polly-parallel": ("-mllvm", "-polly", "-mllvm", "-polly-parallel", "-mllvm",
                       "-polly-omp-backend=LLVM", "-fopenmp"),
}
# The variants run with at least this much stack: Polly's GEMM path keeps its packed panels on the
# stack, and its binaries crash at the usual 8 MiB limit (every variant gets the same limit).
STACK_BYTES = 256 << 20
# A check that could not compare anything (nothing wrong was seen) says so with this prefix.
NOT_RUN = "not run: "
EMPTY = f"{NOT_RUN}the GEMM is empty"      # the original's, at that size: nothing to time
CHECK_SIZE = 67                   # an odd size every variant is also checked at (block edges)
_ARRAY_TYPECODES = {"float": "f", "double": "d", "int": "i", "long": "l",
                    "_Float16": "H"}     # fp16 compared by its bits (struct's "e" reads them)


@dataclass(frozen=True)
class CompareOptions:
    path: str
    functions: tuple[str, ...] = ()
    sizes: tuple[int, ...] = (64, 256, 1024)
    variants: tuple[str, ...] = ()          # () = all that apply here
    rounds: int = 10
    target: str = "auto"
    pluto: PlutoOptions = PlutoOptions()
    original_limit: int = 1024              # the original is timed up to this size
    min_time: float = 0.2                   # seconds timed per measurement (calls repeat)
    cppflags: tuple[str, ...] = ()
    workdir: str | None = None              # keep the variants' sources and executables here
    seed: int | None = None
    progress: bool | None = None            # None: when stderr is a terminal
    threads: int = 1                        # > 1: the THREADED variants also on this many


@dataclass
class Variant:
    name: str
    text: str = ""
    link: tuple[str, ...] = ()
    exe: str = ""
    fast_path: bool = False         # the nest runs behind run-time checks (the harness counts it)
    skipped: dict[str, str] = field(default_factory=dict)   # function -> why it is not measured
    notes: list[str] = field(default_factory=list)     # what the table's notes say of it
    cflags: tuple[str, ...] = ()    # compiler options beyond the common ones
    env: tuple[tuple[str, str], ...] = ()     # its runs' environment, beyond _env()


@dataclass(frozen=True)
class Row:
    variant: str
    function: str
    dtype: str
    size: int
    m: int
    n: int
    k: int
    gflops_median: float | None
    ci_low: float | None
    ci_high: float | None
    seconds_median: float | None
    rounds: int
    note: str = ""


# -- the variants -------------------------------------------------------------------------------------

class PolyccScopBackend(Backend):
    """Marks the nest as Pluto's static control part; polycc does the rest."""

    name = "polycc-scop"

    def call(self, site: Site) -> Call:
        return Call(f"\n#pragma scop\n{site.indent}{site.original}\n#pragma endscop\n", None)

    def support(self, plans: list, uses: str | None = None) -> str:
        return ""


def _located(result, subject: Subject):
    for remark in result.remarks:
        if remark.location.line == subject.spec.location.line and remark.kind == "gemm":
            return remark
    return None


def threaded_name(name: str, threads: int) -> str:
    return f"{name} x{threads}"


def make_variant(name: str, options: CompareOptions, subjects: list[Subject],
                 workdir: str) -> Variant:
    base, _, count = name.partition(" x")
    threads = int(count) if count else 1
    variant = Variant(name)
    if threads > 1:
        variant.env = (("OMP_NUM_THREADS", str(threads)), ("OPENBLAS_NUM_THREADS", str(threads)))
    if base == "original" or base in POLLY:
        with open(options.path, encoding="utf-8", errors="replace") as f:
            variant.text = f.read()
        variant.cflags = POLLY.get(base, ())
        return variant
    backend: object = {"interchange": PlutoStyleBackend(replace(options.pluto, tile=0,
                                                                second_level=0)),
                       "pluto-style": PlutoStyleBackend(replace(options.pluto,
                                                                parallel=threads > 1)),
                       "tiled": "tiled",
                       "tiled+packed": "kernelfarer", "blas": "blas",
                       "polycc": PolyccScopBackend()}[base]
    result = rewrite_file(options.path, RewriteOptions(target=options.target,
                                                       cppflags=options.cppflags,
                                                       verify=False, backend=backend,
                                                       every_helper=True, threads=threads))
    if threads > 1 and base in ("tiled+packed", "pluto-style"):
        variant.cflags = ("-fopenmp",)
    variant.text = result.text
    variant.fast_path = base != "polycc"
    for subject in subjects:
        remark = _located(result, subject)
        details = dict(remark.details) if remark is not None else {}
        if remark is None or not remark.replaced:
            variant.skipped[subject.function] = "the nest was not rewritten"
        elif details.get("not_applied"):
            variant.skipped[subject.function] = details["not_applied"]
        elif base == "blas" and str(details.get("backend", "")).startswith("kernelfarer"):
            variant.skipped[subject.function] = details["backend"]
        elif base == "tiled" and subject.spec.b.col_stride.strip() != "1":
            variant.skipped[subject.function] = "B's columns are not contiguous (no vector loads)"
        if details.get("expanded"):
            variant.notes.append(f"{name} {subject.function}(): scalar {details['expanded']} "
                                 "expanded to a heap array (as PPCG does; Pluto does not)")
    if base == "blas":
        variant.link = ("-lopenblas",)
    if base == "polycc":
        variant.text = _run_polycc(options, variant.text, workdir)
    return variant


def _run_polycc(options: CompareOptions, text: str, workdir: str) -> str:
    source = os.path.join(workdir, "polycc_in.c")
    out = os.path.join(workdir, "polycc_out.c")
    with open(source, "w", encoding="utf-8") as f:
        f.write(text)
    cmd = ["polycc", source, "--tile", "--intratileopt", "-o", out]
    if options.pluto.second_level:
        cmd.insert(3, "--second-level-tile")
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, timeout=600)
    if done.returncode != 0 or not os.path.exists(out):
        raise KernelfarerError(f"polycc failed: {(done.stderr or done.stdout).strip()[:300]}")
    with open(out, encoding="utf-8", errors="replace") as f:
        return f.read()


def harness(options: CompareOptions, subjects: list[Subject]) -> tuple[str, str]:
    """The harness for a variant without the support prelude, and for one with it."""
    name = os.path.basename(options.path)
    return render_harness(name, subjects), render_harness(name, subjects, prelude=False)


def build(variant: Variant, options: CompareOptions, harness_texts: tuple[str, str],
          workdir: str) -> None:
    tag = _file_tag(variant.name)
    source = os.path.join(workdir, f"{tag}.c")
    variant.exe = os.path.join(workdir, tag)
    has_prelude = SUPPORT_MARK in variant.text
    with open(source, "w", encoding="utf-8") as f:
        f.write(variant.text + "\n" + harness_texts[has_prelude])
    directory = os.path.dirname(os.path.abspath(options.path))
    cmd = [clang_path(), "-O3", "-march=native", "-w", "-DKERNELFARER_TRACE",
           "-Dmain=kf_compare_user_main", "-iquote", directory, *options.cppflags,
           *variant.cflags, source, "-o", variant.exe, *variant.link, "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr[:300])
        raise KernelfarerError(f"building the {variant.name} variant failed: {first} "
                               f"(source kept in {source})" if options.workdir else
                               f"building the {variant.name} variant failed: {first}")


def _file_tag(name: str) -> str:
    """A variant's name as part of a file name ("tiled+packed x2" -> "tiled_packed_x2")."""
    return name.replace("+", "_").replace("-", "_").replace(" ", "_")


def raise_stack_limit(wanted: int = STACK_BYTES) -> None:
    """Raise this process's soft stack limit (the variants inherit it) to `wanted`, or as far as
    the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_STACK, (new, hard))


def _env() -> dict:
    env = dict(os.environ)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", GOTO_NUM_THREADS="1")
    return env


def check(variant: Variant, reference: Variant, index: int, subject: Subject, size: int,
          workdir: str, cache: dict | None = None) -> str | None:
    """Run both at `size` and compare C exactly; None when equal, else what differs.  `cache`
    keeps the reference's results between calls."""
    outputs = []
    for v in (reference, variant):
        if v is reference and cache is not None and (v.exe, index, size) in cache:
            outputs.append(cache[(v.exe, index, size)])
            continue
        out = os.path.join(workdir, f"check_{_file_tag(v.name)}_{index}_{size}.bin")
        done = subprocess.run([v.exe, str(index), str(size), "0", "0", out], capture_output=True,
                              text=True, env={**_env(), **dict(v.env)}, timeout=3600)
        if done.returncode != 0:
            return f"{v.name} exited with status {done.returncode}: {done.stderr.strip()[:200]}"
        fast, *shape = (int(word) for word in done.stdout.split()[:4])
        if v is reference and 0 in shape:
            return (f"{EMPTY} when every integer parameter is {size} "
                    f"(M N K = {' '.join(map(str, shape))})")
        if v is variant and v.fast_path and fast <= 0:
            return (f"{NOT_RUN}its fast path did not run (a run-time check failed; the original "
                    "nest ran)")
        code = _ARRAY_TYPECODES.get(subject.spec.dtype.ctype, "f")
        values = array.array(code)
        with open(out, "rb") as f:
            values.frombytes(f.read())
        outputs.append(values)
        if v is reference and cache is not None:
            cache[(v.exe, index, size)] = values
    want, got = outputs
    if want == got:
        return None
    if want.typecode == "H":
        want, got = (array.array("f", struct.unpack(f"{len(x)}e", x.tobytes()))
                     for x in (want, got))
    diffs = [(abs(float(a) - float(b)), i) for i, (a, b) in enumerate(zip(want, got)) if a != b]
    worst = max(diffs) if diffs else (0.0, -1)
    return (f"result differs from the original at N={size} in {len(diffs)} elements "
            f"(largest difference {worst[0]:g} at element {worst[1]})")


def sources(path: str) -> list[str]:
    """The C files a run covers: `path` itself, or every `.c` file under the directory `path`
    (sorted; hidden directories skipped)."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(top, f) for f in sorted(files) if f.endswith(".c")]
    return found


def run_tree(options: CompareOptions) -> tuple[list[Row], list[str]]:
    """`run` on one file, or on every C file of a directory: there each row's function is named
    `<file relative to the directory>:<function>`, and a file holding no nest compare can drive is
    a note."""
    if not os.path.isdir(options.path):
        return run(options)
    rows: list[Row] = []
    notes: list[str] = []
    for path in sources(options.path):
        where = os.path.relpath(path, options.path)
        workdir = os.path.join(options.workdir, where.replace(os.sep, "_")) \
            if options.workdir else None
        try:
            found, said = run(replace(options, path=path, workdir=workdir))
        except KernelfarerError as exc:
            notes.append(f"{where}: not compared: {exc.message}")
            continue
        rows += [replace(r, function=f"{where}:{r.function}") for r in found]
        notes += [f"{where}: {n}" for n in said if f"{where}: {n}" not in notes]
    if not rows:
        raise KernelfarerError(f"{options.path}: no C file in it holds a GEMM nest compare can "
                               "drive")
    return rows, notes


def run(options: CompareOptions) -> tuple[list[Row], list[str]]:
    """Build, check and time every variant; the rows and notes of the report."""
    notes: list[str] = []
    subjects = load_subjects(options.path, options.cppflags, options.functions, notes)
    wanted = list(options.variants or [v for v in VARIANTS if v != "polycc" or shutil.which("polycc")])
    if not options.variants and not shutil.which("polycc"):
        notes.append("polycc (Pluto) is not on PATH: the polycc variant was skipped")
    for name in wanted:
        if name not in VARIANTS and name != "polly-parallel":
            raise KernelfarerError(f"unknown variant '{name}' (known: {', '.join(VARIANTS)}, "
                                   "and polly-parallel with --threads)")
    if options.threads > 1:
        single = [v for v in wanted if v != "polly-parallel"]
        parallel = [v for v in THREADED if v in wanted or not options.variants
                    or v == "polly-parallel" and "polly" in wanted]
        wanted = single + [threaded_name(v, options.threads) for v in parallel]
    elif "polly-parallel" in wanted:
        raise KernelfarerError("variant polly-parallel runs on threads: give --threads N (N > 1)")
    if "polycc" in wanted and not shutil.which("polycc"):
        raise KernelfarerError("variant polycc: polycc (Pluto) is not on PATH")
    if "original" not in wanted:
        wanted.insert(0, "original")        # every variant is checked against it
        notes.append("original is built to check the variants' results (not timed)")
        time_original = False
    else:
        time_original = True
        wanted = ["original"] + [v for v in wanted if v != "original"]
    workdir = options.workdir or tempfile.mkdtemp(prefix="kernelfarer-compare-")
    os.makedirs(workdir, exist_ok=True)
    raise_stack_limit()
    try:
        return _run_in(options, subjects, wanted, time_original, workdir, notes)
    finally:
        if not options.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_in(options, subjects, wanted, time_original, workdir, notes):
    sizes = sorted(set(options.sizes))
    check_sizes = sorted({s for s in sizes if s <= options.original_limit} | {CHECK_SIZE})
    progress = Progress(0, enabled=options.progress)
    variants: list[Variant] = []
    harness_texts = harness(options, subjects)
    progress.total = len(wanted) + 1
    for name in wanted:
        progress.show(f"building {name}")
        try:
            variant = make_variant(name, options, subjects, workdir)
            build(variant, options, harness_texts, workdir)
        except KernelfarerError as exc:
            if name == "original":
                raise
            notes.append(f"{name}: not built: {exc.message}")
            progress.step(f"building {name}")
            continue
        variants.append(variant)
        notes.extend(variant.notes)
        progress.step(f"building {name}")
    reference = variants[0]
    results: dict = {}
    # Correctness first: every variant against the original, before anything is timed.
    for variant in variants[1:]:
        for index, subject in enumerate(subjects):
            if subject.function in variant.skipped:
                continue
            for size in check_sizes:
                progress.show(f"checking {variant.name} {subject.function} N={size}")
                problem = check(variant, reference, index, subject, size, workdir, results)
                if problem:               # the table's notes say it (from the row)
                    wrong = "" if problem.startswith(NOT_RUN) else "WRONG: "
                    variant.skipped[subject.function] = f"{wrong}{problem}; not timed"
                    if problem.startswith(EMPTY):
                        reference.skipped[subject.function] = f"{problem}; not timed"
                    break
    big = [s for s in sizes if s > options.original_limit]
    if big and time_original:
        notes.append(f"original is not timed above N={options.original_limit} (--original-limit); "
                     f"the variants were checked against it at N={', '.join(map(str, check_sizes))}")
    jobs = []
    for variant in variants:
        for index, subject in enumerate(subjects):
            if subject.function in variant.skipped:
                continue
            if variant is reference and not time_original:
                continue
            for size in sizes:
                if variant is reference and size > options.original_limit:
                    continue
                jobs.append(Job(key=(variant.name, index, size),
                                command=(variant.exe, str(index), str(size), "1",
                                         str(options.min_time)),
                                label=f"{variant.name} {subject.function} N={size}",
                                env=variant.env))
    progress.total = progress.done + len(jobs) * options.rounds
    samples = run_rounds(jobs, rounds=options.rounds, parse=_parse_line, env=_env(),
                         seed=options.seed, progress=progress)
    progress.close()
    rows = []
    for variant in variants:
        for index, subject in enumerate(subjects):
            for size in sizes:
                key = (variant.name, index, size)
                if variant is reference and not time_original:
                    continue
                if key not in samples:
                    why = variant.skipped.get(subject.function) or (
                        f"not timed above N={options.original_limit}")
                    rows.append(Row(variant.name, subject.function, subject.dtype, size, 0, 0, 0,
                                    None, None, None, None, 0, why))
                    continue
                runs = samples[key]
                m, n, k = runs[0][1]
                flop = 2.0 * m * n * k
                ci = median_interval([flop / seconds * 1e-9 for seconds, _ in runs])
                secs = median_interval([seconds for seconds, _ in runs])
                note = "" if ci.coverage >= 0.95 else f"CI covers {ci.coverage:.0%}"
                rows.append(Row(variant.name, subject.function, subject.dtype, size, m, n, k,
                                ci.median, ci.low, ci.high, secs.median, len(runs), note))
    return rows, notes


def _parse_line(stdout: str):
    fields = stdout.split()
    return float(fields[0]), (int(fields[2]), int(fields[3]), int(fields[4]))
