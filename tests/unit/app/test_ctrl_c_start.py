"""Ctrl-C in the first seconds of any command, while Python imports slipstream, PySpark and
Py4J (issue 43 break 9: a KeyboardInterrupt traceback of 11-20 frames, 5 of 5 times). SIGINT is
sent when the child has imported a given module (`-X importtime` reports each import on stderr
as it completes): no sleep, and each point is inside the start-up. Every one ends with exit 130
and one line, no traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli_env

#: modules the child imports in this order on its way to a command (ours, then PySpark's)
POINTS = ("slipstream.errors", "slipstream.app.cli", "py4j", "pyspark.sql.types")


@pytest.mark.parametrize("point", POINTS)
def test_ctrl_c_while_python_imports_is_a_clean_exit_130(tmp_path: Path, point: str) -> None:
    env = cli_env()
    child = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "slipstream", "list"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    seen: list[str] = []
    for line in child.stderr:
        seen.append(line)
        if line.startswith("import time:") and line.split("|")[-1].strip() == point:
            child.send_signal(signal.SIGINT)
            break
    else:
        child.wait(timeout=120)
        pytest.fail(f"{point} was never imported:\n{''.join(seen)[-2000:]}")
    out, err = child.communicate(timeout=120)
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert child.returncode == 130, (child.returncode, said, out)
    assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in said), said
    assert said == ["", "slipstream: interrupted (Ctrl-C)"] or said == [
        "slipstream: interrupted (Ctrl-C)"
    ], said
