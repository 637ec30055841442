package slipstream.jvm;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.Serializable;
import java.time.ZoneId;
import java.util.HashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.json.JsonExpressionUtils;
import org.apache.spark.sql.catalyst.expressions.variant.SchemaOfVariant$;
import org.apache.spark.sql.catalyst.expressions.variant.VariantCastArgs;
import org.apache.spark.sql.catalyst.expressions.variant.VariantGet$;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantBuilder;
import org.apache.spark.types.variant.VariantUtil;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;

/**
 * slipstream's strict JSON parser for one declared schema: one JSON-lines record (its bytes) to
 * the typed values of the schema's fields and the reason it is rejected (null when valid).
 *
 * <p>It gives exactly the fates and reasons of the parser built from Spark SQL expressions
 * (src/slipstream/quality/parse.py), plus one fix: content after the root JSON value is "not
 * JSON". Two paths:
 *
 * <ul>
 *   <li>the fast path: Jackson's streaming parser over the bytes, each declared field read once
 *       and every other value skipped (still tokenized, so still validated). It takes a record
 *       only when every check of the reference passes on a value whose conversion is plain
 *       (a string, a boolean, an integer within the type's range, a timestamp or date text read
 *       by {@link PlainTime} in its plainest ISO forms, else cast by Spark's own Cast);
 *   <li>the reference path, for everything else (a rejected record, a number with a fraction or
 *       an exponent, a root that is not an object, a long record): the record parsed into
 *       Spark's variant by Spark's own code (VariantBuilder), each field read and cast by Spark's
 *       own VariantGet, kinds named by SchemaOfVariant, values written by Variant.toJson: the
 *       same functions the expressions call, in the same order of checks.
 * </ul>
 */
