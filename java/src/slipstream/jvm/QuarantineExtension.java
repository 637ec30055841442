package slipstream.jvm;

import java.io.Serializable;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.ScalaUDF;
import org.apache.spark.sql.types.DataTypes;
import scala.Option;
import scala.Tuple3;
import scala.collection.immutable.Nil$;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.AbstractFunction4;
import scala.runtime.BoxedUnit;

/**
 * `slipstream_quarantine`, `slipstream_late` and `slipstream_is_late` in every session of a Spark Connect server started with
 * `--jars slipstream-parse.jar --conf spark.sql.extensions=slipstream.jvm.QuarantineExtension`
 * (a Connect client cannot register a nondeterministic JVM function itself).
 */
public final class QuarantineExtension extends AbstractFunction1<SparkSessionExtensions, BoxedUnit>
    implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The function an expression calls: a {@link Quarantine} or a {@link LateRows}. */
  static final class Call extends AbstractFunction4<Object, Object, Object, Object, Boolean>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final UDF4<Object, Object, Object, Object, Boolean> function;

    @SuppressWarnings("unchecked")
    Call(UDF4<?, ?, ?, ?, Boolean> function) {
      this.function = (UDF4<Object, Object, Object, Object, Boolean>) function;
    }

    @Override
    public Boolean apply(Object a, Object b, Object c, Object d) {
      try {
        return function.call(a, b, c, d);
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** {@link LateRows.IsLate}, as an expression calls it. */
  static final class IsLateCall extends AbstractFunction2<byte[], Long, Boolean>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final LateRows.IsLate function = new LateRows.IsLate();

    @Override
    public Boolean apply(byte[] input, Long at) {
      return function.call(input, at);
    }
  }

  static final class Builder extends AbstractFunction1<Seq<Expression>, Expression>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String name;
    private final Object function;

    Builder(String name, Object function) {
      this.name = name;
      this.function = function;
    }

    @Override
    @SuppressWarnings("unchecked")
    public Expression apply(Seq<Expression> children) {
      return new ScalaUDF(
          function,
          DataTypes.BooleanType,
          children,
          (Seq) Nil$.MODULE$,
          Option.empty(),
          Option.apply(name),
          false,
          false); // nondeterministic: evaluated once a row, never moved or copied
    }
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    inject(extensions, Quarantine.NAME, Quarantine.class, new Call(new Quarantine()));
    inject(extensions, LateRows.NAME, LateRows.class, new Call(new LateRows()));
    inject(extensions, LateRows.IsLate.NAME, LateRows.IsLate.class, new IsLateCall());
    return BoxedUnit.UNIT;
  }

  private static void inject(
      SparkSessionExtensions extensions, String name, Class<?> type, Object function) {
    extensions.injectFunction(
        new Tuple3<>(
            FunctionIdentifier.apply(name),
            new ExpressionInfo(type.getName(), name),
            new Builder(name, function)));
  }
}
