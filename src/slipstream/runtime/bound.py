"""What a run is bound to: each input (its path, source, quarantine, guard), each output (its
sink, context and checkpoint), and the run as a whole (`Prepared`). Plain data: runtime.bind
fills it in, runtime.runner builds queries from it, runtime.explain describes it."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slipstream.analysis.late import LatePlan
from slipstream.analysis.plan import Plan
from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.ingest.expectations import Expectation
from slipstream.ingest.guard import EventTimeGuard
from slipstream.settings.config import Settings
from slipstream.settings.jdbc_drivers import JdbcDriver
from slipstream.sinks import Sink, SinkContext
from slipstream.sources.base import Binding, Source

if TYPE_CHECKING:
    from slipstream.checkpoint.start import StartFrom

QUARANTINE = "quarantine"


class QueryKind(enum.Enum):
    """What a run's query is for."""

    OUTPUT = "output"  # one of the pipeline's outputs
    #: the ingest stage's query of one input (runtime/ingest_stage.py): parses once, writes the
    #: typed rows for the outputs (bronze) and the rejected ones to the quarantine (named
    #: `quarantine.INPUT`, as an older version's quarantine query was)
    INGEST = "ingest"
    #: the shared stage's query of one input (runtime/shared_stage.py): the steps every output
    #: takes first (`Pipeline.shared`), its rows appended to files the outputs read (named
    #: `shared.INPUT`)
    SHARED = "shared"


@dataclass(frozen=True)
class BoundInput:
    spec: Input
    binding: Binding
    source: Source | None = None  # stream inputs
    quarantine: Path | None = None  # stream inputs whose raw records are parsed
    expectations: tuple[Expectation, ...] = ()
    guard: EventTimeGuard | None = None  # parsed inputs with an event-time column
    source_options: Mapping[str, Any] = field(default_factory=dict)  # the source's own settings
    #: read through the ingest stage in this run: decided once, by runtime.bind
    staged: bool = False
    #: its shared steps run once, by its shared query, in this run: decided by runtime.bind
    shared: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def parses(self) -> bool:
        return self.quarantine is not None


@dataclass(frozen=True)
class BoundOutput:
    spec: Output | None  # the pipeline's declaration (None for an ingest query)
    sink: Sink
    ctx: SinkContext
    reads: tuple[str, ...] = ()  # an ingest or shared query: the input it reads
    kind: QueryKind = QueryKind.OUTPUT

    @property
    def name(self) -> str:
        return self.ctx.query_name.split(".", 1)[1]

    @property
    def is_output(self) -> bool:
        """One of the pipeline's outputs (not a query slipstream adds beside them)."""
        return self.kind is QueryKind.OUTPUT


@dataclass
class Prepared:
    """A pipeline bound to its settings: parameters parsed, inputs and outputs bound, all
    decided before Spark starts (runtime.bind). Two fields come from Spark when the queries are
    built (runtime.build): `plans`, each output's analyzed plan, and `late`, the
    dead-letter's rules read from those plans."""

    pipeline: Pipeline
    settings: Settings
    params: Params
    inputs: dict[str, BoundInput]
    outputs: dict[str, BoundOutput]  # the pipeline's outputs that are on, then ingest queries
    plans: dict[str, Plan] = field(default_factory=dict)  # read from Spark by runtime.build
    late: dict[str, LatePlan] = field(default_factory=dict)  # the dead-letter's rules, by build
    # the ingest stage: each staged input's bronze read schema, by build (runtime/ingest_stage.py)
    bronze: dict[str, Any] = field(default_factory=dict)
    # where a new checkpoint started (`--from-checkpoint`, runtime/from_checkpoint.py)
    start_from: StartFrom | None = None
    # each input's quarantine writer: the output whose query writes it, by build
    # (ingest/quarantine.py; a staged input's ingest query writes its own)
    quarantines: dict[str, str] = field(default_factory=dict)
    # each parsed input's quarantine folder as what it is on disk, a sink (`quarantine.INPUT`):
    # what reset deletes, the outputs' record holds and the ownership checks read
    quarantine_sinks: dict[str, BoundOutput] = field(default_factory=dict)
    # each query's name in Spark, by slipstream's (PIPELINE.OUTPUT): `--query-name` for an
    # output, else slipstream's own (runtime/bind.py)
    spark_names: dict[str, str] = field(default_factory=dict)

    @property
    def targets(self) -> dict[str, BoundOutput]:
        """Every place the run writes: its outputs and queries, and the quarantine folders."""
        folders = {n: o for n, o in self.quarantine_sinks.items() if n not in self.outputs}
        return self.outputs | folders

    @property
    def primary(self) -> BoundOutput:
        """The first output: what the dashboard previews and the backfill bar follows."""
        return next(iter(self.outputs.values()))

    @property
    def sink(self) -> Sink:
        return self.primary.sink

    @property
    def ctx(self) -> SinkContext:
        return self.primary.ctx

    @property
    def parses(self) -> bool:
        return any(i.parses for i in self.inputs.values())


def stream_inputs(prepared: Prepared, output: BoundOutput) -> list[BoundInput]:
    """The stream inputs `output`'s query reads: a quarantine's, the input it drains; a
    pipeline output's, every stream input of the run (a pipeline does not declare which of its
    inputs an output reads)."""
    names = output.reads or tuple(prepared.inputs)
    return [prepared.inputs[n] for n in names if prepared.inputs[n].source is not None]


def uses_kafka(prepared: Prepared) -> bool:
    """Whether a run reads or writes Kafka (its session needs the connector)."""
    return any(
        b.source is not None and b.source.needs_kafka_connector for b in prepared.inputs.values()
    ) or any(o.sink.needs_kafka_connector for o in prepared.outputs.values())


def uses_delta(prepared: Prepared) -> bool:
    """Whether a run reads or writes a Delta table (its session needs Delta Lake)."""
    inputs = any(b.source is not None and b.source.delta for b in prepared.inputs.values())
    # the session is made before the build finds which outputs have late rows
    late = prepared.settings.late_delta and prepared.settings.late_rows
    return inputs or late or any(o.sink.delta for o in prepared.outputs.values())


def jdbc_drivers(prepared: Prepared) -> tuple[JdbcDriver, ...]:
    """The JDBC drivers a run's session needs: those of the database sinks its outputs write in
    real-time mode row by row from the JVM (sinks/jvm_rows.py). None under Spark Connect, whose
    outputs keep the Python writer."""
    settings = prepared.settings
    if settings.trigger.kind != "real-time" or settings.remote is not None:
        return ()
    drivers = {o.sink.jdbc for o in prepared.outputs.values() if o.is_output and o.sink.jdbc}
    return tuple(sorted(drivers, key=lambda d: d.coordinate))
