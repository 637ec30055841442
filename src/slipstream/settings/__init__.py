"""Run settings: the options a run takes (CLI, TOML, environment), the one SparkSession
builder and its documented defaults, and Spark Connect."""
