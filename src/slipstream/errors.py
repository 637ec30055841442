"""Stable error codes and the exceptions that carry them.

Every refusal slipstream makes before a query starts has a code (tests assert the code, never the
wording), a message naming the problem, and a fix a person can act on."""

from __future__ import annotations

import os
import re

# code -> one-line rule. The catalog doubles as documentation (`slipstream check --rules`).
CODES: dict[str, str] = {
    # configuration
    "CONFIG_UNKNOWN_KEY": "a setting that slipstream does not know",
    "CONFIG_BAD_VALUE": "a setting whose value is not allowed",
    "CONFIG_MISSING": "a setting the chosen pipeline, source or sink needs",
    "CONFIG_FILE": "the --config file cannot be read or is not valid TOML",
    "JVM_PARSER_MISSING": "slipstream's JVM parser jar is not built or not on Spark's classpath",
    "UNKNOWN_PIPELINE": "no pipeline of that name is registered",
    "PIPELINE_INVALID": "a pipeline declares its inputs, outputs or parameters inconsistently",
    "INIT_NAME_SHADOWS": (
        "init's name is a module already (the standard library's, or an installed one): the new "
        "module would shadow it"
    ),
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
    "STREAM_JOIN_APPEND_ONLY": "a join of two streams runs in append mode only",
    "STREAM_JOIN_NEEDS_WATERMARK": (
        "an outer join of two streams needs watermarks on both sides and a time range in its "
        "condition"
    ),
    "CONTINUOUS_NOT_ELIGIBLE": (
        "the continuous trigger supports only map-like queries from rate/kafka sources to "
        "console/memory/kafka sinks"
    ),
    "PROCESSING_TIMERS_UNBOUNDED": (
        "processing-time timers run a batch every trigger: an available-now run never ends"
    ),
    "REAL_TIME_NOT_ELIGIBLE": (
        "Spark's real-time mode runs update mode from Kafka into console, foreach, kafka and "
        "the database sinks, without dropDuplicatesWithinWatermark, stream-stream joins, "
        "stateful processors, session windows or Python maps"
    ),
    "REAL_TIME_STATE_UNSUPPORTED": (
        "real-time mode's stateful operators (aggregations, dropDuplicates) need Spark 4.3; the "
        "installed pyspark is older (the 4.2 line, which slipstream[delta] brings)"
    ),
    "DELTA_UNAVAILABLE": (
        "Delta Lake runs on the Spark 4.2 line only: install slipstream[delta], which brings "
        "delta-spark and pyspark 4.2"
    ),
    "REAL_TIME_NEEDS_SLOTS": (
        "real-time queries hold a task slot per source and shuffle partition for their whole "
        "run: Spark has too few for all of them"
    ),
    "SOURCE_NOT_SUPPORTED": "the pipeline cannot read from this source kind",
    "SOURCE_NOT_AVAILABLE": "the source's connector is not installed",
    "CONNECTOR_UNAVAILABLE": (
        "a package Spark needs (the Kafka connector, a JDBC driver) could not be resolved "
        "(Maven Central)"
    ),
    "KAFKA_UNREACHABLE": "no Kafka broker answers at the input's or sink's servers",
    "KAFKA_TOPIC_NOT_FOUND": "a Kafka input's or sink's topic does not exist on its broker",
    "KAFKA_DATA_LOST": (
        "records of a Kafka input that the checkpoint had not read are gone (the topic deleted "
        "and re-created, records deleted or aged out); failOnDataLoss=false reads on without them"
    ),
    "CONNECT_UNREACHABLE": (
        "no Spark Connect server accepted connections at --remote's address within --connect-wait"
    ),
    "CONNECT_NOT_SUPPORTED": (
        "a feature or setting that does not work from a Spark Connect client (--remote)"
    ),
    # checkpoints and runs
    "CHECKPOINT_IN_USE": "another run holds this checkpoint",
    "CHECKPOINT_FROM_OLDER_VERSION": "the checkpoint was made before the ingest stage",
    "CHECKPOINT_FROM_INGEST_STAGE": "the checkpoint was made with the ingest stage",
    "CHECKPOINT_WITHOUT_SHARED_STAGE": "the checkpoint was made without the shared stage",
    "CHECKPOINT_FROM_SHARED_STAGE": "the checkpoint was made with the shared stage",
    "RESET_REFUSED": "reset was not confirmed",
    "RESET_INTERRUPTED": "a reset of this checkpoint was interrupted; finish it before a run",
    "RESET_NOT_OURS": "reset deletes only what slipstream made; this path or table has no mark",
    "OUTPUT_BELONGS_TO_OTHER_CHECKPOINT": (
        "an output holds batches of another checkpoint; a new query would lose or repeat rows"
    ),
    # landed files (runtime/landed.py)
    "FILE_UNREADABLE": "a landed file could not be read; Spark recorded it as read",
    "FILE_DELETED": "a landed file was deleted after it was listed, before it was read",
    "FILE_CHANGED": "a landed file changed after it was listed; what changed is not read",
    "CHECKPOINT_DAMAGED": (
        "a checkpoint's logs (metadata, offsets, commits, file source log, build record) "
        "disagree or are cut"
    ),
    "STATE_INCOMPATIBLE": (
        "a checkpoint's state was built for another query (window, slide, key, operators, "
        "output mode, source): restarting on it would mix or lose results"
    ),
    "FROM_CHECKPOINT_NOT_FOUND": "--from-checkpoint names no checkpoint with a committed batch",
    "FROM_CHECKPOINT_SAME": "--from-checkpoint names the run's own checkpoint",
    "FROM_CHECKPOINT_NOT_NEW": (
        "--from-checkpoint starts a new checkpoint, and this one has run (or started elsewhere)"
    ),
    "FROM_CHECKPOINT_OTHER_INPUT": "--from-checkpoint's old version read another input",
    "STOP_TIMEOUT": "a run asked to stop did not stop in time",
    "LOCK_HOLDER_UNKNOWN": "a checkpoint is locked, but the lock file names no running process",
    "OUT_OF_MEMORY": "a query ran out of memory (the driver's, or an executor's on a cluster)",
    "DISK_FULL": "a disk slipstream or Spark writes to is full (ENOSPC)",
    "INTERNAL_ERROR": (
        "slipstream failed in a way it did not expect: the traceback is in STATE_DIR/logs"
    ),
    "PORT_IN_USE": "a server port (--metrics-port, --dashboard) is taken",
    # sinks
    "SINK_UNKNOWN": "no sink of that kind",
    "SINK_BAD_TARGET": "the sink's target cannot be used",
    "SINK_RESERVED_TABLE": (
        "a data output may not take a reserved table name (the ledger's, SQLite's, PostgreSQL's)"
    ),
    "SINK_KEY_NULLABLE": "a database output's key column may be NULL (NULL keys never conflict)",
    "SINK_NEEDS_KEY": "update or complete mode into a database needs the output's key",
    "SINK_UNREACHABLE": "the sink's database cannot be reached",
    "SINK_WRITE_FAILED": "the sink's database refused or lost a write",
    "EXPECTATION_FAILED": "a data-quality expectation of strength 'fail' was violated",
    "EXPECTATION_INVALID": "an expectation is declared wrongly (name, strength or condition)",
    # the event log (a record that is not a slipstream event)
    "EVENT_NOT_AN_OBJECT": "an event-log line is not a JSON object",
    "EVENT_MISSING_FIELD": "an event-log record lacks a field its kind needs",
    "EVENT_BAD_TIMESTAMP": "an event-log record's time cannot be read",
    "EVENT_UNKNOWN_KIND": "an event-log record of a kind slipstream does not write",
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


# What Spark and the JVM say when memory runs out: the JVM's own errors, Spark's error classes
# for memory it could not acquire, and the executor killed for exceeding its container.
_OUT_OF_MEMORY = re.compile(
    r"java\.lang\.OutOfMemoryError|SparkOutOfMemoryError|_OUT_OF_MEMORY\]|"
    r"UNABLE_TO_ACQUIRE_MEMORY|Java heap space|GC overhead limit exceeded|"
    r"Container killed .* memory|exceeding memory limits"
)


def said(text: str, at: int, limit: int = 160) -> str:
    """The line of `text` from position `at` on, shortened: what the error itself says."""
    line = text[at:].splitlines()[0].strip() if text[at:] else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def out_of_memory(text: str, master: str = "local[*]") -> SlipstreamError | None:
    """An OUT_OF_MEMORY error naming the setting to raise, when `text` (a query's failure) says
    memory ran out; None otherwise. In local mode the driver JVM also runs the tasks, so the
    setting is `spark.driver.memory`; on a cluster, tasks run in executors."""
    match = _OUT_OF_MEMORY.search(text or "")
    if match is None:
        return None
    local = master == "local" or master.startswith("local[")
    setting = "spark.driver.memory" if local else "spark.executor.memory"
    example = "12g" if local else "8g"
    return SlipstreamError(
        "OUT_OF_MEMORY",
        f"the query ran out of memory: {said(text, match.start())}",
        f"raise {setting}, e.g. --conf {setting}={example} (slipstream's default for a local run "
        "is a quarter of RAM, see session.py), or fewer events per batch with "
        "--max-files-per-trigger; the next run resumes from the checkpoint",
    )


# What a full disk says: Python's OSError (errno 28), the JVM's IOException, SQLite's and
# PostgreSQL's own words for it.
_DISK_FULL = re.compile(
    r"No space left on device|\[Errno 28\]|\bENOSPC\b|database or disk is full|SQLITE_FULL"
)
_FULL_PATH = re.compile(r"\[Errno 28\] [^:\n]*: '([^'\n]+)'")


def disk_full(text: str, state_dir: object | None = None) -> SlipstreamError | None:
    """DISK_FULL when `text` (an error, or a failed query's) says a disk is full: naming the
    file being written when the text says it (Python's OSError does), else the state dir and
    the room left on its disk (a write's OSError and Java's IOException name no file)."""
    match = _DISK_FULL.search(text or "")
    if match is None:
        return None
    path = _FULL_PATH.search(text)
    if path:
        where = f" writing {path.group(1)}"
    elif state_dir is not None:
        where = f" that holds {state_dir}{room_left(state_dir)}"
    else:
        where = ""
    disk = f"the disk that holds {state_dir}" if state_dir is not None else "that disk"
    return SlipstreamError(
        "DISK_FULL",
        f"no space left on the disk{where}: {said(text, match.start())}",
        f"free space on {disk} (checkpoints, state, quarantine, results, logs), or give "
        "--state-dir on a disk with room; then run the same command: the batch that failed "
        "was not committed, and is read again from the checkpoint",
    )


def room_left(path: object) -> str:
    """` (N KiB free of M KiB)` for the disk that holds `path` (its nearest existing folder);
    empty when the system cannot say."""
    folder = os.path.abspath(str(path))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        stat = os.statvfs(folder)
    except OSError:
        return ""
    free, total = stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize
    return f" ({_kib(free)} free of {_kib(total)})"


def _kib(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= 10 * scale:
            return f"{size // scale:,} {unit}"
    return f"{size // 1024:,} KiB"


def query_failure(
    text: str, master: str, state_dir: object | None = None
) -> SlipstreamError | None:
    """A failed query's error with a code: a full disk, ours (a sink's, wrapped by Spark), or
    memory that ran out; None when the text says none of them."""
    return disk_full(text, state_dir) or find_error(text) or out_of_memory(text, master)
