"""`slipstream generate wordcount`: lines of text for the `wordcount` pipeline (the seeds' quick
example), into text files or a Kafka topic (`--to kafka://HOST:PORT/TOPIC`).

Words come from a small vocabulary with Zipf-like shares (the first word about twice as common
as the second, three times the third...), in both cases (`The`, `the`: the pipeline keeps case),
separated by runs of spaces and tabs; one line in twenty is blank. Files are `lines-NNNNNNNN.txt`,
`--lines-per-file` each, lexical order the order they were written; the same seed gives the
same bytes. The last line printed says how many words were written.

    slipstream generate wordcount (--out DIR | --to kafka://HOST:PORT/TOPIC) [--lines N] ..."""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from slipstream.core.files import write_atomically
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.tools.generators.kafka_out import add_destination, topic_writer
from slipstream.tools.generators.stream_command import number

VOCABULARY = (
    *("the", "stream", "of", "events", "flows", "into", "spark", "and", "out", "as", "a"),
    *("table", "where", "each", "word", "counts", "once", "per", "line", "it", "appears"),
    *("in", "while", "late", "data", "waits", "for", "watermark"),
)
SEPARATORS = (" ", " ", " ", "  ", "\t", " \t ")


def lines(seed: int, total: int) -> Iterator[str]:
    """`total` lines of the vocabulary's words, seeded."""
    rng = random.Random(f"slipstream.wordcount:{seed}")
    weights = [1 / rank for rank in range(1, len(VOCABULARY) + 1)]
    for _ in range(total):
        if rng.random() < 0.05:
            yield rng.choice(("", "   ", "\t"))
            continue
        words = rng.choices(VOCABULARY, weights, k=rng.randint(1, 12))
        words = [w.capitalize() if rng.random() < 0.1 else w for w in words]
        line = ""
        for word in words:
            line += (rng.choice(SEPARATORS) if line else "") + word
        yield line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_destination(parser)
    parser.add_argument("--lines", metavar="N", help="lines to write (default 1000)")
    parser.add_argument("--lines-per-file", metavar="N", help="lines in a file (default 100)")
    parser.add_argument("--seed", metavar="S", help="random seed (default 1)")
    parser.add_argument(
        "--quiet", action="store_true", help="as the other generators take (it prints one line)"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    total = number("lines", args.lines, int, 1000)
    per_file = number("lines_per_file", args.lines_per_file, int, 100)
    seed = number("seed", args.seed, int, 1)
    if total < 1 or per_file < 1:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--lines and --lines-per-file must be at least 1; got {total} and {per_file}",
            "give each a positive count",
        )
    every = list(lines(seed, total))
    chunks = [every[i : i + per_file] for i in range(0, total, per_file)]
    if args.to is not None:
        writer = topic_writer(args.to)
        for index, chunk in enumerate(chunks):
            writer(f"lines-{index:08d}.txt", chunk)
        target = f"Kafka topic {writer.topic.describe()}"
    else:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        existing = sorted(folder.glob("lines-*.txt"))
        if existing:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"{folder} already holds {count(len(existing), 'lines file')}",
                "generate into a new --out directory (Spark never re-reads a file name it has "
                "seen)",
            )
        for index, chunk in enumerate(chunks):
            write_atomically(folder, f"lines-{index:08d}.txt", chunk)
        target = str(folder)
    words = sum(len(line.split()) for line in every)
    print(
        f"wrote {total:,} lines ({words:,} words) in {len(chunks):,} files to {target}",
        file=out,
        flush=True,
    )
    return 0
