"""Source locations, remarks and errors, printed the way compilers print them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SourceLocation:
    file: str
    line: int
    column: int

    def __str__(self) -> str:          # line or column 0: not known
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}" + (f":{self.column}" if self.column > 0 else "")


class KernelfarerError(Exception):
    """A user-facing error; printed as ``file:line:col: error: message`` (or ``error: message``)."""

    def __init__(self, message: str, location: SourceLocation | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}error: {self.message}"


@dataclass(frozen=True)
class Remark:
    """What kernelfarer decided about one loop nest."""

    location: SourceLocation
    kind: str            # "gemm" when recognized, "function" for one left out, else "loop-nest"
    replaced: bool
    reason: str          # why it was not replaced ("" when replaced)
    details: tuple[tuple[str, object], ...] = ()   # extra report fields (sizes, layouts, kernel)

    def message(self) -> str:
        from kernelfarer.scan import plain_names     # names beyond ASCII as the user wrote them
        return plain_names(self._message())

    def _message(self) -> str:
        if self.replaced:
            d = dict(self.details)
            guards = len(d.get("guards", ()))
            source = d.get("blocking_source", "model")
            blocks = d["blocking"] + (f" ({source.split(' (')[0]})" if source != "model" else "")
            return (f"{self.location}: remark: replaced {d['dtype']} GEMM {d['description']} "
                    f"({d['sizes']}; {d['layouts']}) with kernel {d['kernel']}"
                    f" [{blocks}; {guards} run-time check{'s' if guards != 1 else ''}]")
        if self.kind == "function":     # code left out of the analysis: said even unasked
            return f"{self.location}: warning: {self.reason}"
        return f"{self.location}: remark: not replaced: {self.reason}"

    def to_json(self) -> dict:
        entry = {
            "file": self.location.file,
            "line": self.location.line,
            "column": self.location.column,
            "kind": self.kind,
            "replaced": self.replaced,
            "reason": self.reason,
        }
        entry.update(self.details)
        return entry

