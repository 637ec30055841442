"""Every output is bound to the checkpoint that wrote it (issue 13).

For each sink kind (parquet, json, csv, SQLite, PostgreSQL) and the quarantine: a new
checkpoint, or a reset without `--outputs`, on outputs that hold batches is refused before any
query starts and leaves them as they were; a resume and a restart after a crash between the
sink's commit and the checkpoint's are not refused; `reset --outputs` and a rerun give every
row exactly once, checked against the lines landed (plain Python)."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.errors import CheckpointError
from slipstream.pipelines import Input, Output, Params, Pipeline
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness

pytestmark = pytest.mark.spark

PIPELINE = "tests.spark.runtime.test_output_binding:Events"
FILE_KINDS = ("parquet", "json", "csv")
OUTPUTS = (*FILE_KINDS, "db")  # one output a kind, each off unless given a sink


class Events(Pipeline):
    """Valid records as they come (stateless, append): what any sink can take."""

    name = "binding"
    description = "events, as they come"
    inputs = (
        Input(
            "events",
            StructType([StructField("id", StringType()), StructField("n", LongType())]),
            required=("id", "n"),
        ),
    )
    outputs = tuple(
        Output(name, modes=("append",), table="binding_rows", sink=None) for name in OUTPUTS
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        rows = inputs["events"].select("id", "n")
        return {name: rows for name in OUTPUTS}


FIRST = ['{"id": "a", "n": 1}', '{"id": "b", "n": 2}', "not json", '{"id": "c", "n": 3}']
SECOND = ['{"id": "d", "n": 4}', '{"id": "e"}', '{"id": "a", "n": 1}']  # a repeated record


def valid(lines: list[str]) -> list[tuple[str, int]]:
    """What the output must hold: every line that is a JSON object with both fields."""
    rows = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("id") is not None and "n" in record:
            rows.append((record["id"], int(record["n"])))
    return sorted(rows)


Reader = Callable[[], list[tuple[str, int]]]


def file_reader(spark: SparkSession, kind: str, folder: Path) -> Reader:
    def read() -> list[tuple[str, int]]:
        if not (folder / "_spark_metadata").exists():
            return []
        reader = spark.read.format(kind)
        if kind == "csv":
            reader = reader.option("header", "true").schema("id STRING, n BIGINT")
        return sorted((r["id"], int(r["n"])) for r in reader.load(str(folder)).collect())

    return read


def sinks_under_test(
    kind: str, spark: SparkSession, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[list[str], list[str], dict[str, Reader]]:
    """The outputs' sinks, each output moved to a fresh place, and a reader of each output's
    rows. "files": three outputs, one each of parquet, json, csv, in one run."""
    if kind == "files":
        here, there = tmp_path / "out", tmp_path / "elsewhere"
        return (
            [f"{k}={k}:{here / k}" for k in FILE_KINDS],
            [f"{k}={k}:{there / k}" for k in FILE_KINDS],
            {k: file_reader(spark, k, here / k) for k in FILE_KINDS},
        )
    if kind == "sqlite":
        db = tmp_path / "app.db"

        def read_sqlite() -> list[tuple[str, int]]:
            with sqlite3.connect(db) as conn:
                found = conn.execute("SELECT name FROM sqlite_master WHERE name = 'binding_rows'")
                if found.fetchone() is None:
                    return []
                return sorted(conn.execute("SELECT id, n FROM binding_rows").fetchall())

        return [f"db=sqlite:{db}"], [f"db=sqlite:{tmp_path / 'elsewhere.db'}"], {"db": read_sqlite}
    postgres = request.getfixturevalue("postgres")
    database = request.getfixturevalue("pg_database")
    url = postgres.url(database)

    def read_pg() -> list[tuple[str, int]]:
        found = postgres.query(database, "SELECT to_regclass('binding_rows')")
        if not found or found[0][0] is None:
            return []
        rows = postgres.query(database, "SELECT id, n FROM binding_rows")
        return sorted((i, int(n)) for i, n in rows)

    return [f"db={url}"], [f"db={url}"], {"db": read_pg}


def quarantined(spark: SparkSession, folder: Path) -> list[str]:
    """The quarantine's raw records, with or without the ingest stage (its batch-N.json files)."""
    if not folder.is_dir():
        return []
    return sorted(r["raw"] for r in read_quarantine(spark, folder).collect())


