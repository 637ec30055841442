"""Settings + a pipeline -> everything a run decides before Spark starts (no Spark here).

Each input is bound to its path, source, format and quarantine folder; each output to its sink,
table, mode and checkpoint folder; the parameters are parsed against the pipeline's
declaration. Every check that needs only these (missing or unknown names, bad values, a file
sink in update mode, a mode the output does not offer) fails here, naming the flag and the fix.
The rules that need the query's shape run in `runner` on the plans Spark analyzed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from slipstream.analysis.validate import settings_violations
from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.checkpoint.lifecycle import query_checkpoint
from slipstream.core import spark_line
from slipstream.core.kafka_url import KafkaTopic
from slipstream.core.spark_format import SparkFormat
from slipstream.core.specs import SinkSpec, sink_kinds
from slipstream.errors import ConfigError, ValidationError
from slipstream.ingest.expectations import check_expectations
from slipstream.ingest.guard import EventTimeGuard
from slipstream.pipelines import get_pipeline
from slipstream.runtime import shared_stage
from slipstream.runtime.bound import QUARANTINE, BoundInput, BoundOutput, Prepared, QueryKind
from slipstream.runtime.from_checkpoint import apply, start_from
from slipstream.runtime.ingest_stage import applies, decide, refuse_unstaged_delta
from slipstream.settings.config import Settings
from slipstream.settings.connect import sink_violations
from slipstream.sinks import Sink, SinkContext, make_sink
from slipstream.sinks.database import check_table
from slipstream.sinks.quarantine import QuarantineFolder
from slipstream.sinks.registry import sink_class
from slipstream.sources.base import Binding
from slipstream.sources.registry import get_source, kinds_that, sources


def prepare(
    settings: Settings,
    pipeline: Pipeline | None = None,
    *,
    sink: Sink | None = None,
    check_source: bool = True,
    check_rules: bool = True,
) -> Prepared:
    """Bind inputs, parameters and outputs; `sink` replaces the first output's (tests);
    `check_source=False` skips the checks of input paths (reset, stop); `check_rules=False`
    leaves the modes and sinks to `runtime.checks`, which knows the plan (`slipstream check`)."""
    pipeline = pipeline or get_pipeline(settings.pipeline)
    if settings.pipeline != pipeline.name:  # `module:Class`: its state goes under its name
        settings = settings.with_(pipeline=pipeline.name)
    params = pipeline.for_trigger(pipeline.parse_params(settings.params), settings.trigger.kind)
    if settings.remote and params.get("dedup") == "timers":
        raise ConfigError(
            "CONNECT_NOT_SUPPORTED",
            "--dedup timers under --remote: its processor is built in the "
            "driver's JVM, and a Spark Connect client has none",
            "use --dedup within-watermark (the same rows) or auto under --remote",
        )
    if settings.late_delta:
        spark_line.require_delta()  # the quarantine's: its Delta sink's, when it is made
    _refuse_unknown(pipeline, settings.input, "input", "--input")
    streams = pipeline.stream_inputs()
    if "" in settings.input and len(streams) != 1:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--input {settings.input['']}: pipeline {pipeline.name} reads "
            f"{len(streams)} streams, so a path must say which",
            "name each: " + " ".join(f"--input {i.name}=PATH" for i in streams),
        )
    inputs = {
        i.name: _bind_input(pipeline, i, settings, params, check_source) for i in pipeline.inputs
    }
    if check_source:
        pipeline.validate(params, {n: b.binding.path for n, b in inputs.items()})
    for flag in ("sink", "table", "mode"):
        _refuse_unknown(pipeline, getattr(settings, flag), "output", f"--{flag}")
    outputs: dict[str, BoundOutput] = {}
    for output in pipeline.outputs:
        bound = _bind_output(pipeline, output, settings)
        if bound is not None:
            outputs[output.name] = bound
    if not outputs:
        raise ConfigError(
            "CONFIG_MISSING",
            f"every output of pipeline {pipeline.name} is off",
            "give an output a sink: --sink NAME=SPEC",
        )
    if sink is not None:
        first = next(iter(outputs))
        outputs[first] = BoundOutput(outputs[first].spec, sink, outputs[first].ctx)
    for bound_input in inputs.values():
        if bound_input.quarantine is not None:
            name = f"{QUARANTINE}.{bound_input.name}"
            outputs[name] = BoundOutput(
                None,
                quarantine_sink(settings, bound_input.quarantine),
                _ctx(pipeline, settings, name, QUARANTINE, (), "append"),
                reads=(bound_input.name,),
                kind=QueryKind.INGEST,  # kept if the input is staged (below)
            )
    _refuse_shared_targets(outputs)
    # `--ingest-stage auto`: decided here, once, from the checkpoints and the outputs; each
    # input records whether it is staged, and a staged input's query is its ingest query (an
    # input not staged has none: its first output writes its quarantine, ingest/quarantine.py)
    settings = settings.with_(ingest_stage=decide(settings, outputs))
    inputs = {n: replace(b, staged=applies(settings, b)) for n, b in inputs.items()}
    refuse_unstaged_delta(settings, inputs)
    folders = {n: o for n, o in outputs.items() if o.reads}
    outputs = {n: o for n, o in outputs.items() if not o.reads or inputs[o.reads[0]].staged}
    # `--shared-stage auto`: likewise; a shared input's query is its shared query
    settings = settings.with_(shared_stage=shared_stage.decide(settings, pipeline, inputs, outputs))
    if settings.shared_stage:
        inputs = {n: replace(b, shared=n in pipeline.shared_inputs) for n, b in inputs.items()}
        for name in pipeline.shared_inputs:
            query = shared_stage.query_name(name)
            ctx = _ctx(pipeline, settings, query, query, (), "append")
            sink = make_sink(shared_stage.rows_sink(ctx.checkpoint), Path())
            outputs[query] = BoundOutput(None, sink, ctx, (name,), QueryKind.SHARED)
    start = start_from(settings, pipeline.name, inputs) if check_source else None
    # the queries that read the raw files (`--from-checkpoint`'s filter lasts until each has
    # committed past OLD's files)
    raw = [Path(o.ctx.checkpoint) for o in outputs.values() if _reads_raw(o, inputs)]
    inputs = apply(inputs, start, raw)
    prepared = Prepared(
        pipeline, settings, params, inputs, outputs, start_from=start, quarantine_sinks=folders
    )
    prepared.spark_names = _spark_names(prepared)
    problems = [
        ValidationError(v.code, f"output {out.ctx.query_name}: {v.message}", v.fix)
        for out in outputs.values()
        if out.spec is not None  # one of the pipeline's outputs
        for v in settings_violations(
            out.ctx.mode, out.sink.spec, out.spec.modes, settings.trigger.kind
        )
        + (sink_violations(out.sink.spec) if settings.remote else [])
    ]
    if problems and check_rules:
        raise problems[0]
    return prepared


def _reads_raw(out: BoundOutput, inputs: dict[str, BoundInput]) -> bool:
    """Whether a query reads an input itself: an ingest query; a shared query of an input not
    staged; an output reading a stream input neither staged nor shared."""
    if out.kind is QueryKind.INGEST:
        return True
    if out.kind is QueryKind.SHARED:
        return not inputs[out.reads[0]].staged
    streams = [b for b in inputs.values() if b.source is not None]
    return any(not b.staged and not b.shared for b in streams)


def _spark_names(prepared: Prepared) -> dict[str, str]:
    """Each query's name in Spark, by slipstream's (PIPELINE.OUTPUT): `--query-name` for an
    output (bare: the first output), else slipstream's own. Two queries of one name, or a name
    for an output the pipeline does not have, are refused before any query starts."""
    settings = prepared.settings
    outputs = [o for o in prepared.outputs.values() if o.is_output]
    unknown = sorted(set(settings.query_name) - {o.name for o in outputs} - {""})
    if unknown:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--query-name names output(s) {', '.join(unknown)}, which {prepared.pipeline.name} "
            "does not write in this run",
            "give --query-name OUTPUT=NAME with OUTPUT one of "
            + ", ".join(o.name for o in outputs),
        )
    names = {
        o.ctx.query_name: _given_name(settings, o.name, o is prepared.primary) or o.ctx.query_name
        if o.is_output
        else o.ctx.query_name
        for o in prepared.outputs.values()
    }
    taken = [n for n in names.values() if list(names.values()).count(n) > 1]
    if taken:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--query-name gives two queries the name {taken[0]}; Spark runs one query per name",
            "give each output its own --query-name",
        )
    return names


def _given_name(settings: Settings, output: str, first: bool) -> str | None:
    return settings.query_name.get(output) or (settings.query_name.get("") if first else None)


def _refuse_shared_targets(outputs: dict[str, BoundOutput]) -> None:
    """Two outputs in one folder would mix their rows and share one `_spark_metadata`; two in
    one database table would overwrite each other's rows."""
    seen: dict[tuple[str, ...], str] = {}
    for out in outputs.values():
        spec = out.sink.spec
        where: tuple[str, ...]
        if spec.is_file_sink:
            where = (str(spec.path().resolve()),)
            shown = where[0]
        elif out.sink.database:
            target = str(getattr(out.sink, "path", None) or spec.describe())
            where = (spec.kind, target, out.ctx.table)
            shown = f"table {out.ctx.table} of {spec.describe()}"
        else:
            continue
        if where in seen:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"outputs {seen[where]} and {out.name} both write to {shown}",
                "give each output its own folder or table: --sink NAME=SPEC, --table NAME=TABLE",
            )
        seen[where] = out.name


