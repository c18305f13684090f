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

    ex = sub.add_parser("explain", help="list every loop nest with its verdict and reason")
    ex.add_argument("input", help="the C file")
    _common(ex)

    sub.add_parser("targets", help="list the targets and which ones this host can run")
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="auto",
                   help=f"auto (best for this host) or one of: {', '.join(targets.TARGETS)}")
    p.add_argument("--report", metavar="R.json", help="write a JSON report of every loop nest")
    p.add_argument("--remarks", action="store_true",
                   help="print a remark for every loop nest (file:line:col: remark: ...)")
    for name in ("mc", "kc", "nc"):
        p.add_argument(f"--{name}", type=int, default=0, help=f"override the {name} cache block")


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
        options = RewriteOptions(
            target=args.target, cppflags=cppflags,
            blocking={k: getattr(args, k) for k in ("mc", "kc", "nc") if getattr(args, k)},
            verify=getattr(args, "verify", False))
        result = rewrite_file(args.input, options)
        if args.command == "explain":
            _explain(result)
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


def _emit_remarks(result: RewriteResult, enabled: bool) -> None:
    if not enabled:
        return
    for note in result.notes:
        print(f"kernelfarer: {note}", file=sys.stderr)
    for remark in result.remarks:
        print(remark.message(), file=sys.stderr)


def _explain(result: RewriteResult) -> None:
    if not result.remarks:
        print(f"{result.path}: no loop nests")
    for remark in result.remarks:
        print(remark.message())
        if remark.replaced:
            for key, value in remark.details:
                print(f"    {key}: {value}")


def _write_output(result: RewriteResult, args: argparse.Namespace) -> None:
    if args.in_place:
        if result.replaced:
            _write_atomically(args.input, result.text)
    elif args.output:
        _write_atomically(args.output, result.text)
    else:
        sys.stdout.write(result.text)


def _write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kernelfarer-", dir=directory)
    except OSError as exc:
        raise KernelfarerError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _list_targets() -> int:
    auto = targets.best_for_host()
    for target in targets.TARGETS.values():
        runs = "runs here" if targets.host_can_run(target) else "cannot run here"
        mark = " (auto)" if target is auto else ""
        kernels = ", ".join(f"{d.ctype} {k.mr}x{k.nr}" for d, k in target.kernels.items())
        print(f"{target.name:12} {runs:16} {kernels:24} {target.description}{mark}")
    return EXIT_OK
