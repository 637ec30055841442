package slipstream.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.deploy.SparkHadoopUtil;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The late-row dead-letter, served from the query that reads the records:
 * `slipstream_late(input, event_time_micros, raw, source)` in the filter that keeps an input's
 * valid rows, below the query's first stateful operator, called for the rows {@link IsLate}
 * finds late. It always returns true (Spark drops the
 * late row itself, and counts it); a row that operator will drop as late is first written to its
 * task's file ({@link TaskFile}, in a folder per input: a query's inputs are read by tasks of
 * the same partition numbers), as the dead-letter's line (slipstream/runtime/deadletter.py
 * gathers a committed batch's files into `batch-N.jsonl`).
 *
 * <p>Spark judges lateness in the first stateful operator against the watermark of the previous
 * batch (`offsets/N-1`'s `batchWatermarkMs`, 0 for batch 0): a row is late when its event time,
 * or for a tumbling-window aggregation its window's end, is at or before it. Which query writes an
 * input's late rows, and by which rule: the session setting {@link #PREFIX} + input, set while
 * that query starts (JSON: folder, checkpoint, output, column, window in microseconds or 0).
 */
public final class LateRows implements UDF4<String, Long, String, String, Boolean> {
  private static final long serialVersionUID = 1L;

  /** The session setting giving an input's late rule, in the query that writes its late rows. */
  public static final String PREFIX = "spark.sql.slipstream.late.";

  /** The function's name in a session. */
  public static final String NAME = "slipstream_late";

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final DateTimeFormatter SECONDS =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss");
  private static final Map<String, Rule> RULES = new ConcurrentHashMap<>();
  /** Each (checkpoint, batch)'s watermark for late rows, in milliseconds. */
  private static final Map<String, Long> MARKS = new ConcurrentHashMap<>();
  private static Configuration hadoopConf;

  /** One query's rule for one input. */
  private static final class Rule {
    final String folder;
    final String checkpoint;
    final String output;
    final String column;
    final long window;

    Rule(JsonNode spec) {
      folder = spec.get("folder").asText();
      checkpoint = spec.get("checkpoint").asText();
      output = spec.get("output").asText();
      column = spec.get("column").asText();
      window = spec.path("window").asLong(0);
    }
  }

  /**
   * `slipstream_is_late(input, event_time_micros)`: whether this query's rule finds the row late
   * (false without a rule). The filter calls {@link LateRows} only then, so a row that is not
   * late never has its raw record copied out of Spark's memory. The input's name comes as its
   * UTF-8 bytes (a binary literal, which Spark passes as it is): a string argument would be
   * copied into a Java string at every row.
   */
  public static final class IsLate implements UDF2<byte[], Long, Boolean> {
    private static final long serialVersionUID = 1L;

    /** The function's name in a session. */
    public static final String NAME = "slipstream_is_late";

    @Override
    public Boolean call(byte[] input, Long at) {
      TaskContext task = TaskContext.get();
      if (task == null || at == null || input == null) {
        return Boolean.FALSE;
      }
      Judge last = LAST.get();
      Judge judge =
          last != null
                  && last.attempt == task.taskAttemptId()
                  && (last.name == input || Arrays.equals(last.name, input))
              ? last
              : judge(task, new String(input, StandardCharsets.UTF_8));
      return judge.rule != null && judged(judge.rule, at) <= judge.markMicros;
    }
  }

  /** A task's rule for an input and its batch's watermark, kept for the task's next rows. */
  private static final class Judge {
    final long attempt;
    final String input;
    final byte[] name; // the input's UTF-8 bytes
    final Rule rule;
    final long markMicros;

    Judge(long attempt, String input, Rule rule, long markMicros) {
      this.attempt = attempt;
      this.input = input;
      this.name = input.getBytes(StandardCharsets.UTF_8);
      this.rule = rule;
      this.markMicros = markMicros;
    }
  }

  /** The last task this thread ran the function in (a thread runs one task at a time). */
  private static final ThreadLocal<Judge> LAST = new ThreadLocal<>();

  private static Judge judge(TaskContext task, String input) {
    Judge last = LAST.get();
    if (last != null && last.attempt == task.taskAttemptId() && last.input.equals(input)) {
      return last;
    }
    Rule rule = rule(task, input);
    long mark = rule == null ? 0L : watermarkMs(task, rule) * 1000;
    Judge judge = new Judge(task.taskAttemptId(), input, rule, mark);
    LAST.set(judge);
    return judge;
  }

  private static Rule rule(TaskContext task, String input) {
    String spec = task.getLocalProperty(PREFIX + input);
    return spec == null || spec.isEmpty() ? null : RULES.computeIfAbsent(spec, LateRows::parse);
  }

  /** The time the rule compares: the event time, or its tumbling window's end. */
  private static long judged(Rule rule, long at) {
    return rule.window > 0 ? at - Math.floorMod(at, rule.window) + rule.window : at;
  }

  private static long watermarkMs(TaskContext task, Rule rule) {
    return watermarkMs(rule.checkpoint, Long.parseLong(TaskFile.batch(task)));
  }

  @Override
  public Boolean call(String input, Long at, String raw, String source) {
    TaskContext task = TaskContext.get();
    Judge judge = task == null || at == null ? null : judge(task, input);
    if (judge == null || judge.rule == null) {
      return Boolean.TRUE; // no late rule of this query's for the input
    }
    Rule rule = judge.rule;
    String batch = TaskFile.batch(task);
    long judged = judged(rule, at);
    if (judged > judge.markMicros) {
      return Boolean.TRUE;
    }
    String watermark = iso(judge.markMicros);
    String reason =
        rule.window > 0
            ? String.format(
                "late: %s %s in a window ending %s <= watermark %s",
                rule.column, iso(at), iso(judged), watermark)
            : String.format("late: %s %s <= watermark %s", rule.column, iso(at), watermark);
    TaskFile.of(task, Paths.get(rule.folder, input), "late/" + input)
        .write(
            json -> {
              json.writeStringField("raw", raw);
              json.writeStringField("input", input);
              json.writeStringField("source", source);
              json.writeStringField("reason", reason);
              json.writeStringField("event_time", iso(at));
              json.writeStringField("watermark", watermark);
              json.writeNumberField("batch", Long.parseLong(batch));
              json.writeStringField("output", rule.output);
            });
    return Boolean.TRUE;
  }

  private static Rule parse(String spec) {
    try {
      return new Rule(JSON.readTree(spec));
    } catch (IOException e) {
      throw new UncheckedIOException("slipstream_late: an unreadable rule " + spec, e);
    }
  }

  /** Microseconds since the epoch as ISO UTC: `2018-03-02T10:03:00Z`, or with `.123456`. */
  static String iso(long micros) {
    long seconds = Math.floorDiv(micros, 1_000_000L);
    long fraction = Math.floorMod(micros, 1_000_000L);
    String text = LocalDateTime.ofEpochSecond(seconds, 0, ZoneOffset.UTC).format(SECONDS);
    return fraction == 0 ? text + "Z" : String.format("%s.%06dZ", text, fraction);
  }

  /** The watermark batch `batch` judges late rows by: `offsets/(batch-1)`'s, 0 for batch 0. */
  static long watermarkMs(String checkpoint, long batch) {
    if (batch <= 0) {
      return 0L;
    }
    String key = checkpoint + "#" + batch;
    Long found = MARKS.get(key);
    if (found == null) {
      found = readWatermark(new Path(new Path(checkpoint, "offsets"), Long.toString(batch - 1)));
      if (MARKS.size() > 256) {
        MARKS.clear();
      }
      MARKS.put(key, found);
    }
    return found;
  }

  /** This JVM's Hadoop settings, made once: a new Configuration reads its XML files again. */
  private static synchronized Configuration hadoop() {
    if (hadoopConf == null) {
      SparkEnv env = SparkEnv.get();
      hadoopConf =
          env == null
              ? new Configuration()
              : SparkHadoopUtil.get().newConfiguration(env.conf());
    }
    return hadoopConf;
  }

  /** An offset log file's `batchWatermarkMs`: its version line, then the batch's JSON line. */
  private static long readWatermark(Path path) {
    try {
      FileSystem fs = path.getFileSystem(hadoop());
      try (BufferedReader lines =
          new BufferedReader(new InputStreamReader(fs.open(path), StandardCharsets.UTF_8))) {
        lines.readLine(); // the version line
        String meta = lines.readLine();
        if (meta == null) {
          throw new IOException(path + " is incomplete: no batch line after its version line");
        }
        return JSON.readTree(meta).path("batchWatermarkMs").asLong(0);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("slipstream_late: cannot read the watermark in " + path, e);
    }
  }

  /** The function as a session's UDF: nondeterministic, so Spark evaluates it once a row. */
  public static UserDefinedFunction function() {
    return functions.udf(new LateRows(), DataTypes.BooleanType).asNondeterministic();
  }

  /** {@link IsLate} as a session's UDF, nondeterministic: never moved above the parse. */
  public static UserDefinedFunction isLate() {
    return functions.udf(new IsLate(), DataTypes.BooleanType).asNondeterministic();
  }
}