#: what an input given as a URL is, and the `--source` it takes instead of the one given
_URL_KINDS = {
    "binds_topics": ("is a Kafka topic", "a kafka:// input reads Kafka"),
    "binds_formats": ("names a Spark format", "a format:... input reads that format"),
    "reads_format": ("is a Delta table", "a delta:PATH input reads Delta"),
}


def _kind_for(given: object, capability: str, kind: str, no_source: bool, flag: str) -> str:
    """The source kind that reads an input given as a URL (`capability`: the sources that
    bind it); `--source KIND` given for it must be one of them (CONFIG_BAD_VALUE)."""
    reading = kinds_that(capability)
    if no_source:
        return reading[0]
    if kind not in reading:
        what, reads = _URL_KINDS[capability]
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag}{given} {what}, but --source {kind} was given",
            f"drop --source ({reads}), or give the input a path",
        )
    return kind


def _bind_input(
    pipeline: Pipeline, spec: Input, settings: Settings, params: Params, check: bool
) -> BoundInput:
    streams = pipeline.stream_inputs()
    given = settings.input
    value = given.get(spec.name)
    flag = f"--input {spec.name}="
    if value is None and "" in given and not spec.static and len(streams) == 1:
        value, flag = given[""], "--input "
    topic = value if isinstance(value, KafkaTopic) else None
    spark_format = value if isinstance(value, SparkFormat) else None
    path = value if isinstance(value, Path) else None
    if (topic is not None or spark_format is not None) and spec.static:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag}{topic or spark_format}: input {spec.name} is a table (read whole at "
            "every batch), not a stream; a Kafka topic or a format:... can bind only a "
            "stream input",
            f"give it a file: {flag}FILE",
        )
    if spark_format is not None and spark_format.path is not None:
        path = Path(spark_format.path).expanduser()
    if spec.static:
        binding = Binding(spec.name, path, spec.format, flag)
        if check:
            _check_table_path(spec, binding)
        return BoundInput(spec, binding)
    # a path given means files (wordcount reads a socket by default, text files when given one)
    known = sources()
    reading_files = [k for k in spec.sources if k in known and known[k].reads_files]
    kind = settings.source or (
        reading_files[0] if path is not None and reading_files else spec.sources[0]
    )
    if topic is not None:  # a kafka:// input reads Kafka
        kind = _kind_for(topic, "binds_topics", kind, settings.source is None, flag)
    reading_formats = kinds_that("binds_formats")  # format:FORMAT reads any Spark format
    own_format = [
        k for k, c in known.items() if spark_format and c.reads_format == spark_format.name
    ]
    if own_format:  # delta:PATH reads the Delta source
        kind = _kind_for(spark_format, "reads_format", kind, settings.source is None, flag)
    elif spark_format is not None:
        kind = _kind_for(spark_format, "binds_formats", kind, settings.source is None, flag)
    if kind not in spec.sources and kind not in reading_formats and kind not in own_format:
        raise ConfigError(
            "SOURCE_NOT_SUPPORTED",
            f"pipeline {pipeline.name} cannot read input {spec.name} from --source {kind}",
            f"use one of: {', '.join(spec.sources)}",
        )
    if len(streams) == 1:
        flag = "--input "  # a one-stream pipeline names its input path plainly
    fmt = settings.format or spec.format
    binding = Binding(
        spec.name, path, fmt, flag.rstrip(), spec.schema, spec.required, topic, spark_format
    )
    source = get_source(kind)
    options = source.given(settings.source_options)
    if check:
        source.validate(binding, options, settings.conf)
    rules = check_expectations(pipeline.expectations(spec.name, params))
    # an event-time column needs the guard, and the guard a quarantine (ingest/guard.py);
    # parquet files are judged whole, and a rejected one goes to the quarantine
    parquet = source.reads_files and fmt == "parquet"
    parses = fmt in ("json", "csv") or parquet or bool(spec.required or spec.event_time)
    if rules and not parses:
        raise ConfigError(
            "EXPECTATION_INVALID",
            f"pipeline {pipeline.name} declares expectations on unparsed {binding.format} "
            f"input {spec.name}",
            "expectations need typed records: read json or csv with a declared schema",
        )
    quarantine = settings.quarantine_root / spec.name if parses else None
    guard = None
    if parses and spec.event_time is not None:
        guard = EventTimeGuard(spec.event_time, settings.max_future, settings.max_past)
    return BoundInput(spec, binding, source, quarantine, rules, guard, options)


