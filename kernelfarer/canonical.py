"""Canonicalization: bring a candidate loop nest to the form the recognizer matches.

Real code spells a GEMM in many ways; the recognizer (recognize.py) matches one: counted `for`
loops stepping by +1, array subscripts, the product summed in one statement.  Each step here is a
small transform that keeps what the nest computes, applied to a copy of the nest (the user's AST
is never changed, and the fallback path runs the user's own text anyway):

- `while` loops with a counter (set just before, stepped last) become `for` loops;
- labels no `goto` targets are dropped;
- pointer subscripts `*(C + i*ldc + j)` become `C[i*ldc + j]`;
- counted loops are normalised: `v != hi` to `v < hi` (with a run-time check that lo <= hi),
  decrementing loops to incrementing ones over the same values (the original's final value of
  the variable is kept for after the fast path);
- a hand-tiled nest whose tiles cover the iteration space exactly is de-tiled;
- a k loop unrolled by hand with its remainder loop is re-rolled;
- scalar temporaries (hoisted operands, index temporaries, `mult`-style products, f2c's bound
  temporaries) are substituted forward where their definitions dominate their uses and nothing
  redefines their inputs;
- a zero-skip guard `if (b[l][j] != 0) {...}` is dropped (exact for integers; for floating point
  the recognizer adds a run-time check that what the skipped products multiply is finite);
- the `beta == 0` choice between overwriting and scaling C (reference BLAS) becomes one scaled
  update whose C is read only when beta != 0.

Every transform either applies exactly or leaves the nest as it was: the recognizer then says why
the nest is not a GEMM.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.ctype import Scalar, Scope

_GEN = c_generator.CGenerator()


@dataclass
class Canonical:
    """The canonical nest and what the recognizer and the call site need to know about it."""

    node: c_ast.For
    steps: list[str] = field(default_factory=list)     # what was done, for remarks
    guards: list[tuple[str, str]] = field(default_factory=list)   # (C condition, why)
    finals: dict[str, str] = field(default_factory=dict)  # variable -> statement giving the
                                                          # value the original leaves
    dead: set[str] = field(default_factory=set)         # variables declared outside the nest
                                                        # whose stores were removed: must be dead
    zero_skip: list[c_ast.Node] = field(default_factory=list)  # tested elements (b[l][j])
    load_c_when: str | None = None    # C condition: C's old value is read only when it holds


@dataclass(frozen=True)
class Context:
    scope: Scope
    gotos: frozenset[str] = frozenset()        # labels some goto of the function targets
    functions: frozenset[str] = frozenset()    # functions without side effects
    min_functions: frozenset[str] = frozenset()  # file functions that return the smaller argument


def canonicalize(root: c_ast.Node, context: Context, *, before: c_ast.Node | None = None
                 ) -> Canonical | None:
    """The canonical form of the nest at `root` (a `for` or `while`; `before` is the statement
    right before it in its block, the counter's initialization of a `while`), or None when `root`
    is not a loop nest at all."""
    node = copy.deepcopy(root)
    canon = Canonical(node=None)   # type: ignore[arg-type]
    context = _with_declarations(context, node, before)
    if isinstance(node, c_ast.While):
        node = _while_to_for(node, copy.deepcopy(before), canon, root=True)
        if node is None:
            return None
    if not isinstance(node, c_ast.For):
        return None
    node = _walk_blocks(node, canon, context)
    node = _strip_labels(node, context)
    before_text = _GEN.visit(node)
    node = _pointer_subscripts(node, context.scope)
    if _GEN.visit(node) != before_text:
        canon.steps.append("pointer subscripts *(p + i) as p[i]")
    nest_vars = _loop_vars(node)
    _normalize_loops(node, canon, nest_vars)
    node = _detile(node, canon, context) or node
    _reroll_blocks(node, canon, context)
    _unswitch_beta(node, canon)
    _drop_zero_skips(node, canon)
    _substitute_pointers(node, canon, context)
    _substitute_blocks(node, canon, context, _loop_vars(node))
    node = _collapse(node, canon, context) or node
    canon.node = node
    return canon


# -- small helpers ---------------------------------------------------------------------------------

def _with_declarations(context: Context, *nodes: c_ast.Node | None) -> Context:
    """The context with every variable the nest declares (loop counters, temporaries) known by
    type, for the transforms' type questions (shadowing inside the nest only makes them refuse)."""
    scope = context.scope.snapshot()
    scope.push()

    def visit(node: c_ast.Node | None) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.Decl) and node.name and not isinstance(node.type, c_ast.FuncDecl):
            scope.declare(node)
        for _, child in node.children():
            visit(child)

    for node in nodes:
        visit(node)
    return Context(scope=scope, gotos=context.gotos, functions=context.functions,
                   min_functions=context.min_functions)


def _items(node: c_ast.Node | None) -> list[c_ast.Node]:
    if node is None:
        return []
    if isinstance(node, c_ast.Compound):
        return list(node.block_items or [])
    return [node]


def _compound(items: list[c_ast.Node], like: c_ast.Node | None = None) -> c_ast.Compound:
    return c_ast.Compound(items, coord=getattr(like, "coord", None))


def _names(node: c_ast.Node | None) -> set[str]:
    if node is None:
        return set()
    found = {node.name} if isinstance(node, c_ast.ID) else set()
    for _, child in node.children():
        found |= _names(child)
    return found


def _assigned(node: c_ast.Node | None) -> set[str]:
    """Names stored to (plain assignments, compound assignments, ++/--, declarations)."""
    if node is None:
        return set()
    out: set[str] = set()
    if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
        out.add(node.lvalue.name)
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--", "&") \
            and isinstance(node.expr, c_ast.ID):
        out.add(node.expr.name)
    if isinstance(node, c_ast.Decl) and node.name:
        out.add(node.name)
    for _, child in node.children():
        out |= _assigned(child)
    return out


