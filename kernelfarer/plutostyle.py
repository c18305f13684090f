"""Pluto-style tiling of a recognized nest, emitted as plain C: the baseline `kernelfarer compare`
calls "pluto-style" (what ``polycc --tile [--second-level-tile] --intratileopt`` does to a nest).

The nest is read from its AST as written: its loops (``for (v = lo; v < hi; v++)``, bounds become
isl parameters), its statements (consecutive statements between loops are one polyhedral
statement, printed back as C), their original schedule (loops and textual order) and their array
accesses (affine subscripts; a subscript with symbolic coefficients, ``A[i*lda + k]``, is
delinearized into one coordinate per loop variable, largest stride first, which is exact under the
run-time checks the recognizer puts on the nest).  From the memory dependences of the original
order, isl's scheduler (a Pluto-like algorithm: ScheduleConstraints.compute_schedule with validity,
proximity and coincidence constraints, as PPCG calls it) finds a new schedule; its outermost
permutable band (two or three loops) is tiled rectangularly (transforms/tiling.py), the point loops
ordered for vectorization, and isl's AST builder writes the loops; the statements are the nest's
own text with the loop variables bound to the new iterators.

A scalar declared between the loops (``float acc = 0; for (p...) acc += ...; C[i][j] = acc;``)
is expanded as PPCG does: one element per iteration of the loops around its declaration, in a
heap array the tiled code allocates (the original nest runs if that fails), so that its
dependences no longer serialize those loops.  A nest without a permutable band of two or more
loops (an accumulator shared by all iterations, a global say) is left as written, with the reason.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import islpy as isl
from pycparser import c_ast, c_generator

from kernelfarer import emit
from kernelfarer.affine import NotAffine, Poly
from kernelfarer.backends import Backend, Call, Site
from kernelfarer.epilogue import written_scalars
from kernelfarer.islc import AstPrinter
from kernelfarer.transforms import tiling

_GEN = c_generator.CGenerator()


class NotApplicable(Exception):
    """Pluto-style tiling does not apply to this nest; the message says why."""


@dataclass(frozen=True)
class PlutoOptions:
    tile: int = 32                  # first-level tile size (Pluto's default); 0: no tiling, the
                                    # band's loops only put in the intra-tile order (interchange)
    second_level: int = 0           # second-level tile size (0: none); a multiple of `tile`
    intratileopt: bool = True       # choose the innermost point loop for vectorization
    parallel: bool = False          # Pluto's --parallel: OpenMP on the outermost loop when it
                                    # carries no dependence


@dataclass
class _Loop:
    var: str
    lower: str                      # C text
    upper: str                      # C text, exclusive
    decl: c_ast.Decl | None         # the declaration when the loop declares its variable
    order: int                      # preorder position in the nest
    bounds: tuple[c_ast.Node, ...] = ()     # the bounds' expressions


@dataclass
class _Expansion:
    """A scalar declared between the loops, expanded over the loops around its declaration."""

    name: str                       # the scalar's name in the nest
    array: str                      # the expanded array's name in the emitted code
    ctype: str                      # its element type (C text)
    loops: list[int]                # the loops around the declaration (indexes), outermost first
    order: int                      # the order of the statement that declares it


@dataclass
class _Statement:
    name: str
    nodes: list[c_ast.Node]
    loops: list[int]                # enclosing loops (indexes), outermost first
    schedule: list[str]             # original schedule dimensions (isl text)
    order: int
    locals_: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class TiledNest:
    """The result: C text of the loops, and what was done (for remarks and tests)."""

    code: str                       # the tiled loops (statements inlined)
    params: tuple[tuple[str, str], ...]   # (isl parameter, C expression) to define before
    checks: tuple[str, ...]         # C conditions the tiled code assumes (every loop runs)
    band: tuple[str, ...]           # the band's loop variables, outermost first
    point_order: tuple[str, ...]    # the point loops' variables, outermost first
    loop_depth: int                 # loops around the innermost statement
    parallel: bool = False          # the outermost loops run on OpenMP threads
    # scalars expanded to arrays: (array name, element type, the extents' C texts), allocated
    # on the heap before the loops
    expansions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


class _Reader:
    """Loops, statements and accesses of one nest, from its AST."""

    def __init__(self) -> None:
        self.loops: list[_Loop] = []
        self.statements: list[_Statement] = []
        self.expansions: dict[str, _Expansion] = {}
        self.counter = 0

    def walk(self, node: c_ast.Node, loops: list[int], schedule: list[str]) -> None:
        if isinstance(node, c_ast.For):
            loop = self._loop(node)
            self.loops.append(loop)
            index = len(self.loops) - 1
            self.walk(node.stmt, loops + [index], schedule + [_iso(loop.var)])
            return
        items = [node]
        if isinstance(node, c_ast.Compound):
            items = [s for s in (node.block_items or [])
                     if not isinstance(s, (c_ast.Pragma, c_ast.EmptyStatement))]
        groups: list[list[c_ast.Node]] = []
        for item in items:
            if isinstance(item, (c_ast.For, c_ast.Compound)):
                groups.append([item])
            elif groups and not isinstance(groups[-1][0], (c_ast.For, c_ast.Compound)):
                groups[-1].append(item)
            else:
                groups.append([item])
        for position, group in enumerate(groups):
            here = schedule + ([str(position)] if len(groups) > 1 else [])
            if isinstance(group[0], (c_ast.For, c_ast.Compound)) and group[0] is not node:
                self.walk(group[0], loops, here)
                continue
            for stmt in group:
                if isinstance(stmt, (c_ast.While, c_ast.DoWhile, c_ast.If, c_ast.Switch,
                                     c_ast.Goto, c_ast.Label, c_ast.Return, c_ast.Break,
                                     c_ast.Continue)):
                    raise NotApplicable(f"a {type(stmt).__name__} statement in the nest")
            decls = {d.name for d in group if isinstance(d, c_ast.Decl)}
            if decls and len(groups) > 1:
                group = self._expand(group, loops)
                decls = set()
            self.counter += 1
            self.statements.append(_Statement(
                name=f"S{len(self.statements)}", nodes=group, loops=list(loops), schedule=here,
                order=self.counter, locals_=decls))

    def _expand(self, group: list[c_ast.Node], loops: list[int]) -> list[c_ast.Node]:
        """The group with its declarations of scalars replaced by assignments to their expansions
        (a declaration without an initializer writes nothing)."""
        out: list[c_ast.Node] = []
        for position, item in enumerate(group):
            if isinstance(item, c_ast.Decl) and _mentions(group[:position], item.name):
                raise NotApplicable(f"'{item.name}' is used outside the scope of its declaration "
                                    "in the nest")
            if not isinstance(item, c_ast.Decl):
                out.append(item)
                continue
            if not (isinstance(item.type, c_ast.TypeDecl)
                    and isinstance(item.type.type, c_ast.IdentifierType)) \
                    or item.storage or item.bitsize is not None or "volatile" in item.quals:
                raise NotApplicable(f"'{item.name}' is declared between the loops and is not a "
                                    "scalar Pluto-style can expand")
            variables = {lp.var for lp in self.loops}
            if item.name in self.expansions or item.name in variables:
                raise NotApplicable(f"'{item.name}' is declared twice in the nest")
            if any(_mentions(list(self.loops[i].bounds), v) for i in loops for v in variables):
                raise NotApplicable(f"'{item.name}' would be expanded over loops whose bounds "
                                    "depend on other loops")
            ctype = " ".join(item.type.type.names)
            self.expansions[item.name] = _Expansion(item.name, f"kf_x_{item.name}", ctype,
                                                    list(loops), self.counter + 1)
            if item.init is not None:
                if isinstance(item.init, c_ast.InitList):
                    raise NotApplicable(f"'{item.name}' has a brace initializer")
                out.append(c_ast.Assignment("=", c_ast.ID(item.name), item.init))
        return out

    def expand_uses(self) -> None:
        """Every use of an expanded scalar becomes its element of the expansion (new nodes)."""
        if not self.expansions:
            return
        for name in self.expansions:
            if _mentions([b for lp in self.loops for b in lp.bounds], name):
                raise NotApplicable(f"'{name}' is a loop bound in the nest: it cannot be expanded")
        for s in self.statements:
            for name, x in self.expansions.items():
                if (s.loops[:len(x.loops)] != x.loops or s.order < x.order) \
                        and _mentions(s.nodes, name):
                    raise NotApplicable(f"'{name}' is used outside the scope of its declaration "
                                        "in the nest")
            s.nodes = [_Substitute(self).visit(n) for n in s.nodes]

    def element(self, x: _Expansion) -> c_ast.Node:
        node: c_ast.Node = c_ast.ID(x.array)
        for i in x.loops:
            lp = self.loops[i]
            index: c_ast.Node = c_ast.ID(lp.var)
            if _literal(lp.lower) != "0":
                index = c_ast.BinaryOp("-", index, c_ast.ID(lp.lower))
            node = c_ast.ArrayRef(node, index)
        return node

    def _loop(self, node: c_ast.For) -> _Loop:
        init, decl = node.init, None
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init:
            decl = init.decls[0]
            var, lower = decl.name, decl.init
        elif isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
            var, lower = init.lvalue.name, init.rvalue
        else:
            raise NotApplicable("a loop initialization that is not 'v = start'")
        cond = node.cond
        upper = None
        if isinstance(cond, c_ast.BinaryOp):
            if _is_id(cond.left, var) and cond.op in ("<", "<="):
                upper, inclusive = cond.right, cond.op == "<="
            elif _is_id(cond.right, var) and cond.op in (">", ">="):
                upper, inclusive = cond.left, cond.op == ">="
        if upper is None:
            raise NotApplicable(f"the condition of loop '{var}' is not 'v < bound'")
        step = node.next
        ok = (isinstance(step, c_ast.UnaryOp) and step.op in ("p++", "++") and _is_id(step.expr, var)) \
            or (isinstance(step, c_ast.Assignment) and step.op == "+=" and _is_id(step.lvalue, var)
                and isinstance(step.rvalue, c_ast.Constant) and step.rvalue.value == "1")
        if not ok:
            raise NotApplicable(f"loop '{var}' does not step by 1")
        hi = f"({_GEN.visit(upper)})" + (" + 1" if inclusive else "")
        self.counter += 1
        return _Loop(var=var, lower=f"({_GEN.visit(lower)})", upper=hi, decl=decl,
                     order=self.counter, bounds=(lower, upper))


class _Substitute:
    """A copy of a statement with the expanded scalars' uses replaced by their elements."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader

    def visit(self, node: c_ast.Node) -> c_ast.Node:
        if isinstance(node, c_ast.ID) and node.name in self.reader.expansions:
            return self.reader.element(self.reader.expansions[node.name])
        if isinstance(node, c_ast.Decl) and node.name in self.reader.expansions:
            raise NotApplicable(f"'{node.name}' is declared twice in the nest")
        if isinstance(node, (c_ast.StructRef,)):       # s.acc: a member, not the scalar
            return c_ast.StructRef(self.visit(node.name), node.type, node.field)
        fresh = copy.copy(node)
        for name, child in node.children():
            attr, _, index = name.partition("[")
            new = self.visit(child)
            if index:
                items = list(getattr(fresh, attr))
                items[int(index.rstrip("]"))] = new
                setattr(fresh, attr, items)
            else:
                setattr(fresh, attr, new)
        return fresh