def quarantine_sink(settings: Settings, folder: Path) -> Sink:
    """An input's quarantine: JSON files in `folder` (sinks/quarantine.py), or with
    `--quarantine delta:DIR` a Delta table (written by the ingest stage's query, exactly-once
    as any Delta sink)."""
    if settings.quarantine_delta:
        return make_sink(SinkSpec("delta", str(folder)), Path())
    return QuarantineFolder(SinkSpec("json", str(folder)))


def _check_table_path(spec: Input, binding: Binding) -> None:
    help_ = f" ({spec.help})" if spec.help else ""
    path = binding.existing(f"a {spec.format} file or folder{help_}", "FILE")
    flag = f"--input {spec.name}="
    if path.name.startswith(("_", ".")):
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag}{path}: Spark treats names starting with '_' or '.' as hidden and "
            "would read nothing",
            "rename the file, e.g. without the leading '_' or '.'",
        )


def _refuse_unknown(pipeline: Pipeline, given: dict[str, Any], what: str, flag: str) -> None:
    names = {i.name for i in (pipeline.inputs if what == "input" else pipeline.outputs)}
    for name in given:
        if name and name not in names:
            hint = " (a path containing '=': write it as ./PATH)" if what == "input" else ""
            raise ConfigError(
                "CONFIG_UNKNOWN_KEY",
                f"{flag} {name}=...: pipeline {pipeline.name} has no {what} {name!r}{hint}",
                f"its {what}s: {', '.join(sorted(names))}",
            )


