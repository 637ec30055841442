"""`slipstream generate activity`: user actions `{"user_id", "action", "ts"}` for the `activity`
pipeline (seed 000's user-status example).

Users come and go. Each is idle for a while (exponential, mean `--idle` 45 minutes, so some stay
away longer than an hour), then opens the app (`open`), acts every few seconds (`click`,
`scroll`, now and then `purchase`) and leaves with `close`, or with `crash` in one session of
ten. A known set of `--bursty` users acts every 1-2 seconds in their sessions: more than 30
actions a minute, which the pipeline alerts on. The report names them and counts sessions and
crashes. Out-of-order, late, duplicate and malformed records come from generators/streams.py.

    slipstream generate activity --out DIR [--users N] [--bursty N] [--idle D] ..."""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from slipstream.tools.generators import streams
from slipstream.tools.generators.stream_command import Own, command
from slipstream.tools.generators.streams import Record, Shape, StreamSpec

ACTIONS = ("click", "scroll", "purchase")
SHAPE = Shape("actions", time_field="ts", required=("user_id", "action", "ts"), numeric=())
DEFAULTS = StreamSpec(duration=timedelta(hours=4), file_every=timedelta(minutes=1))
_SECOND = 1000


class Users:
    name = "activity"
    shapes = (SHAPE,)

    def __init__(
        self,
        users: int = 200,
        bursty: int = 3,
        idle: timedelta = timedelta(minutes=45),
        seed: int = 1,
    ) -> None:
        if users < 1 or not 0 <= bursty <= users:
            raise streams.bad("bursty", bursty, f"a count of users within --users ({users})")
        if idle < timedelta(seconds=1):
            raise streams.bad("idle", idle, "at least 1s")
        rng = random.Random(f"slipstream.activity.users:{seed}")
        self.ids = [f"user{n:04d}" for n in range(1, users + 1)]
        self.bursty = frozenset(rng.sample(self.ids, bursty))
        self.idle_ms = idle // timedelta(milliseconds=1)
        self.queue: list[tuple[int, str]] = []  # (time of the user's next action, user)
        self.left: dict[str, int] = {}  # actions left in the current session (absent: idle)
        self.sessions = self.crashes = 0
        self.started = False

    def _next_session(self, rng: random.Random, now: int, user: str) -> None:
        heapq.heappush(self.queue, (now + 1 + int(rng.expovariate(1 / self.idle_ms)), user))

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterator[Record]:
        if not self.started:
            self.started = True
            for user in self.ids:
                self._next_session(rng, start_ms, user)
        while self.queue and self.queue[0][0] < end_ms:
            moment, user = heapq.heappop(self.queue)
            left = self.left.get(user)
            if left is None:  # idle until now: the session opens
                action = "open"
                self.sessions += 1
                self.left[user] = 1 + int(rng.expovariate(1 / 15))
                if user in self.bursty:  # a burst lasts over a minute
                    self.left[user] = max(self.left[user], 60)
            elif left == 0:  # the session ends
                action = "crash" if rng.random() < 0.1 else "close"
                self.crashes += action == "crash"
                del self.left[user]
                yield Record("actions", moment, {"user_id": user, "action": action, "ts": None})
                self._next_session(rng, moment, user)
                continue
            else:
                action = ACTIONS[0 if rng.random() < 0.6 else 1 if rng.random() < 0.95 else 2]
                self.left[user] = left - 1
            yield Record("actions", moment, {"user_id": user, "action": action, "ts": None})
            gap = (
                rng.randrange(1, 3) * _SECOND
                if user in self.bursty
                else int(rng.uniform(3, 40) * _SECOND)
            )
            heapq.heappush(self.queue, (moment + gap, user))

    def info(self) -> dict[str, Any]:
        return {
            "users": len(self.ids),
            "bursty": sorted(self.bursty),
            "sessions_started": self.sessions,
            "crashes": self.crashes,
            "mean_idle_s": self.idle_ms / 1000,
        }


OWN = (
    Own("users", 200, "users (200)"),
    Own("bursty", 3, "users acting every 1-2 s (3)"),
    Own("idle", timedelta(minutes=45), "mean idle gap between sessions (45m)"),
)


add_arguments, run = command(DEFAULTS, OWN, lambda own, spec: Users(**own, seed=spec.seed))
