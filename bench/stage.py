"""The ingest stage (issue 26) in the benchmarks: every run of slipstream names it.

Its default is changing (off on main today, on once the figures say so), so a benchmark that
relied on it would measure something else after the flip under the same variant name. Every
slipstream run a scenario starts therefore passes `ingest_stage` (in-process settings) or
`--ingest-stage` (a `slipstream run` subprocess), and the helpers that start runs refuse one
that does not. Variant names say which: "... (no stage)" is before, "... ingest stage" after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SETTING = "ingest_stage"
FLAG = "--ingest-stage"


def cli_args(on: bool) -> tuple[str, str]:
    """`slipstream run` arguments that set the stage, whatever the default is."""
    return (FLAG, "true" if on else "false")


def require_setting(flags: Mapping[str, Any], what: str) -> None:
    if SETTING not in flags:
        raise ValueError(
            f"bench: {what} does not name the ingest stage; pass {SETTING}=True or False "
            "(its default is changing, see bench/stage.py)"
        )


def require_flag(argv: Sequence[str | Path], what: str) -> None:
    if FLAG not in [str(a) for a in argv]:
        raise ValueError(
            f"bench: {what} does not name the ingest stage; add {FLAG} true|false "
            "(its default is changing, see bench/stage.py)"
        )


def param_args(ctx: Any) -> tuple[str, str]:
    """For scenarios with no with/without pair (recovery, start-up, soak, cluster, real-time):
    `--set ingest_stage=true` runs them with the stage; without it they run without, named."""
    return cli_args(bool(ctx.param(SETTING, False, False)))
