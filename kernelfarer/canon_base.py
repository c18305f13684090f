"""The values and AST helpers canonicalization (canonical.py) is made of: what a canonical nest
carries for the recognizer, and small questions about C statements (what they read and store,
their loops' counters and steps).  Every helper builds new nodes or edits a copy the caller owns."""

from __future__ import annotations

import copy

from pycparser import c_ast, c_generator
from pycparser.c_parser import Coord

from kernelfarer.ctype import Scope
from dataclasses import dataclass, field, replace
from typing import Mapping

_GEN = c_generator.CGenerator()


@dataclass(frozen=True)
class Side:
    """A statement of the nest independent of its GEMM (`if (dbias) dbias[o] += d;` next to the
    weight gradient), split off to run in a copy of its loops after the GEMM."""

    loops: tuple[c_ast.For, ...]       # its enclosing loops, outermost first (headers only)
    statement: c_ast.Node


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
    side: list[Side] = field(default_factory=list)   # statements split off (fission)
    inductions: set[str] = field(default_factory=set)  # variables the nest steps, read as closed
                                                       # forms (a final for those from outside)
    views: dict[str, c_ast.Typename] = field(default_factory=dict)  # pointers the nest reads
                                                       # through a cast: the cast's type
                                                       # (canon_views.py)
    index_checks: list[tuple] = field(default_factory=list)  # (index, its range or None, the
                                                       # loops' counters then): every index in
                                                       # 0 .. range - 1 (checked at run time:
                                                       # canon_checks.py)
    unapplied: list[str] = field(default_factory=list)  # why a transform that matched part of
                                                       # the nest left it (for a refusal)
    reordered: list[str] = field(default_factory=list)  # why the canonical loops visit the
                                                        # elements in another order (a loop
                                                        # counted up, a nest de-tiled)


@dataclass(frozen=True)
class Context:
    scope: Scope
    gotos: frozenset[str] = frozenset()        # labels some goto of the function targets
    addressed: frozenset[str] = frozenset()    # names whose address the function takes
    functions: frozenset[str] = frozenset()    # functions without side effects
    min_functions: frozenset[str] = frozenset()  # file functions that return the smaller argument
    dot_functions: Mapping[str, c_ast.FuncDef] = field(default_factory=dict)  # ... that return
                                                   # a sum of products over a loop (canon_calls)
    accessors: Mapping[str, c_ast.FuncDef] = field(default_factory=dict)  # ... that read or
                                                   # store an element (getters and setters)
    void_functions: Mapping[str, c_ast.FuncDef] = field(default_factory=dict)  # ... void ones
                                                   # whose loop stores through a pointer
                                                   # parameter (a dot into *s, an axpy)


def with_declarations(context: Context, *nodes: c_ast.Node | None) -> Context:
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
    return replace(context, scope=scope)


def items_of(node: c_ast.Node | None) -> list[c_ast.Node]:
    if node is None:
        return []
    if isinstance(node, c_ast.Compound):
        return list(node.block_items or [])
    return [node]


def compound(items: list[c_ast.Node], like: c_ast.Node | None = None) -> c_ast.Compound:
    return c_ast.Compound(items, coord=getattr(like, "coord", None))


def names_in(node: c_ast.Node | None) -> set[str]:
    if node is None:
        return set()
    found = {node.name} if isinstance(node, c_ast.ID) else set()
    for _, child in node.children():
        found |= names_in(child)
    return found


def assigned_names(node: c_ast.Node | None) -> set[str]:
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
        out |= assigned_names(child)
    return out


def stored_arrays(node: c_ast.Node | None) -> set[str]:
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
        base = base_name(target)
        out.add(base if base is not None else "*")
    for _, child in node.children():
        out |= stored_arrays(child)
    return out


def read_arrays(node: c_ast.Node | None) -> set[str]:
    if node is None:
        return set()
    out: set[str] = set()
    if isinstance(node, (c_ast.ArrayRef,)) or (isinstance(node, c_ast.UnaryOp) and node.op == "*"):
        base = base_name(node)
        out.add(base if base is not None else "*")
    for _, child in node.children():
        out |= read_arrays(child)
    return out


def base_name(node: c_ast.Node) -> str | None:
    while True:
        if isinstance(node, c_ast.ArrayRef):
            node = node.name
        elif isinstance(node, c_ast.UnaryOp) and node.op == "*":
            node = node.expr
        elif isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
            left, right = base_name(node.left), base_name(node.right)
            return left or right
        elif isinstance(node, c_ast.StructRef):
            node = node.name
        elif isinstance(node, c_ast.Cast):
            node = node.expr
        elif isinstance(node, c_ast.ID):
            return node.name
        else:
            return None