def _stored_arrays(node: c_ast.Node | None) -> set[str]:
    """Base names of the arrays (or pointers) stored through."""
    if node is None:
        return set()
    out: set[str] = set()
    target = None
    if isinstance(node, c_ast.Assignment):
        target = node.lvalue
    elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        target = node.expr
    if target is not None and not isinstance(target, c_ast.ID):
        base = _base(target)
        out.add(base if base is not None else "*")
    for _, child in node.children():
        out |= _stored_arrays(child)
    return out


def _read_arrays(node: c_ast.Node | None) -> set[str]:
    if node is None:
        return set()
    out: set[str] = set()
    if isinstance(node, (c_ast.ArrayRef,)) or (isinstance(node, c_ast.UnaryOp) and node.op == "*"):
        base = _base(node)
        out.add(base if base is not None else "*")
    for _, child in node.children():
        out |= _read_arrays(child)
    return out


def _base(node: c_ast.Node) -> str | None:
    while True:
        if isinstance(node, c_ast.ArrayRef):
            node = node.name
        elif isinstance(node, c_ast.UnaryOp) and node.op == "*":
            node = node.expr
        elif isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
            left, right = _base(node.left), _base(node.right)
            return left or right
        elif isinstance(node, c_ast.StructRef):
            node = node.name
        elif isinstance(node, c_ast.Cast):
            node = node.expr
        elif isinstance(node, c_ast.ID):
            return node.name
        else:
            return None


def _replace_ids(node: c_ast.Node, name: str, value: c_ast.Node) -> c_ast.Node:
    """`node` with every read of `name` replaced by a copy of `value` (in place; returns the new
    root when the root itself is replaced)."""
    if isinstance(node, c_ast.ID) and node.name == name:
        return copy.deepcopy(value)
    for attr in node.__slots__:
        if attr in ("coord", "__weakref__"):
            continue
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, _replace_ids(child, name, value))
        elif isinstance(child, list):
            setattr(node, attr, [_replace_ids(c, name, value) if isinstance(c, c_ast.Node)
                                 else c for c in child])
    return node


def _is_var(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def _const_int(node: c_ast.Node | None) -> int | None:
    if isinstance(node, c_ast.Constant) and node.type == "int":
        try:
            return int(node.value.rstrip("uUlL"), 0)
        except ValueError:
            return None
    if isinstance(node, c_ast.UnaryOp) and node.op == "-":
        inner = _const_int(node.expr)
        return None if inner is None else -inner
    return None


def _step(node: c_ast.For | None, var: str) -> int | None:
    """The constant step of `var` in a for's increment (+1, -1, +4 ...), or None."""
    step = node.next if isinstance(node, c_ast.For) else node
    if isinstance(step, c_ast.UnaryOp) and _is_var(step.expr, var):
        return {"p++": 1, "++": 1, "p--": -1, "--": -1}.get(step.op)
    if isinstance(step, c_ast.Assignment) and _is_var(step.lvalue, var):
        value = _const_int(step.rvalue)
        if step.op in ("+=", "-=") and value is not None:
            return value if step.op == "+=" else -value
        rv = step.rvalue
        if step.op == "=" and isinstance(rv, c_ast.BinaryOp) and rv.op in ("+", "-"):
            if _is_var(rv.left, var) and _const_int(rv.right) is not None:
                return _const_int(rv.right) * (1 if rv.op == "+" else -1)
            if rv.op == "+" and _is_var(rv.right, var) and _const_int(rv.left) is not None:
                return _const_int(rv.left)
    return None


def _init_var(node: c_ast.For) -> tuple[str, c_ast.Node] | None:
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init is not None:
        return init.decls[0].name, init.decls[0].init
    if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name, init.rvalue
    return None


def _loop_var(node: c_ast.For) -> str | None:
    found = _init_var(node)
    if found:
        return found[0]
    step = node.next
    target = step.lvalue if isinstance(step, c_ast.Assignment) else \
        step.expr if isinstance(step, c_ast.UnaryOp) else None
    if isinstance(target, c_ast.ID) and _step(node, target.name) is not None:
        return target.name
    return None


def _loop_vars(node: c_ast.Node) -> set[str]:
    out = set()
    if isinstance(node, c_ast.For):
        var = _loop_var(node)
        if var:
            out.add(var)
    for _, child in node.children():
        out |= _loop_vars(child)
    return out


def _increment_of(stmt: c_ast.Node, var: str) -> bool:
    return _step(stmt, var) == 1


def _has_continue(node: c_ast.Node) -> bool:
    """A `continue` that belongs to this loop (not to a loop nested in it)."""
    if isinstance(node, c_ast.Continue):
        return True
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)):
        return False
    return any(_has_continue(child) for _, child in node.children())


def _pure(node: c_ast.Node, functions: frozenset[str]) -> bool:
    """No side effects: no assignment, ++/--, or call of a function not known to be pure."""
    if isinstance(node, (c_ast.Assignment,)):
        return False
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        return False
    if isinstance(node, c_ast.FuncCall):
        if _GEN.visit(node.name) not in functions:
            return False
    return all(_pure(child, functions) for _, child in node.children())


# -- while loops -----------------------------------------------------------------------------------

def _while_to_for(node: c_ast.While, init: c_ast.Node | None, canon: Canonical,
                  root: bool = False) -> c_ast.For | None:
    """`v = lo; while (v < hi) { ...; v++; }` as `for (v = lo; v < hi; v++) { ... }`."""
    cond = node.cond
    if not isinstance(cond, c_ast.BinaryOp):
        return None
    var = None
    if isinstance(cond.left, c_ast.ID) and cond.op in ("<", "<=", "!="):
        var = cond.left.name
    elif isinstance(cond.right, c_ast.ID) and cond.op in (">", ">=", "!="):
        var = cond.right.name
    if var is None:
        return None
    items = _items(node.stmt)
    if not items or not _increment_of(items[-1], var):
        return None
    body = items[:-1]
    if var in _assigned(_compound(body)) or _has_continue(_compound(body)):
        return None
    if isinstance(init, c_ast.Assignment) and init.op == "=" and _is_var(init.lvalue, var):
        start = init.rvalue
    elif isinstance(init, c_ast.Decl) and init.name == var and init.init is not None:
        start = init.init
    else:
        return None
    if var in _names(start) or not _pure(start, frozenset()):
        return None
    head = c_ast.Assignment("=", c_ast.ID(var), copy.deepcopy(start))
    canon.steps.append(f"the while loop over '{var}' as a counted for loop")
    return c_ast.For(head, cond, c_ast.UnaryOp("p++", c_ast.ID(var)), _compound(body, node.stmt),
                     coord=node.coord)