@pytest.mark.parametrize("kind", ["files", "sqlite", "postgresql"])
def test_outputs_are_bound_to_their_checkpoint(
    spark: SparkSession, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    sinks, elsewhere, readers = sinks_under_test(kind, spark, tmp_path, request)
    fresh_table = {"table": "db=binding_rows_new"} if kind == "postgresql" else {}

    def harness(**settings: Any) -> PipelineHarness:
        return PipelineHarness(spark, PIPELINE, tmp_path, **{"sink": sinks, **settings})

    def outputs_hold(lines: list[str], rejects: list[str]) -> None:
        for name, read in readers.items():
            assert read() == valid(lines), name
        assert quarantined(spark, quarantine) == sorted(rejects)

    first = harness()
    quarantine = first.prepared.inputs["events"].quarantine
    assert quarantine is not None
    with first as h:
        h.feed(FIRST)
        h.process()
    outputs_hold(FIRST, ["not json"])

    # a crash after the sinks committed the batch and before the checkpoint did: not refused,
    # and the batch Spark replays is not written twice (the quarantine neither: the first
    # output's query writes it, its batch run again)
    root = first.settings.checkpoint_root
    for query in readers:
        commits = root / query / "commits"
        batch = last_committed_batch(commits.parent)
        (commits / str(batch)).unlink()
        (commits / f".{batch}.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
    with harness() as h:
        h.process()
    outputs_hold(FIRST, ["not json"])

    def refused(h: PipelineHarness) -> CheckpointError:
        with pytest.raises(CheckpointError) as err:
            h.start()
        assert err.value.code == "OUTPUT_BELONGS_TO_OTHER_CHECKPOINT", err.value.render()
        assert "--outputs" in err.value.fix
        return err.value

    # a new checkpoint on these outputs: refused, nothing written
    refusal = refused(harness(checkpoint=tmp_path / "new-checkpoint"))
    assert f"binding.{next(iter(readers))}" in refusal.message
    assert not list((tmp_path / "new-checkpoint").glob("*/offsets"))
    # every output moved to a new place, but the quarantine is still the old one's
    moved = harness(checkpoint=tmp_path / "new-checkpoint", sink=elsewhere, **fresh_table)
    assert "binding.quarantine.events" in refused(moved).message
    # reset without --outputs, then the same command again: refused too
    settings = first.settings.with_(pipeline=PIPELINE)
    assert reset_command(settings, outputs=False, yes=True, out=io.StringIO()) == 0
    refused(harness())
    outputs_hold(FIRST, ["not json"])

    # reset with its outputs: the rerun reads every file again, each row once
    assert reset_command(settings, outputs=True, yes=True, out=io.StringIO()) == 0
    outputs_hold([], [])
    with harness() as h:
        h.feed(SECOND)
        h.process()
    outputs_hold(FIRST + SECOND, ["not json", '{"id": "e"}'])


def test_keys_that_may_be_null_are_refused_at_check(spark: SparkSession, tmp_path: Path) -> None:
    """Update mode upserts on the key: a key column Spark says may be NULL is refused, a key
    declared with `not_null` passes (the built-in pipelines), and a NULL reaching a declared
    key fails its batch rather than adding a row."""
    from slipstream.api.frames import not_null
    from slipstream.runtime import runner
    from slipstream.settings.config import load_settings

    def problems(pipeline: str, **flags: Any) -> list[str]:
        settings = load_settings(
            pipeline, {"state_dir": tmp_path, "input": str(tmp_path), **flags}, environ={}
        )
        prepared = runner.prepare(settings, check_source=False, check_rules=False)
        return [p.code for p in runner.check(prepared, runner.build(spark, prepared))]

    (tmp_path / "in").mkdir()
    assert problems("mobile", mode="update", sink="sqlite") == []
    assert (
        problems(
            "examples.seeds:UserLogCount", mode="update", sink="sqlite", input=str(tmp_path / "in")
        )
        == []
    )
    assert problems(f"{__name__}:NullableKey", mode="update", sink="sqlite") == [
        "SINK_KEY_NULLABLE"
    ]
    assert problems(f"{__name__}:NoKey", mode="update", sink="sqlite") == ["SINK_NEEDS_KEY"]
    assert problems(f"{__name__}:NoKey", mode="update", sink="console") == []
    frame = spark.createDataFrame([("x", 1), (None, 2)], "k STRING, v BIGINT")
    guarded = not_null(frame, "k")
    assert not guarded.schema["k"].nullable
    assert [tuple(r) for r in not_null(frame.where("v = 1"), "k").collect()] == [("x", 1)]
    with pytest.raises(Exception, match="NULL key k"):
        guarded.collect()


class NullableKey(Pipeline):
    name = "nullable_key"
    description = "counts on a key that may be NULL"
    inputs = Events.inputs
    outputs = (Output("counts", key=("id",), modes=("update",)),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"counts": inputs["events"].groupBy("id").count()}


class NoKey(NullableKey):
    name = "no_key"
    outputs = (Output("counts", modes=("update",)),)


def test_database_errors_say_whether_a_restart_helps() -> None:
    """A lost connection or a deadlock passes on a later attempt; a value or constraint the
    table refuses fails the same batch the same way on every restart (no Spark)."""
    from slipstream.sinks.postgres_io import retry_advice

    class PgError(Exception):
        def __init__(self, sqlstate: str) -> None:
            self.sqlstate = sqlstate

    for transient in ("08006", "40P01", "40001", "53300", "57P01"):
        assert "restart retries the batch" in retry_advice(PgError(transient))
    for permanent in ("23505", "22001", "42703"):
        advice = retry_advice(PgError(permanent))
        assert "fail on this batch the same way" in advice and permanent in advice
