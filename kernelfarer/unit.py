"""Walks a translation unit: functions of the user's file, the scopes inside them, and every loop
nest, each of which ends as a GemmSpec or a reason."""

from __future__ import annotations

import os
import re

from dataclasses import dataclass, replace

from pycparser import c_ast

from kernelfarer.canon_base import const_int, loop_var, walk
from kernelfarer.canon_calls import accessor_functions, dot_functions, void_functions
from kernelfarer.canonical import Context, canonicalize, min_functions
from kernelfarer.classify import kind_of
from kernelfarer.ctype import Scope, file_typedefs
from kernelfarer.epilogue import pure_functions
from kernelfarer.diagnostics import SourceLocation
from kernelfarer.frontend import TranslationUnit
from kernelfarer.nest import NotGemm
from kernelfarer.recognize import FunctionFacts, recognize_nest
from kernelfarer.spec import GemmSpec


@dataclass
class Candidate:
    node: c_ast.For | c_ast.While
    function: c_ast.FuncDef
    location: SourceLocation
    line_rank: int                 # how many `for` (or `while`) statements precede it on its line
    spec: GemmSpec | None
    reason: str
    pragmas: bool = False          # a #pragma applies to the nest or sits inside it
    parallel: bool = False         # ... and one of them is an OpenMP `parallel` (the user wants
                                   # the nest on threads)
    kind: str = "loop-nest"        # "function": a whole function left out (it could not be read)

    @property
    def keyword(self) -> str:
        return _keyword(self.node)


def _function_facts(func: c_ast.FuncDef) -> FunctionFacts:
    """Identifier references of a function, with whether each one is harmless for the liveness of
    a variable a rewritten nest leaves stale: inside a `for` whose initialization sets it first."""
    refs: dict[str, list[tuple[int, bool]]] = {}
    assigned: set[str] = set()
    address_taken: set[str] = set()

    def visit(node: c_ast.Node | None, killed: tuple[str, ...]) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.ID):
            refs.setdefault(node.name, []).append((id(node), node.name in killed))
            return
        if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
            assigned.add(node.lvalue.name)
        if isinstance(node, c_ast.UnaryOp) and isinstance(node.expr, c_ast.ID):
            if node.op in ("++", "--", "p++", "p--"):
                assigned.add(node.expr.name)
            elif node.op == "&":
                address_taken.add(node.expr.name)
        if isinstance(node, c_ast.For):
            init = node.init
            var = None
            if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
                var = init.lvalue.name
                assigned.add(var)
                visit(init.rvalue, killed)
                refs.setdefault(var, []).append((id(init.lvalue), True))
            elif isinstance(init, c_ast.DeclList):
                for decl in init.decls:
                    visit(decl.init, killed)
            else:
                visit(init, killed)
            inner = killed + ((var,) if var else ())
            for child in (node.cond, node.next, node.stmt):
                visit(child, inner)
            return
        for _, child in node.children():
            visit(child, killed)

    visit(func.body, ())
    local_types = any(isinstance(n, c_ast.Typedef) or (isinstance(n, (c_ast.Struct, c_ast.Union,
                      c_ast.Enum)) and (n.decls if not isinstance(n, c_ast.Enum) else n.values))
                      for n in walk(func.body))
    twice = sorted(n.name.name for n in walk(func.body) if isinstance(n, c_ast.FuncCall)
                   and isinstance(n.name, c_ast.ID) and n.name.name in RETURNS_TWICE)
    return FunctionFacts(name=func.decl.name, assigned=frozenset(assigned),
                         address_taken=frozenset(address_taken), references=refs,
                         local_types=local_types, returns_twice=twice[0] if twice else "",
                         body=func.body)


# Functions that return twice: after a longjmp, locals the function changed since the setjmp are
# what the registers hold (C leaves non-volatile ones indeterminate), and a rewrite of the
# function changes which those are (gcc's -Wclobbered says so too).
RETURNS_TWICE = frozenset({"setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp",
                           "savectx", "vfork", "getcontext", "__builtin_setjmp"})


def _holds_pragma(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Pragma) or any(_holds_pragma(c) for _, c in node.children())


_OMP_PARALLEL = re.compile(r"^\s*omp\s+parallel\b")


def _holds_omp_parallel(node: c_ast.Node) -> bool:
    if isinstance(node, c_ast.Pragma):
        return bool(_OMP_PARALLEL.match(node.string or ""))
    return any(_holds_omp_parallel(c) for _, c in node.children())


# OpenMP directives a rewrite keeps its meaning under: the nest's own parallel loop (the driver
# runs on threads instead) and simd hints.  Any other (a worksharing `for`, `single`, `master`,
# `critical`, `section` of an enclosing region...) makes each thread run or skip the nest in a
# way the call of a driver would not follow.
_OMP_KEPT = re.compile(r"^\s*omp\s+(?:parallel\s+for(?:\s+simd)?|simd)\b")


