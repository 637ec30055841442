"""What a pipeline declares, in one module, and nothing about how it is run.

A pipeline names
- its *inputs*: streams (read by a source, parsed, bad records quarantined per input) and static
  tables (read as a batch at each micro-batch, for stream-static joins), each with its format,
  schema, required fields and event-time column;
- its *parameters*: typed, with defaults and help; they become its own flags (`slipstream run
  PIPELINE --help`) and its `[params]` TOML table;
- its *outputs*: each its own query, with its own checkpoint folder, table, key, the modes it
  offers and its default sink;

and `build`s one lazy DataFrame per output from the valid records of its inputs. The runner
does the rest: sources, parsing and quarantine, the rules (read from each output's analyzed plan,
never declared by hand), sinks, checkpoints and monitoring."""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType, TimestampType

from slipstream.api.schema import parse_ddl
from slipstream.core import values
from slipstream.core.specs import DURATION_HELP, OutputMode, SinkSpec
from slipstream.core.values import NAME
from slipstream.errors import ConfigError
from slipstream.ingest.expectations import Expectation
from slipstream.settings.options import OPTION_BY_NAME

__all__ = [  # the declarations (slipstream.api offers them with the rest)
    "Input",
    "Output",
    "Param",
    "Params",
    "Pipeline",
    "choice_param",
    "count_param",
    "dedup_param",
    "duration_param",
    "event_stream",
]


@dataclass(frozen=True)
class Input:
    """One named input. A stream is read by the run's source (`--source`, files by default);
    a static table is a file read as a batch at every micro-batch (replace it atomically and
    the next batch sees the new content). `schema` is a StructType or a Spark DDL string
    (`"id STRING, ts TIMESTAMP"`), parsed once into a StructType here."""

    name: str
    schema: StructType | None = None  # None: text lines in a `value` column; str: Spark DDL
    format: str = "json"  # json | csv | text | parquet
    required: tuple[str, ...] = ()
    #: the column watermarks and windows use: a timestamp field of `schema`; the runner's
    #: event-time guard (--max-future, --max-past) quarantines rows outside its bounds
    event_time: str | None = None
    static: bool = False
    sources: tuple[str, ...] = ("files",)  # stream inputs: the kinds offered, first is default
    help: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.schema, str):
            object.__setattr__(self, "schema", parse_ddl(self.schema))


#: where an event stream may come from: landing files (the default), a table, Kafka
EVENT_SOURCES = ("files", "table", "kafka")


def event_stream(
    name: str,
    schema: StructType | str,
    event_time: str,
    required: tuple[str, ...],
    help: str = "",
    sources: tuple[str, ...] = EVENT_SOURCES,
) -> Input:
    """The usual stream input: JSON lines with an event-time column, from files, a table or
    Kafka; `help` defaults to "JSON lines {FIELD, ...}"."""
    struct = parse_ddl(schema) if isinstance(schema, str) else schema  # as Input would
    spec = Input(name, struct, required=required, event_time=event_time, sources=sources)
    assert spec.schema is not None
    fields = ", ".join(spec.schema.fieldNames())
    return replace(spec, help=help or f"JSON lines {{{fields}}}")


@dataclass(frozen=True)
class Param:
    """One parameter of a pipeline: `--NAME` on the command line, `NAME` in `[params]`.
    `parse` gets the raw text or TOML value and raises ValueError saying what is allowed
    (slipstream.core.values has the usual ones); `default` is used as is (None: not set)."""

    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    allowed: str
    metavar: str = "VALUE"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Output:
    """One named output: its own query and checkpoint folder. `sink` is the default sink
    (None: the output is off unless `--sink NAME=SPEC` turns it on; a file kind without a
    folder, such as "parquet", writes under `STATE_DIR/outputs/PIPELINE/OUTPUT`); `table`
    defaults to the name; the first of `modes` is the default (append for file sinks when
    offered)."""

    name: str
    key: tuple[str, ...] = ()
    modes: tuple[OutputMode, ...] = ("append",)
    table: str = ""
    sink: str | None = "sqlite"
    help: str = ""

    @property
    def table_name(self) -> str:
        return self.table or self.name


def duration_param(name: str, default: timedelta | None, text: str) -> Param:
    """A duration parameter (`--window 5m`); with default None it may be left unset."""
    parse = values.optional_duration if default is None else values.duration
    return Param(name, parse, default, text, DURATION_HELP, "DURATION")


