package slipstream.jvm;

import java.nio.file.Paths;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The quarantine, served from the query that reads the records: `slipstream_quarantine(input,
 * reason, raw, source)` in the filter that keeps an input's valid rows. It returns true for a
 * row without a reason; a rejected row is written to its task's file and the function returns
 * false, so the row goes no further and the records are read and parsed once.
 *
 * <p>Which query writes an input's quarantine, and where: the session setting {@link #PREFIX}
 * + input (a folder), set while that query starts, which Spark carries to its tasks (the other
 * queries reading the input do not have it: they drop the row, which the owner wrote). Each task
 * writes its rows to a {@link TaskFile}; readers take only batches the query committed
 * (slipstream/sinks/quarantine.py).
 */
public final class Quarantine implements UDF4<String, String, String, String, Boolean> {
  private static final long serialVersionUID = 1L;

  /** The session setting naming an input's quarantine folder, in the query that writes it. */
  public static final String PREFIX = "spark.sql.slipstream.quarantine.";

  /** The function's name in a session. */
  public static final String NAME = "slipstream_quarantine";

  /**
   * The batch a foreachBatch function gives the session it runs in: under Spark Connect that
   * function runs in a Python worker whose jobs are not on the query's thread, so they lack
   * Spark's own batch property.
   */
  public static final String BATCH_SETTING = "spark.sql.slipstream.batch";

  @Override
  public Boolean call(String input, String reason, String raw, String source) {
    if (reason == null) {
      return Boolean.TRUE;
    }
    TaskContext task = TaskContext.get();
    String folder = task == null ? null : task.getLocalProperty(PREFIX + input);
    if (folder == null || folder.isEmpty()) {
      return Boolean.FALSE; // not this query's to write: the input's owner writes it
    }
    TaskFile file = TaskFile.of(task, Paths.get(folder), "quarantine/" + input);
    file.write(
        json -> {
          json.writeStringField("raw", raw);
          json.writeStringField("reason", reason);
          json.writeStringField("source", source);
          json.writeStringField("quarantined_at", file.opened);
        });
    return Boolean.FALSE;
  }

  /** The function as a session's UDF: nondeterministic, so Spark evaluates it once a row. */
  public static UserDefinedFunction function() {
    return functions.udf(new Quarantine(), DataTypes.BooleanType).asNondeterministic();
  }

  /**
   * Register the quarantine's and the dead-letter's functions in a classic session (a Connect
   * server: {@link QuarantineExtension}).
   */
  public static void register(SparkSession spark) {
    spark.udf().register(NAME, function());
    spark.udf().register(LateRows.NAME, LateRows.function());
    spark.udf().register(LateRows.IsLate.NAME, LateRows.isLate());
  }
}
