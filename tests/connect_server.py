"""A real Spark Connect server for the tests, started from the installed pyspark.

`ConnectServer` runs what `sbin/start-connect-server.sh` runs, in the foreground:
`$SPARK_HOME/bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer
--master local[2] --conf spark.connect.grpc.binding.port=P spark-internal`, with SPARK_HOME the
pyspark package folder. Its Python workers (foreachBatch functions) run this interpreter (or
PYSPARK_PYTHON when set) with this checkout's src first on PYTHONPATH, so they import the
slipstream under test. It starts in its own working directory, not the tests', so a relative
path that reached it unresolved would land somewhere else.

The server's Python (PYSPARK_PYTHON) is a small launcher written into the server's folder: it
runs every Python worker with this interpreter unchanged, except Spark Connect's foreachBatch
worker, which it starts so that it connects back to the server *before* importing pyspark's
Connect client (pandas, pyarrow, grpc: 1-2 s of CPU). Spark gives that connection a fixed 10 s,
and on this shared 2-core machine at a load of 30-50 the stock worker took 13-14 s to import
(also at nice -15), so every foreachBatch query failed to start ("Python worker failed to
connect back"). The worker's own `main` then runs as it would; only the order differs.

Its event log (what Spark's UI shows: plans, Connect statements) is kept in the same folder,
so tests can search it. Start-up waits, bounded, until the port accepts connections (about
11 s here) or the process exits; `stop()` ends its process group (SIGTERM, then SIGKILL) and
removes its folder. When it cannot start, `unavailable()` fails the test under CI and skips
it locally, with the reason."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

from slipstream.ingest.quarantine import EXTENSION
from slipstream.jvm import jar_path
from tests import services
from tests.services import free_port

SRC = Path(__file__).resolve().parents[1] / "src"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


FOREACH_BATCH_WORKER = "pyspark.sql.connect.streaming.worker.foreach_batch_worker"
FOREACH_BATCH_SHIM = f"""from pyspark.worker_util import get_sock_file_to_executor

with get_sock_file_to_executor(timeout=None) as sock_file:
    from {FOREACH_BATCH_WORKER} import main

    main(sock_file, sock_file)
"""


class ConnectServer:
    def __init__(self, start_timeout: float = 180.0) -> None:
        self.home = Path(pyspark.__file__).parent
        self.base = Path(tempfile.mkdtemp(prefix="slipstream-connect-"))
        self.log = self.base / "server.log"
        self.events = self.base / "events"
        self.port = free_port()
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        env = {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "PYSPARK_PYTHON": str(self._launcher()),
            "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "TZ": "UTC",
        }
        command = [
            str(self.home / "bin" / "spark-submit"),
            "--class", SERVER_CLASS,
            "--master", "local[2]",
            # slipstream's jar and the extension that gives every session the quarantine's
            # function (ingest/quarantine.py), as a user's server is started
            "--jars", str(jar_path()),
            "--conf", f"spark.sql.extensions={EXTENSION}",
            "--conf", f"spark.connect.grpc.binding.port={self.port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.ui.enabled=false",
            # what the UI would show (plans, Connect statements), for tests to search
            "--conf", "spark.eventLog.enabled=true",
            "--conf", f"spark.eventLog.dir={self.events}",
            "--conf", "spark.eventLog.compress=false",
            "spark-internal",
        ]  # fmt: skip
        self.events.mkdir()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=self.base, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout
        while not self._listening():
            try:  # the bounded wait between two probes; returns early if the server died
                self.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                if time.monotonic() < deadline:
                    continue
                self.stop()
                raise RuntimeError(f"not listening after {self.start_timeout:.0f} s") from None
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"exited with {self.process.returncode}:\n{tail}")
        return self

    def event_logs(self) -> list[Path]:
        """The server application's event log (Spark flushes it at each job and execution)."""
        return sorted(p for p in self.events.rglob("*") if p.is_file())

    def _launcher(self) -> Path:
        """PYSPARK_PYTHON for the server: the foreachBatch worker connects back first."""
        python = os.environ.get("PYSPARK_PYTHON") or sys.executable
        shim = self.base / "foreach_batch_worker.py"
        shim.write_text(FOREACH_BATCH_SHIM)
        launcher = self.base / "python"
        launcher.write_text(
            "#!/bin/sh\n"
            f'if [ "$1" = -m ] && [ "$2" = {FOREACH_BATCH_WORKER} ]; then\n'
            f'  shift 2; exec "{python}" "{shim}" "$@"\n'
            "fi\n"
            f'exec "{python}" "$@"\n'
        )
        launcher.chmod(0o755)
        return launcher

    def _listening(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, sig)
                try:
                    self.process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def unavailable(reason: str) -> None:
    """Under CI the Connect tests must run: fail with the reason. Locally: skip with it."""
    services.unavailable(reason, "the Spark Connect server for the tests")


def running_connect_server() -> contextlib.AbstractContextManager[ConnectServer | str]:
    """A started server, or the reason it could not start."""
    return services.running(ConnectServer, (RuntimeError, OSError, subprocess.SubprocessError))
