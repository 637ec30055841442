"""`slipstream generate iot`: seed 004's IoT device records for the `iot_steps` pipeline.

Each line is one record of the seed's `iot-stream/data-device` files, field for field:

    {"id": 1, "user_id": 24, "device_id": 5, "num_steps": 5014, "miles_walked": 2.507,
     "calories_burnt": 250.7, "timestamp": "2026-01-01T06:44:25.732+0000",
     "value": "{\"user_id\": 24, \"calories_burnt\": 250.7, ...}"}

`timestamp` keeps the seed's form (milliseconds and a `+0000` offset); `value` is the record
again as JSON text, as in the seed. Records come at `--rate` per second of event time with
increasing ids; miles are steps / 2000 and calories steps / 20, as in the seed's rows.
Out-of-order, late, duplicate and malformed records come from generators/streams.py.

    slipstream generate iot --out DIR [--rate N] [--users N] [--devices N] [--duration D] ..."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from slipstream.tools.generators import streams
from slipstream.tools.generators.stream_command import Own, command
from slipstream.tools.generators.streams import Record, Shape, StreamSpec


def seed_time(ms: int) -> str:
    """`2026-01-01T06:44:25.732+0000`, the seed's timestamp form."""
    return streams.iso_ms(ms).removesuffix("Z") + "+0000"


SHAPE = Shape(
    "device",
    time_field="timestamp",
    required=("id", "timestamp", "num_steps"),
    numeric=("num_steps", "user_id", "device_id"),
    time_text=seed_time,
)
# no duplicates by default: iot_steps, like the seed, does not deduplicate
DEFAULTS = StreamSpec(duration=timedelta(hours=2), duplicates=0.0)


class Devices:
    name = "iot"
    shapes = (SHAPE,)

    def __init__(self, rate: float = 5.0, users: int = 40, devices: int = 20) -> None:
        if not rate > 0:
            raise streams.bad("rate", rate, "a positive number of records per second")
        for flag, value in (("users", users), ("devices", devices)):
            if value < 1:
                raise streams.bad(flag, value, "a positive integer")
        self.rate, self.users, self.devices = rate, users, devices
        self.origin: int | None = None
        self.next_id = 1

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterator[Record]:
        if self.origin is None:
            self.origin = start_ms
        period = 1000 / self.rate
        first = -int(-(start_ms - self.origin) // period)  # ceil
        slot = first
        while (t := self.origin + int(slot * period)) < end_ms:
            slot += 1
            if t < start_ms:
                continue
            steps = rng.randrange(1000, 12_000)
            user, device = rng.randrange(1, self.users + 1), rng.randrange(1, self.devices + 1)
            miles, calories = round(steps / 2000, 4), round(steps / 20, 2)
            inner = {
                "user_id": user,
                "calories_burnt": calories,
                "num_steps": steps,
                "miles_walked": miles,
                "time_stamp": seed_time(t)[:23].replace("T", " ") + f"{rng.randrange(1000):03d}",
                "device_id": device,
            }
            fields = {
                "id": self.next_id,
                "user_id": user,
                "device_id": device,
                "num_steps": steps,
                "miles_walked": miles,
                "calories_burnt": calories,
                "timestamp": None,
                "value": json.dumps(inner),
            }
            self.next_id += 1
            yield Record("device", t, fields)

    def info(self) -> dict[str, Any]:
        return {"rate": self.rate, "users": self.users, "devices": self.devices}


OWN = (
    Own("rate", 5.0, "records per second of event time (5)"),
    Own("users", 40, "distinct users (40)"),
    Own("devices", 20, "distinct devices (20)"),
)


add_arguments, run = command(DEFAULTS, OWN, lambda own, spec: Devices(**own))
