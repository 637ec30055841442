package slipstream.jvm;

import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.Driver;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

/**
 * slipstream's database sinks in Spark's real-time mode, inside the JVM: each task holds one JDBC
 * connection for its epoch and keeps the latest row of every output key that changed since its
 * last flush (real-time update mode emits a row per input record, most of them newer values of
 * a key already waiting). A flusher thread writes what waits every {@code flushMs}, and {@code
 * process} does when {@code flushKeys} keys wait: the rows as one JDBC batch of upserts and one
 * commit, so the database's work follows the keys changed per flush, not the events. {@code
 * close} (the epoch's end) flushes what is left. The statement is the Python side's
 * (slipstream.sinks.rows.upsert_statement, an INSERT ... ON CONFLICT (key) DO UPDATE) and the
 * row's values are bound in its column order; the frame reaching this writer is the one the
 * Python writer received (timestamps already ISO-8601 text), so the table holds the same values.
 *
 * <p>A replayed epoch upserts the same keys with the same values again: the table converges. A
 * flush that fails in the flusher thread is remembered and thrown by the next {@code process}
 * or by {@code close}, so Spark fails the task (and a restart replays the epoch).
 *
 * <p>The driver class is loaded through the task's class loader (Spark puts `spark.jars` and
 * `spark.jars.packages` there), not through java.sql.DriverManager, which only sees drivers of
 * the system class loader. The password travels inside the serialized task, apart from the other
 * connection properties; {@link #toString} and every error name the target without it.
 */
public final class JdbcUpsertWriter extends ForeachWriter<Row> {
  private static final long serialVersionUID = 2L;
  /** Upserts and commits of every writer in this JVM (what the tests count). */
  private static final AtomicLong UPSERTS = new AtomicLong();

  private static final AtomicLong COMMITS = new AtomicLong();

  private static final String WRITE_FIX =
      "a restart replays the epoch from its offsets and upserts its rows again; if the "
          + "row or the table is refused (not the connection), it fails the same way: fix "
          + "the table (or reset the output) first";

  private final String driver;
  private final String url;
  private final HashMap<String, String> properties;
  private final String password; // null: none (never printed)
  private final String statement;
  private final String[] columns;
  private final String[] key;
  private final long flushMs;
  private final int flushKeys;
  private final String where; // the target as a person reads it, without the password
  private final String connectFix;
  private final boolean sqlite;

  private transient Connection conn;
  private transient PreparedStatement upsert;
  private transient int[] positions; // of `columns` in the row
  private transient int[] keyAt; // of `key` in `columns`
  private transient Object lock; // guards pending and stopped
  private transient LinkedHashMap<Object, Object[]> pending; // key -> its latest row
  private transient boolean stopped;
  private transient Object writing; // one flush at a time, in the order their rows came
  private transient Thread flusher;
  private transient volatile RuntimeException failed; // the first failed flush
  private transient long rows; // keyless outputs: each row its own entry

  /**
   * @param driver the JDBC driver's class (org.sqlite.JDBC, org.postgresql.Driver)
   * @param url the JDBC URL, without credentials
   * @param properties connection properties, without the password
   * @param password the password, or null
   * @param statement the upsert, one `?` per column
   * @param columns the statement's columns, in the order of its placeholders
   * @param key the output's key columns (a subset of `columns`): one entry per key waits
   * @param flushMs how long a row waits at most before the flusher writes it
   * @param flushKeys how many keys may wait before `process` writes them itself
   * @param where the target for messages (never the password)
   * @param connectFix what to do when the database cannot be reached
   */
  public JdbcUpsertWriter(
      String driver,
      String url,
      Map<String, String> properties,
      String password,
      String statement,
      List<String> columns,
      List<String> key,
      long flushMs,
      int flushKeys,
      String where,
      String connectFix) {
    if (flushMs <= 0 || flushKeys <= 0) {
      throw new IllegalArgumentException(
          "flushMs and flushKeys must be positive; got " + flushMs + ", " + flushKeys);
    }
    this.driver = driver;
    this.url = url;
    this.properties = new HashMap<>(properties);
    this.password = password;
    this.statement = statement;
    this.columns = new ArrayList<>(columns).toArray(new String[0]);
    this.key = new ArrayList<>(key).toArray(new String[0]);
    this.flushMs = flushMs;
    this.flushKeys = flushKeys;
    this.where = where;
    this.connectFix = connectFix;
    this.sqlite = url.startsWith("jdbc:sqlite:");
    List<String> all = Arrays.asList(this.columns);
    for (String k : this.key) {
      if (!all.contains(k)) {
        throw new IllegalArgumentException("the key column " + k + " is not a written column");
      }
    }
  }

