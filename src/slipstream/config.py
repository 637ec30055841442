"""Typed, validated settings from CLI flags and an optional TOML file (flags win).

Each setting is declared once in OPTIONS: its parser, default and help. The CLI builds its flags
from that table and TOML keys use the same names, so nothing stringly-typed leaks past this module.
Unknown keys and bad values raise ConfigError before Spark starts, naming the key, the value and
what is allowed."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from slipstream.errors import ConfigError
from slipstream.specs import (
    DURATION_HELP,
    OUTPUT_MODES,
    SINK_HELP,
    TRIGGER_HELP,
    OutputMode,
    SinkSpec,
    TriggerSpec,
    parse_duration,
)

DEFAULT_DASHBOARD_PORT = 8321  # `--dashboard` without a port (a free one if it is taken)

SOURCE_KINDS = ("files", "socket", "rate", "table", "kafka")
FILE_FORMATS = ("json", "csv", "parquet", "text")


def _positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a positive integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError("a positive integer") from None
    if number <= 0 or (isinstance(value, float) and value != number):
        raise ValueError("a positive integer")
    return number


def _port(value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError("a TCP port 0-65535") from None
    if not 0 <= number <= 65535 or isinstance(value, bool):
        raise ValueError("a TCP port 0-65535")
    return number


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return text

    return parse


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("true or false")


def _path(value: Any) -> Path:
    text = str(value).strip()
    if not text:
        raise ValueError("a path")
    return Path(text).expanduser()


def _text(value: Any) -> str:
    text = str(value).strip()
    if not text:
        raise ValueError("a non-empty text")
    return text


def _conf(value: Any) -> dict[str, str]:
    """`--conf key=value` (repeatable) or a TOML table."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    items = [value] if isinstance(value, str) else list(value)
    out: dict[str, str] = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError("key=value pairs, e.g. spark.sql.shuffle.partitions=8")
        out[key.strip()] = val.strip()
    return out


def _fraction_or_none(value: Any) -> float:
    number = float(value)
    if not 0 <= number < 1:
        raise ValueError("a number in [0, 1)")
    return number


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[Any], Any]
    help: str
    allowed: str
    default: Any = None
    flag: str | None = None  # CLI flag; None => --name-with-dashes
    kind: str = "value"  # value | bool | multi
    metavar: str | None = None
    env: str | None = None
    const: Any = None  # value of the bare flag (`--dashboard` alone); None: the flag needs one