def _mentions(nodes: list[c_ast.Node], name: str) -> bool:
    return any(isinstance(n, c_ast.ID) and n.name == name
               or _mentions([c for _, c in n.children()], name) for n in nodes)


def _literal(text: str) -> str | None:
    """The decimal integer a bound's text spells ("(0)", "(64)"), or None."""
    inner = text.strip()
    while inner.startswith("(") and inner.endswith(")"):
        inner = inner[1:-1].strip()
    return inner if inner.isdigit() and (inner == "0" or not inner.startswith("0")) else None


def _is_id(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def _iso(var: str) -> str:
    return f"v_{var}"


class _Accesses:
    """Array and scalar accesses of the statements, as isl maps."""

    def __init__(self, iterators: set[str], written_scalars: set[str]) -> None:
        self.iterators = iterators
        self.scalars = written_scalars
        self.params: dict[str, str] = {}           # C text of an opaque term -> isl name
        self.found: list[tuple[str, list[str], bool]] = []   # (array, coordinates, write)
        self.forms: dict[str, tuple] = {}          # array -> its delinearized offset

    def param(self, text: str) -> str:
        if text not in self.params:
            self.params[text] = f"kf_p{len(self.params)}"
        return self.params[text]

    def poly(self, node: c_ast.Node) -> Poly:
        if not self._uses_iterator(node):
            if isinstance(node, c_ast.Constant) and node.type == "int":
                digits = node.value.rstrip("uUlL")
                base = 8 if len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXbB" else 0
                return Poly.const(int(digits, base))
            return Poly.symbol(_GEN.visit(node))
        if isinstance(node, c_ast.ID):
            return Poly.symbol(node.name)
        if isinstance(node, c_ast.Cast):
            return self.poly(node.expr)
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            inner = self.poly(node.expr)
            return -inner if node.op == "-" else inner
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
            left, right = self.poly(node.left), self.poly(node.right)
            return left + right if node.op == "+" else left - right if node.op == "-" else left * right
        raise NotApplicable(f"subscript '{_GEN.visit(node)}' is not affine in the loop variables")

    def _uses_iterator(self, node: c_ast.Node) -> bool:
        if isinstance(node, c_ast.ID):
            return node.name in self.iterators
        return any(self._uses_iterator(c) for _, c in node.children())

    def _term(self, poly: Poly) -> str:
        parts = []
        for monomial, c in poly.terms:
            factors = [_iso(s) if s in self.iterators else self.param(s) for s in monomial]
            if len(factors) > 1 and any(s in self.iterators for s in monomial):
                raise NotApplicable("a subscript multiplies loop variables")
            if len([s for s in monomial if s not in self.iterators]) > 1:
                factors = [self.param(" * ".join(monomial))]
            parts.append("*".join([str(c)] + factors))
        return " + ".join(parts) or "0"

    def coordinates(self, array: str, subscripts: list[c_ast.Node]) -> list[str]:
        coords = []
        for sub in subscripts:
            poly = self.poly(sub)
            try:
                coeffs, rest = poly.split(self.iterators)
            except NotAffine as exc:
                raise NotApplicable(str(exc)) from None
            if all(c.is_const() for c in coeffs.values()):
                coords.append(self._term(poly))
                continue
            # Symbolic strides: one coordinate per loop variable, largest stride first.
            def size(item):
                var, coef = item
                value = coef.const_value()
                return (0, abs(value)) if value is not None else (1, len(coef.terms), 0)
            ordered = sorted(coeffs.items(), key=size, reverse=True)
            form = (tuple(sorted(coeffs)), rest)
            if self.forms.setdefault(array, form) != form:
                raise NotApplicable(f"'{array}' is indexed in two different ways")
            coords += [(_iso(v) if (c.const_value() or 1) > 0 else f"-{_iso(v)}")
                       for v, c in ordered]
        return coords

    def visit(self, node: c_ast.Node | None, write: bool = False, read: bool = True,
              locals_: frozenset[str] = frozenset()) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.Assignment):
            self.visit(node.lvalue, write=True, read=node.op != "=", locals_=locals_)
            self.visit(node.rvalue, locals_=locals_)
            return
        if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
            self.visit(node.expr, write=True, read=True, locals_=locals_)
            return
        if isinstance(node, c_ast.ArrayRef):
            subs = []
            base = node
            while isinstance(base, c_ast.ArrayRef):
                subs.insert(0, base.subscript)
                base = base.name
            for sub in subs:
                self.visit(sub, locals_=locals_)
            array = _GEN.visit(base)
            coords = self.coordinates(array, subs)
            if read:
                self.found.append((array, coords, False))
            if write:
                self.found.append((array, coords, True))
            return
        if isinstance(node, c_ast.ID):
            if node.name in self.scalars and node.name not in locals_:
                if read:
                    self.found.append((node.name, [], False))
                if write:
                    self.found.append((node.name, [], True))
            return
        if isinstance(node, c_ast.Decl):
            self.visit(node.init, locals_=locals_)
            return
        for _, child in node.children():
            self.visit(child, locals_=locals_)


