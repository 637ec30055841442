"""Shared test utilities (not fixtures): subprocess runs of the CLI, independent computations."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
MOBILE_SAMPLES = SRC / "slipstream" / "data" / "mobile"
#: when the hand-written events of the pipeline tests start
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: float) -> datetime:
    """T0 + `minutes`, to the millisecond."""
    return T0 + timedelta(milliseconds=round(minutes * 60_000))


def iso_at(minutes: float) -> str:
    """`at(minutes)` as an event's time is written: ISO-8601 UTC with milliseconds."""
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def landed_batches(folder: Path, stream: str) -> list[list[str]]:
    """The lines of a generated stream's files (`STREAM-*.jsonl`), one list a file, in order."""
    return [p.read_text().splitlines() for p in sorted(folder.glob(f"{stream}-*.jsonl"))]


#: JVM options of the tests' JVMs (the driver JVM in client mode reads SPARK_SUBMIT_OPTS): the
#: C1 compiler alone and the serial collector, as the crash suite passes them. `slipstream run
#: mobile` over the samples: 143-167 s without, 56-80 s with, on 2 cores at load 27
#: (2026-11-27); the test session's JVM takes them too (tests/conftest.py).
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPSTREAM_")}
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env["TZ"] = "UTC"
    env.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)
    env.update(extra)
    return env


def slipstream(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a real subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "slipstream", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
        cwd=cwd,
    )


def check_in_process(spark: Any, pipeline: str, workdir: Path, *args: str) -> str:
    """What `slipstream check PIPELINE ARGS` prints, parsed by the CLI's own parser and run in
    this process on the test's session (it builds the queries and reads their plans; none
    starts). The `--input` folders that do not exist are made (a table's file is given as is)."""
    from slipstream.app.commands import check
    from slipstream.app.parser import build_parser, pipeline_of, settings_from_args

    argv = ["check", pipeline, "--state-dir", str(workdir / "state"), *args]
    parsed = build_parser(pipeline_of(argv)).parse_args(argv)
    for value in parsed.input or []:
        if not (folder := Path(value.rpartition("=")[2])).exists():
            folder.mkdir(parents=True)
    out = io.StringIO()
    assert check(settings_from_args(parsed), out, spark) == 0, out.getvalue()
    return out.getvalue()


def built(spark: Any, pipeline: Any, folder: Path, params: dict[str, str], **tables: Path) -> Any:
    """`pipeline.assemble` over JSON streams of its stream inputs' schemas read from `folder` and
    the CSV `tables` given by input name: the frames whose plans `check` reads (none starts)."""
    inputs = {
        spec.name: spark.readStream.schema(spec.schema).json(str(folder))
        for spec in pipeline.stream_inputs()
    }
    for name, path in tables.items():
        schema = pipeline.input(name).schema
        inputs[name] = spark.read.schema(schema).option("header", True).csv(str(path))
    return pipeline.assemble(spark, inputs, pipeline.parse_params(params))


