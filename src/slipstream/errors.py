"""Stable error codes and the exceptions that carry them.

Every refusal slipstream makes before a query starts has a code (tests assert the code, never the
wording), a message naming the problem, and a fix a person can act on."""

from __future__ import annotations

import re

# code -> one-line rule. The catalog doubles as documentation (`slipstream check --rules`).
CODES: dict[str, str] = {
    # configuration
    "CONFIG_UNKNOWN_KEY": "a setting that slipstream does not know",
    "CONFIG_BAD_VALUE": "a setting whose value is not allowed",
    "CONFIG_MISSING": "a setting the chosen pipeline, source or sink needs",
    "CONFIG_FILE": "the --config file cannot be read or is not valid TOML",
    "UNKNOWN_PIPELINE": "no pipeline of that name is registered",
    # validation of the query plan (the seeds' and Spark's rules)
    "FILE_SINK_APPEND_ONLY": "file sinks (parquet, json, csv) take append mode only",
    "COMPLETE_NEEDS_AGGREGATION": "complete mode needs a streaming aggregation",
    "APPEND_NEEDS_WATERMARK": (
        "append mode on an aggregation needs an event-time window with a watermark on the same "
        "column, declared before the groupBy"
    ),
    "SESSION_WINDOW_NO_UPDATE": "session windows do not support update mode",
    "UNSUPPORTED_STREAM_OPERATION": (
        "limit, distinct and sort are not supported on streams without an aggregation"
    ),
    "SORT_NEEDS_COMPLETE": "sorting a streaming aggregation needs complete mode",
    "MODE_NOT_SUPPORTED": "the pipeline does not offer this output mode",
    "CONTINUOUS_NOT_ELIGIBLE": (
        "the continuous trigger supports only map-like queries from rate/kafka sources to "
        "console/memory/kafka sinks"
    ),
    "REAL_TIME_NOT_ELIGIBLE": (
        "the real-time trigger supports only stateless queries from kafka to console/foreach/kafka"
    ),
    "SOURCE_NOT_SUPPORTED": "the pipeline cannot read from this source",
    "SOURCE_NOT_AVAILABLE": "the source's connector is not installed",
    "SOCKET_NOT_REPLAYABLE": "the socket source cannot replay after a restart (not fault-tolerant)",
    # checkpoints and runs
    "CHECKPOINT_IN_USE": "another run holds this checkpoint",
    "CHECKPOINT_MISMATCH": "the checkpoint was written by a different query",
    "RESET_REFUSED": "reset was not confirmed",
    "STOP_TIMEOUT": "a run asked to stop did not stop in time",
    "PORT_IN_USE": "a server port (--metrics-port, --dashboard) is taken",
    # sinks
    "SINK_UNKNOWN": "no sink of that kind",
    "SINK_BAD_TARGET": "the sink's target cannot be used",
    "SINK_UNREACHABLE": "the sink's database cannot be reached",
    "SINK_WRITE_FAILED": "the sink's database refused or lost a write",
    "EXPECTATION_FAILED": "a data-quality expectation of strength 'fail' was violated",
    "EXPECTATION_INVALID": "an expectation is declared wrongly (name, strength or condition)",
}


class SlipstreamError(Exception):
    """An error a person can act on: a stable code, what is wrong, and how to fix it."""

    def __init__(self, code: str, message: str, fix: str = "") -> None:
        if code not in CODES:
            raise KeyError(f"unregistered error code {code!r}")
        self.code = code
        self.message = message
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class ConfigError(SlipstreamError):
    """Bad configuration, raised before Spark starts."""


class ValidationError(SlipstreamError):
    """A forbidden combination in the query plan, raised before any query starts."""


class CheckpointError(SlipstreamError):
    """A checkpoint cannot be used (in use by another run, or reset refused)."""


_RENDERED = re.compile(r"\[([A-Z][A-Z_]+)\] (.+?)(?:\n  fix: (.+))?$", re.M)


def find_error(text: str) -> SlipstreamError | None:
    """Our error inside another error's text: a sink's error raised in `foreachBatch` or in a
    Spark task reaches the driver wrapped in Spark's own exception and Python traceback."""
    found = None
    for match in _RENDERED.finditer(text):
        if match.group(1) in CODES:
            found = match  # the last one is the innermost cause
    if found is None:
        return None
    return SlipstreamError(found.group(1), found.group(2).strip(), (found.group(3) or "").strip())