def tile_nest(node: c_ast.For, options: PlutoOptions = PlutoOptions(),
              indent: str = "") -> TiledNest:
    """Pluto-style tiling of the nest rooted at `node`, or NotApplicable."""
    reader = _Reader()
    reader.walk(node, [], [])
    reader.expand_uses()
    loops, stmts = reader.loops, reader.statements
    deepest = max(stmts, key=lambda s: len(s.loops))
    band_loops = [loops[i] for i in deepest.loops]
    band_vars = [lp.var for lp in band_loops]
    if len(band_vars) != 3 or len(set(band_vars)) != 3:
        raise NotApplicable("the nest is not three loops deep")
    iterators = {lp.var for lp in loops}
    for_vars = {lp.var for lp in loops}
    scalars = set().union(*(written_scalars(n) for s in stmts for n in s.nodes)) - for_vars
    params: dict[str, str] = {}
    bounds = {}
    for index, lp in enumerate(loops):
        # Literal bounds stay numbers (isl simplifies with them); others become parameters.
        lo = _literal(lp.lower) or f"kf_lo{index}"
        hi = _literal(lp.upper) or f"kf_hi{index}"
        for name, text in ((lo, lp.lower), (hi, lp.upper)):
            if name.startswith("kf_"):
                params[name] = text
        bounds[index] = (lo, hi)
    accesses = _Accesses(iterators, scalars)
    reads, writes, domain, original = [], [], [], []
    width = max(len(s.schedule) for s in stmts)
    for s in stmts:
        dims = [_iso(loops[i].var) for i in s.loops]
        if len(set(dims)) != len(dims):
            raise NotApplicable("a loop variable is reused by an inner loop")
        tuple_ = f"{s.name}[{', '.join(dims)}]"
        cons = " and ".join(f"{bounds[i][0]} <= {_iso(loops[i].var)} < {bounds[i][1]}"
                            for i in s.loops) or "true"
        domain.append(f"{tuple_} : {cons}")
        original.append(f"{tuple_} -> [{', '.join(s.schedule + ['0'] * (width - len(s.schedule)))}]")
        accesses.found = []
        for n in s.nodes:
            accesses.visit(n, locals_=frozenset(s.locals_))
        for array, arr_coords, write in accesses.found:
            target = f"{_safe(array)}[{', '.join(arr_coords)}]"
            (writes if write else reads).append(f"{tuple_} -> {target}")
    params.update({v: k for k, v in accesses.params.items()})
    head = f"[{', '.join(params)}] -> "

    def union_map(parts: list[str]) -> isl.UnionMap:
        return isl.UnionMap(head + "{ " + "; ".join(parts) + " }")

    dom = isl.UnionSet(head + "{ " + "; ".join(domain) + " }")
    context = isl.Set(head + "{ : " + " and ".join(f"{lo} < {hi}" for lo, hi in bounds.values())
                      + " }")
    deps = tiling.dependences(domain=dom, schedule=union_map(original), reads=union_map(reads),
                              writes=union_map(writes), context=context)
    # isl's scheduler finds the schedule and its outermost permutable band, as PPCG does
    schedule, members = tiling.pluto_schedule(domain=dom, dependences=deps, context=context)
    if members < 2:
        shared = sorted(scalars)
        why = f" (the scalar '{shared[0]}' is shared by all iterations)" if shared else ""
        raise NotApplicable(f"isl's scheduler finds no permutable band of two or more loops{why}")
    band_dims = min(members, 3)
    order = tuple(range(band_dims))
    if options.intratileopt:
        order = tiling.intra_tile_order(schedule=schedule, band_dims=band_dims,
                                        accesses=union_map(reads + writes), dependences=deps)
    tiled = tiling.tile_schedule(
        schedule, band_dims=band_dims, sizes=(options.tile,) * band_dims if options.tile else (),
        second_level=(options.second_level,) * band_dims if options.second_level else None,
        point_order=order)
    ast = tiling.build_ast(schedule=tiled, domain=dom, context=context, separate=True)
    band_names = _band_names(schedule, deepest.name, band_vars, band_dims)

    by_name = {s.name: s for s in stmts}

    def statement(name: str, args: list[str]) -> str:
        s = by_name[name]
        binds = []
        for i, arg in zip(s.loops, args):
            lp = loops[i]
            if lp.decl is not None:
                decl = copy.copy(lp.decl)
                decl.init = c_ast.ID(arg)
                binds.append(_GEN.visit(decl) + ";")
            else:
                binds.append(f"__typeof__({lp.var}) {lp.var} = {arg};")
        body = " ".join(_GEN.visit(n).strip() + ("" if isinstance(n, c_ast.Compound) else ";")
                        for n in s.nodes)
        return "{ " + " ".join(binds + [body]) + " }"

    # The new loops count in the loop variables' own type, as Pluto's output does (a conversion
    # between the iterators and the statements' variables would hide the access pattern from
    # the vectorizer).
    types = {_GEN._generate_type(lp.decl.type, emit_declname=False) if lp.decl is not None
             else f"__typeof__({lp.var})" for lp in band_loops}
    index_type = types.pop() if len(types) == 1 else "kf_index"
    parallel = options.parallel and tiling.outer_parallel(schedule=schedule, dependences=deps)
    code = AstPrinter(statement, index_type=index_type, parallel_outer=parallel).block(ast, indent)
    depth = _depth(ast)
    return TiledNest(code=code, params=tuple((k, v) for k, v in params.items()
                                             if k.startswith("kf_lo") or k.startswith("kf_hi")),
                     checks=tuple(f"{lo} < {hi}" for lo, hi in bounds.values()
                                  if not (_literal(lo) and _literal(hi))) or ("1",),
                     band=band_names, point_order=tuple(band_names[d] for d in order),
                     loop_depth=depth, parallel=parallel,
                     expansions=tuple((x.array, x.ctype, tuple(f"({loops[i].upper} - "
                                                               f"{loops[i].lower})"
                                                               for i in x.loops))
                                      for x in reader.expansions.values()))


