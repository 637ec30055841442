"""Before a query starts: do its checkpoint's logs agree with each other?

Spark trusts its checkpoint. A damaged one fails deep inside Spark (`Incomplete log file`, a
Jackson message naming no file, a Py4J traceback, `CONCURRENT_STREAM_LOG_UPDATE` with one run)
or, worse, runs on: a truncated source log made Spark read 27 files again and count 700
records twice. Each check here reads files only (no Spark) and names the file, what it means
and the way out (CHECKPOINT_DAMAGED):

- `metadata` is a JSON object with the query `id` (present once any batch was planned);
- every `offsets/N` is complete: a version line, the batch's JSON, one line per source;
- every `commits/N` is a version line and a JSON object;
- the last commit has its offsets (Spark plans batch N in offsets/N before it commits it), and
  the offsets run at most one batch past the last commit;
- each file source's log (`sources/I`) holds, whole, every log offset the offsets name, each
  with at least one file (Spark logs an offset only for files it found: one cut to its version
  line is well-formed, and read as "no file" it made every file count again);
- every state store file (`state/OP/PART/N.changelog`, `.zip`, `.delta`, `.snapshot`) matches
  the checksum Hadoop wrote beside it (`.N.changelog.crc`: CRC32 per 512 bytes; Spark's
  temporary files, `.N.changelog.UUID.tmp`, never read, are not checked). Spark does not
  check these when it loads state: a cut changelog fails as `CANNOT_LOAD_STATE_STORE` naming no
  file, inside a Java stack. A cut file is found from its size alone; the content of files up to
  64 MiB is checked too (larger ones, RocksDB snapshots, by size only); and each store holds
  what a restart rebuilds the last committed batch's state from (a snapshot, then every
  changelog after it): a deleted changelog was found only once Spark ran;
- slipstream's own build record (`slipstream-build.json`, runtime/compat.py), when there is
  one, is a JSON object of the shape it writes. A garbled record read as "no record" would let
  a changed window run on state built for another (STATE_INCOMPATIBLE never asked) and be
  overwritten, so no later run could notice. A missing record (a checkpoint built before
  slipstream recorded builds) is not damage."""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slipstream.errors import CheckpointError


@dataclass(frozen=True)
class Damage:
    file: Path
    what: str
    fix: str | None = None  # the way out when it is not WAY_OUT's