def _walk_blocks(node: c_ast.Node, canon: Canonical, context: Context) -> c_ast.Node:
    """Counted while loops inside the nest, with their counter's initialization right before them
    in the same block (a declaration moves into the for when nothing after the loop uses it)."""
    if not isinstance(node, c_ast.For):
        return node
    items = _items(node.stmt)
    out: list[c_ast.Node] = []
    changed = False
    for index, item in enumerate(items):
        if isinstance(item, c_ast.While) and out:
            init = out[-1]
            after = _compound(items[index + 1:])
            converted = _while_to_for(item, init, canon)
            if converted is not None and isinstance(init, c_ast.Decl):
                if init.name in _names(after):
                    converted = None
                else:
                    decl = copy.deepcopy(init)
                    converted.init = c_ast.DeclList([decl])
            if converted is not None:
                out[-1] = converted
                changed = True
                continue
        out.append(item)
    if changed:
        node.stmt = _compound(out, node.stmt)
    for item in _items(node.stmt):
        for loop in _outer_loops(item):
            _walk_blocks(loop, canon, context)
    return node


def _outer_loops(node: c_ast.Node) -> list[c_ast.For]:
    """The for loops in `node` that are not inside another for loop of `node`."""
    if isinstance(node, c_ast.For):
        return [node]
    out: list[c_ast.For] = []
    for _, child in node.children():
        out += _outer_loops(child)
    return out


def _nest_loops(node: c_ast.Node) -> list[c_ast.For]:
    """The for loops of the nest, outermost first (loops inside loops' bodies)."""
    out = []
    if isinstance(node, c_ast.For):
        out.append(node)
        for item in _items(node.stmt):
            out += _nest_loops(item)
    elif isinstance(node, (c_ast.Compound, c_ast.If, c_ast.Label)):
        for _, child in node.children():
            out += _nest_loops(child)
    return out


# -- labels and pointer subscripts -----------------------------------------------------------------

def _strip_labels(node: c_ast.Node, context: Context) -> c_ast.Node:
    if isinstance(node, c_ast.Label) and node.name not in context.gotos:
        return _strip_labels(node.stmt, context)
    for attr in node.__slots__:
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, _strip_labels(child, context))
        elif isinstance(child, list):
            setattr(node, attr, [_strip_labels(c, context) if isinstance(c, c_ast.Node) else c
                                 for c in child])
    return node


def _pointer_type(node: c_ast.Node, scope: Scope):
    """The pointer or array type of an expression, when it has one we can tell."""
    if isinstance(node, c_ast.ArrayRef):
        base = _pointer_type(node.name, scope)
        inner = ctype.element(base) if base is not None else None
        return inner if isinstance(inner, (ctype.Pointer, ctype.Array)) else None
    if isinstance(node, c_ast.Cast):
        t = ctype.resolve(node.to_type, scope.typedefs)
        return t if isinstance(t, (ctype.Pointer, ctype.Array)) else None
    t = scope.type_of_expr(node)
    return t if isinstance(t, (ctype.Pointer, ctype.Array)) else None


def _terms(node: c_ast.Node, sign: int = 1) -> list[tuple[int, c_ast.Node]]:
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        return _terms(node.left, sign) + _terms(node.right, sign if node.op == "+" else -sign)
    return [(sign, node)]


def _sum(terms: list[tuple[int, c_ast.Node]]) -> c_ast.Node:
    if not terms:
        return c_ast.Constant("int", "0")
    sign, first = terms[0]
    out = first if sign > 0 else c_ast.UnaryOp("-", first)
    for sign, term in terms[1:]:
        out = c_ast.BinaryOp("+" if sign > 0 else "-", out, term)
    return out


def _pointer_subscripts(node: c_ast.Node, scope: Scope) -> c_ast.Node:
    for attr in node.__slots__:
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, _pointer_subscripts(child, scope))
        elif isinstance(child, list):
            setattr(node, attr, [_pointer_subscripts(c, scope) if isinstance(c, c_ast.Node)
                                 else c for c in child])
    if isinstance(node, c_ast.UnaryOp) and node.op == "*" and \
            isinstance(node.expr, c_ast.BinaryOp):       # a bare *p is a scalar read: left as is
        terms = _terms(node.expr)
        pointers = [(s, t) for s, t in terms if _pointer_type(t, scope) is not None]
        if len(pointers) == 1 and pointers[0][0] > 0:
            rest = [(s, t) for s, t in terms if t is not pointers[0][1]]
            return c_ast.ArrayRef(pointers[0][1], _sum(rest), coord=node.coord)
    return node


# -- counted loops -----------------------------------------------------------------------------------

def _normalize_loops(node: c_ast.Node, canon: Canonical, nest_vars: set[str]) -> None:
    for loop in _nest_loops(node):
        _normalize_loop(loop, canon, nest_vars)


