"""slipstream: production-grade streaming pipelines and the toolkit to build, test and
operate them, on top of PySpark Structured Streaming. Spark does all distributed work;
slipstream supplies configuration, validation before start, exactly-once sinks, the
quarantine, checkpoints and monitoring."""

__version__ = "0.1.0"


def load_sinks() -> None:
    """Load the sink kinds (sinks/registry.py fills core/specs.py's): core/specs.py calls this
    the first time the kinds are asked for, since core and settings, which parse `--sink`, sit
    below sinks/. Nothing is imported here at import time."""
    import slipstream.sinks.registry  # noqa: F401