public final class StrictJsonParser implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Spark's variant holds at most 16 MiB: a longer record cannot parse, so it is not tried. */
  public static final int MAX_JSON_BYTES = 16 * 1024 * 1024;
  /**
   * Above this size the reference path decides (a variant may outgrow its limit on a record
   * under 16 MiB of text; below 1 MiB of text it cannot reach 16 MiB).
   */
  static final int FAST_MAX_BYTES = 1024 * 1024;

  /**
   * A flat record of at most this many keys has its duplicates found by the fast path itself (a
   * look through the keys read so far: Jackson's detector builds a set for every object, a
   * sixth of the parse); a longer record, or one with a nested object or array, is read again
   * with Jackson's detector.
   */
  static final int ROOT_KEYS = 16;

  static final String NOT_UTF8 = "not valid UTF-8 (bytes shown as U+FFFD in raw)";
  static final String NOT_JSON = "not JSON";
  static final String DUPLICATE = "not JSON: a key appears twice in an object";

  // target kinds
  static final int STRING = 0, BOOLEAN = 1, BYTE = 2, SHORT = 3, INT = 4, LONG = 5;
  static final int FLOAT = 6, DOUBLE = 7, DATE = 8, TIMESTAMP = 9;

  private static final Pattern INTEGRAL_KINDS =
      Pattern.compile("^(BIGINT|INT|SMALLINT|TINYINT|DECIMAL\\([0-9]+,0\\))$");
  private static final Pattern NUMERIC_KINDS =
      Pattern.compile("^(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL)");
  private static final Pattern KIND_NAME = Pattern.compile("^[a-z_]+(\\([0-9, ]+\\))?");
  // as in parse.py: a timestamp or date text starts with a whole date
  static final Pattern DATE_FIRST =
      Pattern.compile("^\\s*[+-]?[0-9]{4,}-[0-9]{2}-[0-9]{2}([T ]|\\s*$)");

  private final String[] names;
  private final int[] kinds;
  private final String[] typeNames; // Spark's simpleString: "int", "timestamp"
  private final boolean[] required;
  private final String timeZone;

  private transient HashMap<String, Integer> index;
  private transient DataType[] sparkTypes;
  private transient JsonFactory fast; // no duplicate detection: the fast path's own, at the root
  private transient JsonFactory strict; // Jackson's, in every object: a record with nested values
  private transient JsonFactory reference;
  private transient String[] rootKeys; // the fast path's keys of the record read so far
  private transient VariantCastArgs castArgs;
  private transient ZoneId zone;
  private transient Cast[] textCasts; // per field: Spark's Cast of a text to its date/time type
  private transient java.time.ZoneOffset fixedZone; // the session zone's, when fixed
  private transient GenericInternalRow textRow;

  public StrictJsonParser(String[] names, String[] typeNames, boolean[] required, String timeZone) {
    this.names = names.clone();
    this.typeNames = typeNames.clone();
    this.required = required.clone();
    this.timeZone = timeZone;
    this.kinds = new int[names.length];
    for (int i = 0; i < names.length; i++) {
      kinds[i] = kindOf(typeNames[i]);
    }
  }

  /** The target kind of a Spark type's simpleString; IllegalArgumentException if unsupported. */
  public static int kindOf(String typeName) {
    switch (typeName) {
      case "string": return STRING;
      case "boolean": return BOOLEAN;
      case "tinyint": return BYTE;
      case "smallint": return SHORT;
      case "int": return INT;
      case "bigint": return LONG;
      case "float": return FLOAT;
      case "double": return DOUBLE;
      case "date": return DATE;
      case "timestamp": return TIMESTAMP;
      default: throw new IllegalArgumentException("no strict JVM parse for type " + typeName);
    }
  }

  /** The type a field's value comes out as: dates as days since the epoch (int), timestamps
   * as microseconds since the epoch (bigint). */
  public static DataType outputType(int kind) {
    switch (kind) {
      case STRING: return DataTypes.StringType;
      case BOOLEAN: return DataTypes.BooleanType;
      case BYTE: return DataTypes.ByteType;
      case SHORT: return DataTypes.ShortType;
      case INT: return DataTypes.IntegerType;
      case LONG: return DataTypes.LongType;
      case FLOAT: return DataTypes.FloatType;
      case DOUBLE: return DataTypes.DoubleType;
      case DATE: return DataTypes.IntegerType;
      default: return DataTypes.LongType;
    }
  }

  static DataType sparkType(int kind) {
    switch (kind) {
      case DATE: return DataTypes.DateType;
      case TIMESTAMP: return DataTypes.TimestampType;
      default: return outputType(kind);
    }
  }

  public int size() {
    return names.length;
  }

  public int kind(int field) {
    return kinds[field];
  }

  private void init() {
    if (index != null) {
      return;
    }
    HashMap<String, Integer> idx = new HashMap<>();
    for (int i = 0; i < names.length; i++) {
      idx.put(names[i], i);
    }
    sparkTypes = new DataType[names.length];
    textCasts = new Cast[names.length];
    for (int i = 0; i < names.length; i++) {
      sparkTypes[i] = sparkType(kinds[i]);
      if (kinds[i] == DATE || kinds[i] == TIMESTAMP) {
        textCasts[i] =
            new Cast(
                new BoundReference(0, DataTypes.StringType, true),
                sparkTypes[i],
                Option.apply(timeZone),
                EvalMode$.MODULE$.TRY());
      }
    }
    textRow = new GenericInternalRow(1);
    fast = new JsonFactory();
    strict = new JsonFactory();
    strict.enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
    rootKeys = new String[ROOT_KEYS];
    reference = new JsonFactory(); // as VariantUtil.JSON_FACTORY (package-private): defaults
    zone = ZoneId.of(timeZone);
    fixedZone = PlainTime.fixedOffset(zone);
    castArgs = VariantCastArgs.apply(false, Option.apply(timeZone), zone);
    index = idx;
  }

  /**
   * One record: null when it is a blank line (not a record), else an array of the fields'
   * values (in schema order, as {@link #outputType}) and, last, the reason (null when valid).
   */
  public Object[] parse(byte[] line) {
    init();
    int n = line.length;
    int i = 0;
    while (i < n && isJsonSpace(line[i])) {
      i++;
    }
    if (i == n) {
      return null;
    }
    Object[] out = new Object[names.length + 1];
    if (line[i] == '{' && n <= FAST_MAX_BYTES && !zeroInFirstFour(line) && fastPath(line, out)) {
      return out;
    }
    out = new Object[names.length + 1]; // what the fast path read before it gave up: not kept
    UTF8String text = UTF8String.fromBytes(line);
    if (!text.isValid()) {
      UTF8String valid = text.makeValid();
      referencePath(valid, out);
      out[names.length] = NOT_UTF8;
      return out;
    }
    referencePath(text, out);
    return out;
  }

  private static boolean isJsonSpace(byte b) {
    return b == ' ' || b == '\t' || b == '\r' || b == '\n';
  }

  private static boolean zeroInFirstFour(byte[] line) {
    for (int i = 0; i < 4 && i < line.length; i++) {
      if (line[i] == 0) {
        return true;
      }
    }
    return false;
  }

  /** Whether every byte is ASCII (then the bytes are valid UTF-8). */
  private static boolean ascii(byte[] line) {
    for (byte b : line) {
      if (b < 0) {
        return false;
      }
    }
    return true;
  }

  /**
   * Whether the line may hold an escaped UTF-16 surrogate (`\uD800` to `\uDFFF`) anywhere: Spark's
   * variant refuses a string or key holding a lone one, which the fast path cannot see in a value
   * it skips; such lines go to the reference path.
   */
  private static boolean escapedSurrogate(byte[] line) {
    for (int i = 0; i + 3 < line.length; i++) {
      if (line[i] == '\\' && line[i + 1] == 'u' && (line[i + 2] == 'd' || line[i + 2] == 'D')) {
        byte c = line[i + 3];
        if ((c >= '8' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
          return true;
        }
      }
    }
    return false;
  }

  /** The fast path: true when it took the record (out filled, reason null). */
  private boolean fastPath(byte[] line, Object[] out) {
    if (!ascii(line) && !UTF8String.fromBytes(line).isValid()) {
      return false;
    }
    if (escapedSurrogate(line)) {
      return false;
    }
    int read = read(fast, line, out);
    if (read == NESTED) {
      java.util.Arrays.fill(out, null);
      read = read(strict, line, out);
    }
    if (read != TAKEN) {
      return false;
    }
    for (int f = 0; f < names.length; f++) {
      if (required[f] && out[f] == null) {
        return false;
      }
    }
    return true;
  }

  private static final int TAKEN = 1, GIVEN_UP = 0, NESTED = -1;

  /**
   * The record's declared fields into `out` by a parser of `factory`: TAKEN, GIVEN_UP (the
   * reference path decides), or NESTED when `factory` is the one without duplicate detection and
   * the record holds a nested object or array or more than ROOT_KEYS keys (read it with Jackson's
   * detector). Without Jackson's detector, a key that appears twice at the root gives up here.
   */
  private int read(JsonFactory factory, byte[] line, Object[] out) {
    boolean own = factory == fast; // duplicates found here, not by Jackson
    try (JsonParser p = factory.createParser(line)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return GIVEN_UP;
      }
      int keys = 0;
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        if (own) {
          if (keys == ROOT_KEYS) {
            return NESTED;
          }
          for (int k = 0; k < keys; k++) {
            if (rootKeys[k].equals(name)) {
              return GIVEN_UP;
            }
          }
          rootKeys[keys++] = name;
        }
        Integer at = index.get(name);
        t = p.nextToken();
        if (own && (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY)) {
          return NESTED;
        }
        if (at == null) {
          p.skipChildren();
          continue;
        }
        int f = at;
        if (t == JsonToken.VALUE_NULL) {
          continue; // not present
        }
        Object v = fastValue(p, t, f);
        if (v == null) {
          return GIVEN_UP;
        }
        out[f] = v;
      }
      if (t != JsonToken.END_OBJECT || p.nextToken() != null) {
        return GIVEN_UP;
      }
    } catch (Exception e) {
      return GIVEN_UP;
    }
    return TAKEN;
  }

  /** A field's value when its conversion is plain and passes every check, else null. */
  private Object fastValue(JsonParser p, JsonToken t, int f) throws java.io.IOException {
    switch (kinds[f]) {
      case STRING:
        return t == JsonToken.VALUE_STRING ? p.getText() : null;
      case BOOLEAN:
        if (t == JsonToken.VALUE_TRUE) return Boolean.TRUE;
        if (t == JsonToken.VALUE_FALSE) return Boolean.FALSE;
        return null;
      case BYTE:
      case SHORT:
      case INT:
      case LONG: {
        if (t != JsonToken.VALUE_NUMBER_INT) return null;
        JsonParser.NumberType nt = p.getNumberType();
        if (nt != JsonParser.NumberType.INT && nt != JsonParser.NumberType.LONG) return null;
        long l = p.getLongValue();
        switch (kinds[f]) {
          case BYTE: return l == (byte) l ? Byte.valueOf((byte) l) : null;
          case SHORT: return l == (short) l ? Short.valueOf((short) l) : null;
          case INT: return l == (int) l ? Integer.valueOf((int) l) : null;
          default: return Long.valueOf(l);
        }
      }
      case FLOAT:
      case DOUBLE: {
        if (t != JsonToken.VALUE_NUMBER_INT && t != JsonToken.VALUE_NUMBER_FLOAT) return null;
        JsonParser.NumberType nt = p.getNumberType();
        if (t == JsonToken.VALUE_NUMBER_INT
            && (nt == JsonParser.NumberType.INT || nt == JsonParser.NumberType.LONG)) {
          long l = p.getLongValue();
          return kinds[f] == FLOAT ? (Object) Float.valueOf((float) l) : Double.valueOf(l);
        }
        Object typed = fractional(p.getText(), kinds[f]);
        if (typed instanceof Double && Double.isFinite((Double) typed)) return typed;
        if (typed instanceof Float && Float.isFinite((Float) typed)) return typed;
        return null;
      }
      default: { // DATE, TIMESTAMP
        if (t != JsonToken.VALUE_STRING) return null;
        String s = p.getText();
        if (!datedFirst(s)) return null;
        Object plain; // (not a conditional expression: it would unbox a date to a long)
        if (kinds[f] == DATE) {
          plain = PlainTime.date(s);
        } else {
          plain = PlainTime.timestamp(s, fixedZone);
        }
        if (plain != null) return plain;
        textRow.update(0, UTF8String.fromString(s));
        return textCasts[f].eval(textRow); // Integer days or Long micros, null if unparseable
      }
    }
  }

  /**
   * A number with a fraction, an exponent or beyond a long, as a float or double field reads it
   * through the variant: Spark's builder keeps a number written without an exponent, of at most
   * 38 digits and 38 decimals, as a decimal, and Spark's cast of a decimal is BigDecimal's
   * doubleValue / floatValue; any other number is Jackson's double (Double.parseDouble), cast.
   * (tests/unit/jvm/test_jvm_parse.py and a fuzz against VariantGet.cast found no difference.)
   */
  static Object fractional(String text, int kind) {
    boolean plain = true;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == 'e' || c == 'E') {
        plain = false;
        break;
      }
    }
    if (plain) {
      java.math.BigDecimal d = new java.math.BigDecimal(text);
      if (d.scale() <= 38 && d.precision() <= 38) {
        return kind == FLOAT
            ? (Object) Float.valueOf(d.floatValue())
            : Double.valueOf(d.doubleValue());
      }
    }
    double x = Double.parseDouble(text);
    return kind == FLOAT ? (Object) Float.valueOf((float) x) : Double.valueOf(x);
  }

  /** The same through Spark's variant, builder then cast: the reference of {@link #fractional}. */
  Object fractionalByVariant(String text, int kind) throws java.io.IOException {
    init();
    Variant v = VariantBuilder.parseJson(text, false);
    return VariantGet$.MODULE$.cast(v, sparkType(kind), castArgs);
  }

  /** parse.py's date test (`^\s*[+-]?[0-9]{4,}-[0-9]{2}-[0-9]{2}([T ]|\s*$)`) by hand. */
  static boolean datedFirst(String s) {
    int n = s.length();
    int i = 0;
    while (i < n && regexSpace(s.charAt(i))) i++;
    if (i < n && (s.charAt(i) == '+' || s.charAt(i) == '-')) i++;
    int digits = 0;
    while (i < n && digit(s.charAt(i))) {
      i++;
      digits++;
    }
    if (digits < 4 || i >= n || s.charAt(i) != '-') return false;
    i++;
    if (i + 5 > n || !digit(s.charAt(i)) || !digit(s.charAt(i + 1)) || s.charAt(i + 2) != '-'
        || !digit(s.charAt(i + 3)) || !digit(s.charAt(i + 4))) {
      return false;
    }
    i += 5;
    if (i == n) return true;
    char c = s.charAt(i);
    if (c == 'T' || c == ' ') return true;
    while (i < n && regexSpace(s.charAt(i))) i++;
    if (i == n) return true;
    // `$` also matches before a final line terminator that `\s` does not cover
    char last = s.charAt(i);
    return i == n - 1 && (last == '\u0085' || last == '\u2028' || last == '\u2029');
  }

  private static boolean regexSpace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == 0x0B || c == '\f' || c == '\r';
  }

  private static boolean digit(char c) {
    return c >= '0' && c <= '9';
  }

  // ------------------------------------------------------------------ the reference path

  /** The document as Spark's try_parse_json reads it, or null; content after the root value
   * makes it null (the fix). */
  private Variant document(String json) {
    try (JsonParser p = reference.createParser(json)) {
      p.nextToken();
      Variant v = VariantBuilder.parseJson(p, false, true);
      return p.nextToken() == null ? v : null;
    } catch (Exception e) {
      return null;
    }
  }

  private void referencePath(UTF8String text, Object[] out) {
    init();
    int size = text.numBytes();
    String reason = null;
    Variant doc = null;
    String json = text.toString();
    if (size > MAX_JSON_BYTES) {
      reason =
          String.format("record too large: %d bytes (at most %d)", size, MAX_JSON_BYTES);
    } else {
      doc = document(json);
      if (doc == null) {
        reason = duplicateKeys(text) ? DUPLICATE : NOT_JSON;
      } else if (!startsWithBrace(json)) {
        reason = "not a JSON object: " + kindName(kindOf(doc));
      }
    }
    String missing = null;
    String bad = null;
    for (int f = 0; f < names.length; f++) {
      Variant node = doc != null && doc.getType() == VariantUtil.Type.OBJECT
          ? doc.getFieldByKey(names[f]) : null;
      boolean present = node != null && node.getType() != VariantUtil.Type.NULL;
      if (!present) {
        if (required[f] && missing == null) {
          missing = "missing required field '" + names[f] + "'";
        }
        continue;
      }
      String kind = kindOf(node);
      boolean kindOk = kindOk(kind, kinds[f]);
      Object typed = VariantGet$.MODULE$.cast(node, sparkTypes[f], castArgs);
      if (typed != null && (kinds[f] == DATE || kinds[f] == TIMESTAMP)) {
        Object asText = VariantGet$.MODULE$.cast(node, DataTypes.StringType, castArgs);
        if (asText != null && !DATE_FIRST.matcher(asText.toString()).find()) {
          typed = null;
        }
      }
      if (typed instanceof Double && !Double.isFinite((Double) typed)) typed = null;
      if (typed instanceof Float && !Float.isFinite((Float) typed)) typed = null;
      out[f] = typed instanceof UTF8String ? typed.toString() : typed;
      if (bad == null) {
        if (!kindOk) {
          bad = "wrong type for '" + names[f] + "': expected " + typeNames[f] + ", got "
              + kindName(kind);
        } else if (typed == null) {
          String raw = node.toJson(zone);
          bad = (kinds[f] == DATE || kinds[f] == TIMESTAMP
                  ? "unparseable " + typeNames[f] + " in '" + names[f] + "': "
                  : "bad value for '" + names[f] + "' (" + typeNames[f] + "): ")
              + (raw == null ? "null" : raw);
        }
      }
    }
    if (reason == null) {
      reason = missing != null ? missing : bad;
    }
    out[names.length] = reason;
  }

  private static boolean startsWithBrace(String json) {
    for (int i = 0; i < json.length(); i++) {
      char c = json.charAt(i);
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
        return c == '{';
      }
    }
    return false;
  }

  /** Spark's json_object_keys of the record has a key twice (parse.py's duplicate test). */
  private static boolean duplicateKeys(UTF8String text) {
    GenericArrayData keys = JsonExpressionUtils.jsonObjectKeys(text);
    if (keys == null) {
      return false;
    }
    java.util.HashSet<Object> seen = new java.util.HashSet<>();
    for (int i = 0; i < keys.numElements(); i++) {
      if (!seen.add(keys.getUTF8String(i).toString())) {
        return true;
      }
    }
    return false;
  }

  /** schema_of_variant of a value, as Spark prints it ("BIGINT", "DECIMAL(2,1)", "OBJECT<...>"). */
  static String kindOf(Variant v) {
    return SchemaOfVariant$.MODULE$.printSchema(SchemaOfVariant$.MODULE$.schemaOf(v));
  }

  /** parse.py's _kind_name: the kind without what it holds ("object", "decimal(2,1)"). */
  static String kindName(String kind) {
    Matcher m = KIND_NAME.matcher(kind.toLowerCase(java.util.Locale.ROOT));
    return m.find() ? m.group() : "";
  }

  /** parse.py's _variant_kind_ok. */
  static boolean kindOk(String kind, int target) {
    switch (target) {
      case STRING:
      case DATE:
      case TIMESTAMP:
        return kind.equals("STRING");
      case BYTE:
      case SHORT:
      case INT:
      case LONG:
        return INTEGRAL_KINDS.matcher(kind).find();
      case FLOAT:
      case DOUBLE:
        return NUMERIC_KINDS.matcher(kind).find();
      default:
        return kind.equals("BOOLEAN");
    }
  }
}