def _normalize_loop(loop: c_ast.For, canon: Canonical, nest_vars: set[str]) -> None:
    found = _init_var(loop)
    cond = loop.cond
    if found is None or not isinstance(cond, c_ast.BinaryOp):
        return
    var, start = found
    step = _step(loop, var)
    if _is_var(cond.right, var) and not _is_var(cond.left, var):
        flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}.get(cond.op)
        if flipped is None:
            return
        cond = c_ast.BinaryOp(flipped, cond.right, cond.left)
    if not _is_var(cond.left, var):
        return
    bound = cond.right
    if (_names(start) | _names(bound)) & (nest_vars - {var}):
        return                         # triangular: the recognizer says so
    if step == 1 and cond.op == "!=":
        loop.cond = c_ast.BinaryOp("<", c_ast.ID(var), bound)
        canon.guards.append((f"({_GEN.visit(start)}) <= ({_GEN.visit(bound)})",
                             f"'{var}' reaches {_GEN.visit(bound)} counting up (the != loop ends)"))
        canon.steps.append(f"the loop '{var} != {_GEN.visit(bound)}' as '{var} < ...'")
        return
    if step == -1 and cond.op in (">=", ">"):
        low = bound if cond.op == ">=" else c_ast.BinaryOp("+", bound, c_ast.Constant("int", "1"))
        if isinstance(loop.init, c_ast.DeclList):
            decl = copy.deepcopy(loop.init.decls[0])
            decl.init = low
            loop.init = c_ast.DeclList([decl])
        else:
            loop.init = c_ast.Assignment("=", c_ast.ID(var), low)
            canon.finals[var] = (f"{var} = ({_GEN.visit(bound)}){' - 1' if cond.op == '>=' else ''};")
        loop.cond = c_ast.BinaryOp("<=", c_ast.ID(var), start)
        loop.next = c_ast.UnaryOp("p++", c_ast.ID(var))
        canon.steps.append(f"the decrementing loop over '{var}' counted up (same values)")


# -- hand tiling -----------------------------------------------------------------------------------

def _min_args(node: c_ast.Node, context: Context) -> tuple[c_ast.Node, c_ast.Node] | None:
    """(x, y) of min(x, y) spelled as a conditional or a call of a file function that is one."""
    if isinstance(node, c_ast.TernaryOp) and isinstance(node.cond, c_ast.BinaryOp):
        c = node.cond
        t, f = _GEN.visit(node.iftrue), _GEN.visit(node.iffalse)
        left, right = _GEN.visit(c.left), _GEN.visit(c.right)
        if c.op in ("<", "<=") and (t, f) == (left, right):
            return node.iftrue, node.iffalse
        if c.op in (">", ">=") and (t, f) == (right, left):
            return node.iftrue, node.iffalse
    if isinstance(node, c_ast.FuncCall) and node.args is not None and len(node.args.exprs) == 2:
        if _GEN.visit(node.name) in context.min_functions:
            return node.args.exprs[0], node.args.exprs[1]
    return None


def min_functions(ast: c_ast.FileAST) -> frozenset[str]:
    """File functions of two integer parameters whose body is `return a < b ? a : b;` (or the
    same with <=, >, >=): what hand-tiled code calls to clamp a tile."""
    out = set()
    for ext in ast.ext:
        if not isinstance(ext, c_ast.FuncDef):
            continue
        params = getattr(ext.decl.type.args, "params", None) or []
        items = ext.body.block_items or []
        if len(params) != 2 or len(items) != 1 or not isinstance(items[0], c_ast.Return):
            continue
        names = [getattr(p, "name", None) for p in params]
        expr = items[0].expr
        if not isinstance(expr, c_ast.TernaryOp) or not isinstance(expr.cond, c_ast.BinaryOp):
            continue
        c, t, f = expr.cond, _GEN.visit(expr.iftrue), _GEN.visit(expr.iffalse)
        left, right = _GEN.visit(c.left), _GEN.visit(c.right)
        if {left, right} != set(names):
            continue
        if (c.op in ("<", "<=") and (t, f) == (left, right)) or \
                (c.op in (">", ">=") and (t, f) == (right, left)):
            out.add(ext.decl.name)
    return frozenset(out)


def _perfect_chain(node: c_ast.For) -> list[c_ast.For]:
    chain = [node]
    while True:
        items = [i for i in _items(chain[-1].stmt) if not isinstance(i, c_ast.Pragma)]
        if len(items) == 1 and isinstance(items[0], c_ast.For):
            chain.append(items[0])
        else:
            return chain


def _detile(node: c_ast.For, canon: Canonical, context: Context) -> c_ast.For | None:
    """for ii (step T) ... for i in [ii, min(ii + T, hi)) ...  ->  for i in [lo, hi)."""
    chain = _perfect_chain(node)
    if len(chain) < 4:
        return None
    tiles: dict[str, tuple[c_ast.Node, c_ast.Node, str]] = {}   # var -> (lo, hi, step text)
    points: list[tuple[c_ast.For, str, str]] = []               # (loop, var, tile var)
    plain: list[c_ast.For] = []
    for loop in chain:
        found = _init_var(loop)
        if found is None or not isinstance(loop.cond, c_ast.BinaryOp):
            return None
        var, start = found
        if not isinstance(loop.init, c_ast.DeclList):
            return None                 # tile and point variables must not outlive the nest
        step = loop.next
        cond = loop.cond
        if isinstance(step, c_ast.Assignment) and step.op == "+=" and _is_var(step.lvalue, var) \
                and _is_var(cond.left, var) and cond.op == "<" and _step(loop, var) != 1:
            tiles[var] = (start, cond.right, _GEN.visit(step.rvalue))
            continue
        if _step(loop, var) != 1 or not isinstance(start, c_ast.ID) or start.name not in tiles:
            if _step(loop, var) == 1:
                plain.append(loop)
                points.append((loop, var, ""))
                continue
            return None
        tile = start.name
        lo, hi, size = tiles[tile]
        upper = None
        if _is_var(cond.left, var) and cond.op == "<":
            args = _min_args(cond.right, context)
            if args is not None:
                upper = args
        elif isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
            a, b = cond.left, cond.right
            if all(isinstance(x, c_ast.BinaryOp) and x.op == "<" and _is_var(x.left, var)
                   for x in (a, b)):
                upper = (a.right, b.right)
        if upper is None:
            return None
        texts = sorted((_GEN.visit(u) for u in upper), key=lambda t: t != _GEN.visit(hi))
        if texts[0] != _GEN.visit(hi) or texts[1] not in (f"{tile} + {size}", f"{size} + {tile}"):
            return None
        points.append((loop, var, tile))
    used = [tile for _, _, tile in points if tile]
    if sorted(used) != sorted(tiles) or len(points) < 3 or len(used) != len(set(used)):
        return None
    body = chain[-1].stmt
    if _names(body) & set(tiles):
        return None
    # the point loops, innermost last, over the tiles' whole ranges
    rebuilt = copy.deepcopy(body)
    for loop, var, tile in reversed(points):
        if tile:
            lo, hi, _ = tiles[tile]
            decl = copy.deepcopy(loop.init.decls[0])
            decl.init = copy.deepcopy(lo)
            new = c_ast.For(c_ast.DeclList([decl]), c_ast.BinaryOp("<", c_ast.ID(var),
                                                                   copy.deepcopy(hi)),
                            c_ast.UnaryOp("p++", c_ast.ID(var)), rebuilt, coord=loop.coord)
        else:
            new = c_ast.For(loop.init, loop.cond, loop.next, rebuilt, coord=loop.coord)
        rebuilt = new
    canon.steps.append(f"the hand-tiled nest ({len(chain)} loops) de-tiled")
    return rebuilt


