"""The `kernelfarer` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Sequence

from kernelfarer import __version__, targets
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.plan import parse_threads
from kernelfarer.rewrite import RewriteOptions, RewriteResult, rewrite_file

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelfarer",
        description="Find naive GEMM loop nests in C and replace them with blocked, packed, "
                    "SIMD code. Arguments after '--' go to the C preprocessor (-I, -D, -std...).")
    parser.add_argument("--version", action="version", version=f"kernelfarer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    rw = sub.add_parser("rewrite", help="rewrite a C file with its GEMM loop nests replaced")
    rw.add_argument("input", help="the C file")
    out = rw.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", help="write the rewritten file here (default: stdout)")
    out.add_argument("--in-place", action="store_true", help="replace the input file (atomically)")
    _common(rw)
    rw.add_argument("--no-verify", dest="verify", action="store_false",
                    help="do not check that the rewritten file compiles")
    rw.add_argument("--backend", choices=("kernelfarer", "blas"), default="kernelfarer",
                    help="what a GEMM nest becomes: kernelfarer's own blocked, packed SIMD code "
                         "(default), or a cblas_sgemm/cblas_dgemm call (#include <cblas.h>; link "
                         "with a CBLAS such as -lopenblas)")

    ex = sub.add_parser("explain", help="list every loop nest with its verdict and reason")
    ex.add_argument("input", help="the C file")
    ex.add_argument("--schedule", action="store_true",
                    help="also print the schedule tree of each replacement's driver")
    _common(ex)

    sub.add_parser("targets", help="list the targets and which ones this host can run")

    tn = sub.add_parser(
        "tune", help="measure cache blocks around the model's on this machine and store the best "
                     "in this machine's profile (used by rewrite and kernelfarer-cc)")
    tn.add_argument("--target", default="auto", help="auto (best for this machine) or a target "
                                                     "this machine runs")
    tn.add_argument("--dtypes", default="f32,f64", help="comma-separated: f32, f64")
    tn.add_argument("--sizes", default="1024,2048", help="square sizes timed (default 1024,2048)")
    tn.add_argument("--rounds", type=int, default=3, help="measurements per candidate and size")
    tn.add_argument("--budget", type=float, default=60.0, metavar="S",
                    help="stop searching after about S seconds (default 60)")
    tn.add_argument("--try", dest="candidates", default="", metavar="MC,KC,NC[;...]",
                    help="time exactly these blocks (and the model's) instead of searching")
    tn.add_argument("-o", "--output", help="write the profile here instead of this machine's "
                                           "profile (use it with KERNELFARER_HOST=FILE)")
    tn.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                    help="no progress bar on stderr")

    pr = sub.add_parser(
        "prepare", help="compile the support code kernelfarer-cc links into objects ahead of "
                        "time, so that the first build on this machine finds it compiled")
    pr.add_argument("--compiler", action="append", metavar="CC",
                    help="a compiler to prepare for (repeatable; default: $KERNELFARER_CC, "
                         "else clang-19)")
    pr.add_argument("--options", action="append", metavar="'FLAGS'",
                    help="a configuration of compile options, as --options='-O2 -g' "
                         "(repeatable; default: '-O2', '-O2 -g', '-O2 -fPIC', "
                         "'-O2 -g -fPIC', '-O2 -march=native')")
    pr.add_argument("--quiet", action="store_true", help="say nothing unless something failed")

    cmp = sub.add_parser(
        "compare", help="time a GEMM nest as written, Pluto-style tiled, tiled, tiled+packed "
                        "(kernelfarer) and as a BLAS call")
    cmp.add_argument("input", help="the C file, or a directory: every C file under it (one "
                                    "plot per function, and a summary table)")
    cmp.add_argument("--function", action="append", default=[], metavar="NAME",
                     help="the function holding the nest (repeatable; default: every function "
                          "with one recognized GEMM nest)")
    cmp.add_argument("--sizes", default="64,256,1024",
                     help="comma-separated N (every integer size and leading-dimension parameter "
                          "gets N; default 64,256,1024)")
    cmp.add_argument("--variants", default="",
                     help="comma-separated subset of: original, interchange, pluto-style, tiled, "
                          "tiled+packed, blas, polly, polly-gemm, polycc, and polly-parallel with "
                          "--threads (default: all; polycc when it is on PATH)")
    cmp.add_argument("--threads", type=int, default=1, metavar="N",
                     help="also run tiled+packed, blas and polly-parallel on N threads (their "
                          "rows are named 'x N'); the single-thread rows stay")
    cmp.add_argument("--rounds", type=int, default=10, help="measurements per variant (default 10)")
    cmp.add_argument("--csv", metavar="OUT.csv", help="write one row per variant, size and type")
    cmp.add_argument("--plot", metavar="OUT.png", help="write a plot of GFLOP/s against N")
    cmp.add_argument("--target", default="auto",
                     help=f"auto or one of: {', '.join(targets.TARGETS)}")
    cmp.add_argument("--tile", type=int, default=32, help="pluto-style tile size (default 32)")
    cmp.add_argument("--second-level-tile", type=int, default=0, metavar="T2",
                     help="pluto-style second-level tile size, a multiple of --tile (default: none)")
    cmp.add_argument("--original-limit", type=int, default=1024, metavar="N",
                     help="time the original nest only up to this N (default 1024)")
    cmp.add_argument("--min-time", type=float, default=0.2, metavar="S",
                     help="seconds timed per measurement; short calls repeat (default 0.2)")
    cmp.add_argument("--seed", type=int, help="seed of the rounds' random order")
    cmp.add_argument("--keep", metavar="DIR", help="keep the variants' sources and executables")
    cmp.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                     help="no progress bar on stderr")
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="auto",
                   help=f"auto (best for this host) or one of: {', '.join(targets.TARGETS)}")
    p.add_argument("--report", metavar="R.json", help="write a JSON report of every loop nest")
    p.add_argument("--remarks", action="store_true",
                   help="print a remark for every loop nest (file:line:col: remark: ...)")
    for name in ("mc", "kc", "nc"):
        p.add_argument(f"--{name}", type=int, default=0, help=f"override the {name} cache block")
    p.add_argument("--threads", type=_threads, default=None, metavar="N|auto",
                   help="run the fast path on OpenMP threads where the output is compiled with "
                        "-fopenmp: at most N, or 'auto' (OMP_NUM_THREADS); 0 or 1: one thread. "
                        "Default: threads for the nests that carry an OpenMP parallel pragma")


def _threads(text: str) -> int:
    try:
        return parse_threads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a thread count or 'auto', not '{text}'") \
            from None


def _split_cppflags(argv: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], tuple(argv[at + 1:])
    return argv, ()


def main(argv: Sequence[str] | None = None) -> int:
    own, cppflags = _split_cppflags(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(own)
    try:
        if args.command == "targets":
            return _list_targets()
        if args.command == "compare":
            return _compare(args, cppflags)
        if args.command == "tune":
            return _tune(args)
        if args.command == "prepare":
            return _prepare(args)
        target = args.target
        if target == "auto":       # `-- --target=aarch64-linux-gnu`: auto is that machine's best
            from kernelfarer.cc import cross_build_target
            target = cross_build_target(cppflags) or target
        options = RewriteOptions(
            target=target, cppflags=cppflags,
            blocking={k: getattr(args, k) for k in ("mc", "kc", "nc") if getattr(args, k)},
            verify=getattr(args, "verify", False),
            backend=getattr(args, "backend", "kernelfarer"), threads=args.threads)
        result = rewrite_file(args.input, options)
        if args.command == "explain":
            _explain(result, args.schedule)
        else:
            _emit_remarks(result, args.remarks)
            _write_output(result, args)
        if args.report:
            _write_atomically(args.report, json.dumps(
                {"file": result.path, "nests": [r.to_json() for r in result.remarks]}, indent=2) + "\n")
        return EXIT_OK
    except KernelfarerError as exc:
        print(f"kernelfarer: {exc}" if exc.location is None else str(exc), file=sys.stderr)
        return EXIT_INTERNAL if exc.message.startswith("internal error") else EXIT_ERROR
    except BrokenPipeError:          # `kernelfarer explain f.c | head`: the reader has enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _prepare(args: argparse.Namespace) -> int:
    from kernelfarer import prepare
    from kernelfarer.cc import DEFAULT_COMPILER
    compilers = args.compiler or [os.environ.get("KERNELFARER_CC") or DEFAULT_COMPILER]
    problems = prepare.prepare(compilers, args.options or list(prepare.CONFIGURATIONS),
                               progress=not args.quiet)
    for problem in problems:
        print(f"kernelfarer prepare: {problem}", file=sys.stderr)
    return EXIT_ERROR if problems else EXIT_OK


def _emit_remarks(result: RewriteResult, enabled: bool) -> None:
    """Remarks when asked for; a function the analysis had to leave out, always."""
    if enabled:
        for note in result.notes:
            print(f"kernelfarer: {note}", file=sys.stderr)
    for remark in result.remarks:
        if enabled or remark.kind == "function":
            print(remark.message(), file=sys.stderr)


def _explain(result: RewriteResult, schedule: bool = False) -> None:
    if not result.remarks:
        print(f"{result.path}: no loop nests")
    for remark in result.remarks:
        print(remark.message())
        if remark.replaced:
            for key, value in remark.details:
                print(f"    {key}: {value}")
    if schedule:
        from kernelfarer.plan import DispatchPlan
        from kernelfarer.transforms import blocking
        for used in result.plans:
            for plan in used.plans if isinstance(used, DispatchPlan) else (used,):
                tree = blocking.layered_tree(blocking.gemm_domain(), mc=plan.mc, kc=plan.kc,
                                             nc=plan.nc, mr=plan.mr, nr=plan.nr,
                                             threads=bool(plan.threads))
                print(f"\nschedule of {plan.driver_name} (problems its small-problem rule "
                      "sends elsewhere run the direct or thin path):")
                print(blocking.describe(tree))


def _write_output(result: RewriteResult, args: argparse.Namespace) -> None:
    if args.in_place:
        if result.replaced:
            _write_atomically(args.input, result.text)
    elif args.output:
        _write_atomically(args.output, result.text)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(result.text.encode("utf-8", errors="surrogateescape"))
        sys.stdout.buffer.flush()


def _write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kernelfarer-", dir=directory)
    except OSError as exc:
        raise KernelfarerError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise KernelfarerError(f"cannot write {path}: {exc.strerror} (it is left as it was)") \
            from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _list_targets() -> int:
    auto = targets.best_for_host()
    for target in targets.TARGETS.values():
        runs = "runs here" if targets.host_can_run(target) else "cannot run here"
        mark = " (auto)" if target is auto else ""
        kernels = ", ".join(f"{d.label} {k.mr}x{k.nr}" for d, k in target.kernels.items())
        print(f"{target.name:12} {runs:16} {kernels:24} {target.description}{mark}")
    return EXIT_OK


def _int_list(option: str, text: str, separator: str = ",") -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(separator) if v.strip())
    except ValueError:
        raise KernelfarerError(f"{option}: not a list of integers: {text}") from None


def _tune(args: argparse.Namespace) -> int:
    from kernelfarer import tune
    from kernelfarer.plan import Blocking
    candidates = []
    for item in args.candidates.split(";"):
        if item.strip():
            values = _int_list("--try", item)
            if len(values) != 3:
                raise KernelfarerError(f"--try: give MC,KC,NC (got '{item}')")
            candidates.append(Blocking(*values))
    if args.rounds < 1:
        raise KernelfarerError("--rounds: at least 1")
    options = tune.TuneOptions(
        target=args.target, dtypes=tuple(d.strip() for d in args.dtypes.split(",") if d.strip()),
        sizes=_int_list("--sizes", args.sizes), rounds=args.rounds, budget=args.budget,
        candidates=tuple(candidates), output=args.output, progress=args.progress)
    results, path = tune.tune(options)
    sys.stdout.write(tune.report(results, path, default_location=not args.output))
    return EXIT_OK


def _compare(args: argparse.Namespace, cppflags: tuple[str, ...]) -> int:
    from kernelfarer import compare, compare_report
    from kernelfarer.plutostyle import PlutoOptions
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
    except ValueError:
        raise KernelfarerError(f"--sizes: not a list of integers: {args.sizes}") from None
    if not sizes or min(sizes) < 1:
        raise KernelfarerError("--sizes: give positive sizes")
    if args.rounds < 1:
        raise KernelfarerError("--rounds: at least 1")
    if args.threads < 1:
        raise KernelfarerError("--threads: at least 1")
    if args.tile < 1 or args.second_level_tile < 0 or (
            args.second_level_tile and args.second_level_tile % args.tile):
        raise KernelfarerError("--second-level-tile must be a multiple of --tile")
    options = compare.CompareOptions(
        path=args.input, functions=tuple(args.function), sizes=sizes,
        variants=tuple(v.strip() for v in args.variants.split(",") if v.strip()),
        rounds=args.rounds, target=args.target,
        pluto=PlutoOptions(tile=args.tile, second_level=args.second_level_tile),
        original_limit=args.original_limit, min_time=args.min_time, cppflags=cppflags,
        workdir=args.keep, seed=args.seed, progress=args.progress, threads=args.threads)
    from kernelfarer import hostinfo
    with hostinfo.planning_for(hostinfo.this_machine()):   # the variants run here
        rows, notes = compare.run_tree(options)
    tree = os.path.isdir(args.input)
    sys.stdout.write(compare_report.markdown(rows, notes))
    if tree:
        sys.stdout.write("\n" + compare_report.summary(rows))
    if args.csv:
        compare_report.write_csv(rows, args.csv)
    title = f"kernelfarer compare {os.path.basename(os.path.normpath(args.input))}"
    if args.plot and tree:
        for path in compare_report.plot_each_function(rows, args.plot, title):
            sys.stderr.write(f"kernelfarer: wrote {path}\n")
    elif args.plot:
        compare_report.plot(rows, args.plot, title=title)
    # a wrong result of our own variants is an error; of Polly's, a finding the table shows
    wrong = [r for r in rows if r.note.startswith("WRONG") and not r.variant.startswith("polly")]
    return EXIT_ERROR if wrong else EXIT_OK
