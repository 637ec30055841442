"""What each output's checkpoint was built for, and whether a new run fits it (issue 28).

Spark restores a stateful query's state from its checkpoint and carries on with whatever the new
query says: a different window length or slide over state built for the old one runs without a
word (mobile, `--window 5m` after `10m`: 5- and 10-minute rows mixed in one table), a changed
output mode crash-loops on the sink, a changed key or operator fails late with a Java stack.

So, on an output's first run, slipstream writes what its state is built for beside Spark's files
(`<checkpoint>/slipstream-build.json`, atomically): the output mode, the sink, each input's
source and path, the parameters and the settings that shape state, and from Spark's analyzed
plan the stateful operators in order with their keys and values, the window (length, slide,
session gap), the watermark and the number of state partitions. Before every later start the
new run's build is compared with it, output by output (`judge`):

- refused (`STATE_INCOMPATIBLE`), before any query starts: the stateful operators, their keys
  or values, the window, a changed output mode, an input's source or path;
- runs, and says what changed: the trigger, the sink's options, `maxFilesPerTrigger`, a
  parameter that changes no operator, the watermark delay (the state held stays valid: a
  window is dropped from it once the new watermark passes its end), the shuffle partitions
  (Spark keeps the checkpoint's number for state);
- a sink new to a resumed checkpoint is named before start: it will hold only what is written
  from now on (windows already emitted are not emitted again)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slipstream.analysis.plan import Plan
from slipstream.analysis.state_ops import state_operators
from slipstream.checkpoint.integrity import BUILD_RECORD
from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import recorded_partitions
from slipstream.core.files import write_atomically
from slipstream.core.specs import TriggerSpec, format_duration
from slipstream.errors import CheckpointError
from slipstream.runtime.bound import BoundOutput, Prepared
from slipstream.runtime.explain import show_value

BUILD = BUILD_RECORD
VERSION = 1


def _duration(value: Any) -> str | None:
    return None if value is None else format_duration(value)


def trigger_text(trigger: TriggerSpec) -> str:
    if trigger.interval is None:
        return trigger.kind
    return f"{trigger.kind}:{format_duration(trigger.interval)}"


def build_of(
    prepared: Prepared, output: BoundOutput, plan: Plan, tree: str, partitions: int | None
) -> dict[str, Any]:
    """What this run builds for one output: the record a checkpoint keeps."""
    settings = prepared.settings
    inputs = []
    for bound in prepared.inputs.values():
        if bound.source is None:
            continue
        if output.reads and bound.name not in output.reads:
            continue
        options = {k: v for k, v in bound.source_options.items() if v is not None}
        inputs.append(
            {
                "name": bound.name,
                "source": bound.source.kind,
                "path": None if bound.binding.path is None else str(bound.binding.path),
                "options": {k: str(v) for k, v in sorted(options.items())},
            }
        )
    ctx = output.ctx
    return {
        "version": VERSION,
        "pipeline": prepared.pipeline.name,
        "output": output.name,
        "mode": ctx.mode,
        "sink": {
            "kind": output.sink.spec.kind,
            "target": output.sink.describe(ctx),
            "table": ctx.table if output.sink.database else None,
        },
        "inputs": inputs,
        "params": {name: show_value(value) for name, value in prepared.params.items()},
        "settings": {
            "trigger": trigger_text(settings.trigger),
            "shuffle_partitions": partitions,
        },
        "state": {
            "operators": state_operators(tree),
            "window": {
                "kind": plan.window,
                "column": plan.window_column,
                "length": _duration(plan.window_length),
                "slide": _duration(plan.window_slide),
            },
            "watermark": {
                "column": plan.watermark_column,
                "delay": _duration(plan.watermark_delay),
            },
        },
    }


def read_build(checkpoint: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(checkpoint) / BUILD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_build(checkpoint: Path, build: dict[str, Any], old: dict[str, Any] | None) -> Path:
    """Record `build` (atomically); the first run's time and every sink seen are kept."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    record = dict(build)
    record["created"] = (old or {}).get("created", now)
    record["updated"] = now
    seen = list((old or {}).get("sinks_seen", []))
    if build["sink"]["target"] not in seen:
        seen.append(build["sink"]["target"])
    record["sinks_seen"] = seen
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    lines = json.dumps(record, indent=1).splitlines()
    return write_atomically(Path(checkpoint), BUILD, lines, mode=0o600)  # private, as the state


