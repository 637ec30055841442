"""A checkpoint's lifecycle: its folders, the one-run-per-checkpoint lock, reset, and
readers of the logs Spark writes into it (offsets, commits, sources, metadata)."""
