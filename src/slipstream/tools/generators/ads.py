"""`slipstream generate ads`: seed 000's ad monetization streams, for the `ads` pipeline.

Writes the ad catalog `catalog.csv` (`ad_id,campaign,cost_per_click`) beside OUT and two streams
in two folders:
- `OUT/impressions/`: `{"impression_id", "ad_id", "user_id", "impression_time"}`;
- `OUT/clicks/`: `{"click_id", "impression_id", "ad_id", "user_id", "click_time"}`.

Impressions come at `--rate` per second of event time. A share `--ctr` of them is clicked:
0 to 60 minutes after the impression, or, for a share `--late-clicks` of the clicks, 60 to 120
minutes after it (too late for the seed's one-hour join bound; the report counts both). As in
the seed, both streams are delayed in transit: out-of-order impressions by up to 2 hours, clicks
by up to 3 hours (`--out-of-order` sets how many). Duplicates and malformed records come from
the shared engine (generators/streams.py). The same flags and seed give the same bytes.

    slipstream generate ads --out DIR [--rate N] [--ads N] [--ctr F] [--late-clicks F] ..."""

from __future__ import annotations

import argparse
import csv
import heapq
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from slipstream.core.files import write_atomically
from slipstream.tools.generators import stream_command, streams
from slipstream.tools.generators.stream_command import Own
from slipstream.tools.generators.streams import Record, Shape, StreamSpec

CAMPAIGNS = ("spring-sale", "new-phone", "travel", "streaming", "fitness", "books", "cars")
CATALOG_NAME = "catalog.csv"
SHAPES = (
    Shape(
        "impressions",
        time_field="impression_time",
        required=("impression_id", "ad_id", "impression_time"),
        numeric=(),
        max_delay=timedelta(hours=2),
    ),
    Shape(
        "clicks",
        time_field="click_time",
        required=("click_id", "impression_id", "ad_id", "click_time"),
        numeric=(),
        max_delay=timedelta(hours=3),
    ),
)
DEFAULTS = StreamSpec(
    duration=timedelta(hours=8),
    file_every=timedelta(minutes=5),
    watermark=timedelta(hours=3),
    window=timedelta(hours=1),
    out_of_order=0.3,
    late=0.0,  # lateness is the join's business: see --late-clicks and the transit delays
    duplicates=0.01,
    malformed=0.01,
)
_HOUR_MS = 3_600_000


class Ads:
    name = "ads"
    shapes = SHAPES

    def __init__(
        self,
        rate: float = 2.0,
        ads: int = 40,
        users: int = 5_000,
        ctr: float = 0.1,
        late_clicks: float = 0.05,
        seed: int = 1,
    ) -> None:
        if not rate > 0:
            raise streams.bad("rate", rate, "a positive number of impressions per second")
        for flag, value in (("ads", ads), ("users", users)):
            if value < 1:
                raise streams.bad(flag, value, "a positive integer")
        for flag, share in (("ctr", ctr), ("late_clicks", late_clicks)):
            if not 0 <= share <= 1:
                raise streams.bad(flag, share, "a share between 0 and 1")
        self.rate, self.users, self.ctr, self.late_clicks = rate, users, ctr, late_clicks
        rng = random.Random(f"slipstream.ads.catalog:{seed}")
        self.catalog = [
            (f"ad{n:03d}", CAMPAIGNS[rng.randrange(len(CAMPAIGNS))], round(rng.uniform(0.05, 2), 2))
            for n in range(1, ads + 1)
        ]
        self.origin: int | None = None
        self.impressions = 0
        # clicks made, not yet due: (click time, seq, after the hour?, fields)
        self.pending: list[tuple[int, int, bool, dict[str, Any]]] = []
        self.clicks = {"within_hour": 0, "after_hour": 0}

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterator[Record]:
        if self.origin is None:
            self.origin = start_ms
        period = 1000 / self.rate
        out: list[Record] = []
        slot = max(0, -int(-(start_ms - self.origin) // period))
        while (t := self.origin + int(slot * period)) < end_ms:
            slot += 1
            self.impressions += 1
            ad = self.catalog[min(int(rng.paretovariate(1.2)) - 1, len(self.catalog) - 1)][0]
            user = f"u{rng.randrange(1, self.users + 1):05d}"
            impression = f"i{self.impressions:09d}"
            out.append(Record("impressions", t, {
                "impression_id": impression, "ad_id": ad, "user_id": user,
                "impression_time": None,
            }))  # fmt: skip
            if rng.random() < self.ctr:
                late = rng.random() < self.late_clicks
                delay = (
                    rng.randrange(_HOUR_MS + 1, 2 * _HOUR_MS)
                    if late
                    else rng.randrange(0, _HOUR_MS + 1)
                )
                click = {"click_id": f"c{self.impressions:09d}", "impression_id": impression,
                         "ad_id": ad, "user_id": user, "click_time": None}  # fmt: skip
                heapq.heappush(self.pending, (t + delay, self.impressions, late, click))
        while self.pending and self.pending[0][0] < end_ms:
            moment, _, late, click = heapq.heappop(self.pending)
            self.clicks["after_hour" if late else "within_hour"] += 1
            out.append(Record("clicks", moment, click))
        out.sort(key=lambda r: r.event_ms)
        yield from out

    def info(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "ads": len(self.catalog),
            "impressions_made": self.impressions,
            # clicks written (before dirt), by their delay after the impression; clicks due
            # after the run's end are not written
            "clicks_within_hour": self.clicks["within_hour"],
            "clicks_after_hour": self.clicks["after_hour"],
            "ctr": self.ctr,
            "late_clicks": self.late_clicks,
        }

    def write_catalog(self, path: Path) -> Path:
        lines = [",".join(("ad_id", "campaign", "cost_per_click"))]
        lines += [f"{ad},{campaign},{cost:.2f}" for ad, campaign, cost in self.catalog]
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_atomically(path.parent, path.name, lines)


def read_catalog(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


OWN = (
    Own("rate", 2.0, "impressions per second of event time (2)"),
    Own("ads", 40, "ads in the catalog (40)"),
    Own("users", 5_000, "distinct users (5000)"),
    Own("ctr", 0.1, "share of impressions clicked (0.1)", "F"),
    Own("late_clicks", 0.05, "share of clicks 1-2 hours after the impression (0.05)", "F"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    stream_command.add_arguments(parser, DEFAULTS, *OWN)
    parser.add_argument(
        "--catalog",
        type=Path,
        metavar="FILE",
        help=f"catalog CSV (default: {CATALOG_NAME} beside OUT)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    spec = stream_command.spec_from_args(args, DEFAULTS)
    workload = Ads(**stream_command.own_values(args, *OWN), seed=spec.seed)
    stream_command.check_target(args, workload)
    catalog = args.catalog or Path(args.out).resolve().parent / CATALOG_NAME
    workload.write_catalog(catalog)
    stream_command.run(args, out, workload, spec)
    print(f"catalog {catalog}", file=out)
    return 0
