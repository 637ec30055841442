package slipstream.jvm;

import java.sql.Connection;
import java.sql.Driver;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

/**
 * slipstream's database sinks in Spark's real-time mode, inside the JVM: each task holds one JDBC
 * connection for its epoch and upserts every row as it arrives, in its own transaction
 * (autocommit), so a row is visible before the next one arrives. The statement is the Python
 * side's (slipstream.sinks.rows.upsert_statement, an INSERT ... ON CONFLICT (key) DO UPDATE) and
 * the row's values are bound in its column order; the frame reaching this writer is the one the
 * Python writer received (timestamps already ISO-8601 text), so the table holds the same values.
 *
 * <p>The driver class is loaded through the task's class loader (Spark puts `spark.jars` and
 * `spark.jars.packages` there), not through java.sql.DriverManager, which only sees drivers of
 * the system class loader. The password travels inside the serialized task, apart from the other
 * connection properties; {@link #toString} and every error name the target without it.
 */
public final class JdbcUpsertWriter extends ForeachWriter<Row> {
  private static final long serialVersionUID = 1L;

  private final String driver;
  private final String url;
  private final HashMap<String, String> properties;
  private final String password; // null: none (never printed)
  private final String statement;
  private final String[] columns;
  private final String where; // the target as a person reads it, without the password
  private final String connectFix;
  private final boolean sqlite;

  private transient Connection conn;
  private transient PreparedStatement upsert;
  private transient int[] positions;

  /**
   * @param driver the JDBC driver's class (org.sqlite.JDBC, org.postgresql.Driver)
   * @param url the JDBC URL, without credentials
   * @param properties connection properties, without the password
   * @param password the password, or null
   * @param statement the upsert, one `?` per column
   * @param columns the statement's columns, in the order of its placeholders
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
      String where,
      String connectFix) {
    this.driver = driver;
    this.url = url;
    this.properties = new HashMap<>(properties);
    this.password = password;
    this.statement = statement;
    this.columns = new ArrayList<>(columns).toArray(new String[0]);
    this.where = where;
    this.connectFix = connectFix;
    this.sqlite = url.startsWith("jdbc:sqlite:");
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
      conn.setAutoCommit(true); // a transaction per row: visible at once
      upsert = conn.prepareStatement(statement);
    } catch (SQLException e) {
      closeQuietly();
      throw failure(
          "SINK_UNREACHABLE", "cannot connect to " + where + ": " + reason(e), connectFix);
    }
    return true;
  }

  @Override
  public void process(Row row) {
    if (positions == null) {
      positions = new int[columns.length];
      for (int i = 0; i < columns.length; i++) {
        positions[i] = row.fieldIndex(columns[i]);
      }
    }
    try {
      for (int i = 0; i < columns.length; i++) {
        bind(i + 1, row.get(positions[i]));
      }
      upsert.executeUpdate();
    } catch (SQLException e) {
      throw failure(
          "SINK_WRITE_FAILED",
          where + " refused an upserted row: " + reason(e),
          "a restart replays the epoch from its offsets and upserts its rows again; if the "
              + "row or the table is refused (not the connection), it fails the same way: fix "
              + "the table (or reset the output) first");
    }
  }

  @Override
  public void close(Throwable error) {
    closeQuietly();
  }

  @Override
  public String toString() {
    return "slipstream JDBC upsert writer (" + where + ")";
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
    String text = String.valueOf(e.getMessage()).strip().replace('\n', ' ');
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
