"""The real-time slot arithmetic (analysis/realtime.py) on docs/howto/kafka.md's own example: the
broker line's `actions` partitions and the real-time command's `--master` and shuffle partitions
leave a slot for the quarantine's micro-batches. The run: tests/e2e/kafka/test_realtime.py."""

from __future__ import annotations

import re
import shlex

from slipstream.analysis.realtime import slot_blocker
from tests.helpers import REPO

PAGE = REPO / "docs" / "howto" / "kafka.md"


def _page_line(start: str, having: str = "") -> list[str]:
    """The page's one command line that starts with `start` and holds `having`, as words."""
    lines = PAGE.read_text().splitlines()
    [line] = [x for x in lines if x.startswith(start) and having in x]
    return shlex.split(line)


def test_the_kafka_pages_real_time_example_fits_its_own_master() -> None:
    broker = _page_line("python -m slipstream.tools.kafka_broker start")
    topics = [broker[i + 1] for i, word in enumerate(broker) if word == "--topic"]
    partitions = dict(t.partition(":")[::2] for t in topics)
    source = int(partitions["actions"] or 1)
    run = _page_line("slipstream run mobile", "real-time")
    master = re.fullmatch(r"local\[(\d+)\]", run[run.index("--master") + 1])
    assert master is not None
    cores = int(master.group(1))
    shuffle = int(run[run.index("--conf") + 1].removeprefix("spark.sql.shuffle.partitions="))
    # mobile aggregates: a slot per source partition and per shuffle partition, held for the
    # run; its quarantine (micro-batches) needs one more
    assert slot_blocker({"mobile.counts": source + shuffle}, 1, cores) is None
    assert slot_blocker({"mobile.counts": source + shuffle}, 1, cores - 1) is not None
