"""What changes when a run goes through a Spark Connect server (`--remote sc://HOST:PORT`).

The client (this process) starts no JVM: it sends plans to the server over gRPC. What runs
where, measured against the server started from the installed pyspark:

- Queries, their checkpoints, file sources and file sinks run in the server's JVM and see the
  server's files. Paths are therefore made absolute here, on the client: a relative path would
  otherwise be resolved against the server's working directory.
- `foreachBatch` functions (the SQLite sink, every `BatchSink`) run in a Python worker the
  *server* starts, with the server's `PYSPARK_PYTHON`, `PYTHONPATH` and files: a SQLite path
  names a file on the server's machine.
- The `StreamingQueryListener` runs on the client (Spark 4 streams listener events to it), so
  the console line per batch, the event log, metrics, `status` and the dashboard work as in a
  classic run. The checkpoint lock, `stop`, `reset` and the backfill bar read the checkpoint
  folder from the client: they need the server's files at the same paths (the same machine or
  a shared mount).

- The PostgreSQL sink's merge runs in that worker too, and its staging COPY in the server's
  executors (`DataFrame.mapInArrow`, as in a classic run): the database must be reachable from
  the server's hosts, and the password travels to the server inside the pickled
  `foreachBatch` function (see sinks/postgres.py).

What is refused, with `CONNECT_NOT_SUPPORTED` and the reason: Spark settings the server owns
(anything but `spark.sql.*` and `spark.hadoop.*`), `--master` with `--remote`, and the console
sink (it prints on the server)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from slipstream.core.specs import DeltaFolder, SinkSpec
from slipstream.errors import ConfigError, ValidationError

#: --conf keys a Connect client can set: session settings (the server owns the rest)
SESSION_CONF_PREFIXES = ("spark.sql.", "spark.hadoop.")


def is_connect(spark_or_frame: Any) -> bool:
    """True for a Spark Connect session or DataFrame (no JVM behind it)."""
    return type(spark_or_frame).__module__.startswith("pyspark.sql.connect")


def check_remote(remote: str, conf: Mapping[str, str], master_given: bool) -> None:
    """Refuse settings a Spark Connect client cannot have (config.load_settings asks). No Spark."""
    if master_given:
        raise ConfigError(
            "CONNECT_NOT_SUPPORTED",
            f"--master and --remote {remote} were both given: a Spark Connect "
            "server has its own master",
            "choose one: --remote (or SPARK_REMOTE) for a Connect server, --master for a JVM "
            "started here",
        )
    for key in conf:
        if not key.startswith(SESSION_CONF_PREFIXES):
            raise ConfigError(
                "CONNECT_NOT_SUPPORTED",
                f"--conf {key} is a setting of the server's Spark application; a Spark Connect "
                "client can set only session settings (spark.sql.*, spark.hadoop.*)",
                f"set {key} where the server starts (spark-submit ... --conf {key}=VALUE), "
                "or drop --remote",
            )


def sink_violations(sink: SinkSpec) -> list[ValidationError]:
    """A sink that cannot work from a Spark Connect client (`Sink.connect_refusal`)."""
    if sink.connect_refusal is None:
        return []
    why, fix = sink.connect_refusal
    return [ValidationError("CONNECT_NOT_SUPPORTED", f"under Spark Connect, {why}", fix)]


def session_conf(defaults: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The settings a Connect session takes: slipstream's session defaults, then the user's."""
    kept = {k: v for k, v in defaults.items() if k.startswith(SESSION_CONF_PREFIXES)}
    return {**kept, **given}


#: what the server says when the Python worker of a foreachBatch query did not start within
#: its fixed 10 s (the worker imports pyspark, pandas and pyarrow first; on a loaded machine
#: that took 14 s here). Nothing has started then, so starting again is safe.
WORKER_TIMEOUT = "Python worker failed to connect back"


def start_query(writer: Any, attempts: int = 3, start: Callable[[Any], Any] | None = None) -> Any:
    """`writer.start()`, started again (at most `attempts` times in all) when a Connect
    server's foreachBatch worker was too slow to connect back."""
    for attempt in range(1, attempts + 1):
        try:
            return writer.start() if start is None else start(writer)
        except Exception as exc:
            if WORKER_TIMEOUT not in str(exc) or attempt == attempts:
                raise
            print(
                f"slipstream: the server's Python worker was slow to start ({WORKER_TIMEOUT}); "
                f"starting the query again ({attempt + 1}/{attempts})",
                file=sys.stderr,
            )
    raise AssertionError("unreachable")


def absolute(path: Path | None) -> Path | None:
    return None if path is None else Path(path).absolute()


def absolute_folder(where: Path | DeltaFolder | None) -> Path | DeltaFolder | None:
    """`absolute` of a records folder, a `delta:DIR` one too."""
    if isinstance(where, DeltaFolder):
        return DeltaFolder(where.path.absolute())
    return absolute(where)


def absolute_sink(spec: SinkSpec) -> SinkSpec:
    if spec.target is None or not spec.has_local_path:
        return spec
    return replace(spec, target=str(Path(spec.target).absolute()))
