"""Terminal output through `rich`: tables, the live demo screen and progress bars.

On a terminal, rich draws (colours, box lines, in-place redraws). When the output is not a
terminal (a pipe, a log file, CI, a test's StringIO), the same renderables print as plain text:
no escape codes, one line per row, wide enough not to wrap, so logs stay greppable."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table

PLAIN_WIDTH = 200  # columns of plain output: wide tables stay one line per row


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False


def console_for(stream: TextIO, *, terminal: bool | None = None) -> Console:
    """A Console writing to `stream`: a terminal's, or plain text (`terminal` forces it)."""
    tty = is_terminal(stream) if terminal is None else terminal
    if tty:
        return Console(file=stream, force_terminal=True, highlight=False)
    return Console(
        file=stream,
        force_terminal=False,
        no_color=True,
        color_system=None,
        width=PLAIN_WIDTH,
        highlight=False,
        soft_wrap=False,
    )


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    numeric: Sequence[int] = (),
    title: str | None = None,
    framed: bool = False,
) -> Table:
    """Columns and rows as a rich Table; `numeric` columns align right. Every column but the
    last keeps its full width; the last one wraps when the line is too long."""
    grid = Table(
        title=title,
        title_justify="left",
        box=box.ASCII if framed else box.SIMPLE_HEAD,
        show_edge=framed,
        pad_edge=framed,
        header_style="bold",
    )
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    last = len(columns) - 1
    for i, name in enumerate(columns):
        widest = max([len(name), *(len(r[i]) for r in cells if i < len(r))])
        grid.add_column(
            name,
            justify="right" if i in numeric else "left",
            no_wrap=i < last,
            min_width=widest if i < last else None,
            overflow="fold",
        )
    for row in cells:
        grid.add_row(*row)
    return grid


def render(renderable: RenderableType) -> str:
    """A renderable as plain text (no escape codes), lines stripped of trailing blanks."""
    buffer = io.StringIO()
    console_for(buffer, terminal=False).print(renderable)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def show(stream: TextIO, renderable: RenderableType) -> None:
    """Print a renderable: drawn by rich on a terminal, plain text otherwise."""
    if is_terminal(stream):
        console_for(stream).print(renderable)
    else:
        stream.write(render(renderable) + "\n")
        stream.flush()
