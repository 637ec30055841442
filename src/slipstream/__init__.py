"""slipstream: production-grade streaming pipelines and the toolkit to build, test and
operate them, on top of PySpark Structured Streaming. Spark does all distributed work;
slipstream supplies configuration, validation before start, exactly-once sinks, the
quarantine, checkpoints and monitoring."""

__version__ = "0.1.0"