# -- hand unrolling ---------------------------------------------------------------------------------

def _reroll_blocks(node: c_ast.Node, canon: Canonical, context: Context) -> None:
    for loop in _nest_loops(node):
        items = _items(loop.stmt)
        for i in range(len(items) - 1):
            first, second = items[i], items[i + 1]
            if isinstance(first, c_ast.For) and isinstance(second, c_ast.For):
                prev = items[i - 1] if i > 0 else None
                merged = _reroll(first, second, prev, _compound(items[i + 2:]), context)
                if merged is not None:
                    rerolled, drop_prev = merged
                    start = i - 1 if drop_prev else i
                    loop.stmt = _compound(items[:start] + [rerolled] + items[i + 2:], loop.stmt)
                    canon.steps.append(f"the loop over '{_loop_var(rerolled)}' unrolled by hand "
                                       "re-rolled with its remainder loop")
                    return _reroll_blocks(node, canon, context)


def _reroll(main: c_ast.For, rest: c_ast.For, prev: c_ast.Node | None, after: c_ast.Node,
            context: Context):
    """(the re-rolled loop, whether `prev` was its initialization) or None."""
    var = _loop_var(main)
    if var is None or _loop_var(rest) != var:
        return None
    unroll = _step(main, var)
    if unroll is None or not 2 <= unroll <= 16 or _step(rest, var) != 1:
        return None
    if rest.init is not None or not isinstance(rest.cond, c_ast.BinaryOp) or \
            rest.cond.op != "<" or not _is_var(rest.cond.left, var):
        return None
    bound = _GEN.visit(rest.cond.right)
    if not _main_bound_ok(main.cond, var, bound, unroll):
        return None
    body = _items(rest.stmt)
    main_body = _items(main.stmt)
    if not body:
        return None
    if len(main_body) == unroll * len(body):
        for r in range(unroll):
            for s, stmt in enumerate(body):
                if not _same_shifted(main_body[r * len(body) + s], stmt, var, r, context):
                    return None
    elif len(body) == 1 and len(main_body) == 1 and _sum_shifted(main_body[0], body[0], var,
                                                                  unroll, context):
        pass
    else:
        return None
    init = main.init
    drop_prev = False
    if init is None:
        if isinstance(prev, c_ast.Assignment) and prev.op == "=" and _is_var(prev.lvalue, var):
            init, drop_prev = copy.deepcopy(prev), True
        elif isinstance(prev, c_ast.Decl) and prev.name == var and prev.init is not None:
            if var in _names(after):
                return None     # declared in the block and used after the loops
            init, drop_prev = c_ast.DeclList([copy.deepcopy(prev)]), True
        else:
            return None
    return c_ast.For(init, copy.deepcopy(rest.cond), c_ast.UnaryOp("p++", c_ast.ID(var)),
                     copy.deepcopy(rest.stmt), coord=main.coord), drop_prev


def _main_bound_ok(cond: c_ast.Node, var: str, bound: str, unroll: int) -> bool:
    """The unrolled loop's condition keeps var + unroll - 1 < bound."""
    if not isinstance(cond, c_ast.BinaryOp):
        return False
    left, right = cond.left, cond.right
    if cond.op in ("<", "<=") and isinstance(left, c_ast.BinaryOp) and left.op == "+" \
            and _is_var(left.left, var) and _GEN.visit(right) == bound:
        c = _const_int(left.right)
        return c is not None and (c >= unroll - 1 if cond.op == "<" else c >= unroll)
    if cond.op in ("<", "<=") and _is_var(left, var) and isinstance(right, c_ast.BinaryOp) \
            and right.op == "-" and _GEN.visit(right.left) == bound:
        c = _const_int(right.right)
        return c is not None and (c >= unroll - 1 if cond.op == "<" else c >= unroll)
    return False


def _shifted(node: c_ast.Node, var: str, r: int) -> c_ast.Node:
    value = c_ast.BinaryOp("+", c_ast.ID(var), c_ast.Constant("int", str(r))) if r else c_ast.ID(var)
    return _replace_ids(copy.deepcopy(node), var, value)


def _same_shifted(candidate: c_ast.Node, template: c_ast.Node, var: str, r: int,
                  context: Context) -> bool:
    return _equivalent(candidate, _shifted(template, var, r), context)


def _sum_shifted(candidate: c_ast.Node, template: c_ast.Node, var: str, unroll: int,
                 context: Context) -> bool:
    """`x += E(v) + E(v+1) + ... + E(v+u-1)` against the remainder's `x += E(v)`."""
    if not (isinstance(candidate, c_ast.Assignment) and isinstance(template, c_ast.Assignment)
            and candidate.op == template.op == "+="
            and _GEN.visit(candidate.lvalue) == _GEN.visit(template.lvalue)):
        return False
    terms = _terms(candidate.rvalue)
    if len(terms) != unroll or any(sign < 0 for sign, _ in terms):
        return False
    return all(_equivalent(term, _shifted(template.rvalue, var, r), context)
               for r, (_, term) in enumerate(terms))