@dataclass
class Verdict:
    """One output's new build against its checkpoint's."""

    output: str  # the query name, pipeline.output
    checkpoint: Path
    recorded: dict[str, Any] | None  # what the checkpoint was built for (None: new, or older)
    resumed: bool  # the checkpoint has committed batches
    refused: list[str] = field(default_factory=list)  # changes the state cannot take
    changed: list[str] = field(default_factory=list)  # changes Spark handles: they run
    notices: list[str] = field(default_factory=list)  # what the output will hold

    @property
    def fits(self) -> bool:
        return not self.refused

    def summary(self) -> str:
        if not self.resumed:
            return "new checkpoint: this run builds its state"
        if self.recorded is None:
            return "built before slipstream recorded builds: not compared (recorded from now on)"
        if self.refused:
            return "does NOT fit: " + "; ".join(self.refused)
        return "fits" + (" (" + "; ".join(self.changed) + ")" if self.changed else "")


def describe_build(build: dict[str, Any]) -> list[str]:
    """What a checkpoint was built for, one fact a line (`check` prints it)."""
    state = build.get("state", {})
    lines = [f"mode {build.get('mode')}, sink {build.get('sink', {}).get('target')}"]
    for i in build.get("inputs", []):
        lines.append(f"input {i['name']}: {i['source']} {i.get('path') or ''}".rstrip())
    if build.get("params"):
        lines.append("params " + ", ".join(f"--{k} {v}" for k, v in build["params"].items()))
    window = state.get("window", {})
    if window.get("kind", "none") != "none":
        every = f" every {window['slide']}" if window.get("slide") else ""
        lines.append(f"window {window['kind']} {window.get('length')}{every}")
    mark = state.get("watermark", {})
    if mark.get("column"):
        lines.append(f"watermark {mark['column']} - {mark.get('delay')}")
    for n, op in enumerate(state.get("operators", [])):
        keys = ", ".join(op.get("keys", [])) or "-"
        values = ", ".join(op.get("values", [])) or "-"
        lines.append(f"operator {n}: {op['operator']} by [{keys}] keeping [{values}]")
    parts = build.get("settings", {}).get("shuffle_partitions")
    if parts is not None:
        lines.append(f"state partitions {parts}")
    return lines


