package slipstream.jvm;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.TaskFailureListener;

/**
 * The quarantine, served from the query that reads the records: `slipstream_quarantine(input,
 * reason, raw, source)` in the filter that keeps an input's valid rows. It returns true for a
 * row without a reason; a rejected row is written to its task's file and the function returns
 * false, so the row goes no further and the records are read and parsed once.
 *
 * <p>Which query writes an input's quarantine, and where: the session setting {@link #PREFIX}
 * + input (a folder), set while that query starts, which Spark carries to its tasks (the other
 * queries reading the input do not have it: they drop the row, which the owner wrote). Each task
 * writes a hidden file and renames it, when the task succeeds, to
 * `batch-B.APP.part-P.json` (B the micro-batch, APP the Spark application, P the partition);
 * a failed task deletes its file. A batch run again after a crash writes the same records
 * under its new application: readers take, per batch, the files of the last application that
 * wrote it, and only batches the query committed (slipstream/ingest/quarantine.py).
 */
public final class Quarantine implements UDF4<String, String, String, String, Boolean> {
  private static final long serialVersionUID = 1L;

  /** The session setting naming an input's quarantine folder, in the query that writes it. */
  public static final String PREFIX = "spark.sql.slipstream.quarantine.";

  /** The function's name in a session. */
  public static final String NAME = "slipstream_quarantine";

  private static final String BATCH_KEY = "streaming.sql.batchId";
  /**
   * The batch a foreachBatch function gives the session it runs in: under Spark Connect that
   * function runs in a Python worker whose jobs are not on the query's thread, so they lack
   * {@link #BATCH_KEY}.
   */
  public static final String BATCH_SETTING = "spark.sql.slipstream.batch";
  private static final DateTimeFormatter AT =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX");
  private static final JsonFactory JSON = new JsonFactory();
  /** The open file of each (task attempt, input). */
  private static final Map<String, TaskFile> OPEN = new ConcurrentHashMap<>();

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
    String key = task.taskAttemptId() + "/" + input;
    TaskFile file = OPEN.get(key);
    if (file == null) {
      file = TaskFile.open(task, Paths.get(folder), key);
      OPEN.put(key, file);
    }
    file.write(raw, reason, source);
    return Boolean.FALSE;
  }

  /** One task's rejected records of one input: a hidden file until the task succeeds. */
  private static final class TaskFile {
    private final Path hidden;
    private final Path done;
    private final OutputStream out;
    private final JsonGenerator json;
    private final String at;
    private volatile boolean failed;

    private TaskFile(Path hidden, Path done, OutputStream out) throws IOException {
      this.hidden = hidden;
      this.done = done;
      this.out = out;
      this.json = JSON.createGenerator(out);
      this.json.setRootValueSeparator(null);
      this.at = ZonedDateTime.now(ZoneOffset.UTC).format(AT);
    }

    static TaskFile open(TaskContext task, Path folder, String key) {
      String batch = task.getLocalProperty(BATCH_KEY);
      if (batch == null) {
        batch = task.getLocalProperty(BATCH_SETTING);
      }
      if (batch == null) {
        throw new IllegalStateException(
            "slipstream_quarantine runs in streaming queries only (no micro-batch id)");
      }
      String app = SparkEnv.get() == null ? "local" : SparkEnv.get().conf().getAppId();
      String name = String.format("batch-%s.%s.part-%05d.json", batch, app, task.partitionId());
      try {
        Files.createDirectories(folder);
        Path hidden = folder.resolve("." + name + "." + task.taskAttemptId() + ".tmp");
        TaskFile file = new TaskFile(hidden, folder.resolve(name), Files.newOutputStream(hidden));
        task.addTaskFailureListener((TaskFailureListener) (context, error) -> file.failed = true);
        task.addTaskCompletionListener(
            (TaskCompletionListener)
                context -> {
              OPEN.remove(key);
              file.finish(file.failed || context.isInterrupted());
            });
        return file;
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write the quarantine in " + folder, e);
      }
    }

    void write(String raw, String reason, String source) {
      try {
        json.writeStartObject();
        json.writeStringField("raw", raw);
        json.writeStringField("reason", reason);
        json.writeStringField("source", source);
        json.writeStringField("quarantined_at", at);
        json.writeEndObject();
        json.writeRaw('\n');
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write the quarantine file " + hidden, e);
      }
    }

    /** Rename the file in (the task succeeded) or delete it (it failed). */
    void finish(boolean discard) {
      try {
        json.close();
        out.close();
        if (discard) {
          Files.deleteIfExists(hidden);
        } else {
          Files.move(
              hidden, done, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot finish the quarantine file " + done, e);
      }
    }
  }

  /** The function as a session's UDF: nondeterministic, so Spark evaluates it once a row. */
  public static UserDefinedFunction function() {
    return functions.udf(new Quarantine(), DataTypes.BooleanType).asNondeterministic();
  }

  /** Register the function in a classic session (a Connect server: {@link QuarantineExtension}). */
  public static void register(SparkSession spark) {
    spark.udf().register(NAME, function());
  }
}