def choice_param(name: str, choices: tuple[str, ...], text: str, metavar: str = "KIND") -> Param:
    """A parameter taking one of `choices`, the first by default (`--join inner`)."""
    return Param(name, values.choice(*choices), choices[0], text, " or ".join(choices), metavar)


#: `--dedup`: `auto` is `event-time` under a real-time trigger, `within-watermark` otherwise;
#: `timers` keeps what `within-watermark` keeps at a batch cost that does not grow with the ids
#: held (api/frames.py: DEDUP_FORMS, dedup_difference)
DEDUP_CHOICES = ("auto", "within-watermark", "event-time", "timers")


def dedup_param(text: str) -> Param:
    """How a re-sent record is kept once (`--dedup auto`): Pipeline.for_trigger resolves
    `auto` from the run's trigger, so `check` shows and the checkpoint records the form used."""
    return choice_param("dedup", DEDUP_CHOICES, text, "FORM")


def count_param(name: str, default: float, text: str) -> Param:
    """A positive count (`--burst 30`, an int default) or rate (`--max-per-minute 1.0`)."""
    if isinstance(default, int):
        allowed = f"an integer from 1 to {values.MAX_COUNT:,}"
        return Param(name, values.positive_int, default, text, allowed, "N")
    allowed = f"a number above 0 and at most {values.MAX_COUNT:,}"
    return Param(name, values.positive_number, default, text, allowed, "N")


