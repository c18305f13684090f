"""The outputs of `kernelfarer compare`: a Markdown table, CSV rows and a PNG plot."""

from __future__ import annotations

import csv
import io
import os
from typing import Sequence

from kernelfarer.compare import THREADED, VARIANTS, Row
from kernelfarer.diagnostics import KernelfarerError

CSV_COLUMNS = ("variant", "function", "dtype", "size", "m", "n", "k", "gflops_median", "ci_low",
               "ci_high", "seconds_median", "rounds", "note")


def _variants(rows: Sequence[Row]) -> list[str]:
    """The variants present, in VARIANTS' order, those on threads ("name xN") last."""
    order = list(VARIANTS) + list(THREADED)

    def key(variant: str) -> tuple:
        base, _, threads = variant.partition(" x")
        return (bool(threads), order.index(base) if base in order else len(order), variant)

    return sorted({r.variant for r in rows}, key=key)


def _groups(rows: Sequence[Row]) -> list[tuple[str, str]]:
    seen = []
    for r in rows:
        if (r.function, r.dtype) not in seen:
            seen.append((r.function, r.dtype))
    return seen


def _cell(row: Row | None) -> str:
    if row is None:
        return ""
    if row.gflops_median is None:
        return "WRONG" if row.note.startswith("WRONG") else "—"
    return f"{row.gflops_median:.2f} ({row.ci_low:.2f}–{row.ci_high:.2f})"


def markdown(rows: Sequence[Row], notes: Sequence[str] = ()) -> str:
    """One line per function, element type and size; one column per variant: the median GFLOP/s
    and its 95% confidence interval; then the tiled+packed / pluto-style ratio when both ran."""
    variants = _variants(rows)
    index = {(r.variant, r.function, r.dtype, r.size): r for r in rows}
    ratio = "tiled+packed" in variants and "pluto-style" in variants
    head = ["function", "dtype", "N"] + variants + (["tiled+packed / pluto-style"] if ratio else [])
    out = io.StringIO()
    out.write("GFLOP/s, median of the rounds (95% confidence interval of the median)\n\n")
    out.write("| " + " | ".join(head) + " |\n")
    out.write("|" + "|".join("---" for _ in head) + "|\n")
    for function, dtype in _groups(rows):
        sizes = sorted({r.size for r in rows if (r.function, r.dtype) == (function, dtype)})
        for size in sizes:
            cells = [function, dtype, str(size)]
            cells += [_cell(index.get((v, function, dtype, size))) for v in variants]
            if ratio:
                fast = index.get(("tiled+packed", function, dtype, size))
                slow = index.get(("pluto-style", function, dtype, size))
                ok = fast and slow and fast.gflops_median and slow.gflops_median
                cells.append(f"{fast.gflops_median / slow.gflops_median:.1f}x" if ok else "—")
            out.write("| " + " | ".join(cells) + " |\n")
    skipped = sorted({f"{r.variant} {r.function}(): {r.note}" for r in rows
                      if r.gflops_median is None and r.note
                      and not r.note.startswith("not timed above")})   # said by a note
    narrow = sorted({(r.rounds, r.note) for r in rows
                     if r.gflops_median is not None and r.note.startswith("CI covers")})
    low = [f"with {rounds} round{'s' if rounds != 1 else ''} the intervals are the rounds' range, which covers the median "
           f"with {note.split()[-1]} confidence (6 or more rounds give 95%)"
           for rounds, note in narrow]
    lines = list(notes) + skipped + low
    if lines:
        out.write("\n" + "".join(f"- {line}\n" for line in lines))
    return out.getvalue()


