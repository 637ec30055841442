import java.util.ArrayList;
import java.util.List;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;

import scala.jdk.javaapi.CollectionConverters;

/**
 * dropDuplicatesWithinWatermark(key) as a transformWithState processor whose state expires by
 * event-time timers (bench/dedupstate.py). Spark's own operator finds the ids to evict by a
 * scan of its whole state every batch; a timer is kept in RocksDB ordered by its time, so a
 * batch reads only the ids whose time the watermark passed. The first row of an id is kept and
 * its id held until the watermark passes its event time + the delay. Spark drops the late rows
 * before the processor sees them, with the watermark its own operator drops them with (the
 * previous batch's); the timers run on the batch's new one, as its operator evicts.
 */
public class TimerDedup extends StatefulProcessor<String, Row, Row> {
  private final long delayMs;
  private final int tsIndex;
  private transient ValueState<Long> held;

  public TimerDedup(long delayMs, int tsIndex) {
    this.delayMs = delayMs;
    this.tsIndex = tsIndex;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getValueState("held", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      String key, scala.collection.Iterator<Row> rows, TimerValues timers) {
    boolean seen = held.exists();
    List<Row> out = new ArrayList<>(1);
    while (rows.hasNext()) {
      Row row = rows.next();
      long ts = millis(row.get(tsIndex));
      if (seen) {
        continue;
      }
      seen = true;
      long expires = ts + delayMs;
      held.update(expires);
      getHandle().registerTimer(expires);
      out.add(row);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  private static long millis(Object value) {
    return value instanceof java.time.Instant
        ? ((java.time.Instant) value).toEpochMilli()
        : ((java.sql.Timestamp) value).getTime();
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      String key, TimerValues timers, ExpiredTimerInfo info) {
    held.clear();
    return CollectionConverters.asScala(new ArrayList<Row>(0).iterator());
  }

  /** `frame` (with a watermark on `ts`) deduplicated on the string column `key`. */
  public static Dataset<Row> apply(Dataset<Row> frame, String key, String ts, long delayMs) {
    int keyIndex = frame.schema().fieldIndex(key);
    int tsIndex = frame.schema().fieldIndex(ts);
    MapFunction<Row, String> byKey = row -> row.getString(keyIndex);
    return frame
        .groupByKey(byKey, Encoders.STRING())
        .transformWithState(
            new TimerDedup(delayMs, tsIndex),
            ts,
            OutputMode.Append(),
            Encoders.row(frame.schema()));
  }
}
