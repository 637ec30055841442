"""Which rows Spark drops as late, as rules read from an output's analyzed plan
(runtime/late_plan.py reads them; the dead-letter applies them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta


@dataclass(frozen=True)
class LateRule:
    """How one input's rows are judged late in one output's query."""

    input: str
    column: str  # the input's event-time column
    operator: str  # the first stateful operator its rows meet
    window: timedelta | None = None  # tumbling window length: the window-end rule

    def describe(self) -> str:
        if self.window is not None:
            rule = f"the end of its {self.column} window <= watermark"
        else:
            rule = f"{self.column} <= watermark"
        return f"{self.input}: {rule} ({self.operator}, the previous batch's watermark)"


@dataclass(frozen=True)
class LatePlan:
    """The rules of one output, and what it cannot cover, each with its reason."""

    rules: tuple[LateRule, ...] = ()
    uncovered: tuple[str, ...] = field(default=())