def _equivalent(a: c_ast.Node, b: c_ast.Node, context: Context) -> bool:
    """Structurally equal, array subscripts compared as affine forms (k + 1 and 1 + k alike)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, c_ast.ArrayRef):
        return _equivalent(a.name, b.name, context) and _same_affine(a.subscript, b.subscript,
                                                                     context)
    if isinstance(a, (c_ast.ID, c_ast.Constant)):
        return _GEN.visit(a) == _GEN.visit(b)
    if hasattr(a, "op") and getattr(a, "op") != getattr(b, "op"):
        return False
    children_a = [c for _, c in a.children()]
    children_b = [c for _, c in b.children()]
    if len(children_a) != len(children_b):
        return False
    if not children_a:
        return _GEN.visit(a) == _GEN.visit(b)
    return all(_equivalent(x, y, context) for x, y in zip(children_a, children_b))


def _same_affine(a: c_ast.Node, b: c_ast.Node, context: Context) -> bool:
    from kernelfarer.affine import IndexConverter, NotAffine
    names = sorted(_names(a) | _names(b))
    try:
        conv = IndexConverter(context.scope, names)
        return conv.convert(a) == conv.convert(b)
    except (NotAffine, Exception):       # noqa: BLE001 - anything not affine is not the same
        return _GEN.visit(a) == _GEN.visit(b)


# -- reference BLAS: beta == 0 and zero skips -------------------------------------------------------

def _unswitch_beta(node: c_ast.For, canon: Canonical) -> None:
    """`if (beta == 0) C = X; else C = X + beta*C;` (and the column-scaling form
    `if (beta == 0) { for i C = 0; } else if (beta != 1) { for i C = beta*C; }`) as one scaled
    update of C, whose old value is read only when beta != 0."""
    for loop in _nest_loops(node):
        items = _items(loop.stmt)
        for index, item in enumerate(items):
            if not isinstance(item, c_ast.If):
                continue
            replacement = _beta_store(item) or _beta_scaling(item)
            if replacement is None:
                continue
            statement, beta = replacement
            if canon.load_c_when is not None:
                return
            items[index] = statement
            loop.stmt = _compound(items, loop.stmt)
            canon.load_c_when = f"({beta}) != 0"
            canon.steps.append(f"the choice on {beta} == 0 as one update reading C when it is not")
            return


def _is_zero(node: c_ast.Node) -> bool:
    if isinstance(node, c_ast.Constant):
        try:
            return float(node.value.lower().rstrip("fl").rstrip("u")) == 0.0
        except ValueError:
            return False
    return False


def _is_one(node: c_ast.Node) -> bool:
    if isinstance(node, c_ast.Constant):
        try:
            return float(node.value.lower().rstrip("fl").rstrip("u")) == 1.0
        except ValueError:
            return False
    return False


def _compare(cond: c_ast.Node, op: str, test) -> str | None:
    """The other side's text when `cond` is `x op <test>` or `<test> op x`."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op == op:
        if test(cond.right):
            return _GEN.visit(cond.left)
        if test(cond.left):
            return _GEN.visit(cond.right)
    return None


def _single(node: c_ast.Node | None) -> c_ast.Node | None:
    items = _items(node)
    return items[0] if len(items) == 1 else None


def _beta_store(item: c_ast.If):
    """if (beta == 0) c = X; else c = X + beta * c;"""
    beta = _compare(item.cond, "==", _is_zero)
    then, other = _single(item.iftrue), _single(item.iffalse)
    if beta is None or not isinstance(then, c_ast.Assignment) or \
            not isinstance(other, c_ast.Assignment) or then.op != "=" or other.op != "=":
        return None
    cell = _GEN.visit(then.lvalue)
    if _GEN.visit(other.lvalue) != cell:
        return None
    terms = _terms(other.rvalue)
    scaled = [t for s, t in terms if s > 0 and isinstance(t, c_ast.BinaryOp) and t.op == "*"
              and {_GEN.visit(t.left), _GEN.visit(t.right)} == {beta, cell}]
    if len(scaled) != 1:
        return None
    rest = [(s, t) for s, t in terms if t is not scaled[0]]
    if _GEN.visit(_sum(rest)) != _GEN.visit(then.rvalue) or cell in _GEN.visit(then.rvalue):
        return None
    return copy.deepcopy(other), beta


def _branch_loop(node: c_ast.Node | None) -> c_ast.For | None:
    """The loop a branch holds, after the bound temporaries set right before it
    (`i__2 = *m; for (i__ = 1; i__ <= i__2; ++i__)`) are put into its header."""
    items = _items(node)
    if not items or not isinstance(items[-1], c_ast.For):
        return None
    loop = copy.deepcopy(items[-1])
    for stmt in reversed(items[:-1]):
        if not (isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and
                isinstance(stmt.lvalue, c_ast.ID) and _pure(stmt.rvalue, frozenset())):
            return None
        name = stmt.lvalue.name
        if name in _names(loop.stmt) or name in _assigned(loop):
            return None
        for attr in ("init", "cond", "next"):
            setattr(loop, attr, _replace_ids(getattr(loop, attr), name, stmt.rvalue))
    return loop


def _beta_scaling(item: c_ast.If):
    """if (beta == 0) { for i c = 0; } else if (beta != 1) { for i c = beta * c; }"""
    beta = _compare(item.cond, "==", _is_zero)
    zero_loop, other = _branch_loop(item.iftrue), _single(item.iffalse)
    if beta is None or not isinstance(zero_loop, c_ast.For) or not isinstance(other, c_ast.If):
        return None
    if _compare(other.cond, "!=", _is_one) != beta or other.iffalse is not None:
        return None
    scale_loop = _branch_loop(other.iftrue)
    if not isinstance(scale_loop, c_ast.For):
        return None
    header = lambda f: (_GEN.visit(f.init), _GEN.visit(f.cond), _GEN.visit(f.next))  # noqa: E731
    if header(zero_loop) != header(scale_loop):
        return None
    zero, scale = _single(zero_loop.stmt), _single(scale_loop.stmt)
    if not (isinstance(zero, c_ast.Assignment) and isinstance(scale, c_ast.Assignment)
            and zero.op == "=" and _is_zero(zero.rvalue)):
        return None
    cell = _GEN.visit(zero.lvalue)
    if _GEN.visit(scale.lvalue) != cell:
        return None
    if not ((scale.op == "*=" and _GEN.visit(scale.rvalue) == beta) or
            (scale.op == "=" and isinstance(scale.rvalue, c_ast.BinaryOp) and scale.rvalue.op == "*"
             and {_GEN.visit(scale.rvalue.left), _GEN.visit(scale.rvalue.right)} == {beta, cell})):
        return None
    return copy.deepcopy(scale_loop), beta


