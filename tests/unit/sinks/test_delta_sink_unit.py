"""The Delta sink and source as declared (no Spark): the spec's grammar, the refusal off the
Spark 4.2 line, the options of `delta:PATH?...` inputs checked when parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from slipstream.core import spark_line
from slipstream.core.specs import SinkSpec
from slipstream.core.values import input_location
from slipstream.errors import ConfigError
from slipstream.sinks.registry import make_sink, sink_class


def test_the_sink_is_refused_off_the_42_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    with pytest.raises(ConfigError) as refused:
        make_sink(SinkSpec.parse("delta:/tmp/out"), Path("/tmp/db"))
    assert refused.value.code == "DELTA_UNAVAILABLE"


def test_the_sink_on_the_42_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(spark_line, "version", lambda: "4.2.0")
    sink = make_sink(SinkSpec.parse(f"delta:{tmp_path}/t?partitionBy=action"), tmp_path / "db")
    assert sink.partition_columns == ["action"]  # type: ignore[attr-defined]
    assert sink_class("delta").delta and not sink_class("delta").file  # every mode
    with pytest.raises(ValueError):
        SinkSpec.parse(f"delta:{tmp_path}/t?compression=zstd")  # not an option it takes


def test_delta_inputs_and_their_options() -> None:
    table = input_location("delta:/data/bronze?startingVersion=latest&skipChangeCommits=true")
    assert (table.name, table.path) == ("delta", "/data/bronze")
    assert table.option_map == {"startingVersion": "latest", "skipChangeCommits": "true"}
    for bad in ("delta:/t?startingVersion=-1", "delta:/t?maxFilesPerTrigger=0", "delta:/t?x=1"):
        with pytest.raises(ValueError):
            input_location(bad)


def test_the_batch_delta_holds_for_a_query(tmp_path: Path) -> None:
    """Read from the log as Delta writes it: JSON commits (newest first), then the last
    checkpoint's Parquet once older commits were cleaned up."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from slipstream.sinks.delta import committed_batch

    log = tmp_path / "_delta_log"
    assert committed_batch(tmp_path, "q") is None
    log.mkdir()

    def commit(n: int, *actions: dict[str, object]) -> None:
        lines = [json.dumps(a) for a in ({"commitInfo": {}}, *actions)]
        (log / f"{n:020d}.json").write_text("\n".join(lines) + "\n")

    commit(0, {"txn": {"appId": "q", "version": 0}}, {"add": {"path": "a"}})
    commit(1, {"txn": {"appId": "other", "version": 7}})
    assert committed_batch(tmp_path, "q") == 0
    commit(2, {"txn": {"appId": "q", "version": 1}})
    assert committed_batch(tmp_path, "q") == 1
    assert committed_batch(tmp_path, "nobody") is None
    # commits 0-2 cleaned up after a checkpoint at 2
    for f in log.glob("*.json"):
        f.unlink()
    txn = [{"appId": "other", "version": 7}, {"appId": "q", "version": 1}, None]
    pq.write_table(pa.table({"txn": txn}), log / f"{2:020d}.checkpoint.parquet")
    assert committed_batch(tmp_path, "q") == 1


