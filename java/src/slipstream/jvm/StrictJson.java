package slipstream.jvm;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * slipstream's strict JSON parser as a Spark function: `NAME(CAST(value AS BINARY))` returns a
 * struct of the declared fields' values (dates as days, timestamps as microseconds) and
 * `_reason`, or NULL for a blank line. Registered once per schema by {@link #register}.
 */
public final class StrictJson implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;

  public static final String REASON = "_reason";

  private final StrictJsonParser parser;

  public StrictJson(StrictJsonParser parser) {
    this.parser = parser;
  }

  @Override
  public Row call(byte[] line) {
    if (line == null) {
      return null;
    }
    Object[] values = parser.parse(line);
    return values == null ? null : RowFactory.create(values);
  }

  /** The struct the function returns for these fields. */
  public static StructType returnType(String[] names, String[] typeNames) {
    StructField[] fields = new StructField[names.length + 1];
    for (int i = 0; i < names.length; i++) {
      int kind = StrictJsonParser.kindOf(typeNames[i]);
      fields[i] = DataTypes.createStructField(names[i], StrictJsonParser.outputType(kind), true);
    }
    fields[names.length] = DataTypes.createStructField(REASON, DataTypes.StringType, true);
    return DataTypes.createStructType(fields);
  }

  /**
   * Register the parser of one schema as the session's function `name`: `names` and
   * `typeNames` (Spark's simpleString of each field's type), which fields are required, and the
   * session time zone that timestamp texts without an offset are read in.
   */
  public static void register(
      SparkSession spark, String name, String[] names, String[] typeNames, boolean[] required,
      String timeZone, boolean nondeterministic) {
    StrictJsonParser parser = new StrictJsonParser(names, typeNames, required, timeZone);
    UserDefinedFunction function =
        functions.udf(new StrictJson(parser), returnType(names, typeNames));
    // nondeterministic: Spark then neither pushes a filter on its result below it nor copies
    // it into several projections, so each record is parsed once without a generator barrier
    spark.udf().register(name, nondeterministic ? function.asNondeterministic() : function);
  }

  /** The version of this jar, for the session to check it loaded the one it ships. */
  public static String version() {
    return "1";
  }
}
