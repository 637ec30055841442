"""The README's "write your own pipeline" example, run as a user runs it: orders joined to their
payments within a time bound (a stream-stream join, inner and left outer), two inputs, one
parameter, two outputs. Its results are checked against pandas over the same records."""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.app import cli, exits
from slipstream.core.files import write_atomically
from slipstream.sinks.quarantine import read_quarantine
from slipstream.sinks.sqlite import read_table
from tests.helpers import REPO, slipstream

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BOUND = timedelta(minutes=15)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def order(order_id: str, minute: float) -> dict[str, object]:
    at = T0 + timedelta(minutes=minute)
    return {"order_id": order_id, "customer_id": "c1", "amount": 10.0, "order_time": at.isoformat()}


def payment(payment_id: str, order_id: str, minute: float) -> dict[str, object]:
    at = T0 + timedelta(minutes=minute)
    return {
        "payment_id": payment_id,
        "order_id": order_id,
        "amount": 10.0,
        "paid_time": at.isoformat(),
    }


# One file per input per micro-batch (--max-files-per-trigger 1): what each batch brings.
ORDERS = [
    [order("A", 0), order("B", 0), order("C", 1), order("D", 2), order("E", 3)],
    [order("F", 120)],  # moves the orders' watermark to 11:45
    [order("G", 150)],  # one more batch, in which the watermark of batch 1 evicts
]
PAYMENTS = [
    [
        payment("pA", "A", 5),
        payment("pB", "B", 20),  # 20 minutes after its order: too late, B stays unpaid
        payment("pD", "D", 17),  # exactly at the bound: paid
    ],
    [payment("pE", "E", 10), payment("pX", "nobody", 120)],  # E paid in a later batch
    [payment("pY", "nobody", 150)],
]
BAD_PAYMENT = "this is not json"
# the event-time guard holds for a user's pipeline too: --max-past 3650d on the command line
FUTURE_ORDER = json.dumps({**order("Z", 0), "order_time": "9999-12-31T00:00:00Z"})
ANCIENT_PAYMENT = json.dumps({**payment("pZ", "A", 0), "paid_time": "2001-01-01T00:00:00Z"})


def expected(batches_orders: list[list[dict]], batches_payments: list[list[dict]]) -> tuple:
    """Independently: paid = every (order, payment) with 0 <= paid - ordered <= bound; unpaid =
    the orders with no such payment whose bound ended before the final watermark (the lowest of
    the two inputs' max event time before the last batch, minus the bound)."""
    o = pd.DataFrame([r for b in batches_orders for r in b])
    p = pd.DataFrame([r for b in batches_payments for r in b])
    o["order_time"], p["paid_time"] = (
        pd.to_datetime(o["order_time"]),
        pd.to_datetime(p["paid_time"]),
    )
    both = o.merge(p, on="order_id", suffixes=("", "_paid"))
    delay = both["paid_time"] - both["order_time"]
    paid = both[(delay >= pd.Timedelta(0)) & (delay <= BOUND)]
    seen_o = max(pd.to_datetime(r["order_time"]) for b in batches_orders[:-1] for r in b)
    seen_p = max(pd.to_datetime(r["paid_time"]) for b in batches_payments[:-1] for r in b)
    watermark = min(seen_o, seen_p) - BOUND
    open_ = o[~o["order_id"].isin(paid["order_id"])]
    unpaid = open_[open_["order_time"] + BOUND < watermark]
    return set(zip(paid["order_id"], paid["payment_id"], strict=True)), set(unpaid["order_id"])


def land(folder: Path, batches: list[list[dict]], extra: dict[int, list[str]]) -> None:
    folder.mkdir(parents=True)
    for i, batch in enumerate(batches):
        lines = [json.dumps(r) for r in batch] + extra.get(i, [])
        path = write_atomically(folder, f"{i:03d}.json", lines)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the files source's order


def test_orders_example_runs_from_the_cli_with_exact_join_semantics(
    spark: SparkSession, tmp_path: Path
) -> None:
    land(tmp_path / "orders", ORDERS, {0: [FUTURE_ORDER]})
    land(tmp_path / "payments", PAYMENTS, {0: [BAD_PAYMENT], 1: [ANCIENT_PAYMENT]})
    state = tmp_path / "state"
    done = slipstream(
        "run", "examples.orders:Orders",
        "--input", f"orders={tmp_path / 'orders'}", "--input", f"payments={tmp_path / 'payments'}",
        "--pay-within", "15m", "--state-dir", str(state), "--trigger", "available-now",
        "--max-files-per-trigger", "1", "--master", "local[2]",
        "--conf", "spark.sql.shuffle.partitions=2", "--max-past", "3650d",
        cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    db = state / "slipstream.db"
    paid = {(r["order_id"], r["payment_id"]) for r in read_table(db, "paid_orders")}
    unpaid = [r["order_id"] for r in read_table(db, "unpaid_orders")]
    want_paid, want_unpaid = expected(ORDERS, PAYMENTS)
    assert paid == want_paid == {("A", "pA"), ("D", "pD"), ("E", "pE")}
    assert sorted(unpaid) == sorted(want_unpaid) == ["B", "C"]  # each once; F, G not yet final
    bad = read_quarantine(spark, state / "quarantine" / "orders" / "payments").collect()
    assert sorted((r.raw, r.reason.split(":")[0]) for r in bad) == sorted(
        [(BAD_PAYMENT, "not JSON"), (ANCIENT_PAYMENT, "event_time_too_old")]
    )
    bad = read_quarantine(spark, state / "quarantine" / "orders" / "orders").collect()
    assert [(r.raw, r.reason.split(":")[0]) for r in bad] == [
        (FUTURE_ORDER, "event_time_too_far_in_future")
    ]
    assert "summary orders.paid_orders:" in done.stdout


def test_check_refuses_a_wrong_mode_in_the_example_naming_the_rule_and_the_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "p").mkdir()
    argv = ["check", "examples.orders:Orders", "--input", f"orders={tmp_path / 'o'}"]
    argv += ["--input", f"payments={tmp_path / 'p'}", "--state-dir", str(tmp_path / "state")]
    out = io.StringIO()
    assert cli.main([*argv, "--mode", "paid_orders=update"], out) == exits.EXIT_REFUSED
    text = out.getvalue()
    # the output declares the modes a stream-stream join allows: refused before Spark plans
    assert "refused [MODE_NOT_SUPPORTED] output orders.paid_orders" in text
    assert "fix: use --mode append" in text
    out = io.StringIO()
    assert cli.main(argv, out) == exits.EXIT_OK, out.getvalue()
    text = out.getvalue()  # the plans read from the real queries name both joins
    assert "join        stream-stream Inner (bounded by watermarks)" in text
    assert "join        stream-stream LeftOuter (bounded by watermarks)" in text
