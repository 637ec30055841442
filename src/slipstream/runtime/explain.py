"""A bound run in words: what `check` and `run` print before the queries start."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slipstream.analysis import realtime
from slipstream.core.specs import format_duration
from slipstream.runtime import partitions
from slipstream.runtime.bound import BoundInput, BoundOutput, Prepared, QueryKind, stream_inputs


def explain(prepared: Prepared) -> str:
    """What `check` and `run` print before the queries start: inputs, parameters, outputs
    with their plans and late-row rules, triggers."""
    s = prepared.settings
    shuffle = partitions.choose(prepared).describe()
    lines = [f"pipeline    {prepared.pipeline.name}: {prepared.pipeline.description}"]
    for bound in prepared.inputs.values():
        lines.append(f"input       {bound.name}: {describe_input(bound)}")
        if bound.guard is not None:
            lines.append(f"  guard     {bound.guard.describe()}")
        for rule in bound.expectations:
            lines.append(f"  expect    {rule.describe()}")
    if prepared.params:
        shown = ", ".join(f"{k}={show_value(v)}" for k, v in prepared.params.items())
        lines.append(f"params      {shown}")
    lines += prepared.pipeline.notes(prepared.params)
    for out in prepared.outputs.values():
        streams = [b.source.kind for b in stream_inputs(prepared, out) if b.source is not None]
        label, what = "output      ", ""
        if out.kind is QueryKind.SHARED:  # runtime/shared_stage.py
            label, what = "shared      ", "the steps every output takes first, once; "
        lines.append(
            f"{label}{out.name}: {what}{out.ctx.mode} to {describe_sink(out, s.trigger.kind)}"
            f"  (checkpoint {out.ctx.checkpoint})"
        )
        plan = prepared.plans.get(out.name)
        if plan is not None:
            lines += [f"  {line}" for line in plan.describe(out.ctx.mode)]
        if s.trigger.kind == "real-time" and plan is not None and out.is_output:
            verdict = realtime.describe(plan, out.ctx.mode, out.sink.spec.kind, streams)
            lines.append(f"  real-time   {verdict}")
        late = prepared.late.get(out.name)
        if late is not None:
            lines += [f"  late rows {rule.describe()}" for rule in late.rules]
            lines += [f"  late rows not written: {why}" for why in late.uncovered]
    lines.append(f"trigger     {s.trigger.describe()}")
    lines.append(shuffle)
    return "\n".join(lines)


#: a database output's guarantee in real-time mode: no micro-batch, so no staging and no batch
#: ledger; the latest row per key is upserted (sinks/rows.py, sinks/jvm_rows.py), and a
#: replayed epoch upserts its rows again
REAL_TIME_DATABASE = "idempotent upserts by key, converging after a replay"


def describe_sink(out: BoundOutput, trigger: str) -> str:
    """An output's sink and the guarantee it gives under the run's trigger (a sink describes
    its micro-batch one)."""
    text = out.sink.describe(out.ctx)
    if trigger == "real-time" and out.is_output and out.sink.database:
        target = text.rsplit(" (", 1)[0] if text.endswith(")") else text
        return f"{target} ({REAL_TIME_DATABASE})"
    return text


def describe_input(bound: BoundInput) -> str:
    if bound.source is None:
        return f"table {bound.binding.path} ({bound.binding.format})"
    text = bound.source.describe(bound.binding, bound.source_options)
    return text + (f"; quarantine {bound.quarantine}" if bound.quarantine else "; no quarantine")


def show_value(value: Any) -> str:
    """A parameter's value as its flag takes it (durations as 10m)."""
    return format_duration(value) if isinstance(value, timedelta) else str(value)
