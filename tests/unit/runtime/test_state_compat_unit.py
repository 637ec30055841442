"""The compatibility check's rules on recorded builds (no Spark): what a change to a stateful
query does to the state its checkpoint holds (runtime.compat, issue 28)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from slipstream.analysis.state_ops import state_operators
from slipstream.errors import CODES
from slipstream.runtime.compat import judge, read_build, write_build

# the analyzed plan of mobile's query, as Spark 4.3 prints it (abridged: one Aggregate line)
MOBILE_AGGREGATE = (
    "~Aggregate [window#33-T600000ms, action#17], [window#33-T600000ms AS window#28-T600000ms, "
    "action#17, count(1) AS count#31L]\n"
    "+- ~Filter isnotnull(ts#18-T600000ms)\n"
    "   +- ~EventTimeWatermark 5f0c, ts#18: timestamp, 10 minutes\n"
    "      +- ~StreamingRelationV2 json\n"
)


def build(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": 1,
        "pipeline": "mobile",
        "output": "counts",
        "mode": "update",
        "sink": {"kind": "sqlite", "target": "sqlite st.db table t", "table": "t"},
        "inputs": [{"name": "actions", "source": "files", "path": "/in", "options": {}}],
        "params": {"window": "10m", "watermark": "10m"},
        "settings": {"trigger": "available-now", "shuffle_partitions": 4},
        "state": {
            "operators": state_operators(MOBILE_AGGREGATE),
            "window": {"kind": "tumbling", "column": "ts", "length": "10m", "slide": None},
            "watermark": {"column": "ts", "delay": "10m"},
        },
    }
    new = copy.deepcopy(base)
    for path, value in changes.items():
        target = new
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return new


def resumed(tmp_path: Path, recorded: dict[str, Any]) -> Path:
    checkpoint = tmp_path / "counts"
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    write_build(checkpoint, recorded, None)
    return checkpoint


def test_the_operators_are_read_from_the_analyzed_plan_without_run_specific_ids() -> None:
    assert state_operators(MOBILE_AGGREGATE) == [
        {
            "operator": "aggregation",
            "node": "Aggregate",
            "keys": ["window", "action"],
            "values": ["count(1) AS count"],
        }
    ]
    dedup = "~DeduplicateWithinWatermark [event_id#3]\n+- ~StreamingRelationV2 json\n"
    assert state_operators(dedup)[0]["keys"] == ["event_id"]


def test_a_new_checkpoint_fits_anything(tmp_path: Path) -> None:
    verdict = judge(tmp_path / "none", build(), "mobile.counts")
    assert verdict.fits and not verdict.resumed


def test_a_changed_window_is_refused_naming_the_flag(tmp_path: Path) -> None:
    checkpoint = resumed(tmp_path, build())
    new = build(params__window="5m", state__window__length="5m")
    verdict = judge(checkpoint, new, "mobile.counts")
    assert verdict.refused == ["--window 10m -> 5m changes the aggregation's state"]
    assert "STATE_INCOMPATIBLE" in CODES


def test_a_changed_slide_is_refused(tmp_path: Path) -> None:
    old = build(params__slide="1m", state__window__kind="sliding", state__window__slide="1m")
    checkpoint = resumed(tmp_path, old)
    new = build(params__slide="5m", state__window__kind="sliding", state__window__slide="5m")
    assert judge(checkpoint, new, "t.views").refused == [
        "--slide 1m -> 5m changes the aggregation's state"
    ]


def test_a_changed_mode_is_refused(tmp_path: Path) -> None:
    checkpoint = resumed(tmp_path, build())
    verdict = judge(checkpoint, build(mode="append"), "mobile.counts")
    assert len(verdict.refused) == 1 and verdict.refused[0].startswith("--mode update -> append")


def test_a_changed_key_without_a_parameter_is_refused_naming_the_key(tmp_path: Path) -> None:
    checkpoint = resumed(tmp_path, build())
    new = build()
    new["state"]["operators"][0]["keys"] = ["window", "id"]
    [reason] = judge(checkpoint, new, "mobile.counts").refused
    assert reason == "the aggregation's key changes: ['window', 'action'] -> ['window', 'id']"


def test_a_changed_input_path_is_refused(tmp_path: Path) -> None:
    checkpoint = resumed(tmp_path, build())
    new = build()
    new["inputs"][0]["path"] = "/elsewhere"
    assert "changes the source" in judge(checkpoint, new, "mobile.counts").refused[0]


def test_trigger_watermark_options_and_partitions_run_and_say_what_changed(
    tmp_path: Path,
) -> None:
    checkpoint = resumed(tmp_path, build())
    new = build(
        params__watermark="1m",
        state__watermark__delay="1m",
        settings__trigger="default",
        settings__shuffle_partitions=8,
    )
    new["inputs"][0]["options"] = {"max_files_per_trigger": "1"}
    verdict = judge(checkpoint, new, "mobile.counts")
    assert verdict.fits
    shown = "\n".join(verdict.changed)
    assert "--watermark 10m -> 1m" in shown
    assert "--trigger available-now -> default" in shown
    assert "max_files_per_trigger" in shown
    assert "Spark keeps the checkpoint's 4" in shown


def test_a_parameter_that_changes_no_operator_runs(tmp_path: Path) -> None:
    checkpoint = resumed(tmp_path, build(params__top="10"))
    verdict = judge(checkpoint, build(params__top="20"), "mobile.counts")
    assert verdict.fits and verdict.changed == ["--top 10 -> 20 (changes no stateful operator)"]


def test_a_sink_new_to_a_resumed_checkpoint_is_named(tmp_path: Path) -> None:
    checkpoint = resumed(tmp_path, build())
    new = build(sink__target="parquet out", sink__kind="parquet")
    verdict = judge(checkpoint, new, "mobile.counts")
    assert verdict.fits
    [notice] = verdict.notices
    assert "new to this checkpoint" in notice and "only what is written from now on" in notice
    # recorded: the next run on that sink is not new any more
    write_build(checkpoint, new, read_build(checkpoint))
    assert judge(checkpoint, new, "mobile.counts").notices == []


def test_a_checkpoint_without_a_record_is_not_compared(tmp_path: Path) -> None:
    checkpoint = tmp_path / "old"
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "3").write_text("v1\n{}\n")
    verdict = judge(checkpoint, build(mode="append"), "mobile.counts")
    assert verdict.fits and "not compared" in verdict.summary()
