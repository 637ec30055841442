"""Every run setting, declared once: its parser, default, help and flag (see config.py).

The CLI builds its flags from OPTIONS; TOML keys and environment variables use the same
declarations. A source's own settings (`--host`, `--max-files-per-trigger`, ...) are declared
with the source and gathered here; a pipeline's own parameters are declared by the pipeline."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.core.specs import (
    DEFAULT_MAX_FUTURE,
    DURATION_HELP,
    MAX_DURATION,
    OUTPUT_MODES,
    TRIGGER_HELP,
    DeltaFolder,
    SinkSpec,
    TriggerSpec,
    parse_duration,
    sink_help,
)
from slipstream.sources.registry import source_options, sources

DEFAULT_DASHBOARD_PORT = 8321  # `--dashboard` without a port (a free one if it is taken)

FILE_FORMATS = ("json", "csv", "parquet", "text")


QUERY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def query_name(value: object) -> str:
    """A Spark query name (`--query-name`): a word of letters, digits, '_', '-' and '.'."""
    name = values.text(value)
    if not QUERY_NAME.fullmatch(name):
        raise ValueError("letters, digits, '_', '-' and '.' (up to 128), e.g. counts_to_lake")
    return name


def source_kind(value: object) -> str:
    """A source's kind: of one in sources/ or one registered since (sources/registry.py)."""
    return values.choice(*sources())(value)


def records_folder(value: object) -> Path | DeltaFolder:
    """Where rejected or late records go: a folder of files, or `delta:DIR` for Delta tables."""
    text = str(value).strip()
    if text.startswith("delta:"):
        return DeltaFolder(values.path(text.removeprefix("delta:")))
    return values.path(text)


def _source_kinds() -> str:
    return "one of " + ", ".join(sources())


