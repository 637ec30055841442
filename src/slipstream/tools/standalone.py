"""A Spark standalone cluster on this host, from the installed pyspark: one master, one worker.

For tests and benchmarks (tests/e2e/cluster/test_cluster.py, `python -m bench cluster`,
docs/scaling.md): Java only, nothing downloaded. `SPARK_HOME` is the pyspark package folder, which
carries `bin/spark-class` and Spark's jars.

    with StandaloneCluster(Path("/tmp/c"), cores=2, memory="2g") as cluster:
        run(["slipstream", "run", "mobile", "--master", cluster.url,
             *cluster.client_args(), ...])
        cluster.kill_worker()      # SIGKILL the worker and its executors (a lost node)
        cluster.start_worker()     # a new worker registers; the master gives it executors

Both daemons listen on 127.0.0.1 on free ports, each in a process group of its own (the worker's
executors and their Python workers are in the worker's group). Start-up waits, bounded, for the
master's "I have been elected leader" and the worker's "Successfully registered with master" in
their logs. A driver on this host needs `spark.driver.host=127.0.0.1` and the Python of this
environment on the executors (`client_conf()`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from slipstream.core.closing import StartStop

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"


class ClusterError(RuntimeError):
    """The cluster did not come up (Java missing, a port taken, a daemon that died)."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Daemon:
    """One spark-class process, its output in `log`, in a process group of its own."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def wait_for(self, line: str, timeout_s: float) -> None:
        """Bounded wait until `line` is in the log; fails if the process ends first."""
        deadline = time.monotonic() + timeout_s
        while line not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None:
                raise ClusterError(
                    f"exited ({self.proc.returncode}) before {line!r}: {self.tail()}"
                )
            if time.monotonic() > deadline:
                raise ClusterError(f"no {line!r} after {timeout_s:.0f} s: {self.tail()}")
            time.sleep(0.1)

    def tail(self, chars: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def kill(self, sig: int = signal.SIGKILL, timeout_s: float = 30) -> None:
        """Signal the whole group (the daemon and what it launched), then reap the daemon."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class StandaloneCluster(StartStop):
    """A master and one worker (`cores`, `memory`) on 127.0.0.1; work dirs under `root`."""

    def __init__(
        self, root: Path, cores: int = 2, memory: str = "2g", timeout_s: float = 180
    ) -> None:
        self.root = Path(root)
        self.work_dir = self.root / "work"
        self.cores, self.memory, self.timeout_s = cores, memory, timeout_s
        self.master: Daemon | None = None
        self.worker: Daemon | None = None
        self.workers_started = 0
        self.port = 0

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def client_conf(self) -> dict[str, str]:
        """What a driver on this host sets: its address, and this Python on the executors."""
        return {"spark.driver.host": HOST, "spark.pyspark.python": sys.executable}

    def client_args(self) -> list[str]:
        """`client_conf()` as `--conf` flags of `slipstream run` or spark-submit."""
        return [arg for k, v in self.client_conf().items() for arg in ("--conf", f"{k}={v}")]

    def _env(self) -> dict[str, str]:
        home = spark_home()
        return {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "SPARK_DAEMON_MEMORY": "512m",
            "PYSPARK_PYTHON": sys.executable,
        }

    def _spark_class(self, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), *args]

    def start(self) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(exist_ok=True)
        for attempt in range(3):  # a free port can be taken before the daemon binds it
            self.port = free_port()
            self.master = Daemon(
                self._spark_class(
                    MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                    "--webui-port", str(free_port()),
                ),
                self.root / f"master-{attempt}.log",
                self._env(),
            )  # fmt: skip
            try:
                self.master.wait_for(MASTER_READY, self.timeout_s)
                break
            except ClusterError:
                self.master.kill()
                if attempt == 2:
                    raise
        self.start_worker()
        return self

    def start_worker(self) -> Daemon:
        """Start a worker (again, after `kill_worker`) and wait until the master has it."""
        assert self.master is not None, "start() the master first"
        self.workers_started += 1
        self.worker = Daemon(
            self._spark_class(
                WORKER_CLASS, self.url, "--host", HOST, "--port", str(free_port()),
                "--webui-port", str(free_port()), "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", str(self.work_dir),
            ),
            self.root / f"worker-{self.workers_started}.log",
            self._env(),
        )  # fmt: skip
        try:
            self.worker.wait_for(WORKER_READY, self.timeout_s)
        except ClusterError:
            self.worker.kill()
            raise
        return self.worker

    def kill_worker(self) -> None:
        """SIGKILL the worker with its executors and their Python workers: a lost node."""
        if self.worker is not None:
            self.worker.kill(signal.SIGKILL)
            self.worker = None

    def stop(self) -> None:
        for daemon in (self.worker, self.master):
            if daemon is not None:
                daemon.kill(signal.SIGTERM)
        self.worker = self.master = None