def _drop_zero_skips(node: c_ast.For, canon: Canonical) -> None:
    """`if (x != 0) { ... }` as the whole body of a loop of the nest, x an element the body
    multiplies by: the body without the test (the recognizer checks that x is a factor of the
    product and guards what it multiplies)."""
    for loop in _nest_loops(node):
        item = _single(loop.stmt)
        if not isinstance(item, c_ast.If) or item.iffalse is not None:
            continue
        tested = None
        for side in ("left", "right"):
            other = "right" if side == "left" else "left"
            cond = item.cond
            if isinstance(cond, c_ast.BinaryOp) and cond.op == "!=" and \
                    _is_zero(getattr(cond, other)) and isinstance(getattr(cond, side), c_ast.ArrayRef):
                tested = getattr(cond, side)
        if tested is None or not _pure(tested, frozenset()):
            continue
        loop.stmt = item.iftrue if isinstance(item.iftrue, c_ast.Compound) else \
            _compound([item.iftrue])
        canon.zero_skip.append(tested)
        canon.steps.append(f"the zero skip 'if ({_GEN.visit(item.cond)})' dropped")


# -- forward substitution ---------------------------------------------------------------------------

def _expr_type(node: c_ast.Node, scope: Scope):
    if isinstance(node, c_ast.ID):
        t = scope.type_of(node.name)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.ArrayRef):
        base = node
        depth = 0
        while isinstance(base, c_ast.ArrayRef):
            base, depth = base.name, depth + 1
        t = scope.type_of_expr(base)
        for _ in range(depth):
            t = ctype.element(t) if t is not None else None
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.Constant):
        if node.type == "int":
            return ctype.INT
        if node.type in ("float", "double"):
            return ctype.FLOAT if node.value.lower().endswith("f") else ctype.DOUBLE
        return None
    if isinstance(node, c_ast.Cast):
        t = ctype.resolve(node.to_type, scope.typedefs)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        return _expr_type(node.expr, scope)
    if isinstance(node, c_ast.UnaryOp) and node.op == "*":
        t = scope.type_of_expr(node)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.StructRef):
        t = scope.type_of_expr(node)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
        lt, rt = _expr_type(node.left, scope), _expr_type(node.right, scope)
        if lt is None or rt is None:
            return None
        return ctype.usual_conversion(lt, rt)
    return None


def _definition(stmt: c_ast.Node, scope: Scope) -> tuple[str, c_ast.Node, bool] | None:
    """(name, value, declared here) of `T v = E;` or `v = E;` setting a scalar."""
    if isinstance(stmt, c_ast.Decl) and stmt.init is not None and \
            isinstance(stmt.type, c_ast.TypeDecl) and not isinstance(stmt.init, c_ast.InitList):
        return stmt.name, stmt.init, True
    if isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and isinstance(stmt.lvalue, c_ast.ID):
        return stmt.lvalue.name, stmt.rvalue, False
    return None


def _substitute_blocks(node: c_ast.For, canon: Canonical, context: Context,
                       nest_vars: set[str]) -> None:
    scope = context.scope.snapshot()
    for loop in _nest_loops(node):
        if isinstance(loop.init, c_ast.DeclList):
            for decl in loop.init.decls:
                scope.declare(decl)
    assigned_in_nest = _assigned(node)
    for loop in _nest_loops(node):
        items = _items(loop.stmt)
        out = _substitute(items, loop, canon, context, scope, nest_vars, assigned_in_nest)
        if out is not None:
            loop.stmt = _compound(out, loop.stmt)


def _substitute(items: list[c_ast.Node], loop: c_ast.For, canon: Canonical, context: Context,
                scope: Scope, nest_vars: set[str], assigned_in_nest: set[str]
                ) -> list[c_ast.Node] | None:
    changed = False
    items = list(items)
    index = 0
    header = _names(loop.cond) | _names(loop.next)
    while index < len(items):
        stmt = items[index]
        if isinstance(stmt, c_ast.Decl):
            scope.declare(stmt)
        found = _definition(stmt, scope)
        if found is None or found[0] in nest_vars:
            index += 1
            continue
        name, value, declared = found
        var_type = scope.type_of(name)
        later = items[index + 1:]
        # the stretch the definition reaches: up to the next definition of the name
        reach = len(later)
        for j, other in enumerate(later):
            d = _definition(other, scope)
            if d is not None and d[0] == name and not (name in _names(d[1])):
                reach = j
                break
        scope_items = later[:reach]
        block = _compound(scope_items)
        earlier = _compound(items[:index])
        value_type = _expr_type(value, scope)
        reads, stores = _read_arrays(value), _stored_arrays(block)
        if (not isinstance(var_type, Scalar) or value_type is None
                or ctype.strip_qualifiers(value_type) != ctype.strip_qualifiers(var_type)
                or name in _assigned(block) or name in _names(value)
                or (name in _names(earlier) and not declared) or name in header
                or not _pure(value, context.functions)
                or _names(value) & _assigned(block)
                or reads & stores or (reads and "*" in stores) or ("*" in reads and stores)):
            index += 1
            continue
        if not declared and reach == len(later):
            # the original leaves the variable set: after the fast path it gets the same value
            # when that value is invariant, else it must be dead
            if _names(value) & (nest_vars | assigned_in_nest):
                canon.dead.add(name)
            else:
                canon.finals[name] = f"{name} = {_GEN.visit(value)};"
        new_later = [_replace_ids(s, name, value) for s in scope_items] + later[reach:]
        items = items[:index] + new_later
        canon.steps.append(f"'{name}' substituted forward")
        changed = True
    return items if changed else None



# -- pointer temporaries ------------------------------------------------------------------------------

