"""What the dashboard shows of a run's results. A pipeline may have a view of its own, found here
by the pipeline's name (a pipeline never names its view); otherwise the first output's newest
rows, in the order the pipeline declares (`Pipeline.results_order`), asked of its sink. Under
`more`, the newest rows of each other output whose sink can read them back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slipstream.runtime.bound import Prepared
from slipstream.sinks import Sink, SinkContext
from slipstream.tools.serving import trending

View = Callable[[Sink, SinkContext], dict[str, Any] | None]

#: pipeline name -> its own view of the first output (None from it: the default view)
VIEWS: dict[str, View] = {"trending": trending.dashboard_view}


def newest_rows(prepared: Prepared) -> dict[str, Any] | None:
    """The first output's newest rows, in the pipeline's declared order."""
    order, words = prepared.pipeline.results_order
    view = prepared.sink.preview(prepared.ctx, order_by=order)
    return None if view is None else {"title": f"{prepared.ctx.table}, {words}", **view}


def results_view(prepared: Prepared) -> dict[str, Any] | None:
    """`{"title", "columns", "rows", "updated", "more"}` or None. Cheap: the dashboard asks on
    every poll."""
    own = VIEWS.get(prepared.pipeline.name)
    view = own(prepared.sink, prepared.ctx) if own is not None else None
    if view is None:
        view = newest_rows(prepared)
    more = []
    for out in list(prepared.outputs.values())[1:]:
        if not out.is_output:  # a quarantine
            continue
        rows = out.sink.preview(out.ctx, limit=20)
        if rows is not None:
            more.append({"title": f"{out.name}: {out.ctx.table}, newest rows", **rows})
    if view is not None and more:
        view = {**view, "more": more}
    return view
