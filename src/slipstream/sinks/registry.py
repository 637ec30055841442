"""SinkSpec -> Sink: the class registered for the spec's scheme in `specs.SINK_KINDS` (the
one place that knows which class serves which kind), imported when first used."""

from __future__ import annotations

import importlib
from pathlib import Path

from slipstream.core.specs import SINK_KINDS, SinkSpec
from slipstream.errors import ConfigError
from slipstream.sinks.base import Sink


def make_sink(spec: SinkSpec, default_database: Path) -> Sink:
    kind = SINK_KINDS.get(spec.kind)
    if kind is None:
        raise ConfigError("SINK_UNKNOWN", f"no sink of kind {spec.kind!r}", "see --help for --sink")
    module, _, attr = kind.sink.partition(":")
    try:
        cls: type[Sink] = getattr(importlib.import_module(module), attr)
    except ImportError as exc:  # pragma: no cover - an optional driver missing from the install
        raise ConfigError(
            "SINK_UNKNOWN",
            f"the {spec.kind} sink is unavailable: {exc}",
            "install its driver (pip install 'psycopg[binary]' for PostgreSQL)",
        ) from None
    return cls.from_spec(spec, default_database)
