"""Article-view events for the ``trending`` pipeline: a news site's readers, with realistic dirt.

The stream is a sequence of *slots*; slot ``i`` has the nominal event time
``start + i / rate``. Slots are cut into files of ``file_every`` event time each
(``views-00000000.jsonl``, ``views-00000001.jsonl``, ...; lexical order is time order), and each
slot becomes exactly one line of one of these kinds:

* **valid, in order** - ``ts`` is the slot's nominal time, never earlier than any valid ``ts``
  written before it.
* **out of order** - ``ts`` is earlier than the maximum valid ``ts`` written so far, by at most
  ``watermark`` (so a query with that watermark keeps it).
* **late** - ``ts`` is older than ``M - watermark - window`` where ``M`` is the maximum valid
  ``ts`` of all files *before the previous one*. Spark filters late rows with the watermark of
  the *previous* micro-batch (each stateful operator's "watermark for late events"), so in batch
  ``k`` rows older than ``max(ts of batches < k-1) - watermark`` are dropped. When each file is
  its own micro-batch (``maxFilesPerTrigger=1``) every late event is therefore dropped, and no
  other valid event is; with other batch boundaries whether Spark drops a given late event
  varies, so the report counts what was generated, not what Spark will do.
* **duplicate** - an exact byte copy of an earlier valid line that is not late (same
  ``event_id``), taken from the current file or the previous one, so some duplicates cross file
  boundaries. Late lines are never re-sent, so with one file per micro-batch a deduplicating
  query drops exactly ``duplicates`` rows as duplicates and ``late`` rows as late.
* **malformed** - one of ``not_json``, ``missing_event_id``, ``missing_article_id``, ``bad_ts``
  (a string no ISO-8601 parser accepts) or ``wrong_type`` (``article_id`` is a JSON object or
  array). Note that Spark's JSON reader turns an object or array in a ``StringType`` field into
  its JSON text, so a pipeline must check the shape of ``article_id`` (``^a[0-9]+$``) to count
  ``wrong_type`` lines as malformed rather than as unknown articles.

Independently, a fraction ``unknown_article`` of the valid unique events names an article id that
is not in the catalog (ids just above the catalog's range, same width).

Valid ``ts`` values are ISO-8601 with milliseconds in three encodings of the same instant: mostly
UTC with ``Z``, some with a numeric offset (``+02:00``, ``-05:00``, ...), some with no zone, which
means UTC. Pipelines must therefore parse with the session time zone set to UTC.

Traffic is skewed and moves: article popularity follows a Zipf law over a ranking, and every
``rotate_every`` of event time one to three stories "break" (jump from the long tail to the top),
pushing the others down. Readers come from a pool of concurrent sessions, so a user reads several
articles in a row; heavy readers (low user numbers) come back more often.

The same spec and seed give byte-identical files: all randomness comes from ``random.Random``
seeded from the spec, and nothing in the content depends on the wall clock.
"""

from __future__ import annotations

import contextlib
import csv
import io
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Protocol

from slipstream.core.files import write_atomically
from slipstream.monitor.progressbar import ProgressBar
from slipstream.tools.generators.trending_spec import (
    CATALOG_HEADER,
    MALFORMED_KINDS,
    SECTIONS,
    GenerationReport,
    MalformedKind,
    SpecError,
    TrendingSpec,
)
from slipstream.tools.generators.trending_stream import (
    FILE_PREFIX,
    FILE_SUFFIX,
    Article,
    TrendingStream,
    catalog,
    event_file_name,
)

__all__ = [
    "CATALOG_HEADER",
    "MALFORMED_KINDS",
    "SECTIONS",
    "Article",
    "Clock",
    "GenerationReport",
    "MalformedKind",
    "SpecError",
    "SystemClock",
    "TrendingSpec",
    "catalog",
    "event_file_name",
    "generate",
    "write_catalog",
]


class Clock(Protocol):
    """Wall time for pacing, in seconds on a monotonic scale. Tests inject a fake."""

    def now(self) -> float: ...

    def sleep_until(self, t: float) -> None: ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``time.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t: float) -> None:
        while (remaining := t - time.monotonic()) > 0:
            time.sleep(remaining)


def write_catalog(path: Path, spec: TrendingSpec) -> Path:
    """Write the catalog as CSV (``article_id,title,section,published_at``), atomically."""
    path = Path(path)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CATALOG_HEADER)
    for article in catalog(spec):
        published = article.published_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        writer.writerow((article.article_id, article.title, article.section, published))
    return write_atomically(path.parent, path.name, buffer.getvalue().splitlines())


def generate(
    spec: TrendingSpec,
    out_dir: Path,
    *,
    clock: Clock | None = None,
    progress: bool = False,
    write: Callable[[str, list[str]], object] | None = None,
) -> GenerationReport:
    """Write the event files of ``spec`` into ``out_dir`` and report exactly what was written.

    With ``clock=None`` files are written as fast as possible. With a clock, file ``k`` (event
    time ``[start + k·file_every, start + (k+1)·file_every)``) is written once the clock reaches
    ``clock.now() at the call + (k+1)·file_every``, so files appear at the live rate. Ctrl-C
    (SIGINT in the main thread) or a ``KeyboardInterrupt`` out of ``clock.sleep_until`` stops the
    run after the current file is written; a second Ctrl-C aborts at once. ``out_dir`` is created
    if needed and must not already hold event files: Spark's file source never re-reads a file
    name it has seen, so overwriting them would silently lose data. ``write(name, lines)``
    replaces the files with another destination (a Kafka topic: generators/kafka_out.py);
    ``out_dir`` is then not touched.
    """
    out_dir = Path(out_dir)
    if write is None:
        out_dir.mkdir(parents=True, exist_ok=True)
    existing = sorted(out_dir.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}")) if write is None else []
    if existing:
        raise FileExistsError(
            f"{out_dir} already holds {len(existing)} event files (e.g. {existing[0].name}); "
            "generate into an empty directory or delete them first"
        )
    stream = TrendingStream(spec)
    file_every_s = spec.file_every.total_seconds()
    started = clock.now() if clock is not None else 0.0
    with (
        stop_on_sigint() as stop,
        ProgressBar(spec.total_lines, "trending", enabled=None if progress else False) as bar,
    ):
        while not stop.is_set():
            lines = stream.next_file()
            if lines is None:
                break
            if clock is not None:
                try:
                    clock.sleep_until(started + stream.files * file_every_s)
                except KeyboardInterrupt:
                    stop.set()
            if write is None:
                write_atomically(out_dir, event_file_name(stream.files - 1), lines)
            else:
                write(event_file_name(stream.files - 1), lines)
            bar.update(len(lines))
    return stream.report(interrupted=stop.is_set())


@contextlib.contextmanager
def stop_on_sigint() -> Iterator[threading.Event]:
    """Turn the first SIGINT into a stop request; a second one raises ``KeyboardInterrupt``.

    Only the main thread can own signal handlers; elsewhere the event is never set by a signal.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        yield stop
    finally:
        signal.signal(
            signal.SIGINT, previous if previous is not None else signal.default_int_handler
        )
