"""python -m bench.heappath DUMP CLASS [N]: why are these objects still alive?

Reads a HotSpot heap dump (`jcmd PID GC.heap_dump FILE`) and prints, for the live instances of
CLASS, the shortest reference paths from a GC root, grouped by path (the N most common). Weak
references (`referent`) are not followed, since they keep nothing alive. CLASS `[J>=1MiB`
selects `long[]` arrays of 1 MiB or more (Tungsten memory pages).

This is how issue 16's two retention roots were found:

    BroadcastExchangeExec <- ... <- ActiveJob.finalStage <- DAGScheduler.activeQueryToJobs
    [J>=1MiB <- BytesToBytesMap <- UnsafeHashedRelation <- MemoryStore.entries (broadcasts)

A breadth-first walk over the whole object graph in pure Python: a 1.5 GB dump takes about a
minute and a few GB of memory."""

from __future__ import annotations

import struct
import sys
from collections import Counter, deque
from pathlib import Path

ID = 8  # identifier size of 64-bit HotSpot dumps
SIZES = {2: ID, 4: 1, 5: 2, 6: 4, 7: 8, 8: 1, 9: 2, 10: 4, 11: 8}  # basic type -> bytes
ROOT_SIZES = {0xFF: 8, 0x01: 16, 0x02: 16, 0x03: 16, 0x04: 12, 0x05: 8, 0x06: 12, 0x07: 8,
              0x08: 16}  # fmt: skip
BIG_LONGS = "[J>=1MiB"


