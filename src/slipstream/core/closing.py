"""`Closing` and `StartStop`: what makes a resource usable in a `with` block, written once.
`Closing` for one with a `close()` (the event log, the metrics and dashboard servers, the
monitoring handles); `StartStop` for one with `start()` and `stop()` (the checkpoint lock, the
pipeline harness, the standalone cluster)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Self


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


class StartStop(Closing):
    """`with thing:` gives what `start()` returns and calls `stop()` at the end, error or not;
    a `start()` that fails calls `stop()` too, for whatever it had started."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def close(self) -> None:
        self.stop()