class Params(Mapping[str, Any]):
    """A pipeline's parameter values, parsed: `params.window` or `params["window"]`."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"no parameter {name!r}") from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Params({self._values!r})"


class Pipeline(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    inputs: ClassVar[tuple[Input, ...]]
    outputs: ClassVar[tuple[Output, ...]]
    params: ClassVar[tuple[Param, ...]] = ()
    #: Python data sources (`pyspark.sql.datasource.DataSource` subclasses) registered on the
    #: session before the inputs are read, so that an input can read `format:NAME` (their
    #: `name()`); docs/howto/any-source.md
    data_sources: ClassVar[tuple[type, ...]] = ()
    #: the stream inputs whose first steps every output shares (`shared`): a finite run on a
    #: new checkpoint computes them once, in one query per input, and the outputs read its rows
    #: (runtime/shared_stage.py)
    shared_inputs: ClassVar[tuple[str, ...]] = ()

    def sample_files(self) -> list[Path]:
        """Bundled input files `slipstream samples NAME` copies, in landing order (none)."""
        return []

    @abstractmethod
    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> Mapping[str, DataFrame]:
        """The valid, typed records of each input (static tables as read) -> one lazy
        DataFrame per output name. Outputs left off (no sink) may be missing or are ignored."""

    def shared(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> Mapping[str, DataFrame]:
        """The steps every output takes first on each input of `shared_inputs` (a watermark and
        a deduplication), one frame per input named there; `build` receives them in place of
        the inputs. Stateless steps and a watermark-bound deduplication only: their rows are
        appended to files that the outputs read under the same watermark."""
        return {}

    def assemble(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> Mapping[str, DataFrame]:
        """Every output over one read of the inputs: `build` over `shared`'s frames."""
        return self.build(spark, {**inputs, **self.shared(spark, inputs, params)}, params)

    def expectations(self, input_name: str, params: Params) -> Sequence[Expectation]:
        """Data-quality rules on one stream input's valid records (slipstream.ingest
        .expectations): counted, dropped to the quarantine or failing, before `build`."""
        return ()

    def for_trigger(self, params: Params, trigger: str) -> Params:
        """The parameters as a run under `trigger` (its kind: `real-time`, `processing-time`,
        ...) uses them: `--dedup auto` becomes `event-time` under real-time mode (Spark 4.3 runs
        no dropDuplicatesWithinWatermark there) and `within-watermark` otherwise."""
        if params.get("dedup") != "auto":
            return params
        form = "event-time" if trigger == "real-time" else "within-watermark"
        return Params({**params, "dedup": form})

    def notes(self, params: Params) -> Sequence[str]:
        """What `check` adds about this pipeline under these parameters: lines, each starting
        with its label padded to 12 characters, as `check` prints its own."""
        return ()

    def validate(self, params: Params, paths: Mapping[str, Path | None]) -> None:
        """Checks of parameters and input files that need this pipeline's knowledge, before
        Spark starts (raise ConfigError naming the flag and the fix). `paths` by input name."""

    #: how the dashboard orders the first output's rows (tools/views.py): (SQL ORDER BY, or
    #: None for the sink's own newest-first order; the title's words)
    results_order: ClassVar[tuple[str | None, str]] = (None, "newest rows first")

    # -- derived, for the runner and the CLI --------------------------------------------------

    @classmethod
    def stream_inputs(cls) -> tuple[Input, ...]:
        return tuple(i for i in cls.inputs if not i.static)

    @classmethod
    def input(cls, name: str) -> Input:
        return _named(cls.inputs, name, "input", cls.name, "--input NAME=PATH")

    @classmethod
    def output(cls, name: str) -> Output:
        return _named(cls.outputs, name, "output", cls.name, "--sink NAME=SPEC")

    def parse_params(self, raw: Mapping[str, Any]) -> Params:
        """Raw values (flags, `[params]`) -> Params, defaults filled; an unknown name or a bad
        value fails here, before Spark starts, naming the key and what is allowed."""
        declared = {p.name: p for p in self.params}
        out = {p.name: p.default for p in self.params}
        for key, value in raw.items():
            name = key.replace("-", "_")
            param = declared.get(name)
            if param is None:
                close = difflib.get_close_matches(name, declared, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                known = ", ".join(sorted(declared)) or "none"
                raise ConfigError(
                    "CONFIG_UNKNOWN_KEY",
                    f"pipeline {self.name} has no parameter {key!r}",
                    f"{hint}its parameters: {known} (slipstream run {self.name} --help)",
                )
            if value is None:
                continue
            try:
                out[name] = param.parse(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"{param.flag} has value {value!r}; allowed: {exc or param.allowed}",
                    f"give {param.flag} {param.allowed}",
                ) from None
        return Params(out)

    def default_mode(self, output: Output, sink: SinkSpec, trigger: str = "") -> OutputMode:
        """The first of the output's modes; append into files when offered; update under a
        real-time trigger when offered (the only mode Spark's real-time mode runs)."""
        if sink.is_file_sink and "append" in output.modes:
            return "append"
        if trigger == "real-time" and "update" in output.modes:
            return "update"
        return output.modes[0]


_In = TypeVar("_In", Input, Output)  # what _named finds: an input or an output


def _named(items: tuple[_In, ...], name: str, what: str, pipeline: str, flag: str) -> _In:
    for item in items:
        if item.name == name:
            return item
    known = ", ".join(i.name for i in items)
    raise ConfigError(
        "CONFIG_UNKNOWN_KEY",
        f"pipeline {pipeline} has no {what} named {name!r}",
        f"its {what}s: {known} ({flag})",
    )


def check_declaration(pipeline: Pipeline) -> None:
    """A pipeline's declaration holds together: at least one stream input and one output,
    unique identifier names, parameters that do not shadow a run setting's flag."""

    problems = []
    if not pipeline.stream_inputs():
        problems.append("declares no stream input (Input(..., static=False))")
    if not pipeline.outputs:
        problems.append("declares no output")
    for what, items in (
        ("input", pipeline.inputs),
        ("output", pipeline.outputs),
        ("parameter", pipeline.params),
    ):
        names = [i.name for i in items]
        for name in names:
            if not NAME.match(name) or name.startswith("_"):
                problems.append(f"{what} name {name!r} is not a lower-case identifier")
            if names.count(name) > 1:
                problems.append(f"{what} {name!r} is declared twice")
    for spec in pipeline.inputs:
        problems += _event_time_problems(spec)
    reserved = set(OPTION_BY_NAME) | {"config", "help", "pipeline"}
    for param in pipeline.params:
        if param.name in reserved:
            problems.append(f"parameter {param.name!r} would shadow the run setting {param.flag}")
    if problems:
        raise ConfigError(
            "PIPELINE_INVALID",
            f"pipeline {getattr(pipeline, 'name', '?')}: " + "; ".join(dict.fromkeys(problems)),
            "fix the pipeline's inputs, outputs and params declarations",
        )


def _event_time_problems(spec: Input) -> list[str]:
    """An input's event-time column is a timestamp field of its schema (the guard reads it)."""
    if spec.event_time is None or spec.static:
        return []
    fields = {f.name: f.dataType for f in spec.schema.fields} if spec.schema is not None else {}
    if not isinstance(fields.get(spec.event_time), TimestampType):
        return [
            f"input {spec.name!r}: event_time {spec.event_time!r} is not a timestamp field "
            "of its schema"
        ]
    return []
