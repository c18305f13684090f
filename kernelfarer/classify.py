"""What a refused loop nest is, when that is easy to tell: the remark then names it ("a matrix-vector
product") next to the reason the recognizer gave."""

from __future__ import annotations

from pycparser import c_ast, c_generator

_GEN = c_generator.CGenerator()
_MIN = {"fmin", "fminf", "fminl", "min", "MIN"}
_MAX = {"fmax", "fmaxf", "fmaxl", "max", "MAX"}


def _loops(node: c_ast.Node) -> list[c_ast.Node]:
    """The chain of loops from `node` down while each body is one loop."""
    chain = []
    while isinstance(node, (c_ast.For, c_ast.While)):
        chain.append(node)
        items = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
        items = [i for i in items or [] if not isinstance(i, (c_ast.Pragma, c_ast.EmptyStatement))]
        if len(items) != 1:
            break
        node = items[0]
    return chain


def _innermost_statement(chain: list[c_ast.Node]) -> c_ast.Node | None:
    body = chain[-1].stmt
    items = body.block_items if isinstance(body, c_ast.Compound) else [body]
    items = [i for i in items or [] if not isinstance(i, (c_ast.Pragma, c_ast.EmptyStatement))]
    return items[0] if len(items) == 1 else None


def _var(loop: c_ast.Node) -> str | None:
    if isinstance(loop, c_ast.For):
        init = loop.init
        if isinstance(init, c_ast.DeclList) and init.decls:
            return init.decls[0].name
        if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
            return init.lvalue.name
    return None


def _names(node: c_ast.Node) -> set[str]:
    found = {node.name} if isinstance(node, c_ast.ID) else set()
    for _, child in node.children():
        found |= _names(child)
    return found


def _subscript_vars(ref: c_ast.Node, loop_vars: set[str]) -> set[str]:
    out = set()
    while isinstance(ref, c_ast.ArrayRef):
        out |= _names(ref.subscript) & loop_vars
        ref = ref.name
    return out


def _chooses_extreme(node: c_ast.TernaryOp) -> bool:
    """`x < y ? x : y` and the like: the condition compares what the branches are (a min or a
    max), not some flag (`skip ? 0 : dot(...)`)."""
    cond = node.cond
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", ">", "<=", ">=")):
        return False
    sides = {_GEN.visit(cond.left), _GEN.visit(cond.right)}
    return bool(sides & {_GEN.visit(node.iftrue), _GEN.visit(node.iffalse)})


def kind_of(node: c_ast.Node) -> str | None:
    """'a matrix-vector product', 'a min-plus product', ... or None."""
    chain = _loops(node)
    stmt = _innermost_statement(chain) if chain else None
    if not isinstance(stmt, c_ast.Assignment):
        return None
    loop_vars = {v for v in map(_var, chain) if v}
    value = stmt.rvalue
    calls = [n for n in _walk(value) if isinstance(n, c_ast.FuncCall)]
    names = {_GEN.visit(c.name) for c in calls}
    has_sum = any(isinstance(n, c_ast.BinaryOp) and n.op == "+" for n in _walk(value))
    if names & _MIN and has_sum:
        return "a min-plus (tropical) product, not a sum of products"
    if names & _MAX and has_sum:
        return "a max-plus product, not a sum of products"
    if isinstance(value, c_ast.TernaryOp) and has_sum and _chooses_extreme(value):
        return "a min/max-plus product, not a sum of products"
    products = [n for n in _walk(value) if isinstance(n, c_ast.BinaryOp) and n.op == "*"]
    if stmt.op == "+=" and products and isinstance(stmt.lvalue, c_ast.ArrayRef):
        target = _subscript_vars(stmt.lvalue, loop_vars)
        factors = [f for f in (products[0].left, products[0].right)
                   if isinstance(f, c_ast.ArrayRef)]
        if len(chain) == 2 and len(factors) == 2:
            used = [_subscript_vars(f, loop_vars) for f in factors]
            if len(target) == 2 and all(len(u) == 1 for u in used) and used[0] != used[1]:
                return "a rank-1 update (an outer product of two vectors)"
            if len(target) == 1 and sorted(len(u) for u in used) == [1, 2]:
                return "a matrix-vector product"
    return None


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)