def _check_openmp(node: c_ast.Node, before: c_ast.Node | None) -> None:
    pragmas = [before] if isinstance(before, c_ast.Pragma) else []
    pragmas += [n for n in walk(node) if isinstance(n, c_ast.Pragma)]
    for pragma in pragmas:
        text = " ".join((pragma.string or "").split())
        if re.match(r"omp\b", text) and not _OMP_KEPT.match(text):
            raise NotGemm(f"'#pragma {text}' applies to the nest: under it each thread runs (or "
                          "skips) the loops in a way a call of the fast path would not")


_OMP_WORKSHARING = re.compile(r"^\s*omp\s+(?:parallel\s+)?for\b")
_OMP_PRIVATE = re.compile(r"\b(?:first)?private\s*\(([^)]*)\)")


def _omp_private(node: c_ast.Node, before: c_ast.Node | None) -> set[str]:
    """The variables OpenMP makes private to the pragmas on and in the nest, under -fopenmp: the
    counter of a `for` loop a work-sharing pragma applies to, and those of its private and
    firstprivate clauses (their original copies keep their values)."""
    out: set[str] = set()
    pairs = [(before, node)] if isinstance(before, c_ast.Pragma) else []
    for block in (n for n in walk(node) if isinstance(n, c_ast.Compound)):
        items = block.block_items or []
        pairs += [(items[i], items[i + 1] if i + 1 < len(items) else None)
                  for i in range(len(items)) if isinstance(items[i], c_ast.Pragma)]
    for pragma, loop in pairs:
        text = " ".join((pragma.string or "").split())
        if not text.startswith("omp"):
            continue
        for names in _OMP_PRIVATE.findall(text):
            out |= {name.strip() for name in names.split(",") if name.strip()}
        if _OMP_WORKSHARING.match(text) and isinstance(loop, c_ast.For) and loop_var(loop):
            out.add(loop_var(loop))
    return out


def _set_name(statement: str) -> str:
    match = re.match(r"\s*([A-Za-z_]\w*)", statement)
    return match.group(1) if match else ""


def _unless_openmp(statement: str) -> str:
    """A final value for a variable OpenMP keeps private: under -fopenmp the original leaves it."""
    return f"\n#if !defined(_OPENMP)\n{statement}\n#endif\n"


def _ids_within(node: c_ast.Node) -> set[int]:
    out = {id(node)}
    for _, child in node.children():
        out |= _ids_within(child)
    return out


