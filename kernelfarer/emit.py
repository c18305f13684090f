"""Emission: render resolved plans and specs into C with the Jinja templates.

The driver's loop nest is produced by isl's AST builder from the layered schedule
(transforms/blocking.py) and printed by islc.py; the statements of that schedule are Jinja macros
(templates/statements.c.j2).  Templates only substitute: every value they print is resolved here or
in the plan.
"""

from __future__ import annotations

import functools
import os

import jinja2

from kernelfarer import __version__
from kernelfarer.islc import AstPrinter
from kernelfarer import templates
from kernelfarer.plan import DispatchPlan, KernelPlan
from kernelfarer.spec import CInit, GemmSpec
from kernelfarer.transforms import blocking


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.dirname(templates.__file__)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def driver_loops(plan: KernelPlan, indent: str = "    ", *, direct: bool = False,
                 rows_outer: bool = False) -> str:
    """The driver's loops: the layered schedule (or, with `direct`, the unpacked schedule of small
    problems) through isl's AST builder, statements rendered by the statement macros."""
    domain = blocking.gemm_domain(params=("M", "N", "K"))
    if direct:
        layered = blocking.direct_schedule(domain, kc=plan.direct_kc, mr=plan.direct_mr, nr=plan.nr,
                                           rows_outer=rows_outer)
    else:
        layered = blocking.layered_schedule(domain, mc=plan.mc, kc=plan.kc, nc=plan.nc,
                                            mr=plan.mr, nr=plan.nr)
    ast = blocking.build_ast(layered)
    macros = environment().get_template("statements.c.j2").make_module({"plan": plan})

    def statement(name: str, args: list[str]) -> str:
        return str(getattr(macros, name)(*args)).strip()

    printer = AstPrinter(statement, rename={"M": "m", "N": "n", "K": "k"})
    return printer.node(ast, indent)


def _kernel_plans(plans) -> list[KernelPlan]:
    out = []
    for plan in plans:
        out += list(plan.plans) if isinstance(plan, DispatchPlan) else [plan]
    return out


def render_prelude(plans: list[KernelPlan]) -> str:
    headers = sorted({h for p in _kernel_plans(plans) for h in p.target.headers})
    return environment().get_template("prelude.c.j2").render(version=__version__, headers=headers)


def render_driver(plan: KernelPlan) -> str:
    direct = driver_loops(plan, "        ", direct=True) if plan.direct else ""
    rows = driver_loops(plan, "        ", direct=True, rows_outer=True) if plan.direct else ""
    return environment().get_template("driver.c.j2").render(
        plan=plan, loops=driver_loops(plan), direct_loops=direct, direct_row_loops=rows)


def render_call(spec: GemmSpec, plan: KernelPlan, original: str, indent: str) -> str:
    load_c = spec.load_c or (0 if spec.init is CInit.OVERWRITE else 1)
    text = environment().get_template("callsite.c.j2").render(
        spec=spec, plan=plan, original=original, indent=indent, load_c=load_c)
    return text.rstrip("\n")


def render_dispatch(plan: DispatchPlan) -> str:
    return environment().get_template("dispatch.c.j2").render(plan=plan)


def render_support(plans: list) -> str:
    """Prelude, one driver (with its kernel and packing routines) per distinct kernel plan, and
    the dispatching drivers that choose among them."""
    seen: dict[str, KernelPlan] = {}
    for plan in _kernel_plans(plans):
        seen.setdefault(plan.driver_name, plan)
    # Drivers only a dispatcher calls are compiled only where the file's ISA leaves them reachable.
    conditions: dict[str, set[str]] = {name: set() for name in seen}
    for plan in plans:
        for sub, condition in (zip(plan.plans, plan.conditions) if isinstance(plan, DispatchPlan)
                               else [(plan, "1")]):
            conditions[sub.driver_name].add(condition)
    parts = [render_prelude(list(seen.values()))]
    for name, plan in seen.items():
        text = render_driver(plan)
        if "1" not in conditions[name]:
            text = f"#if {' || '.join(sorted(conditions[name]))}\n{text}#endif\n"
        parts.append(text)
    dispatchers = {p.driver_name: p for p in plans if isinstance(p, DispatchPlan)}
    parts += [render_dispatch(plan) for plan in dispatchers.values()]
    return "\n".join(parts) + "/* ---- end of kernelfarer support code ---- */\n\n"
