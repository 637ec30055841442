"""`--from-checkpoint OLD` without Spark: the position read from OLD's logs, and every wrong use
refused with its code before Spark starts (runtime/from_checkpoint.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slipstream.checkpoint.logs import kafka_positions
from slipstream.checkpoint.start import InputStart, StartFrom
from slipstream.core.kafka_url import KafkaTopic
from slipstream.errors import CheckpointError, ConfigError
from slipstream.runtime import runner
from slipstream.runtime.bound import Prepared
from slipstream.runtime.compat import BUILD
from slipstream.runtime.from_checkpoint import apply, begin
from slipstream.settings.config import load_settings


def _log(path: Path, *lines: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["v1", *(json.dumps(x) for x in lines)]) + "\n")


def old_checkpoint(state: Path, landing: Path, kafka: bool = False) -> Path:
    """mobile's counts query: batch 0 committed (files a, b), batch 1 planned only (file c)."""
    query = state / "checkpoints" / "mobile" / "counts"
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1}
    offsets = [{"actions": {"0": 7, "1": 3}}, {"actions": {"0": 9, "1": 5}}]
    for batch in (0, 1):
        source = offsets[batch] if kafka else {"logOffset": batch}
        _log(query / "offsets" / str(batch), meta, source)
    _log(query / "commits" / "0", {"nextBatchWatermarkMs": 0})
    (query / "metadata").write_text('{"id": "old-counts"}\n')
    files = {0: ["a.json", "b.json"], 1: ["c.json"]}
    for b, names in files.items():
        entries = [{"path": f"file://{landing / n}", "timestamp": 1, "batchId": b} for n in names]
        _log(query / "sources" / "0" / str(b), *entries)
    return state


def prepare(landing: Path, state: Path, **flags: Any) -> Prepared:
    settings = load_settings(
        "mobile", {"input": [str(landing)], "state_dir": state, **flags}, environ={}
    )
    return runner.prepare(settings)


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    folder = tmp_path / "landing"
    folder.mkdir()
    return folder


def test_the_position_is_the_last_committed_batch(tmp_path: Path, landing: Path) -> None:
    old = old_checkpoint(tmp_path / "old", landing)
    prepared = prepare(landing, tmp_path / "new", from_checkpoint=old)
    start = prepared.start_from
    assert start is not None and not start.recorded and start.batches == {"counts": 0}
    assert [Path(f).name for f in start.inputs["actions"].files] == ["a.json", "b.json"]
    skip = prepared.inputs["actions"].binding.skip_files
    # as the source log names them, and as `_metadata.file_path` does
    assert f"file://{landing / 'a.json'}" in skip and f"file:{landing / 'a.json'}" in skip
    assert not any(f.endswith("c.json") for f in skip)  # batch 1 was not committed


def test_wrong_uses_are_refused_before_spark(tmp_path: Path, landing: Path) -> None:
    old = old_checkpoint(tmp_path / "old", landing)
    cases = {
        "FROM_CHECKPOINT_NOT_FOUND": (tmp_path / "new", tmp_path / "missing"),
        "FROM_CHECKPOINT_SAME": (old, old),
    }
    started = tmp_path / "started"
    (started / "checkpoints" / "mobile" / "counts").mkdir(parents=True)
    (started / "checkpoints" / "mobile" / "counts" / "metadata").write_text('{"id":"x"}')
    cases["FROM_CHECKPOINT_NOT_NEW"] = (started, old)
    for code, (state, given) in cases.items():
        with pytest.raises(CheckpointError) as err:
            prepare(landing, state, from_checkpoint=given)
        assert err.value.code == code, err.value.render()
        assert err.value.fix
    # OLD's logs cannot be read: said before Spark starts, not a traceback
    damaged = old_checkpoint(tmp_path / "damaged", landing)
    (damaged / "checkpoints" / "mobile" / "counts" / "offsets" / "0").write_text("v1\n{oops\n")
    with pytest.raises(CheckpointError) as err:
        prepare(landing, tmp_path / "new", from_checkpoint=damaged)
    assert err.value.code == "CHECKPOINT_DAMAGED"
    # OLD read another folder: its position means nothing in this one
    build = {
        "version": 1,
        "mode": "update",
        "sink": {},
        "inputs": [{"name": "actions", "source": "files", "path": str(tmp_path)}],
        "settings": {},
        "state": {"operators": [], "window": {}, "watermark": {}},
    }
    query = old / "checkpoints" / "mobile" / "counts"
    (query / BUILD).write_text(json.dumps(build))
    with pytest.raises(CheckpointError) as err:
        prepare(landing, tmp_path / "new", from_checkpoint=old)
    assert err.value.code == "FROM_CHECKPOINT_OTHER_INPUT"


