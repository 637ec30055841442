"""settings/python_workers.py and worker_first.py: the workers Spark gives a fixed 10 s connect
back before they import anything; every other use of the launcher runs Python as asked."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

from slipstream.settings.python_workers import WORKERS_FIRST, launcher, python_for_workers

#: a pyspark whose import never ends: the worker can only have connected back before it
BLOCKING_PYSPARK = "import threading\nthreading.Event().wait()\n"


def _read_bytes(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        assert chunk, "the worker closed the connection"
        data += chunk
    return data


def test_the_driver_worker_connects_and_authenticates_before_it_imports(tmp_path: Path) -> None:
    stub = tmp_path / "stub" / "pyspark"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(BLOCKING_PYSPARK)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(120)  # a bound, not a synchronisation: accept returns when it connects
    secret = "s3cret-of-the-factory"
    env = {
        **os.environ,
        "PYTHON_WORKER_FACTORY_PORT": str(server.getsockname()[1]),
        "PYTHON_WORKER_FACTORY_SECRET": secret,
        "PYTHONPATH": str(tmp_path / "stub"),
    }
    proc = subprocess.Popen(
        [str(launcher(folder=tmp_path / "launchers")), "-m", WORKERS_FIRST[0]], env=env
    )
    try:
        conn, _ = server.accept()
        conn.settimeout(120)
        (length,) = struct.unpack("!i", _read_bytes(conn, 4))
        assert _read_bytes(conn, length).decode() == secret
        conn.sendall(struct.pack("!i", 2) + b"ok")
        (pid,) = struct.unpack("!i", _read_bytes(conn, 4))
        assert pid == proc.pid  # the launcher exec'd Python: Spark gets the worker's own pid
        assert proc.poll() is None  # and it is now importing the (never ending) pyspark
    finally:
        proc.kill()
        proc.wait()
        server.close()


def test_any_other_use_runs_python_as_asked(tmp_path: Path) -> None:
    path = launcher(folder=tmp_path)
    assert path.stat().st_mode & 0o777 == 0o700 and tmp_path.stat().st_mode & 0o777 == 0o700
    code = "import sys; print(sys.flags.no_site, sys.argv[1:])"
    done = subprocess.run([str(path), "-c", code, "a b"], capture_output=True, text=True)
    assert done.stdout.strip() == "0 ['a b']"
    assert launcher(folder=tmp_path) == path  # made once per interpreter


def test_a_python_the_user_chose_is_kept() -> None:
    assert python_for_workers({}, environ={"PYSPARK_PYTHON": "/opt/py"}) is None
    assert python_for_workers({"spark.pyspark.python": "/opt/py"}, environ={}) is None
    chosen = python_for_workers({}, environ={})
    assert chosen is not None and sys.executable in Path(chosen).read_text()