def _bind_output(pipeline: Pipeline, output: Output, settings: Settings) -> BoundOutput | None:
    first = output is pipeline.outputs[0]
    spec = settings.sink.get(output.name)
    if spec is None and output.sink is not None:
        spec = settings.sink.get("") or _default_sink(output.sink, settings, pipeline, output)
        enabled = [o for o in pipeline.outputs if o.sink is not None or o.name in settings.sink]
        if spec.is_file_sink and len(enabled) > 1:  # one folder per output under the given one
            spec = replace(spec, target=str(spec.path() / output.name))  # options kept
    if spec is None:
        return None
    table = settings.table.get(output.name) or (settings.table.get("") if first else None)
    table = table or output.table_name
    if sink_class(spec.kind).database:
        check_table(table)  # a bad or reserved table name fails here, not in a batch
    sink = make_sink(spec, settings.default_database)
    mode = settings.mode.get(output.name) or (settings.mode.get("") if first else None)
    mode = mode or pipeline.default_mode(output, spec, settings.trigger.kind)
    query = f"{pipeline.name}.{output.name}"
    checkpoint = query_checkpoint(settings.checkpoint_root, output.name)
    return BoundOutput(
        output, sink, SinkContext(pipeline.name, query, table, output.key, mode, checkpoint)
    )


def _default_sink(text: str, settings: Settings, pipeline: Pipeline, output: Output) -> SinkSpec:
    """An output's declared sink; a file kind without a folder (`parquet`) writes under
    `STATE_DIR/outputs/PIPELINE/OUTPUT`."""
    kind = sink_kinds().get(text)
    if kind is not None and kind.target == "required":
        return SinkSpec(text, str(settings.state_dir / "outputs" / pipeline.name / output.name))
    return SinkSpec.parse(text)


def _ctx(
    pipeline: Pipeline,
    settings: Settings,
    name: str,
    table: str,
    key: tuple[str, ...],
    mode: Any,
) -> SinkContext:
    return SinkContext(
        pipeline=pipeline.name,
        query_name=f"{pipeline.name}.{name}",
        table=table,
        key=key,
        mode=mode,
        checkpoint=query_checkpoint(settings.checkpoint_root, name),
    )