def _numbered(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    return {int(p.name): p for p in folder.iterdir() if p.name.isdigit()}


def _lines(path: Path) -> list[str] | None:
    """The file's lines, or None when it cannot be read as text."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None


def _json(text: str) -> Any:
    """The JSON value of `text`; None when it is not JSON (or is JSON's null)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def _version_then_json(path: Path, at_least: int) -> str | None:
    """What is wrong with a log file of Spark's (a version line, then JSON lines), or None."""
    lines = _lines(path)
    if lines is None:
        return "cannot be read as text"
    if not lines:
        return "is empty"
    if not lines[0].startswith("v"):
        return f"does not start with a version line (found {lines[0][:40]!r})"
    if len(lines) < at_least:
        return f"is incomplete ({len(lines)} lines, at least {at_least} expected)"
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() != "-" and _json(line) is None:  # offsets of some sources are numbers
            return f"line {number} is not JSON (truncated or garbled)"
    return None


NO_FILE_WHY = (
    "the offsets say a batch read files from it (the file source logs a log offset only for "
    "files it found); read as it is, every file would be counted again"
)


def _source_log_has(
    folder: Path, log_offset: int, compacted: dict[Path, set[int]]
) -> Damage | None:
    """Whether the file source's log holds, whole, log offset `log_offset` and at least one
    file of it. `compacted`: the log offsets each compacted file was found to hold (read once)."""
    plain = folder / str(log_offset)
    if plain.is_file():
        problem = _version_then_json(plain, 1)
        if problem is None and len(_lines(plain) or []) < 2:
            problem = f"names no file (cut to its version line), yet {NO_FILE_WHY}"
        return Damage(plain, problem) if problem else None
    compacts = sorted(
        (int(p.name.split(".")[0]), p)
        for p in folder.glob("*.compact")
        if p.name.split(".")[0].isdigit()
    )
    covering = next((p for n, p in compacts if n >= log_offset), None)
    if covering is None:
        return Damage(plain, "is missing: the offsets name this log offset of the file source")
    problem = _version_then_json(covering, 1)
    if problem:
        return Damage(covering, problem)
    if covering not in compacted:
        entries = (_json(line) for line in (_lines(covering) or [])[1:])
        compacted[covering] = {
            b for e in entries if isinstance(e, dict) and isinstance(b := e.get("batchId"), int)
        }
    if log_offset not in compacted[covering]:
        return Damage(covering, f"names no file of log offset {log_offset}, yet {NO_FILE_WHY}")
    return None


CRC_MAGIC = b"crc\x00"
CONTENT_CHECKED_BYTES = 64 << 20


def _checksum_problem(path: Path, crc: Path) -> str | None:
    """What is wrong with `path` against its Hadoop checksum file `crc`, or None."""
    try:
        sums = crc.read_bytes()
        size = path.stat().st_size
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    if len(sums) < 8 or sums[:4] != CRC_MAGIC or (len(sums) - 8) % 4:
        return None  # not a checksum file this check knows: Spark's own reading decides
    (chunk,) = struct.unpack(">i", sums[4:8])
    if chunk <= 0:
        return None
    want = (len(sums) - 8) // 4
    have = -(-size // chunk)
    if have != want:
        return f"is cut or grown: {size} bytes where its checksum file describes {want} chunks"
    if size > CONTENT_CHECKED_BYTES:
        return None
    with open(path, "rb") as data:
        for index in range(want):
            got = zlib.crc32(data.read(chunk))
            (expected,) = struct.unpack(">I", sums[8 + 4 * index : 12 + 4 * index])
            if got != expected:
                first = index * chunk
                return f"is cut or garbled: bytes {first}-{first + chunk - 1} fail its checksum"
    return None


def state_damages(checkpoint: Path) -> list[Damage]:
    """State store files that disagree with their checksums, or that the last committed batch's
    state needs and are gone (empty for a stateless query)."""
    found: list[Damage] = []
    state = Path(checkpoint) / "state"
    if not state.is_dir():
        return found
    for crc in sorted(state.rglob(".*.crc")):
        path = crc.with_name(crc.name[1:-4])
        if path.is_file() and not _temporary(path):
            problem = _checksum_problem(path, crc)
            if problem:
                found.append(Damage(path, problem))
    commits = _numbered(Path(checkpoint) / "commits")
    if commits:
        found += _missing_versions(state, max(commits) + 1)
    return found


def _temporary(path: Path) -> bool:
    """A file Spark writes before it renames it into place (`.4.changelog.UUID.TID8.tmp`,
    CheckpointFileManager's): never read, so never damage, whole or not. A task that failed
    (a full disk) leaves it behind, cut, with the checksum file of what it meant to write."""
    return path.name.startswith(".") and path.name.endswith(".tmp")


_STATE_FILE = re.compile(r"(\d+)\.(changelog|delta|zip|snapshot)")
_SNAPSHOTS = ("zip", "snapshot")
_NOT_A_STORE = ("_metadata", "SSTs")


def _stores(state: Path) -> list[Path]:
    """Each state store's folder: `state/OP/PART`, or a join's `state/OP/PART/STORE`."""
    stores = []
    for operator in sorted(p for p in state.iterdir() if p.is_dir() and p.name.isdigit()):
        for part in sorted(p for p in operator.iterdir() if p.is_dir() and p.name.isdigit()):
            named = [p for p in part.iterdir() if p.is_dir() and p.name not in _NOT_A_STORE]
            stores += sorted(named) or [part]
    return stores


def _missing_versions(state: Path, version: int) -> list[Damage]:
    """The state files a restart needs and cannot find. Batch N committed, each store holds
    version N+1: the newest snapshot at or below it (`V.zip` RocksDB, `V.snapshot` HDFS; none:
    from empty), then one changelog (`.delta`) for each version after it. Spark finds a missing
    one only once the query runs, after the quarantine's query may have committed a batch.
    Stores of another layout (checkpoint format 2's `V_ID.changelog`) are left to Spark."""
    found = []
    for store in _stores(state):
        names = [p.name for p in store.iterdir() if p.is_file()]
        if any("_" in n and n.split("_")[0].isdigit() for n in names):
            continue  # checkpoint format 2: files named by version and id
        files: dict[str, set[int]] = {}
        for name in names:
            match = _STATE_FILE.fullmatch(name)
            if match:
                files.setdefault(match.group(2), set()).add(int(match.group(1)))
        snapshots = {v for kind in _SNAPSHOTS for v in files.get(kind, set()) if v <= version}
        changes = files.get("changelog", set()) | files.get("delta", set())
        kind = "delta" if "delta" in files else "changelog"
        for needed in range(max(snapshots, default=0) + 1, version + 1):
            if needed not in changes and needed not in snapshots:
                found.append(
                    Damage(
                        store / f"{needed}.{kind}",
                        f"is missing: the state of batch {version - 1} (version {version}) is "
                        f"rebuilt from it, and no snapshot stands in for it",
                    )
                )
                break
    return found


BUILD_RECORD = "slipstream-build.json"  # written by runtime/compat.py
BUILD_FIELDS: dict[str, type] = {
    "version": int,
    "mode": str,
    "sink": dict,
    "inputs": list,
    "settings": dict,
    "state": dict,
}
BUILD_STATE_FIELDS: dict[str, type] = {"operators": list, "window": dict, "watermark": dict}


def _build_record_problem(path: Path) -> str | None:
    """What is wrong with a checkpoint's build record, or None (sound)."""
    lines = _lines(path)
    if lines is None:
        return "cannot be read as text"
    record = _json("\n".join(lines))
    if not isinstance(record, dict):
        return "is not a JSON object (truncated or garbled)"
    state = record.get("state")
    missing = [k for k, kind in BUILD_FIELDS.items() if not isinstance(record.get(k), kind)]
    if isinstance(state, dict):
        missing += [
            f"state.{k}"
            for k, kind in BUILD_STATE_FIELDS.items()
            if not isinstance(state.get(k), kind)
        ]
    if missing:
        return f"lacks {', '.join(missing)} (truncated or garbled)"
    return None


def build_record_damage(checkpoint: Path) -> Damage | None:
    path = Path(checkpoint) / BUILD_RECORD
    if not path.exists():
        return None  # built before slipstream recorded builds: compared from the next run on
    problem = _build_record_problem(path)
    if problem is None:
        return None
    return Damage(
        path,
        problem + ": what the checkpoint's state was built for (window, keys, mode) is unknown, "
        "so a changed pipeline could run on it unnoticed",
        "restore the file from a backup if you have one; otherwise start the output over: "
        "`slipstream reset PIPELINE --outputs` (its results are rebuilt from the "
        "landing folder). Only if the pipeline and its flags are unchanged since this "
        "checkpoint was built: delete the file, and the next run records the build again",
    )


def damages(checkpoint: Path) -> list[Damage]:
    """Every disagreement in one query checkpoint (empty when sound or new)."""
    checkpoint = Path(checkpoint)
    offsets = _numbered(checkpoint / "offsets")
    commits = _numbered(checkpoint / "commits")
    found: list[Damage] = []
    metadata = checkpoint / "metadata"
    if offsets or commits or metadata.exists():
        lines = _lines(metadata) if metadata.exists() else None
        meta = _json(lines[0]) if lines else None
        if not (isinstance(meta, dict) and isinstance(meta.get("id"), str)):
            found.append(Damage(metadata, "is missing or not the query's id (a JSON object)"))
    for path in offsets.values():
        problem = _version_then_json(path, 2)
        if problem:
            found.append(Damage(path, problem))
    for path in commits.values():
        problem = _version_then_json(path, 2)
        if problem:
            found.append(Damage(path, problem))
    if commits:
        last_commit = max(commits)
        if last_commit not in offsets:
            where = checkpoint / "offsets" / str(last_commit)
            found.append(Damage(where, f"is missing, yet batch {last_commit} is committed"))
        if offsets and max(offsets) > last_commit + 1:
            found.append(
                Damage(
                    checkpoint / "commits" / str(max(offsets) - 1),
                    f"is missing: offsets run to batch {max(offsets)}, commits to {last_commit}",
                )
            )
    elif offsets and max(offsets) > min(offsets):
        found.append(Damage(checkpoint / "commits", "is empty, yet several batches are planned"))
    if offsets and not any(d.file.parent.name == "offsets" for d in found):
        lines = _lines(offsets[max(offsets)]) or []
        for index, text in enumerate(lines[2:]):
            offset = _json(text) if text.strip() != "-" else None
            if isinstance(offset, dict) and isinstance(offset.get("logOffset"), int):
                folder = checkpoint / "sources" / str(index)
                first = min(offsets)
                # the log offsets of the batches still in the offsets log
                earliest = _earliest_log_offset(offsets[first], index)
                compacted: dict[Path, set[int]] = {}
                for log_offset in range(max(earliest, 0), offset["logOffset"] + 1):
                    damage = _source_log_has(folder, log_offset, compacted)
                    if damage is not None:
                        found.append(damage)
                        break
    build = build_record_damage(checkpoint)
    if build is not None:
        found.append(build)
    return found + state_damages(checkpoint)


def _earliest_log_offset(path: Path, index: int) -> int:
    lines = _lines(path) or []
    text = lines[2 + index] if len(lines) > 2 + index else "-"
    offset = _json(text) if text.strip() != "-" else None
    return int(offset["logOffset"]) if isinstance(offset, dict) else 0


STATE_LOAD_FAILED = "CANNOT_LOAD_STATE_STORE"
WAY_OUT = (
    "restore the file from a backup if you have one; otherwise start the pipeline "
    "over from its landed files: `slipstream reset PIPELINE --outputs`, then run "
    "(outputs are rebuilt exactly from the landing folder)"
)


def as_state_damage(error: BaseException, name: str, checkpoint: Path) -> CheckpointError | None:
    """CHECKPOINT_DAMAGED for a query that failed loading its state (Spark's
    CANNOT_LOAD_STATE_STORE, which names no file): the damaged file when a checksum shows it."""
    text = str(error)
    at = text.find(STATE_LOAD_FAILED)
    if at < 0:
        return None
    if at > 0 and text[at - 1] == "[":
        at -= 1  # Spark's bracketed error class, whole
    spark_says = text[at:].splitlines()[0].split(" SQLSTATE")[0].strip()
    found = state_damages(checkpoint)
    state = Path(checkpoint) / "state"
    where = f": {found[0].file} {found[0].what}" if found else f" under {state}"
    return CheckpointError(
        "CHECKPOINT_DAMAGED",
        f"the state of {name} cannot be loaded{where} (Spark: {spark_says})",
        WAY_OUT,
    )


def refuse_damaged(checkpoints: dict[str, Path]) -> None:
    """CHECKPOINT_DAMAGED, naming the first damaged file of each query's checkpoint, before
    any query starts."""
    for name, checkpoint in checkpoints.items():
        found = damages(checkpoint)
        if found:
            first = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise CheckpointError(
                "CHECKPOINT_DAMAGED",
                f"the checkpoint of {name} is damaged: {first.file} {first.what}{more}"
                + (
                    ""
                    if first.fix
                    else "; Spark would fail on it, or read files again and count records twice"
                ),
                (first.fix or WAY_OUT).replace("PIPELINE", name.split(".")[0]),
            )