OPTIONS: tuple[Option, ...] = (
    Option(
        "source",
        _choice(*SOURCE_KINDS),
        "where input comes from (default: the pipeline's)",
        "one of " + ", ".join(SOURCE_KINDS),
        metavar="KIND",
    ),
    Option("input", _path, "input directory for the files source", "a directory", metavar="DIR"),
    Option(
        "format",
        _choice(*FILE_FORMATS),
        "file format of the files source (default: the pipeline's)",
        "one of " + ", ".join(FILE_FORMATS),
    ),
    Option("host", _text, "host of the socket source", "a host name", default="localhost"),
    Option("port", _port, "port of the socket source", "a TCP port 0-65535", default=9999),
    Option(
        "rows_per_second",
        _positive_int,
        "rows per second of the rate source",
        "a positive integer",
        default=1000,
        metavar="N",
    ),
    Option(
        "max_files_per_trigger",
        _positive_int,
        "cap on new files per micro-batch (files source)",
        "a positive integer",
        metavar="N",
    ),
    Option(
        "latest_first",
        _bool,
        "process the newest files first (files source)",
        "true or false",
        default=False,
        kind="bool",
    ),
    Option(
        "source_table", _text, "table to read with the table source", "a table name", metavar="NAME"
    ),
    Option(
        "kafka_bootstrap",
        _text,
        "Kafka bootstrap servers (kafka source)",
        "host:port[,...]",
        metavar="SERVERS",
        env="SLIPSTREAM_KAFKA_BOOTSTRAP",
    ),
    Option(
        "kafka_topic",
        _text,
        "Kafka topic to subscribe to (kafka source)",
        "a topic name",
        metavar="TOPIC",
    ),
    Option(
        "sink",
        SinkSpec.parse,
        "where results go (default: sqlite under the state dir)",
        SINK_HELP,
        metavar="SINK",
        env="SLIPSTREAM_SINK",
    ),
    Option(
        "table",
        _text,
        "output table name in a database sink (default: the pipeline's)",
        "a table name",
        metavar="NAME",
    ),
    Option(
        "mode",
        _choice(*OUTPUT_MODES),
        "output mode (default: the pipeline's)",
        "one of " + ", ".join(OUTPUT_MODES),
        metavar="MODE",
    ),
    Option(
        "trigger", TriggerSpec.parse, "when micro-batches run", TRIGGER_HELP, default=TriggerSpec()
    ),
    Option(
        "checkpoint",
        _path,
        "checkpoint directory (default: STATE_DIR/checkpoints/PIPELINE)",
        "a directory",
        metavar="DIR",
    ),
    Option(
        "state_dir",
        _path,
        "where checkpoints, the default database, quarantine and event logs live",
        "a directory",
        default=Path("state"),
        metavar="DIR",
        env="SLIPSTREAM_STATE_DIR",
    ),
    Option(
        "quarantine",
        _path,
        "where rejected records go (default: STATE_DIR/quarantine/PIPELINE)",
        "a directory",
        metavar="DIR",
    ),
    Option("window", parse_duration, "event-time window length", DURATION_HELP, metavar="DURATION"),
    Option("slide", parse_duration, "slide of a sliding window", DURATION_HELP, metavar="DURATION"),
    Option(
        "watermark",
        parse_duration,
        "how late an event may arrive and still count",
        DURATION_HELP,
        metavar="DURATION",
    ),
    Option(
        "catalog", _path, "static catalog file joined to the stream", "a CSV file", metavar="FILE"
    ),
    Option(
        "archive",
        _path,
        "also append finalised windows to Parquet here",
        "a directory",
        metavar="DIR",
    ),
    Option(
        "duration",
        parse_duration,
        "stop the run after this long",
        DURATION_HELP,
        metavar="DURATION",
    ),
    Option(
        "master",
        _text,
        "Spark master URL",
        "a Spark master URL such as local[*] or spark://host:7077",
        default="local[*]",
        metavar="URL",
        env="SLIPSTREAM_MASTER",
    ),
    Option(
        "conf",
        _conf,
        "Spark configuration pass-through (repeatable)",
        "key=value",
        default={},
        kind="multi",
        metavar="KEY=VALUE",
    ),
    Option(
        "metrics_port",
        _port,
        "serve Prometheus metrics on this port (127.0.0.1)",
        "a TCP port 0-65535",
        metavar="PORT",
    ),
    Option(
        "dashboard",
        _port,
        f"serve the live dashboard on this port (alone: {DEFAULT_DASHBOARD_PORT}; 0: any free)",
        "a TCP port 0-65535",
        metavar="PORT",
        const=DEFAULT_DASHBOARD_PORT,
    ),
    Option("bind", _text, "address servers bind to", "an IP address", default="127.0.0.1"),
    Option(
        "quiet",
        _bool,
        "print only errors and the summary",
        "true or false",
        default=False,
        kind="bool",
    ),
    Option(
        "verbose",
        _bool,
        "also print Spark's warnings and full progress",
        "true or false",
        default=False,
        kind="bool",
    ),
)
OPTION_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, typed and validated. Built by `load_settings`."""

    pipeline: str
    source: str | None = None
    input: Path | None = None
    format: str | None = None
    host: str = "localhost"
    port: int = 9999
    rows_per_second: int = 1000
    max_files_per_trigger: int | None = None
    latest_first: bool = False
    source_table: str | None = None
    kafka_bootstrap: str | None = None
    kafka_topic: str | None = None
    sink: SinkSpec | None = None
    table: str | None = None
    mode: OutputMode | None = None
    trigger: TriggerSpec = field(default_factory=TriggerSpec)
    checkpoint: Path | None = None
    state_dir: Path = Path("state")
    quarantine: Path | None = None
    window: timedelta | None = None
    slide: timedelta | None = None
    watermark: timedelta | None = None
    catalog: Path | None = None
    archive: Path | None = None
    duration: timedelta | None = None
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    dashboard: int | None = None
    bind: str = "127.0.0.1"
    quiet: bool = False
    verbose: bool = False

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    # Derived locations: one definition each.
    @property
    def checkpoint_root(self) -> Path:
        return self.checkpoint or self.state_dir / "checkpoints" / self.pipeline

    @property
    def quarantine_dir(self) -> Path:
        return self.quarantine or self.state_dir / "quarantine" / self.pipeline

    @property
    def event_log(self) -> Path:
        return self.state_dir / "events" / f"{self.pipeline}.jsonl"

    @property
    def default_database(self) -> Path:
        return self.state_dir / "slipstream.db"


assert {f.name for f in fields(Settings)} - {"pipeline"} == set(OPTION_BY_NAME)


def _parse_one(name: str, value: Any, origin: str) -> Any:
    option = OPTION_BY_NAME[name]
    try:
        return option.parse(value)
    except (ValueError, TypeError) as exc:
        shown = "***" if name == "sink" and "@" in str(value) else value
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{origin} {_display(name, origin)} has value {shown!r}; "
            f"allowed: {exc or option.allowed}",
            f"give {_display(name, origin)} {option.allowed}",
        ) from None


def _display(name: str, origin: str) -> str:
    return "--" + name.replace("_", "-") if origin == "flag" else name


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML file: top-level keys are settings (dashes or underscores allowed);
    `[conf]` is a table of Spark settings."""
    try:
        raw = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(
            "CONFIG_FILE",
            f"config file {path} does not exist",
            "pass an existing TOML file to --config",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            "CONFIG_FILE", f"config file {path} is not valid TOML: {exc}", "fix the TOML syntax"
        ) from None
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name not in OPTION_BY_NAME:
            close = difflib.get_close_matches(name, OPTION_BY_NAME, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                "CONFIG_UNKNOWN_KEY",
                f"unknown key {key!r} in {path}",
                f"{hint}known keys: {', '.join(sorted(OPTION_BY_NAME))}",
            )
        values[name] = value
    return values


def load_settings(
    pipeline: str,
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults < environment < TOML file < flags. Every value is parsed and validated here."""
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    for option in OPTIONS:
        if option.env and environ.get(option.env):
            merged[option.name] = _parse_one(option.name, environ[option.env], "environment")
    if config_file is not None:
        for name, value in read_config_file(config_file).items():
            merged[name] = _parse_one(name, value, "config")
    for name, value in (flags or {}).items():
        if name not in OPTION_BY_NAME:
            raise ConfigError(
                "CONFIG_UNKNOWN_KEY",
                f"unknown setting {name!r}",
                f"known settings: {', '.join(sorted(OPTION_BY_NAME))}",
            )
        if value is None or (OPTION_BY_NAME[name].kind == "multi" and not value):
            continue
        parsed = _parse_one(name, value, "flag")
        if name == "conf" and "conf" in merged:
            parsed = {**merged["conf"], **parsed}
        merged[name] = parsed
    settings = Settings(pipeline=pipeline, **merged)
    if settings.quiet and settings.verbose:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            "--quiet and --verbose were both given",
            "choose one of --quiet or --verbose",
        )
    return settings
