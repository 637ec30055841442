"""The Python that a local run's Spark starts for its workers (PYSPARK_PYTHON): the driver's own
interpreter, through a launcher that routes the workers Spark gives a fixed 10 s to connect
back (transformWithState's driver-side worker, `WORKERS_FIRST`) through
settings/worker_first.py, which connects before it imports. Every other worker runs as Spark
asks. Written once per interpreter into a private folder of the temporary directory; only for
a local master (a cluster's executors have their own Python) and only when neither
PYSPARK_PYTHON nor `spark.pyspark.python` is given."""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

#: the worker modules Spark starts with `python -m MODULE` and waits 10 s for
WORKERS_FIRST = ("pyspark.sql.streaming.transform_with_state_driver_worker",)
FIRST = Path(__file__).with_name("worker_first.py")

LAUNCHER = """#!/bin/sh
# slipstream's Python for Spark's workers (slipstream/settings/python_workers.py)
if [ "$1" = "-m" ]; then
  case "$2" in
    {modules}) exec {python} -S {first} "$2" ;;
  esac
fi
exec {python} "$@"
"""


def launcher(python: str = sys.executable, folder: Path | None = None) -> Path:
    """The launcher for `python` (made if missing): an executable file of this user's."""
    text = LAUNCHER.format(
        modules="|".join(WORKERS_FIRST), python=shlex.quote(python), first=shlex.quote(str(FIRST))
    )
    folder = folder or Path(tempfile.gettempdir()) / f"slipstream-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"python-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if not path.exists():
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        fresh.write_text(text)
        fresh.chmod(0o700)
        fresh.replace(path)  # atomic: two runs starting at once write the same file
    return path


def python_for_workers(conf: dict[str, str], environ: dict[str, str] | None = None) -> str | None:
    """The PYSPARK_PYTHON a local run sets, or None when the user chose one."""
    env = os.environ if environ is None else environ
    if "PYSPARK_PYTHON" in env or "spark.pyspark.python" in conf:
        return None
    return str(launcher())
