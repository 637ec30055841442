"""Typed, validated run settings from CLI flags and an optional TOML file (flags win).

Each setting is declared once in OPTIONS: its parser, default and help. The CLI builds its flags
from that table and TOML keys use the same names, so nothing stringly-typed leaks past this module.
Unknown keys and bad values raise ConfigError before Spark starts, naming the key, the value and
what is allowed.

Settings of the run are here; a pipeline's own parameters (`--window`, ...) are declared by the
pipeline (`Pipeline.params`) and travel as `Settings.params`, raw, until `runner.prepare` parses
them against that declaration. Inputs and outputs are named by the pipeline:

    --input PATH | --input NAME=PATH          [inputs.NAME] path = "..."  (or input = "PATH")
    --sink SPEC  | --sink OUTPUT=SPEC         [outputs.OUTPUT] sink = "...", table = "...",
    --table NAME | --table OUTPUT=NAME                         mode = "..."
    --mode MODE  | --mode OUTPUT=MODE
    --window 5m (a parameter)                 [params] window = "5m"
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from slipstream.core.kafka_url import KafkaTopic
from slipstream.core.options import Option
from slipstream.core.spark_format import SparkFormat
from slipstream.core.specs import (
    DEFAULT_MAX_FUTURE,
    DeltaFolder,
    OutputMode,
    SinkSpec,
    TriggerSpec,
)
from slipstream.errors import ConfigError
from slipstream.settings.connect import absolute, absolute_folder, absolute_sink, check_remote
from slipstream.settings.options import (
    DEFAULT_DASHBOARD_PORT,
    FILE_FORMATS,
    NAMED,
    OPTION_BY_NAME,
    OPTIONS,
    SOURCE_OPTION_NAMES,
)

__all__ = [
    "DEFAULT_DASHBOARD_PORT",
    "FILE_FORMATS",
    "OPTIONS",
    "Option",
    "Settings",
    "load_settings",
    "read_config_file",
]


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, typed and validated. Built by `load_settings`."""

    pipeline: str
    source: str | None = None
    input: dict[str, Path | KafkaTopic | SparkFormat] = field(
        default_factory=dict
    )  # "" = the one input
    format: str | None = None
    late_rows: bool = True  # the late-row dead-letter (runtime/deadletter.py)
    #: parse once, outputs read bronze; None: auto, decided by runtime.bind (ingest_stage.decide)
    ingest_stage: bool | None = None
    #: the pipeline's shared steps computed once per input, outputs read their rows; None: auto,
    #: decided by runtime.bind (shared_stage.decide)
    shared_stage: bool | None = None
    #: the sources' own settings given (`--host`, `--max-files-per-trigger`, ...), parsed by the
    #: declarations each source keeps (sources/); `Source.given` fills in the defaults
    source_options: dict[str, Any] = field(default_factory=dict)
    sink: dict[str, SinkSpec] = field(default_factory=dict)  # "" = every output
    table: dict[str, str] = field(default_factory=dict)  # "" = the first output
    #: Spark's query name of an output (default PIPELINE.OUTPUT; runtime/bind.py)
    query_name: dict[str, str] = field(default_factory=dict)  # "" = the first output
    mode: dict[str, OutputMode] = field(default_factory=dict)  # "" = the first output
    trigger: TriggerSpec = field(default_factory=TriggerSpec)
    checkpoint: Path | None = None
    state_dir: Path = Path("state")
    quarantine: Path | DeltaFolder | None = None
    dead_letter: Path | DeltaFolder | None = None  # None: follows the checkpoint (late_root)
    from_checkpoint: Path | None = None  # a new checkpoint starts where this one stands
    duration: timedelta | None = None
    stop_when_idle: timedelta | None = None  # runtime/idle.py
    max_future: timedelta = DEFAULT_MAX_FUTURE
    max_past: timedelta | None = None
    master: str | None = None  # None: spark-submit's --master, else local[*] (session.py)
    remote: str | None = None  # a Spark Connect URL (sc://...): no JVM in this process
    connect_wait: timedelta = timedelta(minutes=5)  # for a Connect server to accept (connect.py)
    conf: dict[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    dashboard: int | None = None
    bind: str = "127.0.0.1"
    quiet: bool = False
    verbose: bool = False
    params: dict[str, Any] = field(default_factory=dict)  # raw; parsed by the pipeline's Params

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    # Derived locations: one definition each.
    @property
    def checkpoint_root(self) -> Path:
        return self.checkpoint or self.state_dir / "checkpoints" / self.pipeline

    @property
    def quarantine_root(self) -> Path:
        if isinstance(self.quarantine, DeltaFolder):
            return self.quarantine.path
        return self.quarantine or self.state_dir / "quarantine" / self.pipeline

    @property
    def quarantine_delta(self) -> bool:
        """`--quarantine delta:DIR`: one Delta table per input under `quarantine_root`."""
        return isinstance(self.quarantine, DeltaFolder)

    @property
    def late_delta(self) -> bool:
        """`--dead-letter delta:DIR`: one Delta table per output under `late_root`."""
        return isinstance(self.dead_letter, DeltaFolder)

    @property
    def bronze_root(self) -> Path:
        """The ingest stage's typed rows, one folder per input (runtime/ingest_stage.py)."""
        return self.state_dir / "bronze" / self.pipeline

    @property
    def late_root(self) -> Path:
        """The late-row dead-letter, one folder per output (runtime/deadletter.py): the
        `dead_letter` given, else it follows the checkpoint, as a dead-letter belongs to the
        checkpoint whose batches it records: STATE_DIR/late/PIPELINE for the default checkpoint,
        STATE_DIR/late/NAME for a `--checkpoint .../NAME` (a new checkpoint, a new dead-letter)."""
        if isinstance(self.dead_letter, DeltaFolder):
            return self.dead_letter.path
        if self.dead_letter is not None:
            return self.dead_letter
        return (
            self.state_dir / "late" / (self.checkpoint.name if self.checkpoint else self.pipeline)
        )

    @property
    def event_log(self) -> Path:
        return self.state_dir / "events" / f"{self.pipeline}.jsonl"

    @property
    def default_database(self) -> Path:
        return self.state_dir / "slipstream.db"


assert {f.name for f in fields(Settings)} - {"pipeline", "params", "source_options"} == set(
    OPTION_BY_NAME
) - SOURCE_OPTION_NAMES


def _parse_one(name: str, value: Any, origin: str) -> Any:
    option = OPTION_BY_NAME[name]
    try:
        return option.parse(value)
    except (ValueError, TypeError) as exc:
        shown = "***" if name == "sink" and "@" in str(value) else value
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{origin} {_display(name, origin)} has value {shown!r}; "
            f"allowed: {exc or option.allowed_text()}",
            f"give {_display(name, origin)} {option.allowed_text()}",
        ) from None


