"""`slipstream generate trending --to kafka://...`: the generator's lines into a topic, exactly
what its report counts, in order within each partition (a real broker; no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slipstream.app.cli import main
from slipstream.tools.generators.trending import TrendingSpec, generate
from tests.services import read_topic

pytestmark = pytest.mark.kafka


def test_generate_trending_to_a_topic_sends_what_the_files_would_hold(
    kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = kafka.create_topic("generated-trending", 1)
    monkeypatch.chdir(tmp_path)
    flags = ["--events", "3000", "--seed", "7", "--quiet"]
    assert main(["generate", "trending", "--to", kafka.url(topic), *flags]) == 0
    said = capsys.readouterr().out
    assert f"Kafka topic kafka://{kafka.bootstrap}/{topic}" in said
    report = json.loads((tmp_path / f"{topic}_generation-report.json").read_text())
    assert (tmp_path / "catalog.csv").is_file()
    # the same spec into files: the topic holds the same lines in the same order
    files = TrendingSpec(events=3000, seed=7)
    generate(files, tmp_path / "files")
    expected = [
        line
        for path in sorted((tmp_path / "files").glob("views-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    records = read_topic(kafka.bootstrap, topic)
    assert [r["value"] for r in sorted(records, key=lambda r: r["offset"])] == expected
    assert report["total_lines"] == len(expected)


def test_generate_to_a_missing_topic_is_refused(
    kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["generate", "trending", "--to", kafka.url("nowhere"), "--events", "10"])
    assert code == 2
    assert "[KAFKA_TOPIC_NOT_FOUND]" in capsys.readouterr().err
    assert not (tmp_path / "catalog.csv").exists()


def test_feed_sends_a_files_lines_or_typed_lines_to_a_topic(
    kafka: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from slipstream.tools.generators.kafka_out import feed_topic

    topic = kafka.create_topic("fed-lines", 1)
    words = tmp_path / "words.txt"
    words.write_text("the cat sat\non the mat\n")
    assert main(["feed", str(words), "--to", kafka.url(topic)]) == 0
    assert "feed: sent 2 lines" in capsys.readouterr().err
    typed = io.StringIO("a typed line\nand another\n")
    assert feed_topic(kafka.url(topic), None, out=io.StringIO(), stdin=typed) == 0
    values = [
        r["value"] for r in sorted(read_topic(kafka.bootstrap, topic), key=lambda r: r["offset"])
    ]
    assert values == ["the cat sat", "on the mat", "a typed line", "and another"]
    assert main(["feed", str(words), "--to", "kafka://127.0.0.1/x"]) == 2
    assert "[CONFIG_BAD_VALUE] --to has value" in capsys.readouterr().err