RUN_OPTIONS: tuple[Option, ...] = (
    Option(
        "source",
        source_kind,
        "where stream input comes from (default: the pipeline's)",
        _source_kinds,
        metavar="KIND",
    ),
    Option(
        "input",
        values.named(values.input_location),
        "where an input is: PATH for a one-input pipeline, NAME=PATH for a named one "
        "(repeatable; a directory for a stream, a file for a table; a stream may be a Kafka "
        "topic: kafka://HOST:PORT/TOPIC?startingOffsets=earliest)",
        "PATH, NAME=PATH or [NAME=]kafka://HOST:PORT/TOPIC[?OPTION=VALUE&...]",
        default={},
        kind="multi",
        metavar="[NAME=]PATH",
    ),
    Option(
        "format",
        values.choice(*FILE_FORMATS),
        "file format of the stream inputs (default: the pipeline's)",
        "one of " + ", ".join(FILE_FORMATS),
    ),
    Option(
        "ingest_stage",
        values.boolean_or_auto,
        "read and parse each stream input once, in one ingest query that writes the valid typed "
        "rows to STATE_DIR/bronze and the rejected ones to the quarantine; every output reads "
        "the typed rows. auto (the default): a checkpoint goes on as it was made; a new one "
        "uses the stage only for a Delta quarantine, which its ingest query writes "
        "(runtime/ingest_stage.py)",
        "true, false or auto",
        default=None,
        metavar="BOOL|auto",
    ),
    Option(
        "shared_stage",
        values.boolean_or_auto,
        "compute the steps every output of the pipeline takes first (`Pipeline.shared`: "
        "sensors' watermark and deduplication) once, in one query per input that appends its "
        "rows to files in its checkpoint; every output reads them. auto (the default): a "
        "checkpoint goes on as it was made; a new one uses the stage in a finite run "
        "(available-now, once) of two or more outputs (runtime/shared_stage.py)",
        "true, false or auto",
        default=None,
        metavar="BOOL|auto",
    ),
    Option(
        "late_rows",
        values.boolean,
        "write the rows Spark drops as late to STATE_DIR/late (each batch's files are read "
        "once more after its commit); false: only count them",
        "true or false",
        default=True,
        metavar="BOOL",
    ),
    Option(
        "sink",
        values.named(SinkSpec.parse),
        "where results go: SPEC for every output, OUTPUT=SPEC for one (repeatable; default: "
        "each output's own, sqlite under the state dir)",
        sink_help,
        default={},
        kind="multi",
        metavar="[OUTPUT=]SINK",
        env="SLIPSTREAM_SINK",
    ),
    Option(
        "table",
        values.named(values.text),
        "table name in a database sink: NAME for the first output, OUTPUT=NAME for one "
        "(default: the output's)",
        "a table name",
        default={},
        kind="multi",
        metavar="[OUTPUT=]NAME",
    ),
    Option(
        "query_name",
        values.named(query_name),
        "Spark's name of an output's query (queryName; in the Spark UI and the event log's "
        "progress): NAME for the first output, OUTPUT=NAME for one (default: PIPELINE.OUTPUT)",
        "letters, digits, '_', '-' and '.'",
        default={},
        kind="multi",
        metavar="[OUTPUT=]NAME",
    ),
    Option(
        "mode",
        values.named(values.choice(*OUTPUT_MODES)),
        "output mode: MODE for the first output, OUTPUT=MODE for one (default: the output's)",
        "one of " + ", ".join(OUTPUT_MODES),
        default={},
        kind="multi",
        metavar="[OUTPUT=]MODE",
    ),
    Option(
        "trigger",
        TriggerSpec.parse,
        "when micro-batches run",
        TRIGGER_HELP,
        default=TriggerSpec(),
    ),
    Option(
        "checkpoint",
        values.path,
        "checkpoint directory (default: STATE_DIR/checkpoints/PIPELINE; one folder per output)",
        "a directory",
        metavar="DIR",
    ),
    Option(
        "state_dir",
        values.path,
        "where checkpoints, the default database, quarantine and event logs live",
        "a directory",
        default=Path("state"),
        metavar="DIR",
        env="SLIPSTREAM_STATE_DIR",
    ),
    Option(
        "quarantine",
        records_folder,
        "where rejected records go (default: STATE_DIR/quarantine/PIPELINE; one folder of JSON "
        "files per input), or delta:DIR for one Delta table per input (the Spark 4.2 line, "
        "docs/howto/delta.md)",
        "a directory, or delta:DIR",
        metavar="DIR",
    ),
    Option(
        "dead_letter",
        records_folder,
        "where late rows go, one folder of JSON-lines files per output (default: "
        "STATE_DIR/late/PIPELINE, or STATE_DIR/late/NAME beside a --checkpoint DIR named NAME), "
        "or delta:DIR for one Delta table per output (the Spark 4.2 line, docs/howto/delta.md)",
        "a directory, or delta:DIR",
        metavar="DIR",
    ),
    Option(
        "from_checkpoint",
        values.path,
        "start a NEW checkpoint (a new --state-dir or --checkpoint) where OLD stands: a files "
        "input skips every file OLD read, a Kafka input starts at OLD's offsets; every output "
        "is rebuilt from there (docs/howto/upgrades.md, Changing a pipeline). Recorded in the "
        "new checkpoint: a restart needs no flag",
        "the old version's state dir or checkpoint folder",
        metavar="OLD",
    ),
    Option(
        "max_future",
        values.duration,
        "quarantine a record whose event time is more than this after the batch's time, before "
        "the watermark sees it (every input with an event-time column; default 1 day)",
        DURATION_HELP + f", at most {MAX_DURATION.days} days",
        default=DEFAULT_MAX_FUTURE,
        metavar="DURATION",
    ),
    Option(
        "max_past",
        values.optional_duration,
        "quarantine a record whose event time is more than this before the batch's time "
        "(default: off, no lower bound)",
        DURATION_HELP + f", at most {MAX_DURATION.days} days, or off",
        metavar="DURATION",
    ),
    Option(
        "duration",
        parse_duration,
        "stop the run after this long",
        DURATION_HELP,
        metavar="DURATION",
    ),
    Option(
        "stop_when_idle",
        parse_duration,
        "stop the run once its queries have run no batch and found no data for this long: a "
        "run whose input ends (a socket whose server closed, a folder nobody writes to) ends "
        "by itself, at a batch boundary",
        DURATION_HELP,
        metavar="DURATION",
    ),
    Option(
        "master",
        values.text,
        "Spark master URL: local[*], spark://HOST:7077, yarn, k8s://https://HOST:443 "
        "(default: spark-submit's --master under spark-submit, else local[*]; on a cluster the "
        "driver's address comes from --conf spark.driver.host or SLIPSTREAM_DRIVER_HOST)",
        "a Spark master URL such as local[*] or spark://host:7077",
        metavar="URL",
        env="SLIPSTREAM_MASTER",
    ),
    Option(
        "remote",
        values.connect_url,
        "run through a Spark Connect server instead of a local JVM (not with --master); paths "
        "are the server's",
        "a Spark Connect URL such as sc://127.0.0.1:15002",
        metavar="sc://HOST:PORT",
        env="SPARK_REMOTE",
    ),
    Option(
        "connect_wait",
        parse_duration,
        "how long to wait for a Spark Connect server (--remote) that does not accept "
        "connections yet, saying so meanwhile (default 5m)",
        DURATION_HELP,
        default=timedelta(minutes=5),
        metavar="DURATION",
    ),
    Option(
        "conf",
        values.conf,
        "Spark configuration pass-through (repeatable)",
        "key=value",
        default={},
        kind="multi",
        metavar="KEY=VALUE",
    ),
    Option(
        "metrics_port",
        values.port,
        "serve Prometheus metrics on this port (127.0.0.1)",
        "an integer from 0 to 65,535",
        metavar="PORT",
    ),
    Option(
        "dashboard",
        values.port,
        f"serve the live dashboard on this port (alone: {DEFAULT_DASHBOARD_PORT}; 0: any free)",
        "an integer from 0 to 65,535",
        metavar="PORT",
        const=DEFAULT_DASHBOARD_PORT,
    ),
    Option("bind", values.text, "address servers bind to", "an IP address", default="127.0.0.1"),
    Option(
        "quiet",
        values.boolean,
        "print only errors and the summary",
        "true or false",
        default=False,
        kind="bool",
    ),
    Option(
        "verbose",
        values.boolean,
        "also print Spark's warnings and full progress",
        "true or false",
        default=False,
        kind="bool",
    ),
)
#: every setting: the run's, then each source's own (declared with the source, sources/)
OPTIONS: tuple[Option, ...] = (*RUN_OPTIONS, *source_options())
OPTION_BY_NAME = {o.name: o for o in OPTIONS}
#: the settings that belong to a source, kept in `Settings.source_options`
SOURCE_OPTION_NAMES = frozenset(o.name for o in source_options())
#: settings given as NAME=VALUE pairs, merged name by name (flags over TOML over environment)
NAMED = ("input", "sink", "table", "query_name", "mode", "conf")
