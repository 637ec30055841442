"""What a scenario's sink and quarantine hold, read without slipstream and without Spark:
sqlite3, psycopg, a Spark file sink's committed files through its `_spark_metadata` log
(files of a batch killed before its commit are on disk but not in the log, and do not count),
a Kafka topic through confluent-kafka's consumer (the latest value of each key), and a Delta
table through delta-rs (`deltalake`), in this interpreter when it has it, else in the Spark 4.2
line's (`.venv-delta`, scripts/venv-delta.sh), which the Delta scenarios' runs use."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd

from tests.helpers import quarantine_records


def read_sqlite(path: Path, table: str) -> pd.DataFrame:
    with sqlite3.connect(path) as conn:
        return pd.read_sql_query(f'SELECT * FROM "{table}"', conn)


def read_pg(server: Any, database: str, table: str) -> pd.DataFrame:
    import psycopg

    with psycopg.connect(server.admin_dsn(database)) as conn:
        cur = conn.execute(f'SELECT * FROM "{table}"')
        return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description or ()])


def read_kafka(bootstrap: str, topic: str) -> pd.DataFrame:
    """A Kafka sink's topic as a consumer that upserts by key sees it (Spark's Kafka sink is
    at-least-once, sinks/kafka.py): every record read, the latest value of each key kept, one
    row a key."""
    from tests.services import read_topic

    return latest_by_key(read_topic(bootstrap, topic))


def latest_by_key(records: list[dict[str, Any]]) -> pd.DataFrame:
    """`records` (tests.services.read_topic's, one partition, in offset order) as the rows of
    the latest value of each key."""
    latest: dict[str | None, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        latest[record["key"]] = json.loads(record["value"])
    if not latest:  # both workloads' columns (workloads.py's rows)
        frame = pd.DataFrame(columns=["window_start", "action", "word", "count"])
    else:
        frame = pd.DataFrame(list(latest.values()))
    frame.attrs["records"] = len(records)  # for the report: keys written more than once
    return frame


#: a Delta table's current version as JSON records, by delta-rs (not Spark, not slipstream).
#: It leaves by os._exit once its output is out: deltalake 1.6.6 with pyarrow 26 aborts at the
#: interpreter's shutdown now and then ("terminate called without an active exception", exit
#: 134, after the rows were printed: 3 times in 4 here), which would read as a failed read
READ_DELTA = (
    "import os, sys, deltalake; "
    "sys.stdout.write(deltalake.DeltaTable(sys.argv[1]).to_pandas()"
    ".to_json(orient='records', date_unit='us')); sys.stdout.flush(); os._exit(0)"
)


def delta_python() -> str:
    """The interpreter that runs the Delta scenarios' CLI and reads their tables: this one when
    it is on the Spark 4.2 line with delta-spark and deltalake (the suite's 4.2 leg), else
    `$SLIPSTREAM_DELTA_PYTHON` or the repository's `.venv-delta`."""
    try:
        import delta  # noqa: F401
        import deltalake  # noqa: F401

        return sys.executable
    except ImportError:
        pass
    from tests.helpers import REPO

    python = os.environ.get("SLIPSTREAM_DELTA_PYTHON") or str(REPO / ".venv-delta/bin/python")
    if not Path(python).is_file():
        raise RuntimeError(
            f"a Delta scenario runs on the Spark 4.2 line and {python} is missing: "
            "build it with `make venv-delta` (scripts/venv-delta.sh)"
        )
    return python


def read_delta(folder: Path) -> pd.DataFrame:
    """The Delta table's rows at its latest version (an absent table holds none)."""
    if not (folder / "_delta_log").is_dir():
        return pd.DataFrame(columns=["window_start", "action", "word", "count"])
    text = subprocess.run(
        [delta_python(), "-c", READ_DELTA, str(folder)],
        check=True, capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    frame = pd.read_json(io.StringIO(text), orient="records", convert_dates=False)
    if "window_start" in frame.columns and pd.api.types.is_numeric_dtype(frame["window_start"]):
        frame["window_start"] = pd.to_datetime(frame["window_start"], unit="us", utc=True)
    return frame


def committed_files(folder: Path) -> list[Path]:
    """The files a Spark file sink committed: the newest compacted log and the batches after
    it, `add` minus `delete` (Spark's FileStreamSinkLog, format v1: a version line, then one
    JSON entry a line)."""
    log = folder / "_spark_metadata"
    if not log.is_dir():
        return []
    names = [p for p in log.iterdir() if not p.name.startswith(".")]
    batch = {p: int(p.name.split(".")[0]) for p in names if p.name.split(".")[0].isdigit()}
    compacts = [b for p, b in batch.items() if p.name.endswith(".compact")]
    start = max(compacts) if compacts else -1
    live: dict[str, bool] = {}
    for path in sorted((p for p, b in batch.items() if b >= start), key=batch.__getitem__):
        for line in path.read_text().splitlines()[1:]:
            entry = json.loads(line)
            live[entry["path"]] = entry["action"] != "delete"
    return [Path(unquote(urlparse(p).path)) for p, alive in live.items() if alive]


def read_parquet_sink(folder: Path) -> pd.DataFrame:
    files = committed_files(folder)
    if not files:
        return pd.DataFrame(columns=["window_start", "action", "count"])
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def quarantined_lines(folder: Path) -> int:
    """Records in a quarantine folder (JSON lines, one record each), committed files only."""
    return len(quarantine_records(folder))


def dead_letter_lines(folder: Path) -> int:
    """Late records in an output's dead-letter (`batch-N.jsonl` files, written whole, one
    record a line); a missing folder holds none."""
    return sum(len(f.read_text().splitlines()) for f in folder.glob("batch-*.jsonl"))
