"""The vocabulary every room speaks: typed specs (durations, sink URLs, triggers, output
modes), value parsers for settings and parameters, and small lifecycle helpers."""
