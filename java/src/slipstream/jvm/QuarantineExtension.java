package slipstream.jvm;

import java.io.Serializable;
import org.apache.spark.sql.SparkSessionExtensions;
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
import scala.runtime.AbstractFunction4;
import scala.runtime.BoxedUnit;

/**
 * `slipstream_quarantine` in every session of a Spark Connect server started with
 * `--jars slipstream-parse.jar --conf spark.sql.extensions=slipstream.jvm.QuarantineExtension`
 * (a Connect client cannot register a nondeterministic JVM function itself).
 */
public final class QuarantineExtension extends AbstractFunction1<SparkSessionExtensions, BoxedUnit>
    implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The function the expression calls: {@link Quarantine#call}. */
  static final class Call extends AbstractFunction4<String, String, String, String, Boolean>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Quarantine quarantine = new Quarantine();

    @Override
    public Boolean apply(String input, String reason, String raw, String source) {
      return quarantine.call(input, reason, raw, source);
    }
  }

  static final class Builder extends AbstractFunction1<Seq<Expression>, Expression>
      implements Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    @SuppressWarnings("unchecked")
    public Expression apply(Seq<Expression> children) {
      return new ScalaUDF(
          new Call(),
          DataTypes.BooleanType,
          children,
          (Seq) Nil$.MODULE$,
          Option.empty(),
          Option.apply(Quarantine.NAME),
          false,
          false); // nondeterministic: evaluated once a row, never moved or copied
    }
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectFunction(
        new Tuple3<>(
            FunctionIdentifier.apply(Quarantine.NAME),
            new ExpressionInfo(Quarantine.class.getName(), Quarantine.NAME),
            new Builder()));
    return BoxedUnit.UNIT;
  }
}
