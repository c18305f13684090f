"""Is a local scalar's value read after a loop nest, before it is set again?

A rewritten nest leaves the scalars it sums into (an accumulator `temp`, `sum`) as they were
before it, where the original loops leave their last values: the rewrite is exact only if no
path from the end of the nest reads the scalar before assigning it again.  This is that liveness
question for one variable at one point, on pycparser's AST of structured C: the statements after
the nest in each enclosing block, the conditions and back edges of the enclosing loops (a path
around a loop that comes back to the nest adds nothing: what follows the nest is what is being
decided), up to the end of the variable's block or of the function.

Conservative wherever the control flow is not plain: a function with `goto` or labels, or with a
`switch`, is not analysed (the answer is "read"); so is a variable declared more than once in the
function (a name could then mean two objects).  An assignment kills the value only as a whole
statement `v = e` (or a for-initialization, a comma operand, a declaration) whose right side does
not mention v; any other mention of v counts as a read.
"""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from kernelfarer.canon_base import walk

_EXPRESSIONS = (c_ast.Assignment, c_ast.BinaryOp, c_ast.UnaryOp, c_ast.TernaryOp, c_ast.Cast,
                c_ast.FuncCall, c_ast.ID, c_ast.Constant, c_ast.ArrayRef, c_ast.StructRef,
                c_ast.ExprList, c_ast.CompoundLiteral, c_ast.InitList)


class _Unsure(Exception):
    """Control flow this analysis does not follow."""


@dataclass(frozen=True)
class _Paths:
    """What the paths through a statement do, for the variable: some path reads it first
    (`read`); some complete normally (`fall`), leave by `break` or by `continue` (`brk`, `cnt`)
    with the old value still in it.  Paths that set it, return, or come back to the nest end."""

    read: bool = False
    fall: bool = False
    brk: bool = False
    cnt: bool = False


_FALL = _Paths(fall=True)
_READ = _Paths(read=True)
_KILLED = _Paths()


def read_after(body: c_ast.Compound, nest_ids: set[int], name: str) -> bool:
    """Whether some path from the end of the nest (the statement whose node ids are `nest_ids`)
    reads `name` before assigning it (True also where the analysis is not sure)."""
    try:
        if any(isinstance(n, (c_ast.Goto, c_ast.Label, c_ast.Switch)) for n in walk(body)):
            raise _Unsure
        declared = [n for n in walk(body) if isinstance(n, c_ast.Decl) and n.name == name]
        if len(declared) > 1:
            raise _Unsure
        path = _path_to(body, nest_ids)
        if path is None:
            raise _Unsure
        return _Analysis(name, path[-1][1]).outward(path)
    except _Unsure:
        return True


def _path_to(node: c_ast.Node, nest_ids: set[int]) -> list[tuple[c_ast.Node, c_ast.Node]] | None:
    """The (ancestor, child) pairs from `node` down to the nest's root statement."""
    for _, child in node.children():
        if id(child) in nest_ids:
            return [(node, child)]
        below = _path_to(child, nest_ids)
        if below is not None:
            return [(node, child), *below]
    return None