  @Override
  public boolean open(long partitionId, long epochId) {
    Properties info = new Properties();
    info.putAll(properties);
    if (password != null) {
      info.setProperty("password", password);
    }
    try {
      conn = load().connect(url, info);
      if (conn == null) {
        throw new SQLException("the driver " + driver + " does not accept " + url);
      }
      conn.setAutoCommit(false); // a transaction per flush
      upsert = conn.prepareStatement(statement);
    } catch (SQLException e) {
      closeQuietly();
      throw failure(
          "SINK_UNREACHABLE", "cannot connect to " + where + ": " + reason(e), connectFix);
    }
    lock = new Object();
    writing = new Object();
    pending = new LinkedHashMap<>();
    stopped = false;
    failed = null;
    flusher = new Thread(this::flushEvery, "slipstream-flush-" + partitionId + "-" + epochId);
    flusher.setDaemon(true);
    flusher.setContextClassLoader(Thread.currentThread().getContextClassLoader());
    flusher.start();
    return true;
  }

  @Override
  public void process(Row row) {
    RuntimeException earlier = failed;
    if (earlier != null) {
      throw earlier;
    }
    if (positions == null) {
      positions = new int[columns.length];
      for (int i = 0; i < columns.length; i++) {
        positions[i] = row.fieldIndex(columns[i]);
      }
      keyAt = new int[key.length];
      List<String> all = Arrays.asList(columns);
      for (int i = 0; i < key.length; i++) {
        keyAt[i] = all.indexOf(key[i]);
      }
    }
    Object[] values = new Object[columns.length];
    for (int i = 0; i < columns.length; i++) {
      values[i] = row.get(positions[i]);
    }
    boolean full;
    synchronized (lock) {
      pending.put(keyOf(values), values);
      full = pending.size() >= flushKeys;
    }
    if (full) {
      flush();
    }
  }

  @Override
  public void close(Throwable error) {
    try {
      stopFlusher();
      if (error == null && conn != null) {
        RuntimeException earlier = failed;
        if (earlier != null) {
          throw earlier;
        }
        flush();
      }
    } finally {
      closeQuietly(); // uncommitted work (a failed task's) is rolled back by the database
    }
  }

  @Override
  public String toString() {
    return "slipstream JDBC upsert writer ("
        + where
        + "; the latest row per key, every "
        + flushMs
        + " ms or "
        + flushKeys
        + " keys)";
  }

  /** Rows upserted by every writer in this JVM since it started. */
  public static long upserts() {
    return UPSERTS.get();
  }

  /** Transactions committed by every writer in this JVM since it started. */
  public static long commits() {
    return COMMITS.get();
  }

  private Object keyOf(Object[] values) {
    if (keyAt.length == 0) {
      return rows++;
    }
    if (keyAt.length == 1) {
      return comparable(values[keyAt[0]]);
    }
    Object[] parts = new Object[keyAt.length];
    for (int i = 0; i < keyAt.length; i++) {
      parts[i] = comparable(values[keyAt[i]]);
    }
    return Arrays.asList(parts);
  }

  /** A value that is equal to an equal value (arrays compare by identity). */
  private static Object comparable(Object value) {
    return value instanceof byte[] ? ByteBuffer.wrap((byte[]) value) : value;
  }

