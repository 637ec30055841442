"""Every run header's guarantee is the sink's under the run's trigger (issue 43 break 11): the
header of `run` and `check` (runtime/explain.py) said "exactly-once: staging + batch ledger" for a
real-time run into PostgreSQL, which upserts row by row on the key (sinks/rows.py): at-least-once
delivery converging to exact rows after a replay. Each (sink kind x trigger) that binds is
checked against the table below, written from what each sink does, not from the code's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slipstream.errors import SlipstreamError
from slipstream.runtime import runner
from slipstream.runtime.explain import explain
from slipstream.settings.config import load_settings

TRIGGERS = ("default", "5s", "available-now", "once", "continuous:1s", "real-time:5s")
MICRO_BATCH = {"default", "5s", "available-now", "once"}


def sinks(tmp: Path) -> dict[str, str]:
    return {
        "sqlite": "sqlite",
        "postgresql": "postgresql://writer@localhost:1/db",
        "kafka": "kafka://localhost:1/counts",
        "console": "console",
        "memory": "memory",
        "noop": "noop",
        "parquet": f"parquet:{tmp / 'out'}",
        "json": f"json:{tmp / 'out'}",
        "csv": f"csv:{tmp / 'out'}",
    }


def promised(kind: str, trigger: str) -> tuple[str | None, str | None]:
    """(what the guarantee must say, what it must not) for an output of `kind`."""
    if kind in ("sqlite", "postgresql"):
        if trigger.startswith("real-time"):  # row by row, no ledger: a replay upserts again
            return "idempotent upserts by key, converging after a replay", "exactly-once"
        return "exactly-once", None  # the batch ledger (and PostgreSQL's staging)
    if kind in ("parquet", "json", "csv"):
        return "exactly-once", None  # the _spark_metadata log
    if kind == "kafka":
        return "at-least-once", "exactly-once"
    if kind == "console":
        return "not exactly-once", None
    return None, "exactly-once"  # memory, noop: nothing durable is promised


OUTPUT = re.compile(r"^output +(\S+): (\w+) to (.*)  \(checkpoint .*\)$")


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_every_output_line_promises_what_its_sink_does_under_the_trigger(
    tmp_path: Path, trigger: str
) -> None:
    (tmp_path / "landing").mkdir()
    checked = set()
    for kind, sink in sinks(tmp_path).items():
        mode = "append" if kind in ("parquet", "json", "csv") else "update"
        flags = {
            "input": [str(tmp_path / "landing")],
            "state_dir": tmp_path / "state",
            "trigger": trigger,
            "sink": sink,
            "mode": mode,
        }
        try:
            prepared = runner.prepare(load_settings("mobile", flags, environ={}))
        except SlipstreamError:
            continue  # refused before any header: nothing is promised
        for line in explain(prepared).splitlines():
            if not line.startswith("output"):
                continue
            match = OUTPUT.match(line)
            assert match, line
            name, target = match.group(1), match.group(3)
            guarantee = target[target.rindex("(") :] if target.endswith(")") else ""
            own = "json" if name.startswith("quarantine.") else kind  # rejected rows: files
            must, must_not = promised(own, trigger)
            if must is not None:
                assert must in guarantee, (trigger, kind, line)
            if must_not is not None and must_not not in (must or ""):
                assert must_not not in guarantee, (trigger, kind, line)
            checked.add((own, trigger))
    if trigger.startswith("real-time"):  # the break: both databases were checked
        assert {("sqlite", trigger), ("postgresql", trigger)} <= checked
    if trigger in MICRO_BATCH:
        assert {("sqlite", trigger), ("parquet", trigger), ("kafka", trigger)} <= checked