def test_a_log_folder_without_a_commit_is_no_table_yet(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fault campaign's seed 170: the first batch's write failed on a full disk after Delta
    made `_delta_log/_staged_commits` and before its first commit; the next run took the folder
    for a table and MERGEd into it (DELTA_TABLE_NOT_FOUND, every run after). The first write is
    done again until a commit or a checkpoint is in the log."""
    monkeypatch.setattr(spark_line, "version", lambda: "4.2.0")
    sink = make_sink(SinkSpec.parse(f"delta:{tmp_path}/t"), tmp_path / "db")
    log = tmp_path / "t" / "_delta_log"
    assert not sink.exists()  # type: ignore[attr-defined]
    (log / "_staged_commits").mkdir(parents=True)
    (tmp_path / "t" / "part-00000-x.snappy.parquet").write_bytes(b"")
    assert not sink.exists()  # type: ignore[attr-defined]
    (log / f"{0:020d}.json").write_text('{"commitInfo": {}}\n')
    assert sink.exists()  # type: ignore[attr-defined]
    (log / f"{0:020d}.json").unlink()
    (log / f"{10:020d}.checkpoint.parquet").write_bytes(b"")
    assert sink.exists()  # type: ignore[attr-defined]


def test_reset_deletes_only_a_table_slipstream_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from slipstream.errors import CheckpointError
    from slipstream.sinks.base import SinkContext
    from slipstream.sinks.spark_sinks import write_mark

    monkeypatch.setattr(spark_line, "version", lambda: "4.2.0")
    ctx = SinkContext("mobile", "mobile.counts", "counts", (), "append", tmp_path / "ckpt")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for table in (ours, theirs):
        (table / "_delta_log").mkdir(parents=True)
    write_mark(ours, ctx.checkpoint)
    assert make_sink(SinkSpec.parse(f"delta:{ours}"), tmp_path).reset(ctx) == [str(ours)]
    assert not ours.exists()
    with pytest.raises(CheckpointError) as refused:
        make_sink(SinkSpec.parse(f"delta:{theirs}"), tmp_path).reset(ctx)
    assert refused.value.code == "RESET_NOT_OURS" and theirs.exists()


def test_a_delta_run_binds_the_delta_source_and_asks_for_delta(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--input delta:DIR --sink delta:DIR`: the input reads the Delta source with its options,
    the session is to get Delta (runtime/bound.py); a folder that is no Delta table is refused."""
    from slipstream.runtime import runner
    from slipstream.runtime.bound import uses_delta
    from slipstream.settings.config import load_settings

    monkeypatch.setattr(spark_line, "version", lambda: "4.2.0")
    table = tmp_path / "bronze"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / f"{0:020d}.json").write_text('{"commitInfo": {}}\n')
    flags = {
        "input": f"delta:{table}?startingVersion=1",
        "sink": f"delta:{tmp_path / 'out'}",
        "state_dir": str(tmp_path / "state"),
    }
    prepared = runner.prepare(load_settings("mobile", flags, environ={}))
    bound = prepared.inputs["actions"]
    assert bound.source is not None and bound.source.kind == "delta"
    assert bound.binding.spark_format is not None
    assert bound.binding.spark_format.option_map == {"startingVersion": "1"}
    assert uses_delta(prepared)
    flags["input"] = f"delta:{tmp_path}"  # a folder without _delta_log
    with pytest.raises(ConfigError) as refused:
        runner.prepare(load_settings("mobile", flags, environ={}))
    assert refused.value.code == "CONFIG_BAD_VALUE" and "_delta_log" in str(refused.value)
    half = tmp_path / "half"  # a first write that failed before its commit left only this
    (half / "_delta_log" / "_staged_commits").mkdir(parents=True)
    flags["input"] = f"delta:{half}"
    with pytest.raises(ConfigError) as refused:
        runner.prepare(load_settings("mobile", flags, environ={}))
    assert refused.value.code == "CONFIG_BAD_VALUE" and "no commit" in str(refused.value)


@pytest.mark.parametrize("flag", ["quarantine", "dead_letter"])
def test_delta_records_are_refused_off_the_42_line(
    flag: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--quarantine delta:DIR`, `--dead-letter delta:DIR` on the 4.3 line: DELTA_UNAVAILABLE
    when the run is prepared, before a JVM starts; a plain folder is taken as before."""
    from slipstream.runtime import runner
    from slipstream.runtime.bound import uses_delta
    from slipstream.settings.config import load_settings

    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    flags = {"input": str(tmp_path), "state_dir": str(tmp_path / "state")}
    settings = load_settings("mobile", {**flags, flag: f"delta:{tmp_path}/records"}, environ={})
    assert (settings.quarantine_delta, settings.late_delta) == (
        flag == "quarantine",
        flag == "dead_letter",
    )
    assert (settings.late_root if flag == "dead_letter" else settings.quarantine_root) == (
        tmp_path / "records"
    )
    monkeypatch.setattr(spark_line, "version", lambda: "4.2.0")  # Delta's line: bound to Delta
    prepared = runner.prepare(settings)
    assert uses_delta(prepared)
    quarantine = prepared.targets["quarantine.actions"].sink
    assert quarantine.kind == ("delta" if flag == "quarantine" else "json")
    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    with pytest.raises(ConfigError) as refused:
        runner.prepare(settings)
    assert refused.value.code == "DELTA_UNAVAILABLE"
    plain = load_settings("mobile", {**flags, flag: str(tmp_path / "records")}, environ={})
    assert not (plain.quarantine_delta or plain.late_delta)
    assert not uses_delta(runner.prepare(plain))  # no Delta: prepared as before
