"""Where a new checkpoint started (`--from-checkpoint OLD`): OLD's position as the new one's
first start took it, kept in the new checkpoint (`slipstream-from.json`). Plain data and its
file; checkpoint/old.py reads OLD's position, runtime/from_checkpoint.py binds the inputs to it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slipstream.core.files import write_atomically

RECORD = "slipstream-from.json"


@dataclass(frozen=True)
class InputStart:
    """Where one stream input of the new checkpoint starts."""

    name: str
    source: str  # files | kafka
    files: tuple[str, ...] = ()  # files: read by OLD's committed batches (as Spark logged them)
    offsets: dict[str, dict[str, int]] | None = None  # kafka: topic -> partition -> next offset

    def skip_forms(self) -> frozenset[str]:
        """The files as the file source's log (`file:///x`) and `_metadata.file_path`
        (`file:/x`) name them."""
        forms = set(self.files)
        forms |= {"file:/" + f[len("file:///") :] for f in self.files if f.startswith("file:///")}
        return frozenset(forms)

    def describe(self) -> str:
        if self.source == "kafka":
            where = "; ".join(
                f"{t} " + ", ".join(f"{p}@{o}" for p, o in sorted(ps.items(), key=_num))
                for t, ps in sorted((self.offsets or {}).items())
            )
            return f"input {self.name}: kafka from offsets {where} (partition@next offset)"
        return f"input {self.name}: files, skips the {len(self.files):,} files OLD read"


def _num(item: tuple[str, int]) -> int:
    return int(item[0]) if item[0].isdigit() else 0


@dataclass(frozen=True)
class StartFrom:
    """A new checkpoint's start: OLD's position when the new one first started."""

    old: Path  # OLD's checkpoint (the pipeline's folder of query checkpoints)
    taken: str  # when (UTC)
    batches: dict[str, int]  # OLD's queries and the last batch each had committed
    inputs: dict[str, InputStart]
    recorded: bool = False  # False: taken by this run, written when its queries start

    def skips(self, name: str) -> frozenset[str]:
        """Every file input `name` skips (the dead-letter and the landed-files check leave
        them out; the query's filter may carry fewer: runtime.from_checkpoint.still_to_skip)."""
        where = self.inputs.get(name)
        return frozenset() if where is None else where.skip_forms()

    def describe(self) -> list[str]:
        at = ", ".join(f"{q} batch {b}" for q, b in sorted(self.batches.items()))
        return [
            f"started from {self.old} as it stood at {self.taken} (its last committed: {at})",
            *(i.describe() for i in self.inputs.values()),
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "from": str(self.old),
            "taken": self.taken,
            "batches": self.batches,
            "inputs": {
                n: {"source": i.source, "files": list(i.files), "offsets": i.offsets}
                for n, i in self.inputs.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StartFrom:
        inputs = {
            n: InputStart(n, i["source"], tuple(i.get("files") or ()), i.get("offsets"))
            for n, i in data["inputs"].items()
        }
        return cls(Path(data["from"]), data["taken"], data["batches"], inputs, recorded=True)


def read_record(root: Path) -> StartFrom | None:
    try:
        return StartFrom.from_json(json.loads((Path(root) / RECORD).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def report(start: StartFrom | None) -> list[str]:
    """What `check` and `state` print about a new checkpoint's start."""
    if start is None:
        return []
    when = "recorded in this checkpoint" if start.recorded else "taken now, recorded at start"
    return [f"\nstart of this checkpoint ({when}):", *(f"  {line}" for line in start.describe())]


def write_record(root: Path, start: StartFrom) -> Path:
    """Write `start` into the new checkpoint (atomically, private as the state)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    lines = json.dumps(start.as_json(), indent=1).splitlines()
    return write_atomically(Path(root), RECORD, lines, mode=0o600)