  /** The flusher thread: a flush every flushMs until close stops it or a flush fails. */
  private void flushEvery() {
    try {
      while (true) {
        synchronized (lock) {
          long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(flushMs);
          long left;
          while (!stopped && (left = until - System.nanoTime()) > 0) {
            TimeUnit.NANOSECONDS.timedWait(lock, left);
          }
          if (stopped) {
            return;
          }
        }
        flush();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // the JVM is going away: close does the last flush
    } catch (RuntimeException e) {
      remember(e); // flush's own failure is remembered already; anything else here too
    } catch (Error e) {
      remember(failure("SINK_WRITE_FAILED", where + ": the flusher failed: " + e, WRITE_FIX));
      throw e;
    }
  }

  private void stopFlusher() {
    Thread thread = flusher;
    if (thread == null) {
      return;
    }
    synchronized (lock) {
      stopped = true;
      lock.notifyAll();
    }
    try {
      thread.join(); // a flush under way finishes first
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    flusher = null;
  }

  /** Write every waiting row as one batch in one transaction (the caller's thread). */
  private void flush() {
    synchronized (writing) {
      RuntimeException earlier = failed;
      if (earlier != null) {
        throw earlier;
      }
      LinkedHashMap<Object, Object[]> batch;
      synchronized (lock) {
        if (pending.isEmpty()) {
          return;
        }
        batch = pending;
        pending = new LinkedHashMap<>();
      }
      try {
        for (Object[] values : batch.values()) {
          for (int i = 0; i < values.length; i++) {
            bind(i + 1, values[i]);
          }
          upsert.addBatch();
        }
        upsert.executeBatch();
        conn.commit();
      } catch (SQLException e) {
        rollbackQuietly();
        throw remember(writeFailure(e, batch.size()));
      } catch (RuntimeException e) {
        rollbackQuietly();
        throw remember(
            failure("SINK_WRITE_FAILED", where + ": a flush failed: " + e, WRITE_FIX));
      }
      UPSERTS.addAndGet(batch.size());
      COMMITS.incrementAndGet();
    }
  }

  private RuntimeException remember(RuntimeException e) {
    if (failed == null) {
      failed = e;
    }
    return failed;
  }

  /** A lost connection (SQLSTATE class 08) as the Python sinks say it, anything else refused. */
  private RuntimeException writeFailure(SQLException e, int size) {
    String state = String.valueOf(e.getSQLState());
    if (state.startsWith("08")) {
      return failure(
          "SINK_UNREACHABLE",
          "lost the connection to " + where + " while writing " + size + " rows: " + reason(e),
          connectFix);
    }
    return failure(
        "SINK_WRITE_FAILED",
        where + " refused a batch of " + size + " upserted rows: " + reason(e),
        WRITE_FIX);
  }

  /** Values as the Python writer bound them (sqlite3, psycopg). */
  private void bind(int index, Object value) throws SQLException {
    if (value == null) {
      upsert.setNull(index, Types.NULL);
    } else if (sqlite && value instanceof LocalDateTime) {
      // Python's sqlite3 stores a datetime as its isoformat(" ")
      upsert.setString(index, isoSpace((LocalDateTime) value));
    } else {
      upsert.setObject(index, value);
    }
  }

  static String isoSpace(LocalDateTime t) {
    String text = String.format("%tF %<tT", t);
    int nanos = t.getNano();
    return nanos == 0 ? text : text + String.format(".%06d", nanos / 1000);
  }

  private Driver load() throws SQLException {
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    if (loader == null) {
      loader = JdbcUpsertWriter.class.getClassLoader();
    }
    try {
      return (Driver) Class.forName(driver, true, loader).getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new SQLException("the JDBC driver " + driver + " is not on Spark's classpath", e);
    }
  }

  private void rollbackQuietly() {
    try {
      upsert.clearBatch();
      conn.rollback();
    } catch (SQLException ignored) {
      // the failure being reported says more
    }
  }

  private void closeQuietly() {
    try {
      if (upsert != null) {
        upsert.close();
      }
    } catch (SQLException ignored) {
      // closing: nothing left to do
    }
    try {
      if (conn != null) {
        conn.close();
      }
    } catch (SQLException ignored) {
      // closing: nothing left to do
    }
    upsert = null;
    conn = null;
  }

  private String reason(SQLException e) {
    String text = String.valueOf(e.getMessage()).strip();
    SQLException next = e.getNextException(); // a batch's: the server's own error
    if (next != null && next.getMessage() != null && !text.contains(next.getMessage().strip())) {
      text += " (" + next.getMessage().strip() + ")";
    }
    text = text.replace('\n', ' ');
    if (password != null && !password.isEmpty()) {
      text = text.replace(password, "***");
    }
    String state = e.getSQLState();
    return state == null ? text : text + " (SQLSTATE " + state + ")";
  }

  /** An error slipstream's Python side reads back (errors.find_error): `[CODE] message`. */
  private static RuntimeException failure(String code, String message, String fix) {
    return new RuntimeException("[" + code + "] " + message + "\n  fix: " + fix);
  }
}