def _display(name: str, origin: str) -> str:
    return "--" + name.replace("_", "-") if origin == "flag" else name


def _unknown(key: str, known: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    if "params" in known:
        hint += "a pipeline's own parameters go in the [params] table; "
    return ConfigError(
        "CONFIG_UNKNOWN_KEY",
        f"unknown key {key!r} in {where}",
        f"{hint}known keys: {', '.join(sorted(known))}",
    )


OUTPUT_KEYS = ("sink", "table", "mode")


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML file: top-level keys are settings (dashes or underscores allowed);
    `[conf]` is a table of Spark settings, `[params]` the pipeline's parameters,
    `[inputs.NAME]` (key `path`) and `[outputs.NAME]` (keys sink, table, mode) bind them."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
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
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "CONFIG_FILE",
            f"config file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
            f"offset {exc.start})",
            "save the file as UTF-8 (TOML files are UTF-8), e.g. iconv -f latin1 -t utf-8",
        ) from None
    except OSError as exc:  # permission denied, a folder, an I/O error
        raise ConfigError(
            "CONFIG_FILE",
            f"config file {path} cannot be read: {exc.strerror or exc}",
            "pass a readable TOML file to --config (check its permissions)",
        ) from None
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name == "params":
            out["params"] = _table(value, f"[params] of {path}")
        elif name == "inputs":
            for input_name, binding in _table(value, f"[inputs] of {path}").items():
                where = f"[inputs.{input_name}] of {path}"
                path_value = _table(binding, where) if isinstance(binding, Mapping) else binding
                if isinstance(path_value, Mapping):
                    for extra in set(path_value) - {"path"}:
                        raise _unknown(extra, ["path"], where)
                    path_value = path_value.get("path")
                out.setdefault("input", {})[input_name] = path_value
        elif name == "outputs":
            for output, table in _table(value, f"[outputs] of {path}").items():
                where = f"[outputs.{output}] of {path}"
                for item, setting in _table(table, where).items():
                    if item not in OUTPUT_KEYS:
                        raise _unknown(item, list(OUTPUT_KEYS), where)
                    out.setdefault(item, {})[output] = setting
        elif name in OPTION_BY_NAME:
            if name in NAMED and not isinstance(value, Mapping):
                value = {"": value} if name != "conf" else value
            out[name] = {**out.get(name, {}), **value} if name in NAMED else value
        else:
            known = [*OPTION_BY_NAME, "params", "inputs", "outputs"]
            raise _unknown(key, known, str(path))
    return out


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError("CONFIG_FILE", f"{where} must be a table", f"write it as {where}")
    return dict(value)


