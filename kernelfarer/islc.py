"""Printing isl AST nodes as C, with our own names for min/max/division and a callback for the
statements (isl's own printer would need user-defined `min`/`floord` macros in the user's file)."""

from __future__ import annotations

from typing import Callable

import islpy as isl

# The mark of transforms/blocking.py above a loop that the threads of a parallel region share.
PARALLEL_FOR = "kf_parallel_for"
# ... and above one they share in chunks of `kf_epi_chunk` iterations counted from the start of
# the outermost loop (the driver's fused epilogue runs on what one chunk computed).
PARALLEL_FOR_CHUNKED = "kf_parallel_for_chunked"
CHUNK_VARIABLE = "kf_epi_chunk"

_OP = isl.ast_expr_op_type
_BINARY = {
    _OP.add: "+", _OP.sub: "-", _OP.mul: "*", _OP.div: "/", _OP.pdiv_q: "/", _OP.pdiv_r: "%",
    _OP.zdiv_r: "%", _OP.eq: "==", _OP.le: "<=", _OP.lt: "<", _OP.ge: ">=", _OP.gt: ">",
    _OP.and_: "&&", _OP.and_then: "&&", _OP.or_: "||", _OP.or_else: "||",
}

Statement = Callable[[str, list[str]], str]   # (statement name, argument texts) -> C statement


class AstPrinter:
    def __init__(self, statement: Statement, *, rename: dict[str, str] | None = None,
                 index_type: str = "kf_index", parallel_outer: bool = False) -> None:
        self.statement = statement
        self.rename = rename or {}
        self.index_type = index_type
        # Pluto's --parallel: the outermost loops (known to carry no dependence) become
        # `omp parallel for` loops, every inner loop variable private
        self.parallel_outer = parallel_outer
        self.iterators: dict[str, None] = {}     # the loop variables printed, in order
        self._around: list[str] = []             # variables of the loops around the node
                                                 # being printed, outermost first

    def block(self, n: isl.AstNode, indent: str = "") -> str:
        """The AST as a block that declares its loop variables first (C89: no declaration in a
        `for` header, none after a statement)."""
        self.iterators = {}
        self._around = []
        body = self.node(n, indent + "    ")
        if not self.iterators:
            return body
        body = body.replace(_PRIVATE, ", ".join(self.iterators))
        return (f"{indent}{{\n{indent}    {self.index_type} {', '.join(self.iterators)};\n"
                f"{body}{indent}}}\n")

    def expr(self, e: isl.AstExpr) -> str:
        kind = e.get_type()
        if kind == isl.ast_expr_type.int:
            return e.int_get_val().to_str()
        if kind == isl.ast_expr_type.id:
            name = e.id_get_id().get_name()
            return self.rename.get(name, name)
        op = e.op_get_type()
        args = [self.expr(e.op_get_arg(i)) for i in range(e.op_get_n_arg())]
        if op in _BINARY:
            return f"({args[0]} {_BINARY[op]} {args[1]})"
        if op == _OP.minus:
            return f"(-{args[0]})"
        if op in (_OP.min, _OP.max):
            fn = "kf_min" if op == _OP.min else "kf_max"
            text = args[0]
            for a in args[1:]:
                text = f"{fn}({text}, {a})"
            return text
        if op == _OP.fdiv_q:
            return f"kf_floordiv({args[0]}, {args[1]})"
        if op in (_OP.cond, _OP.select):
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if op == _OP.call:
            return f"{args[0]}({', '.join(args[1:])})"
        raise NotImplementedError(f"isl AST operator {op}")

    def node(self, n: isl.AstNode, indent: str = "") -> str:
        kind = n.get_type()
        if kind == isl.ast_node_type.block:
            children = n.block_get_children()
            return "".join(self.node(children.get_at(i), indent) for i in range(children.n_ast_node()))
        if kind == isl.ast_node_type.for_:
            it = self.expr(n.for_get_iterator())
            init = self.expr(n.for_get_init())
            cond = self.expr(n.for_get_cond())
            if cond.startswith("(") and cond.endswith(")") and _balanced(cond[1:-1]):
                cond = cond[1:-1]        # OpenMP's canonical loop form (gcc): `it <= bound`
            inc = self.expr(n.for_get_inc())
            self._around.append(it)
            body = self.node(n.for_get_body(), indent + "    ")
            self._around.pop()
            self.iterators[it] = None
            pragma = ""
            if self.parallel_outer and not self._around:
                pragma = (f"#if defined(_OPENMP)\n{indent}#pragma omp parallel for "
                          f"schedule(static) private({_PRIVATE})\n#endif\n")
            return (f"{pragma}{indent}for ({it} = {init}; {cond}; {it} += {inc}) {{\n"
                    f"{body}{indent}}}\n")
        if kind == isl.ast_node_type.if_:
            text = f"{indent}if ({self.expr(n.if_get_cond())}) {{\n"
            text += self.node(n.if_get_then_node(), indent + "    ")
            if n.if_has_else_node():
                text += f"{indent}}} else {{\n" + self.node(n.if_get_else_node(), indent + "    ")
            return text + f"{indent}}}\n"
        if kind == isl.ast_node_type.user:
            call = n.user_get_expr()
            name = self.expr(call.op_get_arg(0))
            args = [self.expr(call.op_get_arg(i)) for i in range(1, call.op_get_n_arg())]
            return f"{indent}{self.statement(name, args)}\n"
        if kind == isl.ast_node_type.mark:
            inner = n.mark_get_node()
            text = self.node(inner, indent)
            mark = n.mark_get_id().get_name()
            if mark not in (PARALLEL_FOR, PARALLEL_FOR_CHUNKED):
                return text
            # The threads of the enclosing parallel region share the loop, and wait for each
            # other at its end (without OpenMP, one thread runs it all).  A loop isl printed as
            # no loop (one trip) is run by one of them.
            if inner.get_type() == isl.ast_node_type.for_:
                chunk = ""
                if mark == PARALLEL_FOR_CHUNKED:
                    # OpenMP counts the chunks from the loop's start: the statements count them
                    # from the outermost loop's variable, which must be that start
                    if not self._around or self.expr(inner.for_get_init()) != self._around[0]:
                        raise ValueError("a loop shared in chunks does not start at the "
                                         "outermost loop's variable")
                    chunk = f", {CHUNK_VARIABLE}"
                return (f"#if defined(_OPENMP)\n{indent}#pragma omp for schedule(static{chunk})"
                        f"\n#endif\n{text}")
            return (f"#if defined(_OPENMP)\n{indent}#pragma omp single\n#endif\n"
                    f"{indent}{{\n{text}{indent}}}\n")
        raise NotImplementedError(f"isl AST node {kind}")


_PRIVATE = "\0private\0"      # stands for the loop variables until all are known


def _balanced(text: str) -> bool:
    """No parenthesis of `text` closes one it did not open."""
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0