def _band_names(schedule: isl.UnionMap, statement: str, variables: list[str],
                band_dims: int) -> tuple[str, ...]:
    """The band's dimensions as the deepest statement's loop variables (`variables`, in the
    order of its tuple); a dimension that is no single one of them is named b0, b1, ..."""
    names = []
    for m in tiling._maps(schedule):
        if m.get_tuple_name(isl.dim_type.in_) != statement:
            continue
        universe = isl.Map.universe(m.get_space())
        for d in range(band_dims):
            names.append(next((variables[i] for i in range(m.dim(isl.dim_type.in_))
                               if m.is_subset(universe.equate(isl.dim_type.in_, i,
                                                              isl.dim_type.out, d))), f"b{d}"))
    return tuple(names)


def _depth(node: isl.AstNode) -> int:
    kind = node.get_type()
    if kind == isl.ast_node_type.for_:
        return 1 + _depth(node.for_get_body())
    if kind == isl.ast_node_type.block:
        children = node.block_get_children()
        return max((_depth(children.get_at(i)) for i in range(children.n_ast_node())), default=0)
    if kind == isl.ast_node_type.if_:
        depth = _depth(node.if_get_then_node())
        return max(depth, _depth(node.if_get_else_node())) if node.if_has_else_node() else depth
    if kind == isl.ast_node_type.mark:
        return _depth(node.mark_get_node())
    return 0


