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

A server that does not accept connections yet (still starting, on a busy machine minutes) is
waited for, saying so with the time waited, for `--connect-wait` (5 minutes unless given), then
refused with `CONNECT_UNREACHABLE`; pyspark's own client would retry silently for minutes.

What is refused, with `CONNECT_NOT_SUPPORTED` and the reason: Spark settings the server owns
(anything but `spark.sql.*` and `spark.hadoop.*`), `--master` with `--remote`, and the console
sink (it prints on the server)."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from slipstream.core.backoff import SlowWorker
from slipstream.core.specs import DeltaFolder, SinkSpec
from slipstream.errors import ConfigError, SlipstreamError, ValidationError

#: Spark Connect's port when the URL names none
DEFAULT_PORT = 15002
#: how often the wait for a server says it is still waiting
SAY_EVERY_S = 15.0

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


def start_query(
    writer: Any,
    start: Callable[[Any], Any] | None = None,
    slow: SlowWorker | None = None,
    wait: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """`writer.start()`, started again when a Connect server's foreachBatch worker was too slow
    to connect back (nothing has started then, so starting again is safe): after a pause that
    doubles each time, within `core/backoff.py`'s budget."""
    slow = slow or SlowWorker()
    while True:
        try:
            return writer.start() if start is None else start(writer)
        except Exception as exc:
            pause = slow.pause_after_failure(clock()) if SlowWorker.is_slow_start(exc) else None
            if pause is None:
                raise
            print(slow.says("the server", pause, clock()), file=sys.stderr, flush=True)
            wait(pause)


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


def server_address(url: str) -> tuple[str, int]:
    """`sc://HOST[:PORT][/;params]` -> (HOST, PORT); the parameters (a token among them) are
    never part of it, so it may be printed."""
    where = url.removeprefix("sc://").split("/", 1)[0]
    if where.startswith("["):  # sc://[::1]:15002
        host, _, rest = where[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = where.partition(":")
    return host, int(port) if port.isdigit() else DEFAULT_PORT


def accepts(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection at host:port (within 2 s)."""
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False


def wait_for_server(
    url: str,
    patience_s: float,
    say: Callable[[str], None],
    *,
    probe: Callable[[str, int], bool] = accepts,
    wait: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once the Connect server at `url` accepts connections; meanwhile say so, with the
    time waited, at the start and every SAY_EVERY_S; CONNECT_UNREACHABLE after `patience_s`."""
    host, port = server_address(url)
    if probe(host, port):
        return
    start = said = clock()
    say(
        f"slipstream: waiting for the Spark Connect server at {host}:{port}: it does not "
        f"accept connections yet (waiting up to {patience_s:.0f} s, --connect-wait)"
    )
    pause = 0.5
    while True:
        waited = clock() - start
        if waited >= patience_s:
            raise SlipstreamError(
                "CONNECT_UNREACHABLE",
                f"no Spark Connect server accepted connections at {host}:{port} in {waited:.0f} s",
                "start the server (sbin/start-connect-server.sh) or correct --remote; a server "
                "that starts slowly (a busy machine) gets longer with --connect-wait 10m",
            )
        wait(min(pause, patience_s - waited))
        pause = min(pause * 2, 5.0)
        if probe(host, port):
            say(
                f"slipstream: the Spark Connect server at {host}:{port} accepts connections "
                f"(waited {clock() - start:.0f} s)"
            )
            return
        if clock() - said >= SAY_EVERY_S:
            said = clock()
            say(
                f"slipstream: still waiting for the Spark Connect server at {host}:{port}: "
                f"{said - start:.0f} s of {patience_s:.0f} s"
            )