def _param_flags(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    a, b = old.get("params", {}), new.get("params", {})
    return [
        f"--{k.replace('_', '-')} {a.get(k)} -> {b.get(k)}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def _what(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The operator whose state a change touches: the first that differs, or the one the
    window belongs to (the aggregation)."""
    a, b = old["operators"], new["operators"]
    for x, y in zip(a, b, strict=False):
        if x != y:
            return str(x["operator"])
    names = [op["operator"] for op in a]
    if old["window"] != new["window"] and "aggregation" in names:
        return "aggregation"
    return names[0] if names else "query"


def judge(checkpoint: Path, new: dict[str, Any], query: str) -> Verdict:
    """The new build against the one recorded in `checkpoint`."""
    old = read_build(checkpoint)
    resumed = last_committed_batch(checkpoint) is not None
    verdict = Verdict(query, checkpoint, old, resumed)
    if not resumed or old is None:
        return verdict
    params = _param_flags(old, new)
    if old.get("mode") != new["mode"]:
        verdict.refused.append(
            f"--mode {old.get('mode')} -> {new['mode']} changes what the output holds (rows "
            f"written in {old.get('mode')} mode cannot be continued in {new['mode']} mode)"
        )
    o_state, n_state = old["state"], new["state"]
    shape_changed = (o_state["operators"], o_state["window"]) != (
        n_state["operators"],
        n_state["window"],
    )
    wm_changed = o_state["watermark"] != n_state["watermark"]
    wm_flags = [p for p in params if p.startswith("--watermark ")]
    what = _what(o_state, n_state)
    if shape_changed:
        # the parameters that moved are the cause; the watermark alone changes no operator
        causes = [p for p in params if p not in wm_flags] or params
        if causes:
            verdict.refused += [f"{c} changes the {what}'s state" for c in causes]
        else:
            verdict.refused.append(_shape_change(o_state, n_state))
    elif params:
        harmless = [p for p in params if p not in wm_flags]
        verdict.changed += [f"{p} (changes no stateful operator)" for p in harmless]
    if wm_changed and not shape_changed:
        shown = (
            wm_flags[0]
            if wm_flags
            else (f"watermark {o_state['watermark']} -> {n_state['watermark']}")
        )
        verdict.changed.append(
            f"{shown}: how late a record may be from now on (the state held stays valid; "
            "Spark keeps the watermark it reached)"
        )
    for index, (a, b) in enumerate(zip(old.get("inputs", []), new["inputs"], strict=False)):
        if (a["source"], a.get("path")) != (b["source"], b.get("path")):
            verdict.refused.append(
                f"input {b['name']}: {a['source']} {a.get('path')} -> {b['source']} "
                f"{b.get('path')} changes the source whose position the checkpoint holds"
            )
        elif a.get("options") != b.get("options"):
            verdict.changed.append(
                f"input {b['name']} options {a.get('options')} -> {b.get('options')}"
            )
        del index
    o_set, n_set = old.get("settings", {}), new["settings"]
    if o_set.get("trigger") != n_set["trigger"]:
        verdict.changed.append(f"--trigger {o_set.get('trigger')} -> {n_set['trigger']}")
    if o_set.get("shuffle_partitions") != n_set["shuffle_partitions"] and o_state["operators"]:
        verdict.changed.append(
            f"shuffle partitions {o_set.get('shuffle_partitions')} -> "
            f"{n_set['shuffle_partitions']}: Spark keeps the checkpoint's "
            f"{o_set.get('shuffle_partitions')} for the state"
        )
    o_sink, n_sink = old.get("sink", {}), new["sink"]
    seen = old.get("sinks_seen", [o_sink.get("target")])
    if n_sink["target"] not in seen:
        verdict.notices.append(
            f"output {query}: its sink {n_sink['target']} is new to this checkpoint (which "
            f"wrote to {o_sink.get('target')}): it will hold only what is written from now on "
            "(rows already emitted are not emitted again). To have it all, run it on a new "
            "checkpoint: `--state-dir NEW_DIR` reads the input from the beginning; "
            "`--state-dir NEW_DIR --from-checkpoint OLD` from where this one stands "
            "(docs/howto/upgrades.md, Changing a pipeline)"
        )
    elif o_sink.get("target") != n_sink["target"]:
        verdict.changed.append(f"sink {o_sink.get('target')} -> {n_sink['target']}")
    return verdict


def _shape_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    a, b = old["operators"], new["operators"]
    if [o["operator"] for o in a] != [o["operator"] for o in b]:
        return (
            "the stateful operators change: "
            f"{[o['operator'] for o in a]} -> {[o['operator'] for o in b]}"
        )
    for x, y in zip(a, b, strict=True):
        if x["keys"] != y["keys"]:
            return f"the {x['operator']}'s key changes: {x['keys']} -> {y['keys']}"
        if x["values"] != y["values"]:
            return f"the {x['operator']}'s state changes: {x['values']} -> {y['values']}"
    return f"the window changes: {old['window']} -> {new['window']}"


def refusal(prepared: Prepared, verdict: Verdict) -> CheckpointError:
    output = verdict.output.split(".", 1)[1]
    pipeline = prepared.pipeline.name
    return CheckpointError(
        "STATE_INCOMPATIBLE",
        f"output {verdict.output}: its checkpoint {verdict.checkpoint} holds state built for "
        f"another query: {'; '.join(verdict.refused)}; nothing was started",
        f"revert the change; or start this output over: `slipstream reset {pipeline} "
        f"--outputs {output}` (deletes its checkpoint and results); or run the new version "
        f"beside the old one, from where its checkpoint stands: `--state-dir NEW_DIR "
        f"--from-checkpoint {verdict.checkpoint.parent}` (its outputs are rebuilt from there)",
    )


Verdicts = dict[str, tuple[Verdict, dict[str, Any]]]


def judge_all(prepared: Prepared, trees: dict[str, str], partitions: int | None) -> Verdicts:
    """Each output's verdict and new build (quarantine queries are stateless: left out)."""
    found = {}
    for name, out in prepared.outputs.items():
        if not out.is_output or name not in trees:
            continue
        build = build_of(prepared, out, prepared.plans[name], trees[name], partitions)
        verdict = judge(out.ctx.checkpoint, build, out.ctx.query_name)
        # judged by what this run asks; recorded as what the state has (Spark keeps the
        # number its checkpoint was made with)
        held = recorded_partitions(out.ctx.checkpoint)
        if held is not None:
            build["settings"]["shuffle_partitions"] = held
        found[name] = (verdict, build)
    return found


def refuse_or_record(
    prepared: Prepared,
    verdicts: Verdicts,
    say: Callable[[str], None],
) -> None:
    """Refuse the first output whose checkpoint cannot take this run; otherwise say what
    changed and record each output's build (before the queries start)."""
    for verdict, _ in verdicts.values():
        if verdict.refused:
            raise refusal(prepared, verdict)
    for verdict, build in verdicts.values():
        for line in verdict.notices:
            say(line)
        if verdict.changed:
            say(
                f"output {verdict.output}: changed since its checkpoint was built, and safe: "
                + "; ".join(verdict.changed)
            )
        write_build(verdict.checkpoint, build, verdict.recorded)
