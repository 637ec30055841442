"""slipstream: production-grade streaming pipelines and the toolkit to build, test and
operate them, on top of PySpark Structured Streaming. Spark does all distributed work;
slipstream supplies configuration, validation before start, exactly-once sinks, the
quarantine, checkpoints and monitoring."""

__version__ = "0.1.0"


def _load_sinks() -> None:
    import slipstream.sinks.registry  # noqa: F401  (its import fills core/specs.py's kinds)


# the sink kinds are found in sinks/ (above core and settings, which parse `--sink`): the
# package hands core the way to load them, the first time they are needed
from slipstream.core.specs import load_sinks_with  # noqa: E402

load_sinks_with(_load_sinks)
