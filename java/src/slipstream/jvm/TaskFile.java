package slipstream.jvm;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.TaskFailureListener;

/**
 * One task's records of one kind (a quarantine's rejected rows, a dead-letter's late rows): JSON
 * lines in a hidden file until the task succeeds, then renamed to `batch-B.APP.part-P.json` (B
 * the micro-batch, APP the Spark application, P the partition); a failed task deletes its file.
 * A batch run again after a crash writes the same records under its new application: readers
 * take, per batch, the files of the last application that wrote it, and only batches the query
 * committed.
 */
final class TaskFile {
  /** A line's fields, written into the open JSON object. */
  interface Fields {
    void write(JsonGenerator json) throws IOException;
  }

  private static final String BATCH_KEY = "streaming.sql.batchId";
  private static final JsonFactory JSON = new JsonFactory();
  private static final DateTimeFormatter AT =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX");
  /** The open file of each (task attempt, kind, input). */
  private static final Map<String, TaskFile> OPEN = new ConcurrentHashMap<>();

  private final Path hidden;
  private final Path done;
  private final OutputStream out;
  private final JsonGenerator json;
  private volatile boolean failed;
  /** When the file was opened (the task's first record), ISO UTC with microseconds. */
  final String opened = ZonedDateTime.now(ZoneOffset.UTC).format(AT);

  private TaskFile(Path hidden, Path done, OutputStream out) throws IOException {
    this.hidden = hidden;
    this.done = done;
    this.out = out;
    this.json = JSON.createGenerator(out);
    this.json.setRootValueSeparator(null);
  }

  /**
   * The micro-batch a task runs for: Spark's own local property, or under Spark Connect (where a
   * foreachBatch function's jobs run off the query's thread) the one its function set.
   */
  static String batch(TaskContext task) {
    String batch = task.getLocalProperty(BATCH_KEY);
    if (batch == null) {
      batch = task.getLocalProperty(Quarantine.BATCH_SETTING);
    }
    if (batch == null) {
      throw new IllegalStateException(
          "slipstream's quarantine and dead-letter run in streaming queries only (no micro-batch"
              + " id)");
    }
    return batch;
  }

  /** The task's open file of `key` in `folder`, opened at its first line. */
  static TaskFile of(TaskContext task, Path folder, String key) {
    String full = task.taskAttemptId() + "/" + key;
    TaskFile file = OPEN.get(full);
    if (file == null) {
      file = open(task, folder, full);
      OPEN.put(full, file);
    }
    return file;
  }

  private static TaskFile open(TaskContext task, Path folder, String key) {
    String app = SparkEnv.get() == null ? "local" : SparkEnv.get().conf().getAppId();
    String name =
        String.format("batch-%s.%s.part-%05d.json", batch(task), app, task.partitionId());
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
      throw new UncheckedIOException("cannot write a task's records in " + folder, e);
    }
  }

  void write(Fields fields) {
    try {
      json.writeStartObject();
      fields.write(json);
      json.writeEndObject();
      json.writeRaw('\n');
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the task file " + hidden, e);
    }
  }

  /** Rename the file in (the task succeeded) or delete it (it failed). */
  private void finish(boolean discard) {
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
      throw new UncheckedIOException("cannot finish the task file " + done, e);
    }
  }
}