class _Walker:
    def __init__(self, tu: TranslationUnit) -> None:
        self.tu = tu
        self.candidates: list[Candidate] = []
        self.pragma_loops: set[int] = set()     # loops that directly follow a #pragma
        self.parallel_loops: set[int] = set()   # ... an OpenMP `parallel` one
        # A weak definition may not be the one its calls run: none is read as a helper.
        own = c_ast.FileAST([ext for ext in tu.ast.ext if not (
            isinstance(ext, c_ast.FuncDef) and ext.decl.name in tu.weak)])
        self.functions = pure_functions(own)  # calls an epilogue may make
        self.min_functions = min_functions(own)
        self.dot_functions = dot_functions(own)
        self.void_functions = void_functions(own)
        self.accessors = accessor_functions(own, skip=self.functions.widenings)
        for name in tu.weak:
            self.functions.near_widenings[name] = (
                f"'{name}' is weak: another file's definition may replace the one seen here")

    def function(self, func: c_ast.FuncDef, scope: Scope) -> None:
        self.func = func
        self.facts = _function_facts(func)
        self.gotos = frozenset(n.name for n in walk(func.body) if isinstance(n, c_ast.Goto))
        self.for_lines: dict[tuple[str, int], list[c_ast.Node]] = {}
        self._index_fors(func.body)
        scope.push()
        params = getattr(func.decl.type, "args", None)
        # A K&R definition lists names in the declarator and declares them after it.
        for param in [*(params.params if params else []), *(func.param_decls or [])]:
            if isinstance(param, c_ast.Decl):
                scope.declare_param(param)
        self.statement(func.body, scope, depth=0)
        scope.pop()

    def _index_fors(self, node: c_ast.Node) -> None:
        if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)) and node.coord is not None:
            self.for_lines.setdefault((_keyword(node), node.coord.line), []).append(node)
        for _, child in node.children():
            self._index_fors(child)

    def statement(self, node: c_ast.Node | None, scope: Scope, depth: int,
                  before: c_ast.Node | None = None, earlier: tuple = ()) -> None:
        """`earlier`: the statements that run right before `node` in this order, with no jump
        into them (where a while loop's counter may be set)."""
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            scope.push()
            previous = None
            chain = list(earlier)
            for item in node.block_items or []:
                if isinstance(item, (c_ast.For, c_ast.While, c_ast.DoWhile)) and \
                        isinstance(previous, c_ast.Pragma):
                    self.pragma_loops.add(id(item))
                    if _holds_omp_parallel(previous):
                        self.parallel_loops.add(id(item))
                if isinstance(item, (c_ast.Case, c_ast.Default)) or \
                        isinstance(item, c_ast.Label) and item.name in self.gotos:
                    chain = []                  # a jump may enter here
                self.statement(item, scope, depth, before=previous, earlier=tuple(chain))
                previous = item
                chain.append(item)
            scope.pop()
        elif isinstance(node, c_ast.Decl):
            scope.declare(node)
        elif isinstance(node, c_ast.Typedef):
            scope.declare_typedef(node)
        elif isinstance(node, (c_ast.For, c_ast.While)) or \
                isinstance(node, c_ast.DoWhile) and const_int(node.cond) is None:
            self.loop(node, scope, depth, before, earlier)   # (`do {} while (0)`: a block)
        elif isinstance(node, (c_ast.If,)):
            self.statement(node.iftrue, scope, depth, earlier=(*earlier, node.cond))
            self.statement(node.iffalse, scope, depth, earlier=(*earlier, node.cond))
        elif isinstance(node, c_ast.Label):
            self.statement(node.stmt, scope, depth, before, earlier)     # `outer: for ...`
        elif isinstance(node, (c_ast.DoWhile, c_ast.Case, c_ast.Default)):
            for _, child in node.children():
                if isinstance(child, (c_ast.Compound, c_ast.For, c_ast.If, c_ast.While,
                                      c_ast.DoWhile, c_ast.Label, c_ast.Case, c_ast.Default,
                                      c_ast.Switch, c_ast.Decl)):
                    self.statement(child, scope, depth,
                                   earlier=earlier if isinstance(node, c_ast.DoWhile) else ())
        elif isinstance(node, c_ast.Switch):
            self.statement(node.stmt, scope, depth)

    def loop(self, node: c_ast.For | c_ast.While | c_ast.DoWhile, scope: Scope, depth: int,
             before: c_ast.Node | None = None, earlier: tuple = ()) -> None:
        source = self.tu.source
        if not source.is_here(node.coord):
            return
        keyword = _keyword(node)
        siblings = sorted(self.for_lines.get((keyword, node.coord.line), []),
                          key=lambda f: f.coord.column)
        rank = next(i for i, f in enumerate(siblings) if f is node)
        location = source.location(node.coord)
        context = Context(scope=scope, gotos=self.gotos, addressed=self.facts.address_taken,
                          functions=self.functions,
                          min_functions=self.min_functions, dot_functions=self.dot_functions,
                          void_functions=self.void_functions,
                          accessors=self.accessors)
        canon = None
        try:
            canon = canonicalize(node, context, before=before, earlier=earlier)
            _check_openmp(node, before)
            if canon is None:
                raise NotGemm(f"the {'do-' if keyword == 'do' else ''}while loop is not a counted "
                              "loop (a counter set before it, kept until it, and stepped by one "
                              "once in its body)")
            spec = recognize_nest(canon.node, scope, self.facts, location, _ids_within(node),
                                  self.functions, canon=canon,
                                  char_unsigned=self.tu.char_unsigned)
        except (NotGemm, RecursionError, ValueError, TypeError, AttributeError, KeyError,
                IndexError, AssertionError) as exc:
            # a bug of the analysis leaves this nest alone, with a remark, not the whole file
            if not isinstance(exc, NotGemm):
                exc = NotGemm(f"internal error in the analysis ({type(exc).__name__}: {exc}); "
                              "the nest is left as it is")
            # Every nest of three or more loops gets a line; so does every outermost loop.
            if depth == 0 or _depth(node) >= 3:
                reason = str(exc)
                if canon is not None and canon.unapplied:
                    reason += f" ({'; '.join(canon.unapplied)})"
                what = kind_of(canon.node if canon is not None else node)
                if what and what not in reason:
                    reason += f" (this is {what})"
                self.candidates.append(Candidate(node, self.func, location, rank, None, reason))
            scope.push()
            if isinstance(node, c_ast.For) and isinstance(node.init, c_ast.DeclList):
                for decl in node.init.decls:
                    scope.declare(decl)
            self.statement(node.stmt, scope, depth + 1)
            scope.pop()
            return
        private = _omp_private(node, before)
        if private:
            spec = replace(spec, finals=tuple(_unless_openmp(f) if _set_name(f) in private else f
                                              for f in spec.finals))
        pragmas = id(node) in self.pragma_loops or _holds_pragma(node)
        parallel = id(node) in self.parallel_loops or _holds_omp_parallel(node)
        self.candidates.append(Candidate(node, self.func, location, rank, spec, "", pragmas,
                                         parallel))


