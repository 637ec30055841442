"""Expectations: data-quality rules a pipeline declares on its valid input, in three strengths.

    Expectation("value_in_range", "value BETWEEN -50 AND 150", "drop")
    Expectation("article_id_shape", lambda: F.col("article_id").rlike("^a[0-9]+$"), "drop")
    Expectation("user_id_present", "user_id IS NOT NULL")            # warn

- `warn`: count the violation and keep the row;
- `drop`: count it and route the row to the quarantine with reason `expectation NAME failed`;
- `fail`: the query fails with error code EXPECTATION_FAILED (the first violating row's raw
  record is in the message).

A row violates a rule when its condition is not TRUE (FALSE or NULL), so a rule on an optional
field says what it wants for missing values (`user_id IS NULL OR length(user_id) < 64`).
Rules see the typed columns of records that parsed; records rejected by parsing are not
counted again. Rules are evaluated independently: a row breaking two rules counts for both, and
its quarantine reason names the first `drop` rule it broke, in declaration order.

Counts per rule travel with each micro-batch through Spark's `observe()` under the name
`expectations` ({rule: violations}), so they are in the query's progress JSON, the batch line,
the run summary and the metrics, without a second pass over the data. `current_timestamp()` in a
streaming query is the batch's timestamp, recorded in the offset log, so a replayed batch
classifies rows the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from slipstream.errors import ConfigError, SlipstreamError
from slipstream.ingest.parse import RAW, REASON

EXPECTATIONS_METRICS = "expectations"
OnFail = Literal["warn", "drop", "fail"]
ON_FAIL: tuple[OnFail, ...] = get_args(OnFail)
FAILED_MARKER = "[EXPECTATION_FAILED]"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Expectation:
    """A named rule. `condition` is a SQL boolean expression over the record's columns, or a
    callable returning a Column (Columns need a live session, so rules declared at import time
    use a string or a lambda)."""

    name: str
    condition: str | Callable[[], Column]
    on_fail: OnFail = "warn"
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigError(
                "EXPECTATION_INVALID",
                f"expectation name {self.name!r} is not an identifier",
                "use letters, digits and underscores (it names a metric), e.g. value_in_range",
            )
        if self.on_fail not in ON_FAIL:
            raise ConfigError(
                "EXPECTATION_INVALID",
                f"expectation {self.name}: on_fail={self.on_fail!r}",
                f"use one of {', '.join(ON_FAIL)}",
            )
        if isinstance(self.condition, str):
            if not self.condition.strip():
                raise ConfigError(
                    "EXPECTATION_INVALID",
                    f"expectation {self.name}: empty condition",
                    "give a SQL boolean expression or a callable returning a Column",
                )
        elif not callable(self.condition):
            raise ConfigError(
                "EXPECTATION_INVALID",
                f"expectation {self.name}: condition {self.condition!r}",
                "give a SQL boolean expression or a callable returning a Column",
            )

    @property
    def reason(self) -> str:
        """The quarantine reason of a row dropped by this rule."""
        return f"expectation {self.name} failed"

    def describe(self) -> str:
        """`NAME (ON_FAIL): CONDITION (DESCRIPTION)`: the run's header and check list it, and a
        `fail` rule's error names it; a callable's condition is shown by its description."""
        text = f"{self.name} ({self.on_fail})"
        if not isinstance(self.condition, str):
            return f"{text}: {self.description}" if self.description else text
        words = f" ({self.description})" if self.description else ""
        return f"{text}: {self.condition}{words}"

    def column(self) -> Column:
        return F.expr(self.condition) if isinstance(self.condition, str) else self.condition()

    def violated(self) -> Column:
        """TRUE when the row breaks the rule (its condition is FALSE or NULL)."""
        return ~F.coalesce(self.column().cast("boolean"), F.lit(False))


def check_expectations(rules: Sequence[Expectation]) -> tuple[Expectation, ...]:
    """Validate a pipeline's rules together (unique names), before Spark starts."""
    seen: set[str] = set()
    for rule in rules:
        if not isinstance(rule, Expectation):
            raise ConfigError(
                "EXPECTATION_INVALID",
                f"{rule!r} is not an Expectation",
                "declare rules with slipstream.ingest.expectations.Expectation",
            )
        if rule.name in seen:
            raise ConfigError(
                "EXPECTATION_INVALID",
                f"two expectations are named {rule.name!r}",
                "give each rule its own name (names are metric keys)",
            )
        seen.add(rule.name)
    return tuple(rules)