def _safe(name: str) -> str:
    return "a_" + "".join(ch if ch.isalnum() else "_" for ch in name)


class PlutoStyleBackend(Backend):
    """compare's "pluto-style" variant: the nest tiled as above, behind the recognizer's run-time
    checks (the original runs when one fails).  A nest it does not apply to stays as written; its
    report entry says why (``not_applied``)."""

    name = "pluto-style"

    def __init__(self, options: PlutoOptions = PlutoOptions()) -> None:
        self.options = options

    def call(self, site: Site) -> Call:
        try:
            tiled = tile_nest(site.node, self.options, site.indent + "        ")
        except NotApplicable as exc:
            return Call(site.original, None, details=(("backend", "pluto-style"),
                                                      ("not_applied", str(exc))))
        text = emit.environment().get_template("plutostyle.c.j2").render(
            spec=site.spec, tiled=tiled, options=self.options, original=site.original,
            indent=site.indent)
        return Call(text.rstrip("\n"), None, details=(
            ("backend", "pluto-style"), ("kernel", "isl-tiled loops"),
            ("blocking", (f"tile {self.options.tile}" if self.options.tile else "no tiling") + (
                f", second level {self.options.second_level}" if self.options.second_level else "")
             + f"; point loops {' '.join(tiled.point_order)}"
             + ("; outermost loop on OpenMP threads" if tiled.parallel else
                "; no OpenMP (the outermost loop carries a dependence)" if self.options.parallel
                else "")))
            + tuple(("expanded", ", ".join(f"'{name[5:]}' over {len(extents)} loop"
                                            f"{'s' if len(extents) > 1 else ''}"
                                            for name, _, extents in tiled.expansions))
                    for _ in tiled.expansions[:1]))

    def support(self, plans: list, uses: str | None = None) -> str:
        return emit.render_prelude([], emit.helpers_called(uses)) + emit.SUPPORT_END