def _parse_setting(name: str, value: Any, origin: str) -> Any:
    """One setting's value; a named setting's table is parsed value by value."""
    if name in NAMED and name != "conf" and isinstance(value, Mapping):
        parsed: dict[str, Any] = {}
        for key, item in value.items():
            one = _parse_one(name, item, origin)
            parsed[key] = one[""] if "" in one else next(iter(one.values()))
        return parsed
    return _parse_one(name, value, origin)


#: session time zones that are UTC (the only one slipstream runs with)
UTC_NAMES = frozenset({"UTC", "ETC/UTC", "GMT", "Z", "+00:00", "UTC+0", "GMT+0"})


def load_settings(
    pipeline: str,
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults < environment < TOML file < flags, per name for NAME=VALUE settings and params.
    Every setting is parsed and validated here; params when the pipeline is known (prepare)."""
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    raw_params: dict[str, Any] = {}

    def put(name: str, parsed: Any) -> None:
        merged[name] = {**merged.get(name, {}), **parsed} if name in NAMED else parsed

    for option in OPTIONS:
        if option.env and environ.get(option.env):
            put(option.name, _parse_one(option.name, environ[option.env], "environment"))
    if config_file is not None:
        for name, value in read_config_file(config_file).items():
            if name == "params":
                raw_params.update(value)
            else:
                put(name, _parse_setting(name, value, "config"))
    for name, value in (flags or {}).items():
        if name not in OPTION_BY_NAME:
            raise ConfigError(
                "CONFIG_UNKNOWN_KEY",
                f"unknown setting {name!r}",
                f"known settings: {', '.join(sorted(OPTION_BY_NAME))}",
            )
        if value is None or (OPTION_BY_NAME[name].kind == "multi" and not value):
            continue
        put(name, _parse_one(name, value, "flag"))
    raw_params.update({k: v for k, v in (params or {}).items() if v is not None})
    source_options = {k: merged.pop(k) for k in list(merged) if k in SOURCE_OPTION_NAMES}
    settings = Settings(
        pipeline=pipeline, params=raw_params, source_options=source_options, **merged
    )
    zone = settings.conf.get("spark.sql.session.timeZone")
    if zone is not None and zone.strip().upper() not in UTC_NAMES:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--conf spark.sql.session.timeZone={zone}: slipstream reads zone-less times as UTC "
            "and stores every timestamp as UTC text ending in Z; another session zone would "
            "shift them",
            "drop that --conf (results are UTC; convert to local time where you read them)",
        )
    if settings.remote is not None:
        # a Connect server resolves a relative path against its own working directory
        check_remote(settings.remote, settings.conf, master_given="master" in merged)
        settings = settings.with_(
            input={
                name: absolute(path) if isinstance(path, Path) else path  # a kafka:// topic
                for name, path in settings.input.items()
            },
            checkpoint=absolute(settings.checkpoint),
            state_dir=absolute(settings.state_dir),
            quarantine=absolute_folder(settings.quarantine),
            dead_letter=absolute_folder(settings.dead_letter),
            from_checkpoint=absolute(settings.from_checkpoint),
            sink={name: absolute_sink(spec) for name, spec in settings.sink.items()},
        )
    if settings.quiet and settings.verbose:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            "--quiet and --verbose were both given",
            "choose one of --quiet or --verbose",
        )
    return settings
