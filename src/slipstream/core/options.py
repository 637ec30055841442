"""One setting's declaration: its parser, help, allowed values, default, flag and environment
variable. The run's own settings are declared in settings/options.py, each source's with the
source (sources/), a pipeline's parameters with the pipeline; the CLI, TOML keys, environment
variables and `--help` are all built from these declarations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[Any], Any]
    help: str
    allowed: str | Callable[[], str]  # a callable: read when shown (the sink kinds, found later)
    default: Any = None
    flag: str | None = None  # CLI flag; None => --name-with-dashes
    kind: str = "value"  # value | bool | multi
    metavar: str | None = None
    env: str | None = None
    const: Any = None  # value of the bare flag (`--dashboard` alone); None: the flag needs one

    def allowed_text(self) -> str:
        return self.allowed() if callable(self.allowed) else self.allowed
