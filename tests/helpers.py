"""Shared test utilities (not fixtures): subprocess runs of the CLI, independent computations."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
MOBILE_SAMPLES = SRC / "slipstream" / "data" / "mobile"


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPSTREAM_")}
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env["TZ"] = "UTC"
    env.update(extra)
    return env


def slipstream(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a real subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "slipstream", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
        cwd=cwd,
    )


def mobile_counts(lines: list[str], window: str = "10min") -> pd.DataFrame:
    """Seed 003's counts computed independently with pandas (valid records only)."""
    frame = pd.read_json(
        io.StringIO("\n".join(lines)), lines=True, dtype={"id": str, "action": str}
    )
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True, format="ISO8601")
    frame["window_start"] = frame["ts"].dt.floor(window)
    counts = frame.groupby(["window_start", "action"]).size().rename("count").reset_index()
    counts["window_start"] = counts["window_start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return counts.sort_values(["window_start", "action"]).reset_index(drop=True)
