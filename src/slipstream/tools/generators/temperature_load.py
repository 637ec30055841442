"""`slipstream generate temperature_load`: seed 003's two streams, keyed by location, in two
folders under OUT: `temperature/` with `{"location_id", "temp", "temp_taken_time"}` and `load/`
with `{"location_id", "load", "load_taken_time"}`.

Each location takes its temperature every `--temp-every` (10 min) and its load every
`--load-every` (15 min), each at its own phase, so a temperature has a load within the hour
after it most of the time, and sometimes none (which a left outer join shows). The watermark
and window given to the engine default to the pipeline's: 2 hours (loads) and 1 hour (the
join's time bound). Late records are off by default: for a join, what Spark drops as late
depends on both sides' watermarks, which a generator cannot promise.

    slipstream generate temperature_load --out DIR [--locations N] [--temp-every D]
                                         [--load-every D] [--duration D] ..."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from slipstream.tools.generators import streams
from slipstream.tools.generators.stream_command import Own, command
from slipstream.tools.generators.streams import Record, Shape, StreamSpec

SHAPES = (
    Shape(
        "temperature",
        time_field="temp_taken_time",
        required=("location_id", "temp", "temp_taken_time"),
        numeric=("temp",),
    ),
    Shape(
        "load",
        time_field="load_taken_time",
        required=("location_id", "load", "load_taken_time"),
        numeric=("load",),
    ),
)
DEFAULTS = StreamSpec(
    duration=timedelta(hours=12),
    file_every=timedelta(minutes=5),
    watermark=timedelta(hours=2),
    window=timedelta(hours=1),
    late=0.0,
    duplicates=0.0,  # the join, like the seed's, does not deduplicate: a re-sent row pairs twice
)


class Locations:
    name = "temperature_load"
    shapes = SHAPES

    def __init__(
        self,
        locations: int = 10,
        temp_every: timedelta = timedelta(minutes=10),
        load_every: timedelta = timedelta(minutes=15),
        seed: int = 1,
    ) -> None:
        if locations < 1:
            raise streams.bad("locations", locations, "a positive integer")
        for flag, value in (("temp_every", temp_every), ("load_every", load_every)):
            if value < timedelta(seconds=1):
                raise streams.bad(flag, value, "at least 1s")
        rng = random.Random(f"slipstream.temperature_load.sites:{seed}")
        self.ids = [f"loc{n:03d}" for n in range(1, locations + 1)]
        ms = timedelta(milliseconds=1)
        self.every = {"temperature": temp_every // ms, "load": load_every // ms}
        self.phase = {
            (stream, loc): rng.randrange(every)
            for stream, every in self.every.items()
            for loc in self.ids
        }
        self.climate = {loc: rng.uniform(5, 30) for loc in self.ids}

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterator[Record]:
        due: list[tuple[int, str, str]] = []
        for (stream, loc), phase in self.phase.items():
            every = self.every[stream]
            first = start_ms + (phase - start_ms) % every
            due.extend((t, stream, loc) for t in range(first, end_ms, every))
        for t, stream, loc in sorted(due):
            if stream == "temperature":
                fields = {"location_id": loc, "temp": round(rng.gauss(self.climate[loc], 2), 2)}
            else:
                fields = {"location_id": loc, "load": round(rng.uniform(0.1, 1.0), 3)}
            yield Record(stream, t, fields)

    def info(self) -> dict[str, Any]:
        return {
            "locations": len(self.ids),
            "temp_every_s": self.every["temperature"] / 1000,
            "load_every_s": self.every["load"] / 1000,
        }


OWN = (
    Own("locations", 10, "locations (10)"),
    Own("temp_every", timedelta(minutes=10), "temperature period (10m)"),
    Own("load_every", timedelta(minutes=15), "load period (15m)"),
)


add_arguments, run = command(DEFAULTS, OWN, lambda own, spec: Locations(**own, seed=spec.seed))