def clone(value, memo: dict | None = None):
    """A deep copy of a pycparser tree (or of a list of them), as copy.deepcopy makes it (shared
    subtrees stay shared) but several times faster: it knows nodes are slots, lists and leaves.
    Coordinates and strings are immutable and shared."""
    if memo is None:
        memo = {}
    if isinstance(value, c_ast.Node):
        done = memo.get(id(value))
        if done is not None:
            return done
        cls = value.__class__
        new = cls.__new__(cls)
        memo[id(value)] = new
        for slot in cls.__slots__:
            if slot == "__weakref__":
                continue
            try:
                item = getattr(value, slot)
            except AttributeError:
                continue
            setattr(new, slot, item if slot == "coord" else clone(item, memo))
        return new
    if isinstance(value, list):
        return [clone(item, memo) for item in value]
    if isinstance(value, (str, int, float, bool, type(None), Coord)):
        return value
    return copy.deepcopy(value, memo)


def type_name(declared: c_ast.Node) -> c_ast.Typename:
    """The type of a declarator (`float x`, a function's `float f`) as a type name for a cast,
    `(float)`: a copy without the declared name."""
    unnamed = clone(declared)
    inner = unnamed
    while not isinstance(inner, c_ast.TypeDecl):
        inner = inner.type
    inner.declname = None
    return c_ast.Typename(None, [], None, unnamed)


def map_children(node: c_ast.Node, change) -> c_ast.Node:
    """`node` with each child replaced by `change(child)` (in place)."""
    for attr in node.__slots__:
        if attr in ("coord", "__weakref__"):
            continue
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, change(child))
        elif isinstance(child, list):
            setattr(node, attr, [change(c) if isinstance(c, c_ast.Node) else c for c in child])
    return node


def replace_ids(node: c_ast.Node, name: str, value: c_ast.Node) -> c_ast.Node:
    """`node` with every read of `name` replaced by a copy of `value` (in place; returns the new
    root when the root itself is replaced)."""
    if isinstance(node, c_ast.ID) and node.name == name:
        return clone(value)
    if isinstance(node, c_ast.StructRef):        # `s.name` is a member, not the variable
        node.name = replace_ids(node.name, name, value)
        return node
    return map_children(node, lambda child: replace_ids(child, name, value))


def is_var(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def const_int(node: c_ast.Node | None) -> int | None:
    if isinstance(node, c_ast.Constant) and node.type == "int":
        try:
            return int(node.value.rstrip("uUlL"), 0)
        except ValueError:
            return None
    if isinstance(node, c_ast.UnaryOp) and node.op == "-":
        inner = const_int(node.expr)
        return None if inner is None else -inner
    return None


def step_of(node: c_ast.For | None, var: str) -> int | None:
    """The constant step of `var` in a for's increment (+1, -1, +4 ...), or None."""
    step = node.next if isinstance(node, c_ast.For) else node
    if isinstance(step, c_ast.UnaryOp) and is_var(step.expr, var):
        return {"p++": 1, "++": 1, "p--": -1, "--": -1}.get(step.op)
    if isinstance(step, c_ast.Assignment) and is_var(step.lvalue, var):
        value = const_int(step.rvalue)
        if step.op in ("+=", "-=") and value is not None:
            return value if step.op == "+=" else -value
        rv = step.rvalue
        if step.op == "=" and isinstance(rv, c_ast.BinaryOp) and rv.op in ("+", "-"):
            if is_var(rv.left, var) and const_int(rv.right) is not None:
                return const_int(rv.right) * (1 if rv.op == "+" else -1)
            if rv.op == "+" and is_var(rv.right, var) and const_int(rv.left) is not None:
                return const_int(rv.left)
    return None


def init_var(node: c_ast.For) -> tuple[str, c_ast.Node] | None:
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init is not None:
        return init.decls[0].name, init.decls[0].init
    if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name, init.rvalue
    return None


def loop_var(node: c_ast.For) -> str | None:
    found = init_var(node)
    if found:
        return found[0]
    step = node.next
    target = step.lvalue if isinstance(step, c_ast.Assignment) else \
        step.expr if isinstance(step, c_ast.UnaryOp) else None
    if isinstance(target, c_ast.ID) and step_of(node, target.name) is not None:
        return target.name
    return None


def loop_vars(node: c_ast.Node) -> set[str]:
    out = set()
    if isinstance(node, c_ast.For):
        var = loop_var(node)
        if var:
            out.add(var)
    for _, child in node.children():
        out |= loop_vars(child)
    return out


def increments(stmt: c_ast.Node, var: str) -> bool:
    return step_of(stmt, var) == 1


def has_continue(node: c_ast.Node) -> bool:
    """A `continue` that belongs to this loop (not to a loop nested in it)."""
    if isinstance(node, c_ast.Continue):
        return True
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)):
        return False
    return any(has_continue(child) for _, child in node.children())


def side_effect_free(node: c_ast.Node, functions: frozenset[str]) -> bool:
    """No side effects: no assignment, ++/--, or call of a function not known to be pure."""
    if isinstance(node, (c_ast.Assignment,)):
        return False
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        return False
    if isinstance(node, c_ast.FuncCall):
        if _GEN.visit(node.name) not in functions:
            return False
    return all(side_effect_free(child, functions) for _, child in node.children())


