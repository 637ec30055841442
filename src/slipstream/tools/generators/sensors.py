"""`slipstream generate sensors`: sensor readings `{"sensor_id", "event_time", "value",
"error_code"}` for the `sensors` pipeline (seed 000's running example).

A healthy sensor reports once a minute, at its own second of the minute, a value around its own
baseline, with `error_code` null. A known set misbehaves, and the report names them:
- *noisy* sensors report every `--noisy-every` (10 s: six times a minute, far too often);
- *drifting* sensors' values climb by `--drift` per minute;
- *erroring* sensors send an error code (`E01`, `E17`, `E42`, `E99`) in one reading of three.
Out-of-order, late, duplicate and malformed readings come from the shared engine
(generators/streams.py). The same flags and seed give the same bytes.

    slipstream generate sensors --out DIR [--sensors N] [--noisy N] [--drifting N]
                                [--erroring N] [--duration D] [--seed S] [--late F] ..."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from slipstream.tools.generators import streams
from slipstream.tools.generators.stream_command import Own, command
from slipstream.tools.generators.streams import Record, Shape, StreamSpec

ERROR_CODES = ("E01", "E17", "E42", "E99")
SHAPE = Shape(
    "readings",
    time_field="event_time",
    required=("sensor_id", "event_time", "value"),
    numeric=("value",),
)
DEFAULTS = StreamSpec()
_MINUTE_MS = 60_000


class Sensors:
    """The fleet: `sensors` in all, of which `noisy`, `drifting` and `erroring` misbehave
    (which ids those are depends on the seed). Drift counts from `origin_ms`."""

    name = "sensors"
    shapes = (SHAPE,)

    def __init__(
        self,
        sensors: int = 20,
        noisy: int = 2,
        drifting: int = 2,
        erroring: int = 2,
        *,
        noisy_every_ms: int = 10_000,
        drift: float = 0.5,
        seed: int = 1,
        origin_ms: int = streams.to_ms(streams.DEFAULT_START),
    ) -> None:
        if sensors < 1:
            raise streams.bad("sensors", sensors, "a positive integer")
        if min(noisy, drifting, erroring) < 0 or noisy + drifting + erroring > sensors:
            raise streams.bad(
                "noisy", (noisy, drifting, erroring), "counts that fit within --sensors"
            )
        if not 0 < noisy_every_ms < _MINUTE_MS:
            raise streams.bad("noisy_every", noisy_every_ms / 1000, "under 60 seconds")
        self.sensors, self.noisy_every_ms, self.drift = sensors, noisy_every_ms, drift
        self.origin_ms = origin_ms
        rng = random.Random(f"slipstream.sensors.fleet:{seed}")
        self.ids = [f"s{n:04d}" for n in range(1, sensors + 1)]
        order = self.ids[:]
        rng.shuffle(order)
        a, b = noisy, noisy + drifting
        self.noisy = frozenset(order[:a])
        self.drifting = frozenset(order[a:b])
        self.erroring = frozenset(order[b : b + erroring])
        self.phase = {s: rng.randrange(_MINUTE_MS) for s in self.ids}
        self.base = {s: round(rng.uniform(15, 30), 1) for s in self.ids}

    def period(self, sensor: str) -> int:
        return self.noisy_every_ms if sensor in self.noisy else _MINUTE_MS

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterator[Record]:
        due: list[tuple[int, str]] = []
        for sensor in self.ids:
            period = self.period(sensor)
            first = start_ms + (self.phase[sensor] - start_ms) % period
            due.extend((t, sensor) for t in range(first, end_ms, period))
        for t, sensor in sorted(due):
            value = self.base[sensor] + rng.gauss(0, 0.5)
            if sensor in self.drifting:
                value += self.drift * (t - self.origin_ms) / _MINUTE_MS
            code = None
            if sensor in self.erroring and rng.random() < 1 / 3:
                code = ERROR_CODES[rng.randrange(len(ERROR_CODES))]
            fields = {
                "sensor_id": sensor,
                "event_time": None,
                "value": round(value, 3),
                "error_code": code,
            }
            yield Record("readings", t, fields)

    def info(self) -> dict[str, Any]:
        return {
            "sensors": self.sensors,
            "noisy": sorted(self.noisy),
            "drifting": sorted(self.drifting),
            "erroring": sorted(self.erroring),
            "noisy_every_s": self.noisy_every_ms / 1000,
            "healthy_every_s": 60,
        }


OWN = (
    Own("sensors", 20, "sensors in all (default 20)"),
    Own("noisy", 2, "sensors that report far too often (default 2)"),
    Own("drifting", 2, "sensors whose value drifts upward (default 2)"),
    Own("erroring", 2, "sensors that send error codes (default 2)"),
    Own("noisy_every", 10.0, "how often a noisy sensor reports (default 10)", "SECONDS"),
)


def fleet(own: dict[str, Any], spec: StreamSpec) -> Sensors:
    every = own.pop("noisy_every")
    return Sensors(
        **own,
        noisy_every_ms=int(every * 1000),
        seed=spec.seed,
        origin_ms=streams.to_ms(spec.start),
    )


add_arguments, run = command(DEFAULTS, OWN, fleet)