def _utc(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def mobile_counts(lines: list[str], window: str = "10min") -> pd.DataFrame:
    """Seed 003's counts computed independently with pandas (valid records only)."""
    frame = pd.read_json(
        io.StringIO("\n".join(lines)), lines=True, dtype={"id": str, "action": str}
    )
    # each timestamp on its own: pandas parses a mixed column of offset and naive ISO strings
    # with the first offset it sees; a naive time means UTC (the session time zone)
    frame["ts"] = pd.to_datetime([_utc(t) for t in frame["ts"]], utc=True)
    frame["window_start"] = frame["ts"].dt.floor(window)
    counts = frame.groupby(["window_start", "action"]).size().rename("count").reset_index()
    counts["window_start"] = counts["window_start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return counts.sort_values(["window_start", "action"]).reset_index(drop=True)


def late_records(state_dir: Path, pipeline: str, output: str) -> dict[int, list[dict[str, Any]]]:
    """An output's late-row dead-letter (`STATE_DIR/late/PIPELINE/OUTPUT/batch-N.jsonl`):
    batch id -> its late records."""
    import json

    found = {}
    for path in sorted((Path(state_dir) / "late" / pipeline / output).glob("batch-*.jsonl")):
        found[int(path.stem.split("-")[1])] = [json.loads(x) for x in path.read_text().splitlines()]
    return found


def data_batch_ids(checkpoint: Path) -> list[int]:
    """The ids of a query's committed batches that read data (a source's offset moved), in
    order. An id missing between two is a no-data batch Spark ran for a new watermark (a
    query that caught up with its input), which moves the watermark later rows are judged by
    (`stream_reference.counted`'s `ids`)."""
    from slipstream.checkpoint.logs import batch_offsets

    commits = Path(checkpoint) / "commits"
    committed = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    ids: list[int] = []
    before: tuple[Any, ...] | None = None
    for batch in committed:
        sources = batch_offsets(Path(checkpoint), batch).sources
        if sources != before:
            ids.append(batch)
        before = sources
    return ids


def window_end(moment: datetime, length: timedelta) -> datetime:
    """The end (exclusive) of the epoch-aligned tumbling window of `length` holding `moment`."""
    since = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return moment - (since % length) + length


def late_by_window_end(
    batches: list[list[dict[str, Any]]], window: timedelta, delay: timedelta, time: str = "ts"
) -> tuple[list[tuple[dict[str, Any], datetime]], list[dict[str, Any]]]:
    """What Spark's watermark drops from a windowed aggregation fed batch by batch, each batch
    followed by the no-data batch its new watermark calls for: a row is late when its window
    ends at or before the watermark the batches before it made (their newest event time -
    `delay`; the epoch before any). Returns (each late row with that watermark, the rows kept)."""
    late: list[tuple[dict[str, Any], datetime]] = []
    kept: list[dict[str, Any]] = []
    newest: datetime | None = None
    for rows in batches:
        mark = newest - delay if newest else datetime(1970, 1, 1, tzinfo=UTC)
        for row in rows:
            moment = _utc(row[time])
            (late.append((row, mark)) if window_end(moment, window) <= mark else kept.append(row))
        newest = max([*([newest] if newest else []), *(_utc(r[time]) for r in rows)], default=None)
    return late, kept


def quarantine_records(folder: Path) -> list[dict[str, Any]]:
    """The records a quarantine folder holds for good, read without slipstream's reader: the
    files an older version's file sink logged in `_spark_metadata`, the ingest stage's
    `batch-N.json`, and the task files `batch-B.APP.part-P.json` of each batch at or below the
    last commit of the checkpoint its mark (`.slipstream-output`) names, of each batch the
    application whose files are newest (a batch run again after a SIGKILL wrote its records
    again under a new application; the files of a batch never committed do not count)."""
    import json
    import re
    from urllib.parse import unquote, urlparse

    folder = Path(folder)
    if not folder.is_dir():
        return []
    files: list[Path] = []
    log = folder / "_spark_metadata"
    if log.is_dir():
        live: dict[str, bool] = {}
        entries = sorted(
            (p for p in log.iterdir() if p.name.split(".")[0].isdigit()),
            key=lambda p: int(p.name.split(".")[0]),
        )
        for entry in entries:
            for line in entry.read_text().splitlines()[1:]:
                item = json.loads(line)
                live[item["path"]] = item["action"] != "delete"
        files += [Path(unquote(urlparse(p).path)) for p, alive in live.items() if alive]
    files += [p for p in folder.glob("batch-*.json") if re.fullmatch(r"batch-\d+\.json", p.name)]
    tasks = [
        (int(m[1]), m[2], p)
        for p in folder.glob("batch-*.part-*.json")
        if (m := re.fullmatch(r"batch-(\d+)\.(.+)\.part-\d+\.json", p.name))
    ]
    if tasks:
        mark = json.loads((folder / ".slipstream-output").read_text())
        commits = Path(mark["checkpoint"]) / "commits"
        done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
        last = max(done, default=-1)
        newest: dict[int, tuple[float, str]] = {}
        for batch, app, path in tasks:
            when = path.stat().st_mtime
            if batch <= last and when >= newest.get(batch, (0.0, ""))[0]:
                newest[batch] = (when, app)
        files += [p for b, app, p in tasks if b in newest and newest[b][1] == app]
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]
