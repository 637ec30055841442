"""Value parsers shared by settings (`config.py`) and pipeline parameters (`Param`).

Each takes what a flag, an environment variable or a TOML key gave (text, number, bool, table)
and returns the typed value, or raises ValueError whose text says what is allowed."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from slipstream.core.kafka_url import KafkaTopic, is_kafka_url
from slipstream.core.spark_format import SparkFormat, is_delta_url, is_format_url
from slipstream.core.specs import parse_duration

T = TypeVar("T")

#: the NAME of `NAME=VALUE`: a Python identifier (so a path or URL with `=` is not mistaken)
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


#: the largest count or rate any flag takes (events/s, files per trigger, rows per second,
#: bursts, generated users...): more is a typo, and would exhaust memory or overflow rather than
#: fail with a message
MAX_COUNT = 1_000_000_000
#: seeds are any 64-bit integer
MAX_SEED = 2**63 - 1


def integer(low: int, high: int) -> Callable[[Any], int]:
    """A parser of whole numbers from `low` to `high`; the error names both bounds."""
    allowed = f"an integer from {low:,} to {high:,}"

    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(allowed)
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):  # text, NaN, infinity
            raise ValueError(allowed) from None
        if not low <= number <= high or (isinstance(value, float) and value != number):
            raise ValueError(allowed)
        return number

    return parse


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def number(low: float, high: float, *, above: bool = True) -> Callable[[Any], float]:
    """A parser of numbers up to `high` and above `low` (or from `low`, with above=False);
    NaN and infinity are refused; the error names both bounds."""
    allowed = (
        f"a number above {_shown(low)} and at most {_shown(high)}"
        if above
        else f"a number from {_shown(low)} to {_shown(high)}"
    )

    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(allowed)
        try:
            parsed = float(value)
        except (TypeError, ValueError):
            raise ValueError(allowed) from None
        if not (low < parsed <= high if above else low <= parsed <= high):  # also NaN
            raise ValueError(allowed)
        return parsed

    return parse


positive_int = integer(1, MAX_COUNT)
positive_number = number(0, MAX_COUNT)
_port = integer(0, 65535)


def port(value: Any) -> int:
    return _port(value)


def flag_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse `type=` from a parser: its message (the bounds) becomes argparse's."""
    import argparse

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: allowed is {exc}") from None

    return convert


def choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return text

    return parse


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("true or false")


def boolean_or_auto(value: Any) -> bool | None:
    """A boolean, or `auto` (None): the run decides (e.g. `--ingest-stage`)."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    try:
        return boolean(value)
    except ValueError:
        raise ValueError("true, false or auto") from None


_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/")


def path(value: Any) -> Path:
    """A local path; `file:///abs/path` is taken as /abs/path. Other URIs (s3a://, hdfs://,
    gs://) are refused: checkpoint locks, `reset` and the outputs' marks work on the local file
    system only, and a URI read as a local path would land in a folder named `s3a:`."""
    text = str(value).strip()
    if not text:
        raise ValueError("a path")
    scheme = _SCHEME.match(text)
    if scheme and scheme.group("scheme").lower() == "file":
        parsed = urllib.parse.urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"a local path (file:// on host {parsed.netloc!r} is not local)")
        text = urllib.parse.unquote(parsed.path)
    elif scheme:
        raise ValueError(
            f"a local path: {scheme.group('scheme')}:// paths are not supported (locks, reset "
            "and output marks work on the local file system); use a local or mounted folder"
        )
    return Path(text).expanduser()


def input_location(value: Any) -> Any:
    """Where a stream input is: a local path, a Kafka topic
    (`kafka://HOST:PORT/TOPIC?OPTION=VALUE`, slipstream.core.kafka_url.KafkaTopic) or any format
    Spark loads (`format:FORMAT[:PATH][?OPTION=VALUE]`, slipstream.core.spark_format), a Delta
    table (`delta:PATH[?OPTION=VALUE]`, read by sources/delta.py)."""
    if isinstance(value, KafkaTopic | SparkFormat):
        return value
    if is_kafka_url(value):
        return KafkaTopic.parse(str(value))
    if is_format_url(value):
        return SparkFormat.parse(str(value))
    if is_delta_url(value):
        return SparkFormat.parse_delta(str(value))
    return path(value)


def text(value: Any) -> str:
    out = str(value).strip()
    if not out:
        raise ValueError("a non-empty text")
    return out


def connect_url(value: Any) -> str:
    """A Spark Connect URL: sc://HOST[:PORT][/;param=value...]."""
    url = str(value).strip()
    host = url[5:].split("/", 1)[0].split(":", 1)[0] if url.startswith("sc://") else ""
    if not host:
        raise ValueError("a Spark Connect URL such as sc://127.0.0.1:15002")
    return url


def duration(value: Any) -> timedelta:
    return parse_duration(value)


def optional_duration(value: Any) -> timedelta | None:
    """A duration, or `none`/`off` for no value (e.g. no slide: tumbling windows)."""
    if value is None or str(value).strip().lower() in ("none", "off", ""):
        return None
    return parse_duration(value)


def conf(value: Any) -> dict[str, str]:
    """`--conf key=value` (repeatable) or a TOML table."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    items = [value] if isinstance(value, str) else list(value)
    out: dict[str, str] = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError("key=value pairs, e.g. spark.sql.shuffle.partitions=8")
        out[key.strip()] = val.strip()
    return out


def named(parse: Callable[[Any], T]) -> Callable[[Any], dict[str, T]]:
    """`VALUE` or `NAME=VALUE`, repeatable (or a TOML table of NAME = VALUE) -> {NAME: value};
    a bare VALUE is stored under the name "" (it applies to every input or output that takes
    one). NAME must be an identifier, so `postgresql://h/db?sslmode=require` or `data/day=1`
    stay whole values."""

    def parse_named(value: Any) -> dict[str, T]:
        if isinstance(value, Mapping):
            return {str(k): parse(v) for k, v in value.items()}
        items = [value] if isinstance(value, str | Path) or not _iterable(value) else list(value)
        out: dict[str, T] = {}
        for item in items:
            name, sep, rest = str(item).partition("=")
            if sep and NAME.match(name.strip()):
                out[name.strip()] = parse(rest)
            else:
                out[""] = parse(item)
        return out

    return parse_named


def _iterable(value: Any) -> bool:
    return isinstance(value, list | tuple)
