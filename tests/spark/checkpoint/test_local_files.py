"""A local master writes checkpoint files without starting a process per file
(java/src/slipstream/jvm/LocalFiles.java, settings/slipstream_jar.py): Hadoop's own local file
system starts `chmod` for every file it creates and `readlink` for every rename when its native
library is missing.

Told by a driver whose PATH has no `chmod` and no `readlink`: a stateful query's checkpoint
(offset, commit and source logs, state files, their checksums) is written with the session's
defaults, keeps the session's private permissions, and fails with Hadoop's own file system.
A file's status, read with one `stat`, and a folder's listing equal Hadoop's own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

QUERY = r"""
import json, os, sys
from pathlib import Path
from pyspark.sql import functions as F
from slipstream.settings.session import build_session

work = Path(sys.argv[1])
conf = json.loads(sys.argv[2])
spark = build_session(master="local[1]", conf=conf, log_level="ERROR")
landing = work / "landing"
frame = (
    spark.readStream.schema("k STRING, t TIMESTAMP").json(str(landing))
    .withWatermark("t", "1 minute").groupBy("k", F.window("t", "1 minute")).count()
)
query = (
    frame.writeStream.format("memory").queryName("counts").outputMode("update")
    .option("checkpointLocation", str(work / "ck")).start()
)
for batch in range(3):
    (landing / f".{batch}").write_text(json.dumps({"k": "a", "t": f"2026-12-03T00:0{batch}:00"}))
    os.rename(landing / f".{batch}", landing / f"{batch}.json")
    query.processAllAvailable()
query.stop()
rows = spark.sql("SELECT sum(count) AS n FROM counts").first()
print(json.dumps({"rows": rows["n"] if rows else None}))
"""


def path_without(tmp_path: Path, *names: str) -> str:
    """A PATH folder that links every program of this PATH except `names`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if entry.name in names or link.exists() or link.is_symlink():
                continue
            link.symlink_to(entry.path)
    return str(folder)


def run(tmp_path: Path, name: str, conf: dict[str, str], path: str) -> subprocess.CompletedProcess:
    work = tmp_path / name
    (work / "landing").mkdir(parents=True)
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        [sys.executable, "-c", QUERY, str(work), json.dumps(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_checkpoint_files_are_written_without_chmod_or_readlink(tmp_path: Path) -> None:
    path = path_without(tmp_path, "chmod", "readlink")
    ours = run(tmp_path, "ours", {}, path)
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert json.loads(ours.stdout.strip().splitlines()[-1]) == {"rows": 3}
    checkpoint = tmp_path / "ours" / "ck"
    written = [p for p in checkpoint.rglob("*") if p.is_file()]
    assert any(p.parent.name == "commits" for p in written)
    assert any("state" in p.parts for p in written)
    # the session's umask (077): nothing readable by others, as with Hadoop's own chmod
    assert written and all(p.stat().st_mode & 0o077 == 0 for p in written), [
        (str(p), oct(p.stat().st_mode)) for p in written if p.stat().st_mode & 0o077
    ]

    hadoops = {
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
    }
    theirs = run(tmp_path, "hadoop", hadoops, path)  # the same query on Hadoop's own
    assert theirs.returncode != 0
    assert "chmod" in theirs.stderr or "readlink" in theirs.stderr, theirs.stderr[-3000:]


def _status(status: Any) -> dict[str, Any]:
    return {
        "path": status.getPath().toString(),
        "length": status.getLen(),
        "directory": status.isDirectory(),
        "symlink": status.isSymlink(),
        "replication": status.getReplication(),
        "block": status.getBlockSize(),
        "modified": status.getModificationTime(),
        "accessed": status.getAccessTime(),
        "permission": status.getPermission().toString(),
        "owner": status.getOwner(),
        "group": status.getGroup(),
    }


def test_a_status_and_a_listing_are_hadoops_own(spark: SparkSession, tmp_path: Path) -> None:
    """Statuses read with one `stat` (the file source lists its directory every batch) equal
    Hadoop's own, field by field and in the listing's order, raw and with checksums (a
    symbolic link's are its target's, as Hadoop's); a missing path is Hadoop's error."""
    folder = tmp_path / "landing"
    (folder / "dir").mkdir(parents=True)
    (folder / "sticky").mkdir()
    (folder / "sticky").chmod(0o1777)
    (folder / "plain.json").write_text('{"k": "a"}\n')
    (folder / ".plain.json.crc").write_bytes(b"crc")
    (folder / "empty").touch()
    for name in ("colon:name.json", "space name %20.json", "ünïcode.json", ".hidden"):
        (folder / name).write_text("x\n")
    (folder / "locked").write_text("x\n")
    (folder / "locked").chmod(0o000)
    (folder / "link").symlink_to(folder / "plain.json")
    (folder / "broken").symlink_to(folder / "missing")
    os.utime(folder / "plain.json", ns=(1_700_000_000_123_456_789, 1_700_000_001_987_654_321))

    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    uri = jvm.java.net.URI("file:///")
    hadoop, jar = jvm.org.apache.hadoop.fs, jvm.slipstream.jvm
    pairs = {
        "raw": (hadoop.RawLocalFileSystem(), getattr(jar, "LocalFiles$Raw")()),
        "checksums": (hadoop.LocalFileSystem(), jar.LocalFiles()),
    }
    directory = hadoop.Path(folder.as_uri())
    for kind, (hadoops, ours) in pairs.items():
        hadoops.initialize(uri, conf)
        ours.initialize(uri, conf)
        theirs = [_status(s) for s in hadoops.listStatus(directory)]
        mine = [_status(s) for s in ours.listStatus(directory)]
        link = next(s for s in mine if s["path"].endswith("/link"))
        expected = stat.filemode((folder / "plain.json").stat().st_mode)[1:]
        assert link["permission"] == expected, kind  # its target's, as Hadoop's
        assert mine == theirs, kind
        assert len(mine) == len(os.listdir(folder)) - 1 - (kind == "checksums")  # broken, crc
        assert [s for s in mine if s["path"].endswith("/sticky")][0]["permission"] == "rwxrwxrwt"
        for entry in (
            "dir",
            "plain.json",
            "locked",
            "sticky",
            "link",
            "ünïcode.json",
            "colon:name.json",
            "space name %20.json",
        ):
            path = hadoop.Path(str(folder / entry))
            assert _status(ours.getFileStatus(path)) == _status(hadoops.getFileStatus(path))
        assert _status(ours.getFileStatus(directory)) == _status(hadoops.getFileStatus(directory))
        for entry in ("missing", "broken"):
            path = hadoop.Path(str(folder / entry))
            for fs in (ours, hadoops):
                with pytest.raises(Exception, match="FileNotFoundException.*does not exist"):
                    fs.getFileStatus(path)
        ours.close()
        hadoops.close()
