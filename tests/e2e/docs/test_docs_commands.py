"""The documentation pages' commands, run as a reader types them: each page's blocks in order,
in a fresh folder; a block titled with a path (```json title="landing/x.jsonl") is written to
that file, each line of a ```sh block runs in bash with the installed `slipstream` and `python`
on PATH, and a `# exit N` comment is the exit code the page promises (0 otherwise). The results
are then compared with an independent computation. The tour (docs/tour.md) runs line by line in
test_cli_tour, each line's exit code and refusal checked. tests/unit/project/test_docs_site.py
checks that every page with a ```sh block is run here."""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests import doc_blocks
from tests.helpers import MOBILE_SAMPLES, cli_env, mobile_counts, quarantine_records, slipstream

#: page -> the test that runs its ```sh blocks (tests/unit/project/test_docs_site.py reads this)
RUN_HERE = {
    "docs/getting-started.md": "test_getting_started_toml_example",
    "docs/tutorial.md": "test_tutorial_from_init_to_a_crash_safe_run",
    "docs/howto/postgresql.md": "test_postgresql_howto",
    "docs/tour.md": "test_cli_tour",
}
TOUR = "docs/tour.md"


def run_page(page: str, cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """Run a page's files and commands in `cwd`; the outputs of its commands, in order. An
    `export` line sets nothing: the test gives the values in `env`."""
    env = dict(env or cli_env())
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    outputs = []
    for lang, title, body in doc_blocks.blocks(page):
        if title:
            (cwd / title).parent.mkdir(parents=True, exist_ok=True)
            (cwd / title).write_text(body)
        if lang != "sh":
            continue
        for line in body.strip().splitlines():
            command, _, comment = line.partition("#")
            if command.startswith("export "):
                continue
            wanted = int(m.group(1)) if (m := re.search(r"exit (\d+)", comment)) else 0
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            code = done.returncode if done.returncode >= 0 else 128 - done.returncode
            assert code == wanted, (line, done.stdout[-3000:], done.stderr[-3000:])
            outputs.append(done.stdout + done.stderr)
    return outputs


def views_per_user_and_window(folder: Path) -> list[tuple[str, str, str, int]]:
    """The tutorial's table computed with pandas from the landed lines (records with a `ts`)."""
    frame = pd.concat(pd.read_json(p, lines=True) for p in sorted(folder.glob("*.jsonl")))
    frame = frame.dropna(subset=["user_id", "ts"])
    frame["start"] = pd.to_datetime(frame["ts"], utc=True).dt.floor("5min")
    counts = frame.groupby(["start", "user_id"]).size().reset_index(name="views")
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return sorted(
        (s.strftime(fmt), (s + pd.Timedelta(minutes=5)).strftime(fmt), u, int(n))
        for s, u, n in counts.itertuples(index=False)
    )


@pytest.mark.spark
@pytest.mark.slow
def test_tutorial_from_init_to_a_crash_safe_run(tmp_path: Path) -> None:
    outputs = run_page("docs/tutorial.md", tmp_path)
    assert any("1 passed" in out for out in outputs)  # the generated test, run by pytest
    with sqlite3.connect(tmp_path / "state" / "slipstream.db") as conn:
        table = sorted(conn.execute("SELECT * FROM page_views_counts").fetchall())
    assert table == views_per_user_and_window(tmp_path / "landing")
    quarantined = quarantine_records(tmp_path / "state" / "quarantine" / "page_views" / "views")
    assert len(quarantined) == 1 and "missing required field 'ts'" in quarantined[0]["reason"]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.postgres
def test_postgresql_howto(postgres, pg_database: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.services import APP_PASSWORD

    outputs = run_page("docs/howto/postgresql.md", tmp_path, cli_env(**postgres.env(pg_database)))
    assert all(APP_PASSWORD not in out for out in outputs)
    rows = postgres.query(
        pg_database,
        "SELECT to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
        "action, count FROM mobile_action_counts ORDER BY 1, 2",
    )
    lines = [x for p in sorted(MOBILE_SAMPLES.glob("*.json")) for x in p.read_text().splitlines()]
    expected = mobile_counts(lines).itertuples(index=False, name=None)
    assert [tuple(r) for r in rows] == sorted(expected)


@pytest.mark.spark
@pytest.mark.slow
def test_getting_started_toml_example(tmp_path: Path) -> None:
    """The TOML example binds trending's events and catalog where `generate` puts them (it once
    bound the events to the catalog's folder: every record quarantined): the table equals the
    independent model over the generated files (one available-now batch: nothing is late)."""
    from datetime import UTC, datetime, timedelta

    from tests.trending_reference import article_views, counted_events, table_rows

    outputs = run_page("docs/getting-started.md", tmp_path)
    assert not any("WARNING" in out and "quarantined" in out for out in outputs)
    lines = [
        x for p in sorted((tmp_path / "landing" / "views").glob("*.jsonl"))
        for x in p.read_text().splitlines()
    ]  # fmt: skip
    events, _ = counted_events([lines], timedelta(minutes=10), datetime.now(UTC))
    expected = article_views(
        events, tmp_path / "landing" / "catalog.csv", timedelta(minutes=5), timedelta(minutes=1)
    )
    with sqlite3.connect(tmp_path / "state" / "serving.db") as conn:
        conn.row_factory = sqlite3.Row
        views = [dict(r) for r in conn.execute("SELECT * FROM article_views")]
    assert expected and table_rows(views) == expected
    assert list((tmp_path / "archive").glob("*.parquet"))  # [outputs.archive] was bound


@pytest.mark.spark
@pytest.mark.slow
def test_cli_tour(tmp_path: Path) -> None:
    """docs/tour.md's commands (once the README's "A tour of the CLI"), one by one: each exits
    as its comment says (a refusal names its code); mobile's table equals pandas over the
    landed lines; `reset` removes the checkpoint."""
    for line in doc_blocks.block_after(TOUR, "## The commands", "sh").strip().splitlines():
        command, _, comment = line.partition("#")
        args = shlex.split(command)
        assert args[0] == "slipstream"
        expected = int(m.group(1)) if (m := re.search(r"exit (\d)", comment)) else 0
        done = slipstream(*args[1:], cwd=tmp_path)
        assert done.returncode == expected, (line, done.stdout[-3000:], done.stderr[-3000:])
        if expected == 2:
            code = re.search(r"[A-Z_]{6,}", comment).group(0)  # the rule's code
            assert code in done.stdout + done.stderr
        if args[1:3] == ["run", "mobile"] and "parquet" not in line:
            lines = [
                x
                for f in sorted((tmp_path / "landing").iterdir())
                for x in f.read_text().splitlines()
            ]
            with sqlite3.connect(tmp_path / "state" / "slipstream.db") as conn:
                table = sorted(
                    conn.execute(
                        "SELECT window_start, action, count FROM mobile_action_counts"
                    ).fetchall()
                )
            assert table == sorted(mobile_counts(lines).itertuples(index=False, name=None))
        if "parquet" in line and args[1] == "run" and expected == 0:
            assert list((tmp_path / "out").glob("*.parquet"))
    assert not (tmp_path / "state" / "checkpoints" / "mobile").exists()  # reset removed it