def _parsed_ok() -> Column:
    return F.col(REASON).isNull()


def apply_expectations(
    records: DataFrame, rules: Sequence[Expectation], suffix: str = ""
) -> DataFrame:
    """`route(enforce(records, rules, suffix), rules)`, each rule's test evaluated once a row: a
    column of its own (TRUE where a parsed row breaks the rule) that the count, the `fail` check
    and the routing read, dropped after. (Spark does not share an expression between the
    `observe()` and the projections around it: written in each, a rule ran twice a row.)"""
    if not rules:
        return records
    broken = {rule.name: f"_slipstream_broken_{i}" for i, rule in enumerate(rules)}
    ok = _parsed_ok()
    marked = records.withColumns({broken[rule.name]: ok & rule.violated() for rule in rules})
    tests = {rule.name: F.col(broken[rule.name]) for rule in rules}
    return route(enforce(marked, rules, suffix, tests), rules, tests).drop(*broken.values())


def enforce(
    records: DataFrame,
    rules: Sequence[Expectation],
    suffix: str = "",
    tests: Mapping[str, Column] | None = None,
) -> DataFrame:
    """Count violations per rule with `observe("expectations" + suffix)` and fail on `fail`
    rules. Apply to the branch the outputs read; a query reading several inputs needs a
    `suffix` per input (observed metric names are unique within a query). `tests`: per rule, a
    column already TRUE where a parsed row breaks it (`apply_expectations`)."""
    if not rules:
        return records
    ok = _parsed_ok()
    broken = {rule.name: ok & rule.violated() for rule in rules} if tests is None else tests
    counted = records.observe(
        EXPECTATIONS_METRICS + suffix,
        *[F.count(F.when(broken[rule.name], 1)).alias(rule.name) for rule in rules],
    )
    fatal = [rule for rule in rules if rule.on_fail == "fail"]
    if not fatal:
        return counted
    reason: Column = F.col(REASON)
    for rule in reversed(fatal):
        message = F.concat(
            F.lit(f"{FAILED_MARKER} expectation {rule.name} failed ({rule.describe()}) on: "),
            F.substring(F.coalesce(F.col(RAW), F.lit("")), 1, 500),
        )
        reason = F.when(broken[rule.name], F.raise_error(message).cast("string")).otherwise(reason)
    return counted.withColumn(REASON, reason)


def route(
    records: DataFrame, rules: Sequence[Expectation], tests: Mapping[str, Column] | None = None
) -> DataFrame:
    """Give rows that break a `drop` rule the reason `expectation NAME failed`, so the runner's
    split sends them to the quarantine. Parse failures keep their own reason. `tests`: as
    `enforce`'s."""
    dropping = [rule for rule in rules if rule.on_fail == "drop"]
    if not dropping:
        return records
    reason: Column = F.lit(None).cast("string")
    for rule in reversed(dropping):
        test = rule.violated() if tests is None else tests[rule.name]
        reason = F.when(test, F.lit(rule.reason)).otherwise(reason)
    return records.withColumn(REASON, F.when(_parsed_ok(), reason).otherwise(F.col(REASON)))


class ExpectationFailed(SlipstreamError):
    """A `fail` expectation was violated; the query stopped."""


def as_expectation_failure(error: BaseException) -> ExpectationFailed | None:
    """Recognise a query failure caused by a `fail` rule (raised inside a Spark task)."""
    text = str(error)
    at = text.find(FAILED_MARKER)
    if at < 0:
        return None
    detail = text[at + len(FAILED_MARKER) :].strip().splitlines()[0]
    detail = re.sub(r"\s*SQLSTATE: \w+\s*$", "", detail)
    return ExpectationFailed(
        "EXPECTATION_FAILED",
        detail,
        "fix the data at its source, or relax the rule to 'drop' (quarantine) or 'warn' (count)",
    )