class _Analysis:
    def __init__(self, name: str, nest: c_ast.Node) -> None:
        self.name = name
        self.nest = nest

    # -- from the nest outwards ---------------------------------------------------------------

    def outward(self, path: list[tuple[c_ast.Node, c_ast.Node]]) -> bool:
        falls, jumps_brk, jumps_cnt = True, False, False
        for parent, child in reversed(path):
            if isinstance(parent, c_ast.Compound):
                items = parent.block_items or []
                after = self.sequence(items[next(i for i, s in enumerate(items) if s is child)
                                            + 1:]) if falls else _KILLED
                if after.read:
                    return True
                falls = after.fall
                jumps_brk |= after.brk
                jumps_cnt |= after.cnt
                if any(isinstance(s, c_ast.Decl) and s.name == self.name for s in items):
                    return False            # the variable's block ends: every path leaves it
            elif isinstance(parent, c_ast.If):
                if child is parent.cond:
                    raise _Unsure
            elif isinstance(parent, (c_ast.For, c_ast.While, c_ast.DoWhile)):
                if child is not parent.stmt:
                    raise _Unsure
                back = falls or jumps_cnt      # paths that go round again
                exits = jumps_brk
                if back:
                    again = self.expression(parent.next) if isinstance(parent, c_ast.For) \
                        else _FALL
                    if again.read:
                        return True
                    if again.fall:
                        test = self.expression(parent.cond) if parent.cond is not None else _FALL
                        if test.read:
                            return True
                        if test.fall:
                            # the condition true: the body again (coming back to the nest ends
                            # a path); false, or a break in the body: out of the loop
                            body = self.statement(parent.stmt)
                            if body.read:
                                return True
                            exits = exits or parent.cond is not None or body.brk
                falls, jumps_brk, jumps_cnt = exits, False, False
            elif isinstance(parent, c_ast.FuncDef):
                return False
            else:
                raise _Unsure                  # a case label, a statement expression, ...
            if not (falls or jumps_brk or jumps_cnt):
                return False
        return False                           # the end of the function

    # -- statements ---------------------------------------------------------------------------

    def sequence(self, items) -> _Paths:
        brk = cnt = False
        for item in items:
            paths = self.statement(item)
            if paths.read:
                return _READ
            brk, cnt = brk or paths.brk, cnt or paths.cnt
            if not paths.fall:
                return _Paths(brk=brk, cnt=cnt)
        return _Paths(fall=True, brk=brk, cnt=cnt)

    def statement(self, node: c_ast.Node | None) -> _Paths:
        if node is None or isinstance(node, (c_ast.EmptyStatement, c_ast.Pragma)):
            return _FALL
        if node is self.nest:
            return _KILLED                     # round to the nest again: nothing new
        if isinstance(node, c_ast.Compound):
            return self.sequence(node.block_items or [])
        if isinstance(node, c_ast.DeclList):
            return self.sequence(node.decls)
        if isinstance(node, c_ast.Decl):
            init = self.expression(node.init) if node.init is not None else _FALL
            if init.read or node.name != self.name:
                return init
            return _KILLED                     # a new object of that name (its only declaration)
        if isinstance(node, (c_ast.Typedef, c_ast.FuncDecl, c_ast.StaticAssert)):
            return _FALL
        if isinstance(node, c_ast.Return):
            return _READ if self.mentions(node.expr) else _KILLED
        if isinstance(node, c_ast.Break):
            return _Paths(brk=True)
        if isinstance(node, c_ast.Continue):
            return _Paths(cnt=True)
        if isinstance(node, c_ast.If):
            test = self.expression(node.cond)
            if not test.fall:
                return test
            yes, no = self.statement(node.iftrue), self.statement(node.iffalse)
            return _Paths(read=yes.read or no.read, fall=yes.fall or no.fall,
                          brk=yes.brk or no.brk, cnt=yes.cnt or no.cnt)
        if isinstance(node, c_ast.For):
            init = self.statement(node.init) if isinstance(node.init, c_ast.DeclList) \
                else self.expression(node.init)
            if not init.fall:
                return init
            if self.mentions(node.cond) or self.mentions(node.next) or \
                    self.statement(node.stmt).read:
                return _READ
            return _FALL                       # it may run no iteration
        if isinstance(node, c_ast.While):
            if self.mentions(node.cond) or self.statement(node.stmt).read:
                return _READ
            return _FALL
        if isinstance(node, c_ast.DoWhile):
            body = self.statement(node.stmt)
            if body.read:
                return _READ
            if not (body.fall or body.cnt):
                return _Paths(fall=body.brk)
            if self.mentions(node.cond):
                return _READ
            return _FALL
        if isinstance(node, _EXPRESSIONS):
            return self.expression(node)
        if self.mentions(node):
            raise _Unsure
        return _FALL

    # -- expressions --------------------------------------------------------------------------

    def expression(self, node: c_ast.Node | None) -> _Paths:
        """A whole expression evaluated: it sets the variable (`v = e`, e not mentioning v, or
        the first such operand of a comma), reads it (any other mention), or neither."""
        if node is None:
            return _FALL
        if isinstance(node, c_ast.ExprList):
            for expr in node.exprs:
                paths = self.expression(expr)
                if not paths.fall:
                    return paths
            return _FALL
        if isinstance(node, c_ast.Assignment) and node.op == "=" and \
                isinstance(node.lvalue, c_ast.ID) and node.lvalue.name == self.name:
            return _READ if self.mentions(node.rvalue) else _KILLED
        return _READ if self.mentions(node) else _FALL

    def mentions(self, node: c_ast.Node | None) -> bool:
        return node is not None and any(isinstance(n, c_ast.ID) and n.name == self.name
                                        for n in walk(node))
