package slipstream.jvm;

import java.time.Instant;
import java.util.Collections;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.DataTypes;
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
 * + the delay. The key's one timer is all its state: a key with a timer is held, and the timer's
 * firing frees it (no value beside it, so no value written and deleted per id:
 * docs/benchmarks.md section 47). Spark drops the late rows before the processor sees them, with
 * the watermark its own operator drops them with (the previous batch's); the timers run on the
 * batch's new one, as its operator evicts. The output keeps the input's columns and carries the watermark on the
 * event-time column.
 */
public final class TimerDedup<K> extends StatefulProcessor<K, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final long delayMs;
  private final int timeIndex;

  TimerDedup(long delayMs, int timeIndex) {
    this.delayMs = delayMs;
    this.timeIndex = timeIndex;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {}

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      K key, scala.collection.Iterator<Row> rows, TimerValues timers) {
    if (getHandle().listTimers().hasNext()) { // held: its timer has not fired
      return scala.collection.Iterator.empty();
    }
    Row row = rows.next();
    long expires = millis(row.get(timeIndex)) + delayMs;
    getHandle().registerTimer(expires);
    return CollectionConverters.asScala(Collections.singletonList(row).iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      K key, TimerValues timers, ExpiredTimerInfo info) {
    return scala.collection.Iterator.empty(); // the fired timer is gone: the key is free
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
    Column[] columns = new Column[keys.length];
    StructField[] fields = new StructField[keys.length];
    for (int i = 0; i < keys.length; i++) {
      columns[i] = frame.col(keys[i]);
      fields[i] = schema.fields()[schema.fieldIndex(keys[i])];
    }
    TimerDedup<Object> processor = new TimerDedup<>(delayMs, schema.fieldIndex(eventTime));
    boolean oneString = keys.length == 1 && fields[0].dataType().equals(DataTypes.StringType);
    @SuppressWarnings("unchecked")
    Encoder<Object> keyEncoder =
        (Encoder<Object>)
            (oneString ? (Encoder<?>) Encoders.STRING() : Encoders.row(new StructType(fields)));
    KeyValueGroupedDataset<Object, Row> grouped =
        frame.groupBy(columns).as(keyEncoder, Encoders.row(schema));
    return grouped.transformWithState(
        processor, eventTime, OutputMode.Append(), Encoders.row(schema));
  }
}
