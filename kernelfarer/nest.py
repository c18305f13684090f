"""Loop-nest structure: the loops of a candidate nest and the statements at each level.

This module only reads syntax: it turns a `for` statement into a LoopNest (three canonical loops
``for (v = lower; v < upper; v++)`` and the statements around the innermost one) or raises
NotGemm with the reason.  What the statements compute is decided in recognize.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.affine import IndexConverter, NotAffine, Poly
from kernelfarer.canon_base import assigned_names, names_in, walk
from kernelfarer.ctype import Scalar, Scope


_GEN = c_generator.CGenerator()


class NotGemm(Exception):
    """This nest is not replaced; the message is the reason shown to the user."""


@dataclass(frozen=True)
class Loop:
    var: str
    lower: Poly             # first value
    upper: Poly             # one past the last value
    node: c_ast.For
    var_type: Scalar
    declared_in_for: bool
    compare_type: Scalar    # the type in which `var < bound` is evaluated
    sign_checks: tuple[Poly, ...] = ()   # invariants the bounds convert to unsigned (>= 0)
    held: tuple[tuple[Poly, str], ...] = ()  # a counter narrower than int: values it must hold
                                         # (its start, and its end, which `v < end` compares
                                         # it with), and why; checked at run time in its range


@dataclass(frozen=True)
class LoopNest:
    loops: tuple[Loop, Loop, Loop]        # outermost first
    pre: tuple[c_ast.Node, ...]           # statements before the innermost loop (in loop 2's body)
    body: tuple[c_ast.Node, ...]          # the innermost loop's statements
    post: tuple[c_ast.Node, ...]          # statements after the innermost loop
    hoisted: tuple[c_ast.Node, ...] = ()  # set-up statements at the top of loop 1's body
    side: tuple[c_ast.Assignment, ...] = ()  # integer bound assignments (hoisted or in pre)
    around: tuple[tuple, tuple] = ((), ())   # other statements of loop 1's body, before / after

    @property
    def perfect(self) -> bool:
        return not self.pre and not self.post


def _statements(node: c_ast.Node | None) -> list[c_ast.Node]:
    if node is None:
        return []
    if isinstance(node, c_ast.Compound):
        # Pragmas inside the nest (omp simd, unroll hints) do not change what it computes; the
        # original loops keep them for the fallback path.
        items = [s for s in (node.block_items or [])
                 if not isinstance(s, (c_ast.EmptyStatement, c_ast.Pragma))]
        if len(items) == 1 and isinstance(items[0], c_ast.Compound):
            return _statements(items[0])
        return items
    if isinstance(node, c_ast.EmptyStatement):
        return []
    return [node]


def _single_for(node: c_ast.Node | None) -> c_ast.For | None:
    items = _statements(node)
    if len(items) == 1 and isinstance(items[0], c_ast.For):
        return items[0]
    return None


def _same_header(a: c_ast.For, b: c_ast.For) -> bool:
    return all(_GEN.visit(x) == _GEN.visit(y) if x is not None and y is not None else x is y
               for x, y in ((a.init, b.init), (a.cond, b.cond), (a.next, b.next)))


def _split_sequence(outer: c_ast.For) -> tuple[list[c_ast.For], list, list, list] | None:
    """The PolyBench shape: for i { for j S1; for k for j S2 } (or `for j for k S2`).  Per (i, j)
    element S1 runs before every S2 instance, exactly as in `for i for j { S1; for k S2 }`."""
    items = _statements(outer.stmt)
    if len(items) != 2 or not all(isinstance(s, c_ast.For) for s in items):
        return None
    first, second = items
    pre = _statements(first.stmt)
    if not pre or any(isinstance(s, c_ast.For) for s in pre):
        return None
    inner = _single_for(second.stmt)
    if inner is None:
        return None
    body = _statements(inner.stmt)
    if not body or any(isinstance(s, c_ast.For) for s in body):
        return None
    if _same_header(first, second):          # for j S1; for j for k S2
        return [outer, first, inner], pre, body, []
    if _same_header(first, inner):           # for j S1; for k for j S2
        return [outer, first, second], pre, body, []
    return None


def _is_pointer_decl(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.PtrDecl) \
        and node.init is not None


def is_side_assignment(node: c_ast.Node) -> bool:
    """`v = expr;` with a plain name on the left: f2c sets loop bounds this way (`i__2 = *m;`).
    Whether it is an invariant integer is decided with types, in the recognizer."""
    return isinstance(node, c_ast.Assignment) and node.op == "=" and isinstance(node.lvalue, c_ast.ID)


def hoisted_pointers(outer: c_ast.For) -> tuple[list[c_ast.Node], c_ast.Node | None]:
    """Statements that only set things up at the top of the outer loop's body — row pointers
    (`const float *arow = A + i*lda;`) and bound assignments (`i__2 = *m;`) — and the loop that
    follows them, when that is all the body holds."""
    items = _statements(outer.stmt)
    decls = []
    while items and (_is_pointer_decl(items[0]) or is_side_assignment(items[0])):
        decls.append(items.pop(0))
    if decls and len(items) == 1 and isinstance(items[0], c_ast.For):
        return decls, items[0]
    return [], None


def around_statements(outer: c_ast.For) -> tuple[list, c_ast.For | None, list]:
    """Statements before and after the one loop in the outer loop's body (`for i { s1; for j
    ...; s2; }`): the GEMM may be nested in other code; whether that code is independent of it is
    decided in fission.py."""
    items = _statements(outer.stmt)
    # the GEMM's loops: the one loop that holds another (single loops around it are other code)
    fors = [i for i, s in enumerate(items) if isinstance(s, c_ast.For) and _holds_loop(s.stmt)]
    if len(fors) != 1 or len(items) == 1:
        return [], None, []
    return items[:fors[0]], items[fors[0]], items[fors[0] + 1:]


def _holds_loop(node: c_ast.Node | None) -> bool:
    if node is None:
        return False
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)):
        return True
    return any(_holds_loop(child) for _, child in node.children())


def split_nest(outer: c_ast.For) -> tuple[list[c_ast.For], list, list, list]:
    """The three loops and the pre/body/post statements, or NotGemm."""
    second = _single_for(outer.stmt)
    if second is None:
        second = hoisted_pointers(outer)[1]
    if second is None:
        sequence = _split_sequence(outer)
        if sequence is not None:
            return sequence
        second = around_statements(outer)[1]
    if second is None:
        raise NotGemm("not a 3-deep loop nest: the outer loop's body is not a single loop")
    third = _single_for(second.stmt)
    if third is not None:
        pre, post = [], []
    else:
        items = _statements(second.stmt)
        fors = [i for i, s in enumerate(items) if isinstance(s, c_ast.For)]
        if len(fors) != 1:
            raise NotGemm("not a 3-deep loop nest: the second loop's body does not hold exactly "
                          "one loop" if fors else "not a 3-deep loop nest (2 loops)")
        third = items[fors[0]]
        pre, post = items[:fors[0]], _unblocked(items[fors[0] + 1:], outer)
    body = _statements(third.stmt)
    if any(isinstance(s, c_ast.For) for s in body):
        raise NotGemm("loop nest deeper than 3 loops")
    if not body:
        raise NotGemm("the innermost loop has an empty body")
    return [outer, second, third], pre, body, post


def _unblocked(statements: list[c_ast.Node], outer: c_ast.For) -> list[c_ast.Node]:
    """The statements after the k loop with a block among them (`{ long t = acc * m[j]; ...
    c[i][j] = t >> 8; }`) spelled as its statements, where that changes no name's meaning: what
    the block declares is named nowhere else in the nest."""
    out: list[c_ast.Node] = []
    for stmt in statements:
        items = stmt.block_items or [] if isinstance(stmt, c_ast.Compound) else None
        if items is None:
            out.append(stmt)
            continue
        inside = {id(n) for n in walk(stmt)}
        own = {item.name for item in items if isinstance(item, c_ast.Decl)}
        elsewhere = {n.name for n in walk(outer) if id(n) not in inside
                     and isinstance(n, (c_ast.ID, c_ast.Decl))}
        if own & elsewhere:
            out.append(stmt)
        else:
            out += _unblocked(list(items), outer)
    return out


def parse_loop(node: c_ast.For, scope: Scope, outer_vars: list[str],
               values: dict[str, c_ast.Node] | None = None) -> Loop:
    """A canonical counted loop ``for (v = lo; v < hi; v++)`` (also <=, ++v, v += 1, v = v + 1).
    `values` gives the value of names set by side assignments before the loop."""
    var, lower_node, declared = _loop_init(node, scope)
    values = _init_values(node, scope, outer_vars + [var], values)
    var_type = scope.type_of(var)
    if not isinstance(var_type, Scalar) or var_type.kind != "int":
        raise NotGemm(f"loop variable '{var}' is not an integer")
    if var_type.volatile:
        raise NotGemm(f"loop variable '{var}' is volatile (or _Atomic)")
    narrow = var_type.bits < 32     # promoted to int wherever it is read
    upper_node, inclusive = _loop_cond(node, var)
    _loop_step(node, var)
    conv = IndexConverter(scope, outer_vars + [var], values)
    conv.allow_sign_checks = True
    try:
        lower = conv.convert(lower_node)
        upper = conv.convert(upper_node)
        bound_type = conv.type_of(upper_node)
    except NotAffine as exc:
        raise NotGemm(f"bound of loop '{var}' is not affine: {exc}") from None
    for poly, what in ((lower, "lower"), (upper, "upper")):
        inner = poly.symbols() & set(outer_vars)
        if inner:
            raise NotGemm(f"{what} bound of loop '{var}' depends on '{sorted(inner)[0]}' "
                          "(triangular or non-rectangular iteration space)")
        if var in poly.symbols():
            raise NotGemm(f"bound of loop '{var}' depends on the loop variable itself")
    compare = ctype.usual_conversion(ctype.strip_qualifiers(var_type), bound_type)
    if narrow:
        pass        # the loop ends as an int loop would where its values fit: `held`, below
    elif not compare.signed:
        if not var_type.signed and var_type.bits < compare.bits:
            raise NotGemm(f"loop variable '{var}' ({var_type.spelling}) is narrower than its "
                          f"bound ({compare.spelling}): the loop may not terminate")
    elif var_type.bits < compare.bits:
        raise NotGemm(f"loop variable '{var}' ({var_type.spelling}) is narrower than its bound "
                      f"({compare.spelling})")
    if inclusive:
        upper = upper + Poly.const(1)
    held = ()
    if narrow:
        # `for (uint16_t i = 0; i < M; i++)` counts 0 .. M - 1 and ends at M as an int counter
        # would when the start and the end fit its type; where they do not, the counter wraps
        # (or the loop never ends) and the original runs
        held = ((lower, f"the start of '{var}' fits {var_type.spelling}"),
                (upper, f"the end of '{var}' fits {var_type.spelling}"))
    return Loop(var=var, lower=lower, upper=upper, node=node,
                var_type=ctype.strip_qualifiers(var_type), declared_in_for=declared,
                compare_type=compare,
                sign_checks=tuple(conv.sign_checks), held=held)


def _init_values(node: c_ast.For, scope: Scope, loop_vars: list[str],
                 values: dict[str, c_ast.Node] | None) -> dict[str, c_ast.Node] | None:
    """`for (int i = 0, e = m; i < e; i++)`: the names the initialization declares after the loop
    variable stand for their values in the bounds (`values`), when the loop never sets them and
    each holds its value unchanged (its type as wide as the value's, the same signedness)."""
    init = node.init
    if not isinstance(init, c_ast.DeclList) or len(init.decls) < 2:
        return values
    out = dict(values or {})
    used = names_in(node.stmt) | names_in(node.next)    # (what sets it uses it too)
    for decl in init.decls[1:]:
        if decl.name in used:       # the fast path's call, before the loops, could not name it
            raise NotGemm(f"'{decl.name}', declared in the loop's initialization, is used in its "
                          "body")
        if decl.init is None:
            raise NotGemm(f"'{decl.name}', declared in the loop's initialization, has no value")
        scope.declare(decl)
        held = scope.type_of(decl.name)
        try:
            given = IndexConverter(scope, loop_vars, out).type_of(decl.init)
        except NotAffine as exc:
            raise NotGemm(f"'{decl.name}' = {exc}") from None
        if not isinstance(held, Scalar) or held.kind != "int" or held.signed != given.signed \
                or held.bits < given.bits:
            raise NotGemm(f"'{decl.name}' does not hold its initial value unchanged")
        out[decl.name] = decl.init
    return out


def _loop_init(node: c_ast.For, scope: Scope) -> tuple[str, c_ast.Node, bool]:
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) >= 1 and init.decls[0].init is not None:
        decl = init.decls[0]
        scope.declare(decl)
        return decl.name, decl.init, True
    if (isinstance(init, c_ast.Assignment) and init.op == "="
            and isinstance(init.lvalue, c_ast.ID)):
        return init.lvalue.name, init.rvalue, False
    raise NotGemm("loop initialization is not 'v = start'")


def _loop_cond(node: c_ast.For, var: str) -> tuple[c_ast.Node, bool]:
    cond = node.cond
    if isinstance(cond, c_ast.BinaryOp):
        if isinstance(cond.left, c_ast.ID) and cond.left.name == var and cond.op in ("<", "<="):
            return cond.right, cond.op == "<="
        if isinstance(cond.right, c_ast.ID) and cond.right.name == var and cond.op in (">", ">="):
            return cond.left, cond.op == ">="
    raise NotGemm(f"loop condition of '{var}' is not 'v < bound' or 'v <= bound'")


def _loop_step(node: c_ast.For, var: str) -> None:
    step = node.next

    def is_var(n: c_ast.Node) -> bool:
        return isinstance(n, c_ast.ID) and n.name == var

    def is_one(n: c_ast.Node) -> bool:
        return isinstance(n, c_ast.Constant) and n.value in ("1", "1u", "1U", "1l", "1L")

    if isinstance(step, c_ast.UnaryOp) and step.op in ("p++", "++") and is_var(step.expr):
        return
    if isinstance(step, c_ast.Assignment) and is_var(step.lvalue):
        if step.op == "+=" and is_one(step.rvalue):
            return
        rv = step.rvalue
        if (step.op == "=" and isinstance(rv, c_ast.BinaryOp) and rv.op == "+"
                and ((is_var(rv.left) and is_one(rv.right)) or (is_one(rv.left) and is_var(rv.right)))):
            return
    raise NotGemm(f"loop '{var}' does not step by +1")


def parse_nest(outer: c_ast.For, scope: Scope) -> LoopNest:
    fors, pre, body, post = split_nest(outer)
    hoisted = tuple(hoisted_pointers(outer)[0])
    around: tuple = ((), ())
    if not hoisted and _single_for(outer.stmt) is None and _split_sequence(outer) is None:
        before, _, after = around_statements(outer)
        around = (tuple(before), tuple(after))
    side = [s for s in hoisted if is_side_assignment(s)]
    # (an integer the k loop sums into, `acc = 0;` before it, is an accumulator, not a bound)
    summed = set().union(*(assigned_names(s) for s in body))
    pre_side = [s for s in pre if is_side_assignment(s) and _names_integer(s, scope)
                and s.lvalue.name not in summed]
    pre = [s for s in pre if not any(s is side_stmt for side_stmt in pre_side)]
    side += pre_side
    values: dict[str, c_ast.Node] = {}
    loops: list[Loop] = []
    # The third loop's variable declared, without a value, in the second loop's body before it
    # (`int p; float s = 0; for (p = 0; ...)`): local to the nest, as if declared in its for.
    counter = _assigned_name(fors[2].init)
    own = [s for s in pre if isinstance(s, c_ast.Decl) and s.name == counter and s.init is None]
    if own:
        scope.declare(own[0])
        pre = [s for s in pre if s is not own[0]]
    for level, node in enumerate(fors):
        if level == 1:
            values.update((a.lvalue.name, a.rvalue) for a in hoisted if is_side_assignment(a))
        if level == 2:
            values.update((a.lvalue.name, a.rvalue) for a in pre_side)
        loop = parse_loop(node, scope, [lp.var for lp in loops], dict(values))
        loops.append(replace(loop, declared_in_for=True) if own and level == 2 else loop)
    names = [lp.var for lp in loops]
    if len(set(names)) != 3:
        raise NotGemm("the loops do not have three distinct variables")
    for assignment in side:
        name = assignment.lvalue.name
        if not _names_integer(assignment, scope):
            raise NotGemm(f"'{name}' is assigned before the inner loops and is not an integer")
        if name in {lp.var for lp in loops}:
            raise NotGemm(f"loop variable '{name}' is assigned in the nest")
    return LoopNest(loops=tuple(loops), pre=tuple(pre), body=tuple(body), post=tuple(post),
                    hoisted=tuple(s for s in hoisted if not is_side_assignment(s)),
                    side=tuple(side), around=around)


def _assigned_name(init: c_ast.Node | None) -> str | None:
    """v of a for's `v = start` initialization."""
    if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name
    return None


def _names_integer(assignment: c_ast.Assignment, scope: Scope) -> bool:
    t = scope.type_of(assignment.lvalue.name)
    return isinstance(t, Scalar) and t.kind == "int" and not t.volatile
