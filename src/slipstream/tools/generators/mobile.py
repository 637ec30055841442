"""`slipstream generate mobile`: app actions `{"id", "action", "ts"}` for the `mobile` pipeline
(seed 003's phones), into files or a Kafka topic (`--to kafka://HOST:PORT/TOPIC`).

`--devices` phones act at `--rate` actions a second in all (exponential gaps, so arrivals
bunch as real ones do); each action is `open`, `swipe`, `close` or `crash` (about 30/50/15/5
in 100), the seed's four. Out-of-order, late, duplicate and malformed records come from
generators/streams.py; the defaults shape them by mobile's own window and watermark (10m each).

    slipstream generate mobile (--out DIR | --to kafka://HOST:PORT/TOPIC) [--rate N] ..."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from slipstream.tools.generators import streams
from slipstream.tools.generators.stream_command import Own, command
from slipstream.tools.generators.streams import Record, Shape, StreamSpec

#: the seed's actions and their shares
ACTIONS = (("open", 0.30), ("swipe", 0.50), ("close", 0.15), ("crash", 0.05))
SHAPE = Shape("actions", time_field="ts", required=("id", "action", "ts"), numeric=())
DEFAULTS = StreamSpec(
    duration=timedelta(hours=1),
    file_every=timedelta(minutes=1),
    watermark=timedelta(minutes=10),
    window=timedelta(minutes=10),
)


class Phones:
    name = "mobile"
    shapes = (SHAPE,)

    def __init__(self, devices: int = 50, rate: float = 5.0) -> None:
        if devices < 1:
            raise streams.bad("devices", devices, "at least 1")
        if not 0 < rate <= 100_000:
            raise streams.bad("rate", rate, "actions a second in (0, 100000]")
        self.ids = [f"phone{n}" for n in range(1, devices + 1)]
        self.mean_gap_ms = 1000 / rate
        self.next_ms: float | None = None
        self.made: dict[str, int] = {action: 0 for action, _ in ACTIONS}

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterator[Record]:
        if self.next_ms is None:
            self.next_ms = start_ms + rng.expovariate(1 / self.mean_gap_ms)
        names = [action for action, _ in ACTIONS]
        weights = [weight for _, weight in ACTIONS]
        while self.next_ms < end_ms:
            action = rng.choices(names, weights)[0]
            self.made[action] += 1
            fields = {"id": rng.choice(self.ids), "action": action, "ts": None}
            yield Record("actions", int(self.next_ms), fields)
            self.next_ms += rng.expovariate(1 / self.mean_gap_ms)

    def info(self) -> dict[str, Any]:
        return {"devices": len(self.ids), "actions": dict(self.made)}


OWN = (
    Own("devices", 50, "phones acting (50)"),
    Own("rate", 5.0, "actions a second, all phones together (5)"),
)


add_arguments, run = command(DEFAULTS, OWN, lambda own, spec: Phones(**own))