def summary(rows: Sequence[Row]) -> str:
    """One line per function, element type and variant: its median GFLOP/s at each size, and its
    speedup over the original and over pluto-style at the largest size where both were timed."""
    sizes = sorted({r.size for r in rows})
    index = {(r.variant, r.function, r.dtype, r.size): r for r in rows}
    head = ["function", "dtype", "variant"] + [f"N={n}" for n in sizes] + [
        "x original", "x pluto-style"]
    out = io.StringIO()
    out.write("Summary: median GFLOP/s; speedups at the largest N both were timed at\n\n")
    out.write("| " + " | ".join(head) + " |\n")
    out.write("|" + "|".join("---" for _ in head) + "|\n")
    for function, dtype in _groups(rows):
        for variant in _variants([r for r in rows if (r.function, r.dtype) == (function, dtype)]):
            mine = [index.get((variant, function, dtype, n)) for n in sizes]
            cells = [function, dtype, variant]
            cells += [("WRONG" if r.note.startswith("WRONG") else "—") if r and r.gflops_median
                      is None else f"{r.gflops_median:.2f}" if r else "" for r in mine]
            for base in ("original", "pluto-style"):
                both = [(r.gflops_median / b.gflops_median, n) for r, n in zip(mine, sizes)
                        if r and r.gflops_median and (b := index.get((base, function, dtype, n)))
                        and b.gflops_median]
                cells.append("" if variant == base else
                             f"{both[-1][0]:.1f}x (N={both[-1][1]})" if both else "—")
            out.write("| " + " | ".join(cells) + " |\n")
    return out.getvalue()


def plot_each_function(rows: Sequence[Row], path: str, title: str = "") -> list[str]:
    """One plot per function (`plot`), written as `<path stem>-<function>.png`; the paths."""
    stem, ext = os.path.splitext(path)
    written = []
    for function in dict.fromkeys(r.function for r in rows):
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in function)
        target = f"{stem}-{safe}{ext or '.png'}"
        plot([r for r in rows if r.function == function], target, f"{title} {function}".strip())
        written.append(target)
    return written


def write_csv(rows: Sequence[Row], path: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for r in rows:
            writer.writerow([r.variant, r.function, r.dtype, r.size, r.m, r.n, r.k,
                             _num(r.gflops_median), _num(r.ci_low), _num(r.ci_high),
                             _num(r.seconds_median, 6), r.rounds, r.note])


def _num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}" if digits > 4 else f"{value:.4f}"


def plot(rows: Sequence[Row], path: str, title: str = "") -> None:
    """GFLOP/s against N for every variant (log-log, with the confidence intervals), one panel per
    function and element type."""
    try:
        import matplotlib
    except ImportError:
        raise KernelfarerError("--plot needs matplotlib (pip install 'kernelfarer[compare]')") \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    groups = _groups(rows)
    variants = _variants(rows)
    fig, axes = plt.subplots(1, len(groups), figsize=(6.4 * len(groups), 4.6), squeeze=False)
    markers = dict(zip(VARIANTS + THREADED, "osD^vP<>hX*dp"))
    for ax, (function, dtype) in zip(axes[0], groups):
        for variant in variants:
            mine = sorted((r for r in rows if (r.variant, r.function, r.dtype) ==
                           (variant, function, dtype) and r.gflops_median), key=lambda r: r.size)
            if not mine:
                continue
            xs = [r.size for r in mine]
            ys = [r.gflops_median for r in mine]
            err = [[y - r.ci_low for y, r in zip(ys, mine)], [r.ci_high - y for y, r in zip(ys, mine)]]
            ax.errorbar(xs, ys, yerr=err, marker=markers.get(variant, "o"), capsize=3,
                        linewidth=1.6, markersize=5, label=variant)
        wrong = sorted({(r.variant, r.note) for r in rows if (r.function, r.dtype) ==
                        (function, dtype) and r.note.startswith("WRONG")})
        for i, (variant, note) in enumerate(wrong):      # not plotted: said on the plot
            ax.text(0.01, 0.02 + 0.06 * i, f"{variant}: {note[:90]}", transform=ax.transAxes,
                    fontsize=7, color="firebrick")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({r.size for r in rows if (r.function, r.dtype) == (function, dtype)})
        ax.set_xticks(sizes)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("N (M = N = K)")
        ax.set_ylabel("GFLOP/s (log scale)")
        ax.set_title(f"{function}() — {dtype}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.suptitle(title or "kernelfarer compare: median GFLOP/s with 95% confidence intervals",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
