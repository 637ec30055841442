"""`python -m bench.bare_trending LANDING CATALOG DB`: trending as a user of plain PySpark runs it
live, the engine's own cost beside slipstream in scenario 4 (issue 40): the flagship's bare
streaming query (bench/scenarios/flagship.py `bare_streaming`: Spark's JSON reader, the
pipeline's rules as filters, dedup within the watermark, the sliding count, the catalog join)
with the default trigger, each batch's rows upserted into DB's `article_views` with the batch id
in `_slipstream_batches`, in one transaction. One shuffle partition (what slipstream
chooses for a live run on a local master), Spark's own (HDFS-backed) state store and file
listing (`inproc.SPARK_OWN`), Hadoop's own local file system (`inproc.HADOOP_FILES`). Runs
until it is stopped."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from pyspark.sql import DataFrame

from bench import inproc
from bench.scenarios.flagship import bare_streaming
from slipstream.settings.session import build_session
from slipstream.testing import article_views_db


def main(landing: Path, catalog: Path, db: Path) -> None:
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        article_views_db(db, [])
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE _slipstream_batches (batch_id BIGINT PRIMARY KEY)")
    conf = {inproc.PARTITIONS_KEY: "1", **inproc.SPARK_OWN, **inproc.HADOOP_FILES}
    spark = build_session(conf=conf, app_name="bare-trending", log_level="ERROR")

    def upsert(frame: DataFrame, batch_id: int) -> None:
        rows = [tuple(r) for r in frame.collect()]  # a batch's changed windows: small
        with sqlite3.connect(db) as conn:
            conn.executemany("INSERT OR REPLACE INTO article_views VALUES (?,?,?,?,?,?,?)", rows)
            conn.execute("INSERT OR REPLACE INTO _slipstream_batches VALUES (?)", (batch_id,))

    query = (
        bare_streaming(spark, landing, catalog)
        .writeStream.outputMode("update")
        .option("checkpointLocation", str(db.parent / "bare-checkpoint"))
        .foreachBatch(upsert)
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:4]))
