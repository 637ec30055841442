"""Apache Spark's own Python Structured Streaming examples, ported to slipstream pipelines
(docs/howto/migrate.md)."""
