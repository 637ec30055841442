"""`Closing`: what makes a resource with a `close()` usable in a `with` block, written once
(the event log, the metrics and dashboard servers, the monitoring handles)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any


class Closing(AbstractContextManager[Any]):
    """`with resource:` gives the resource and closes it at the end, error or not."""

    def close(self) -> None:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