def test_a_recorded_start_is_kept_and_another_old_refused(tmp_path: Path, landing: Path) -> None:
    old = old_checkpoint(tmp_path / "old", landing)
    other = old_checkpoint(tmp_path / "other", landing)
    prepared = prepare(landing, tmp_path / "new", from_checkpoint=old)
    said: list[str] = []
    begin(prepared, said.append)
    assert any("rebuilt on a new checkpoint, not continued" in line for line in said)
    # a restart: no flag needed, the same flag accepted, another OLD refused
    for flags in ({}, {"from_checkpoint": old}):
        again = prepare(landing, tmp_path / "new", **flags).start_from
        assert again is not None and again.recorded
        assert prepared.start_from is not None
        assert again.inputs["actions"].files == prepared.start_from.inputs["actions"].files
    with pytest.raises(CheckpointError) as err:
        prepare(landing, tmp_path / "new", from_checkpoint=other)
    assert err.value.code == "FROM_CHECKPOINT_NOT_NEW"
    # once every query of the new checkpoint committed a batch that listed a file, Spark never
    # lists it again: the filter carries only the others (here b.json)
    root = tmp_path / "new" / "checkpoints" / "mobile"
    for query in ("counts", "quarantine.actions"):
        _log(root / query / "offsets" / "0", {"batchTimestampMs": 1}, {"logOffset": 0})
        _log(root / query / "commits" / "0", {})
        entry = {"path": f"file://{landing / 'a.json'}", "timestamp": 1, "batchId": 0}
        _log(root / query / "sources" / "0" / "0", entry)
    restarted = prepare(landing, tmp_path / "new")
    assert restarted.start_from is not None and len(restarted.start_from.skips("actions")) == 4
    skip = restarted.inputs["actions"].binding.skip_files
    assert {Path(f).name for f in skip} == {"b.json"}


def test_kafka_starts_at_the_committed_end_offsets(tmp_path: Path, landing: Path) -> None:
    old = old_checkpoint(tmp_path / "old", landing, kafka=True)
    query = old / "checkpoints" / "mobile" / "counts"
    assert kafka_positions(query, 0) == {"actions": {"0": 7, "1": 3}}  # batch 1 uncommitted
    files_input = prepare(landing, tmp_path / "new").inputs["actions"]
    topic = KafkaTopic.parse("kafka://127.0.0.1:9092/actions?maxOffsetsPerTrigger=10")
    bound = replace(files_input, binding=replace(files_input.binding, path=None, topic=topic))
    where = InputStart("actions", "kafka", offsets={"actions": {"0": 7, "1": 3}})
    start = StartFrom(old, "now", {"counts": 0}, {"actions": where})
    binding = apply({"actions": bound}, start, [])["actions"].binding
    assert binding.topic is not None
    options = binding.topic.option_map
    assert json.loads(options["startingOffsets"]) == {"actions": {"0": 7, "1": 3}}
    assert options["maxOffsetsPerTrigger"] == "10"
    # a startingOffsets of the user's own says something else: refused
    given = KafkaTopic.parse("kafka://127.0.0.1:9092/actions?startingOffsets=earliest")
    clash = replace(bound, binding=replace(bound.binding, topic=given))
    with pytest.raises(ConfigError) as err:
        apply({"actions": clash}, start, [])
    assert err.value.code == "CONFIG_BAD_VALUE"


@pytest.mark.parametrize("batch", [0, 1])
@pytest.mark.parametrize("text", ["", "v1\n"])
def test_an_empty_offsets_file_in_old_is_checkpoint_damaged(
    tmp_path: Path, landing: Path, batch: int, text: str
) -> None:
    """issue 43 break 3: an emptied offsets file of OLD was an IndexError (INTERNAL_ERROR);
    `run` on OLD says CHECKPOINT_DAMAGED, and so does `--from-checkpoint OLD`."""
    damaged = old_checkpoint(tmp_path / "damaged", landing)
    offsets = damaged / "checkpoints" / "mobile" / "counts" / "offsets" / str(batch)
    offsets.write_text(text)
    with pytest.raises(CheckpointError) as err:
        prepare(landing, tmp_path / "new", from_checkpoint=damaged)
    assert err.value.code == "CHECKPOINT_DAMAGED", err.value.render()
    assert str(offsets) in err.value.render() and err.value.fix
