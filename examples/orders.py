"""Orders joined to their payments within a time bound: a complete two-input pipeline.

    slipstream run examples.orders:Orders \
        --input orders=landing/orders --input payments=landing/payments --pay-within 15m

Inputs (JSON lines, one folder each):
    orders    {"order_id", "customer_id", "amount", "order_time"}
    payments  {"payment_id", "order_id", "amount", "paid_time"}

Parameter `--pay-within` (default 15m): how long after its order a payment still counts. It is
also how late either stream may arrive (the watermark of both), which bounds the join's state:
an order is kept until the payments' watermark passes order_time + pay_within.

Outputs (append: each row is emitted once, when it is final):
    paid_orders    each order with the payment that paid it, within the bound (inner join)
    unpaid_orders  each order no payment paid in time, emitted once the watermark proves none
                   can still come (left outer join, keeping the unmatched)

Rows are written to SQLite under the state directory by default (`--sink NAME=SPEC` for one
output, `--sink SPEC` for both). Malformed records land in quarantine/orders/INPUT with the raw
line and the reason."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.core.specs import spark_interval
from slipstream.pipelines import Input, Output, Params, Pipeline, duration_param

# Spark DDL, parsed once (a pyspark StructType works as well)
ORDERS = "order_id STRING, customer_id STRING, amount DOUBLE, order_time TIMESTAMP"
PAYMENTS = "payment_id STRING, order_id STRING, amount DOUBLE, paid_time TIMESTAMP"


class Orders(Pipeline):
    name = "orders"
    description = "orders joined to the payments that pay them within a time bound"
    inputs = (
        Input("orders", ORDERS, required=("order_id", "order_time"), event_time="order_time"),
        Input(
            "payments",
            PAYMENTS,
            required=("payment_id", "order_id", "paid_time"),
            event_time="paid_time",
        ),
    )
    params = (
        duration_param(
            "pay_within",
            timedelta(minutes=15),
            "how long after its order a payment still counts (also how late input may be)",
        ),
    )
    outputs = (
        Output("paid_orders", key=("order_id", "payment_id"), help="orders with their payment"),
        Output("unpaid_orders", key=("order_id",), help="orders not paid in time"),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        bound = spark_interval(params.pay_within)
        orders = inputs["orders"].withWatermark("order_time", bound).alias("o")
        payments = inputs["payments"].withWatermark("paid_time", bound).alias("p")
        condition = (
            (F.col("o.order_id") == F.col("p.order_id"))
            & (F.col("p.paid_time") >= F.col("o.order_time"))
            & (F.col("p.paid_time") <= F.col("o.order_time") + F.expr(f"INTERVAL {bound}"))
        )
        columns = [
            F.col("o.order_id").alias("order_id"),
            F.col("o.customer_id").alias("customer_id"),
            F.col("o.amount").alias("amount"),
            F.col("o.order_time").alias("order_time"),
        ]
        paid = orders.join(payments, condition, "inner").select(
            *columns,
            F.col("p.payment_id").alias("payment_id"),
            F.col("p.amount").alias("paid_amount"),
            F.col("p.paid_time").alias("paid_time"),
        )
        unpaid = (
            orders.join(payments, condition, "left_outer")
            .where(F.col("p.payment_id").isNull())
            .select(*columns)
        )
        return {"paid_orders": paid, "unpaid_orders": unpaid}