def outer_loops(node: c_ast.Node) -> list[c_ast.For]:
    """The for loops in `node` that are not inside another for loop of `node`."""
    if isinstance(node, c_ast.For):
        return [node]
    out: list[c_ast.For] = []
    for _, child in node.children():
        out += outer_loops(child)
    return out


def added_to(stmt: c_ast.Node, target) -> c_ast.Node | None:
    """x of `t += x;` or `t = t + x;`, where `target(t)` tells the sum's lvalue; else None."""
    if not isinstance(stmt, c_ast.Assignment) or not target(stmt.lvalue):
        return None
    if stmt.op == "+=":
        return stmt.rvalue
    if stmt.op == "=" and isinstance(stmt.rvalue, c_ast.BinaryOp) and stmt.rvalue.op == "+" \
            and target(stmt.rvalue.left):
        return stmt.rvalue.right
    return None


def the_loop_adds(loop: c_ast.For, name: str) -> c_ast.Node | None:
    """x of a loop whose body is the one statement `name += x;` (or `name = name + x;`)."""
    body = items_of(loop.stmt)
    return added_to(body[0], lambda n: is_var(n, name)) if len(body) == 1 else None


def perfect_chain(node: c_ast.For) -> list[c_ast.For]:
    """`node` and the loops nested in it perfectly: each the whole body of the one before
    (pragmas aside)."""
    chain = [node]
    while True:
        items = [i for i in items_of(chain[-1].stmt) if not isinstance(i, c_ast.Pragma)]
        if len(items) == 1 and isinstance(items[0], c_ast.For):
            chain.append(items[0])
        else:
            return chain


def nest_loops(node: c_ast.Node) -> list[c_ast.For]:
    """The for loops of the nest, outermost first (loops inside loops' bodies)."""
    out = []
    if isinstance(node, c_ast.For):
        out.append(node)
        for item in items_of(node.stmt):
            out += nest_loops(item)
    elif isinstance(node, (c_ast.Compound, c_ast.If, c_ast.Label)):
        for _, child in node.children():
            out += nest_loops(child)
    return out


def terms_of(node: c_ast.Node, sign: int = 1) -> list[tuple[int, c_ast.Node]]:
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        return terms_of(node.left, sign) + terms_of(node.right, sign if node.op == "+" else -sign)
    return [(sign, node)]


def sum_of(terms: list[tuple[int, c_ast.Node]]) -> c_ast.Node:
    if not terms:
        return c_ast.Constant("int", "0")
    sign, first = terms[0]
    out = first if sign > 0 else c_ast.UnaryOp("-", first)
    for sign, term in terms[1:]:
        out = c_ast.BinaryOp("+" if sign > 0 else "-", out, term)
    return out


def single(node: c_ast.Node | None) -> c_ast.Node | None:
    items = items_of(node)
    return items[0] if len(items) == 1 else None


def walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from walk(child)


def jumps(node: c_ast.Node) -> bool:
    """Does `node` hold a jump or a label (break, continue, goto, return)?"""
    return any(isinstance(n, (c_ast.Break, c_ast.Continue, c_ast.Goto, c_ast.Return,
                              c_ast.Label)) for n in walk(node))


def declared_names(node: c_ast.Node) -> set[str]:
    """The names `node` declares (anywhere within it)."""
    return {n.name for n in walk(node) if isinstance(n, c_ast.Decl) and n.name}


def declares(node: c_ast.Node, name: str) -> bool:
    return name in declared_names(node)


def element_of_address(node: c_ast.Node) -> c_ast.Node:
    """`(&X[a])[b]` as `X[a + b]` (the one node; others as they are)."""
    if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.UnaryOp) and \
            node.name.op == "&" and isinstance(node.name.expr, c_ast.ArrayRef):
        inner = node.name.expr
        return c_ast.ArrayRef(inner.name, c_ast.BinaryOp("+", inner.subscript, node.subscript),
                              coord=node.coord)
    return node


def is_zero(node: c_ast.Node) -> bool:
    if isinstance(node, c_ast.Constant):
        try:
            return float(node.value.lower().rstrip("fl").rstrip("u")) == 0.0
        except ValueError:
            return False
    return False


def is_one(node: c_ast.Node) -> bool:
    if isinstance(node, c_ast.Constant):
        try:
            return float(node.value.lower().rstrip("fl").rstrip("u")) == 1.0
        except ValueError:
            return False
    return False


def computes_value(node: c_ast.Node | None) -> bool:
    """Does the value (not the addresses it reads) involve arithmetic or a call?  `a[i * n + k]`
    and `*(p + k)` only read; `a[i][k] * b[k][j]`, `-x` and `f(x)` compute."""
    if isinstance(node, (c_ast.BinaryOp, c_ast.TernaryOp, c_ast.FuncCall)):
        return True
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+", "!", "~"):
        return True
    if isinstance(node, c_ast.Cast):
        return computes_value(node.expr)
    return False          # a constant, a variable, an element (subscripts are addresses)

