"""The sinks slipstream knows, by kind: every `Sink` subclass with its own `kind` in a module of
this folder (core/registry.py; adding a module adds the sink), and any added with `register`.
Each kind's grammar (`Sink.grammar`) is told to core/specs.py, which parses `--sink` below
this room; `make_sink` turns a SinkSpec into its sink."""

from __future__ import annotations

from pathlib import Path

from slipstream.core.registry import Registry
from slipstream.core.specs import SINK_KINDS, SinkSpec, add_sink_kind
from slipstream.errors import ConfigError
from slipstream.sinks.base import Sink

#: the order `--help` lists them in (any other kind follows, by name)
ORDER = (
    "console", "memory", "noop", "parquet", "orc", "json", "csv", "sqlite", "postgresql",
    "foreach", "batch", "kafka", "table", "delta",
)  # fmt: skip
NOT_SINKS = frozenset(
    {"base", "registry", "database", "jvm_rows", "postgres_io", "rows"}
)  # fmt: skip


def _tell_core(cls: type[Sink]) -> None:
    add_sink_kind(cls.kind, cls.grammar())


REGISTRY: Registry[type[Sink]] = Registry(
    __package__ or "slipstream.sinks",
    Sink,  # type: ignore[type-abstract]  # the base, abstract: its subclasses register
    ORDER,
    skip=NOT_SINKS,
    added=_tell_core,
)


def sinks() -> dict[str, type[Sink]]:
    """kind -> Sink class, for every sink module of this package and every registered."""
    return REGISTRY.classes()


def register(cls: type[Sink]) -> type[Sink]:
    """Add a Sink subclass defined outside this folder (a test's); usable as a decorator."""
    return REGISTRY.register(cls)


def unregister(kind: str) -> None:
    REGISTRY.unregister(kind)
    SINK_KINDS.pop(kind, None)


def sink_class(kind: str) -> type[Sink]:
    cls = sinks().get(kind)
    if cls is None:
        raise ConfigError("SINK_UNKNOWN", f"no sink of kind {kind!r}", "see --help for --sink")
    return cls


def kinds_that(capable: str) -> tuple[str, ...]:
    """The kinds whose class has the capability `capable` (a boolean class attribute)."""
    return tuple(kind for kind, cls in sinks().items() if getattr(cls, capable))


def make_sink(spec: SinkSpec, default_database: Path) -> Sink:
    return sink_class(spec.kind).from_spec(spec, default_database)


sinks()  # the kinds' grammar reaches core/specs.py before any `--sink` is parsed
