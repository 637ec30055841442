package slipstream.jvm;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * dropDuplicatesWithinWatermark(keys) as a transformWithState processor whose state expires by
 * event-time timers. Spark's own operator finds the keys to evict by reading all of its state
 * every batch; a timer is kept in RocksDB ordered by its time, so a batch reads only the keys
 * whose time the watermark passed (docs/benchmarks.md section 45).
 *
 * <p>The first row of a key is kept and the key held until the watermark passes its event time
 * + the delay. Spark drops the late rows before the processor sees them, with the watermark its
 * own operator drops them with (the previous batch's); the timers run on the batch's new one, as
 * its operator evicts. The output keeps the input's columns and carries the watermark on the
 * event-time column.
 */
public final class TimerDedup extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final long delayMs;
  private final int timeIndex;
  private transient ValueState<Long> held;

  TimerDedup(long delayMs, int timeIndex) {
    this.delayMs = delayMs;
    this.timeIndex = timeIndex;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getValueState("held", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      Row key, scala.collection.Iterator<Row> rows, TimerValues timers) {
    boolean seen = held.exists();
    List<Row> out = new ArrayList<>(1);
    while (rows.hasNext()) {
      Row row = rows.next();
      if (seen) {
        continue;
      }
      seen = true;
      long expires = millis(row.get(timeIndex)) + delayMs;
      held.update(expires);
      getHandle().registerTimer(expires);
      out.add(row);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timers, ExpiredTimerInfo info) {
    held.clear();
    return CollectionConverters.asScala(new ArrayList<Row>(0).iterator());
  }

  private static long millis(Object value) {
    return value instanceof Instant
        ? ((Instant) value).toEpochMilli()
        : ((java.sql.Timestamp) value).getTime();
  }

  /**
   * `frame` (with a watermark on `eventTime`) with a row of the same `keys` kept once within
   * `delayMs` of event time, as dropDuplicatesWithinWatermark(keys) keeps it.
   */
  public static Dataset<Row> apply(
      Dataset<Row> frame, String[] keys, String eventTime, long delayMs) {
    StructType schema = frame.schema();
    int[] indexes = new int[keys.length];
    StructField[] fields = new StructField[keys.length];
    for (int i = 0; i < keys.length; i++) {
      indexes[i] = schema.fieldIndex(keys[i]);
      fields[i] = schema.fields()[indexes[i]];
    }
    MapFunction<Row, Row> byKey =
        row -> {
          Object[] values = new Object[indexes.length];
          for (int i = 0; i < indexes.length; i++) {
            values[i] = row.get(indexes[i]);
          }
          return RowFactory.create(values);
        };
    return frame
        .groupByKey(byKey, Encoders.row(new StructType(fields)))
        .transformWithState(
            new TimerDedup(delayMs, schema.fieldIndex(eventTime)),
            eventTime,
            OutputMode.Append(),
            Encoders.row(schema));
  }
}