def _keyword(loop: c_ast.Node) -> str:
    """The keyword a loop statement starts with."""
    return {c_ast.While: "while", c_ast.DoWhile: "do"}.get(type(loop), "for")


def _depth(node: c_ast.Node) -> int:
    """How many loops deep the nest at `node` goes."""
    inner = max((_depth(child) for _, child in node.children()), default=0)
    return inner + (1 if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)) else 0)


# `#line 200 "calc.y"` or `# 200` in the user's own file (what parser and scanner generators write)
_LINE_DIRECTIVE = re.compile(r"#\s*(?:line\b|(?=\d))")
_LINE_NUMBER = re.compile(r'#\s*(?:line\s+)?(\d+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*$')
_DIRECTIVE_NOISE = re.compile(r"/\*[\s\S]*?\*/|\\\r?\n")     # comments, continuations


# Text that could be such a directive: a `#` that only whitespace (or the end of a comment)
# precedes on its line, then `line` or a number.  Files without one are not tokenized to look.
_MAYBE_LINE_DIRECTIVE = re.compile(
    r"(?:^|\*/)[ \t\f\v]*#(?:[ \t\f\v]|\\\r?\n|/\*[\s\S]*?\*/)*(?:line\b|\d)", re.M)


def _renumbering(source) -> object | None:
    """The first #line directive of the file that gives its code other numbers or another file
    name than its own (one that restates the next line's own number and name changes nothing)."""
    if not _MAYBE_LINE_DIRECTIVE.search(source.text):
        return None
    for tok in source.tokens:
        if tok.kind != "directive":
            continue
        words = _DIRECTIVE_NOISE.sub(" ", tok.text)      # `# /* c */ line 300`, `#\<newline>line`
        if not _LINE_DIRECTIVE.match(words):
            continue
        m = _LINE_NUMBER.match(words.strip())
        if m is None or int(m[1]) != tok.line + tok.text.count("\n") + 1 or \
                m[2] is not None and os.path.normpath(m[2]) != os.path.normpath(source.path):
            return tok
    return None


def find_candidates(tu: TranslationUnit) -> list[Candidate]:
    renumbered = _renumbering(tu.source)
    if renumbered is not None:
        # the compiler's lines (and file names) are then not the file's own: a nest could be
        # neither found in the text by its coordinates nor told apart from a header's
        return [Candidate(None, None, SourceLocation(tu.source.path, renumbered.line,
                                                     renumbered.column), 0, None,
                          "the file's loop nests are not considered: its #line directive gives "
                          "its code other line numbers or another file name (generated code), "
                          "which the rewrite cannot map back to the file", kind="function")]
    typedefs = file_typedefs(tu.ast)
    scope = Scope(typedefs)
    walker = _Walker(tu)
    for ext in tu.ast.ext:
        if isinstance(ext, c_ast.Decl):
            scope.declare(ext)
        elif isinstance(ext, c_ast.Typedef):
            scope.declare_enumerators(ext.type)     # `typedef enum { ... } kind;`
        elif isinstance(ext, c_ast.FuncDef):
            scope.declare(ext.decl)
            if tu.source.is_here(ext.coord):
                found = len(walker.candidates)
                try:
                    walker.function(ext, scope)
                except RecursionError:     # expressions nested deeper than the analysis goes
                    del walker.candidates[found:]
                    scope = Scope(typedefs)           # its frames are gone: start again
                    for earlier in tu.ast.ext:
                        if earlier is ext:
                            break
                        if isinstance(earlier, c_ast.Decl):
                            scope.declare(earlier)
                        elif isinstance(earlier, c_ast.Typedef):
                            scope.declare_enumerators(earlier.type)
                        elif isinstance(earlier, c_ast.FuncDef):
                            scope.declare(earlier.decl)
                    scope.declare(ext.decl)
                    walker.candidates.append(Candidate(
                        None, ext, tu.source.location(ext.coord), 0, None,
                        f"function '{ext.decl.name}' not considered: its expressions are nested "
                        "too deeply to analyse", kind="function"))
    for skipped in tu.skipped:
        if tu.source.is_here(_Coord(skipped.location)):
            what = f"function '{skipped.name}'" if skipped.name else "a declaration"
            walker.candidates.append(Candidate(
                None, None, skipped.location, 0, None,
                f"{what} not considered: the parser cannot read it ({skipped.reason})",
                kind="function"))
    walker.candidates.sort(key=lambda c: (c.location.line, c.location.column))
    return walker.candidates


class _Coord:
    """A SourceLocation as the coordinate `SourceText.is_here` takes."""

    def __init__(self, location: SourceLocation) -> None:
        self.file, self.line, self.column = location.file, location.line, location.column