class Heap:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.strings: dict[int, str] = {}
        self.name_ids: dict[int, int] = {}  # class id -> string id of its name
        self.class_names: dict[int, str] = {}
        self.classes: dict[int, tuple[int, list[tuple[int, int]]]] = {}  # id -> super, fields
        self.statics: dict[int, list[tuple[int, str]]] = {}
        self.instances: dict[int, tuple[int, int]] = {}  # id -> (offset of fields, class id)
        self.arrays: dict[int, tuple[int, int]] = {}  # id -> (offset, length) of object arrays
        self.kind: dict[int, int] = {}  # object id -> class id (-11: a big long[])
        self.roots: set[int] = set()
        self._layouts: dict[int, list[tuple[int, int]]] = {}
        self._read()

    def _id(self, at: int) -> int:
        return int(struct.unpack_from(">Q", self.data, at)[0])

    def _u4(self, at: int) -> int:
        return int(struct.unpack_from(">I", self.data, at)[0])

    def _read(self) -> None:
        data = self.data
        header_end = data.index(b"\0")
        if self._u4(header_end + 1) != ID:
            raise SystemExit("heappath: only 64-bit heap dumps are supported")
        at = header_end + 1 + 4 + 8
        while at < len(data):
            tag, length = data[at], self._u4(at + 5)
            body = at + 9
            if tag == 0x01:
                self.strings[self._id(body)] = data[body + ID : body + length].decode(
                    "utf-8", "replace"
                )
            elif tag == 0x02:
                self.name_ids[self._id(body + 4)] = self._id(body + 4 + ID + 4)
            elif tag in (0x0C, 0x1C):
                self._segment(body, body + length)
            at = body + length
        self.class_names = {
            c: self.strings.get(n, "?").replace("/", ".") for c, n in self.name_ids.items()
        }
        self.class_names[-11] = BIG_LONGS

    def _segment(self, at: int, end: int) -> None:
        data = self.data
        while at < end:
            sub = data[at]
            at += 1
            if sub in ROOT_SIZES:
                self.roots.add(self._id(at))
                at += ROOT_SIZES[sub]
            elif sub == 0x20:
                at = self._class_dump(at)
            elif sub == 0x21:
                oid, cid, size = self._id(at), self._id(at + ID + 4), self._u4(at + 2 * ID + 4)
                at += 2 * ID + 8
                self.instances[oid] = (at, cid)
                self.kind[oid] = cid
                at += size
            elif sub == 0x22:
                oid, n = self._id(at), self._u4(at + ID + 4)
                self.kind[oid] = self._id(at + ID + 8)
                at += 2 * ID + 8
                self.arrays[oid] = (at, n)
                at += ID * n
            elif sub == 0x23:
                oid, n, basic = self._id(at), self._u4(at + ID + 4), data[at + ID + 8]
                if basic == 11 and n * 8 >= 1 << 20:
                    self.kind[oid] = -11
                at += ID + 9 + n * SIZES[basic]
            else:
                raise SystemExit(f"heappath: unknown heap record {sub:#x} at {at}")

    def _class_dump(self, at: int) -> int:
        cid, parent = self._id(at), self._id(at + ID + 4)
        at += 7 * ID + 8  # ids of class, super, loader, signers, domain, 2 reserved; 2 u4
        count = struct.unpack_from(">H", self.data, at)[0]  # constant pool: index, type, value
        at += 2
        for _ in range(count):
            at += 2
            at += 1 + SIZES[self.data[at]]
        statics = []
        count = struct.unpack_from(">H", self.data, at)[0]
        at += 2
        for _ in range(count):
            name, basic = self._id(at), self.data[at + ID]
            at += ID + 1
            if basic == 2 and self._id(at):
                statics.append((self._id(at), "static " + self.strings.get(name, "?")))
            at += SIZES[basic]
        fields = []
        count = struct.unpack_from(">H", self.data, at)[0]
        at += 2
        for _ in range(count):
            fields.append((self._id(at), self.data[at + ID]))
            at += ID + 1
        self.classes[cid] = (parent, fields)
        self.statics[cid] = statics
        return at

    def layout(self, cid: int) -> list[tuple[int, int]]:
        """Instance fields in dump order: the class's own, then each superclass's."""
        if cid not in self._layouts:
            out: list[tuple[int, int]] = []
            current = cid
            while current:
                parent, fields = self.classes.get(current, (0, []))
                out.extend(fields)
                current = parent
            self._layouts[cid] = out
        return self._layouts[cid]

    def references(self, oid: int) -> list[tuple[int, str]]:
        if oid in self.statics:
            return self.statics[oid]
        if oid in self.arrays:
            at, n = self.arrays[oid]
            return [(self._id(at + ID * i), f"[{i}]") for i in range(n) if self._id(at + ID * i)]
        if oid not in self.instances:
            return []
        at, cid = self.instances[oid]
        out = []
        for name, basic in self.layout(cid):
            if basic == 2:
                target = self._id(at)
                label = self.strings.get(name, "?")
                if target and label != "referent":
                    out.append((target, label))
            at += SIZES[basic]
        return out

    def name(self, oid: int) -> str:
        if oid in self.classes:
            return f"class {self.class_names.get(oid, '?')}"
        return self.class_names.get(self.kind.get(oid, 0), "?")


def paths(heap: Heap, class_name: str, top: int) -> str:
    targets = {o for o, c in heap.kind.items() if heap.class_names.get(c) == class_name}
    parent: dict[int, tuple[int, str] | None] = dict.fromkeys(heap.roots)
    queue, found = deque(heap.roots), [t for t in targets if t in heap.roots]
    while queue and len(found) < len(targets):
        oid = queue.popleft()
        for child, label in heap.references(oid):
            if child not in parent:
                parent[child] = (oid, label)
                queue.append(child)
                if child in targets:
                    found.append(child)
    groups: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for target in found:
        chain, oid = [heap.name(target)], target
        while (step := parent.get(oid)) is not None:
            oid, label = step
            chain.append(f"{heap.name(oid)}.{label}")
        chain[-1] = "ROOT " + chain[-1]
        key = " <- ".join(c.split("[")[0] for c in chain)
        groups[key] += 1
        examples.setdefault(key, chain)
    lines = [f"{len(targets)} live {class_name}; {len(found)} reachable from a GC root"]
    for key, count in groups.most_common(top):
        lines.append(f"\n{count} reached by:\n  " + "\n  <- ".join(examples[key]))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.splitlines()[0])
        return 2
    heap = Heap(Path(argv[0]).read_bytes())
    print(paths(heap, argv[1], int(argv[2]) if len(argv) > 2 else 3))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