def _pointer_refs(node: c_ast.Node, name: str) -> tuple[int, int]:
    """(uses of `name` as `name[...]`, all uses of `name`)."""
    subscripted = 1 if isinstance(node, c_ast.ArrayRef) and _is_var(node.name, name) else 0
    total = 1 if _is_var(node, name) else 0
    for _, child in node.children():
        a, b = _pointer_refs(child, name)
        subscripted, total = subscripted + a, total + b
    return subscripted, total


def _expand_pointer(node: c_ast.Node, name: str, value: c_ast.Node) -> c_ast.Node:
    from kernelfarer.access import expand_alias
    for attr in node.__slots__:
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, _expand_pointer(child, name, value))
        elif isinstance(child, list):
            setattr(node, attr, [_expand_pointer(c, name, value) if isinstance(c, c_ast.Node)
                                 else c for c in child])
    if isinstance(node, c_ast.ArrayRef) and _is_var(node.name, name):
        return expand_alias(node, {name: value})
    return node


def _substitute_pointers(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """`const float *wrow = W + o*C;` then `wrow[i]`: the uses become `W[o*C + i]` (every use a
    subscript, the pointer and what its address is computed from never changed after)."""
    while _substitute_one_pointer(node, canon, context):
        pass


def _substitute_one_pointer(node: c_ast.For, canon: Canonical, context: Context) -> bool:
    from kernelfarer.nest import NotGemm
    for loop in _nest_loops(node):
        items = _items(loop.stmt)
        for index, stmt in enumerate(items):
            if not (isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl)
                    and stmt.init is not None and _pure(stmt.init, context.functions)):
                continue
            name, value = stmt.name, stmt.init
            later = _compound(items[index + 1:])
            subscripted, total = _pointer_refs(later, name)
            if total != subscripted or name in _assigned(later) or \
                    _names(value) & _assigned(later) or name in _names(value):
                continue
            try:
                expanded = [_expand_pointer(copy.deepcopy(s), name, value)
                            for s in items[index + 1:]]
            except NotGemm:
                continue
            loop.stmt = _compound(items[:index] + expanded, loop.stmt)
            canon.steps.append(f"the pointer '{name}' substituted into its subscripts")
            return True
    return False


# -- collapsing --------------------------------------------------------------------------------------

def _collapse(node: c_ast.For, canon: Canonical, context: Context) -> c_ast.For | None:
    """`for b for t { ... X[b*T*c + t*c + e] ... }` with t running over [0, T) and every use of b
    and t in such a flat subscript (b's coefficient T times t's): one loop over b*T + t."""
    from kernelfarer.affine import IndexConverter, NotAffine, Poly
    if _depth_loops(node) < 4:
        return None
    inner = _single(node.stmt)
    if not isinstance(inner, c_ast.For):
        return None
    outer_head, inner_head = _init_var(node), _init_var(inner)
    if outer_head is None or inner_head is None:
        return None
    b, b_lo = outer_head
    t, t_lo = inner_head
    if _step(node, b) != 1 or _step(inner, t) != 1 or not _const_int(b_lo) == 0 or \
            not _const_int(t_lo) == 0:
        return None
    if not (isinstance(node.init, c_ast.DeclList) and isinstance(inner.init, c_ast.DeclList)):
        return None
    b_hi, t_hi = _upper(node, b), _upper(inner, t)
    if b_hi is None or t_hi is None or (_names(b_hi) | _names(t_hi)) & {b, t}:
        return None
    body = inner.stmt
    if {b, t} & _assigned(body):
        return None
    iterators = sorted(_loop_vars(body) | {b, t})
    conv = IndexConverter(context.scope, iterators)
    try:
        extent = conv.convert(t_hi)
    except NotAffine:
        return None
    uses = [0]

    def check(n: c_ast.Node) -> bool:
        if isinstance(n, c_ast.ArrayRef) and (_names(n.subscript) & {b, t}):
            try:
                coeffs, _ = conv.convert(n.subscript).split(iterators)
            except NotAffine:
                return False
            cb, ct = coeffs.get(b, Poly.const(0)), coeffs.get(t, Poly.const(0))
            if cb != extent * ct or ct == Poly.const(0):
                return False
            uses[0] += len([x for x in _walk(n.subscript) if _is_var(x, b) or _is_var(x, t)])
            return check(n.name)
        return all(check(c) for _, c in n.children())

    if not check(body):
        return None
    occurrences = len([x for x in _walk(body) if _is_var(x, b) or _is_var(x, t)])
    if occurrences != uses[0]:
        return None                      # b or t used outside such a subscript
    fused = f"{b}_{t}"
    while fused in _names(node) or context.scope.lookup(fused) is not None:
        fused += "_"
    new_body = _replace_ids(_replace_ids(copy.deepcopy(body), b, c_ast.Constant("int", "0")),
                            t, c_ast.ID(fused))
    decl = copy.deepcopy(node.init.decls[0])
    decl.name = fused
    decl.type.declname = fused
    decl.init = c_ast.Constant("int", "0")
    total = c_ast.BinaryOp("*", copy.deepcopy(b_hi), copy.deepcopy(t_hi))
    canon.steps.append(f"the loops over '{b}' and '{t}' collapsed into one over {b}*{_GEN.visit(t_hi)} + {t}")
    canon.guards.append((f"({_GEN.visit(b_hi)}) <= 0 || ({_GEN.visit(t_hi)}) <= 0 || "
                         f"(kf_index)({_GEN.visit(b_hi)}) * (kf_index)({_GEN.visit(t_hi)}) <= "
                         "2147483647",
                         f"{_GEN.visit(b_hi)} * {_GEN.visit(t_hi)} fits an int"))
    return c_ast.For(c_ast.DeclList([decl]), c_ast.BinaryOp("<", c_ast.ID(fused), total),
                     c_ast.UnaryOp("p++", c_ast.ID(fused)), new_body, coord=node.coord)


def _upper(loop: c_ast.For, var: str) -> c_ast.Node | None:
    cond = loop.cond
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and _is_var(cond.left, var):
        return cond.right
    return None


def _depth_loops(node: c_ast.Node) -> int:
    inner = max((_depth_loops(c) for _, c in node.children()), default=0)
    return inner + (1 if isinstance(node, c_ast.For) else 0)


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)
