package slipstream.jvm;

import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.ZoneOffset;

/**
 * Timestamp and date texts in their plainest ISO-8601 forms, read without Spark's Cast: the
 * values Spark's Cast gives for them, for a fraction of its cost (the Cast is evaluated
 * interpreted, and matches a regular expression on every offset it reads).
 *
 * <p>Taken here: {@code yyyy-MM-dd[T| ]HH:mm:ss[.f]} with 1 to 6 fraction digits, then {@code Z},
 * {@code +HH:mm} or {@code -HH:mm} (under 18 hours), or nothing in a session zone of a fixed
 * offset (UTC); and {@code yyyy-MM-dd} alone for a date. Every other text returns null and
 * Spark's Cast decides it: other zones (their daylight-saving gaps and overlaps), leap seconds,
 * hour 24, whitespace, a year that is not four digits, year 0, any other form.
 */
final class PlainTime {
  private static final long[] SCALE = {0, 100_000, 10_000, 1_000, 100, 10, 1};

  private PlainTime() {}

  /** The session zone's offset when it never changes (UTC, +02:00), else null. */
  static ZoneOffset fixedOffset(ZoneId zone) {
    return zone.getRules().isFixedOffset() ? zone.getRules().getOffset(Instant.EPOCH) : null;
  }

  /** The epoch day of {@code yyyy-MM-dd}, or null. */
  static Integer date(String s) {
    if (s.length() != 10) {
      return null;
    }
    long day = epochDay(s);
    return day == Long.MIN_VALUE ? null : Integer.valueOf((int) day);
  }

  /**
   * Microseconds since the epoch of a timestamp text in a plain form, or null. {@code session}:
   * the session zone's fixed offset (null when it has none: a text without an offset is then
   * not taken).
   */
  static Long timestamp(String s, ZoneOffset session) {
    int n = s.length();
    if (n < 19 || n > 32) {
      return null;
    }
    char sep = s.charAt(10);
    if ((sep != 'T' && sep != ' ') || s.charAt(13) != ':' || s.charAt(16) != ':') {
      return null;
    }
    long day = epochDay(s);
    int hour = digits(s, 11, 2);
    int minute = digits(s, 14, 2);
    int second = digits(s, 17, 2);
    if (day == Long.MIN_VALUE || hour < 0 || hour > 23 || minute < 0 || minute > 59
        || second < 0 || second > 59) {
      return null;
    }
    int i = 19;
    long micros = 0;
    if (i < n && s.charAt(i) == '.') {
      int start = ++i;
      while (i < n && i - start <= 6 && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
        i++;
      }
      int length = i - start;
      if (length == 0 || length > 6) {
        return null;
      }
      micros = digits(s, start, length) * SCALE[length];
    }
    int offset;
    if (i == n) {
      if (session == null) {
        return null;
      }
      offset = session.getTotalSeconds();
    } else if (i + 1 == n && s.charAt(i) == 'Z') {
      offset = 0;
    } else if (i + 6 == n && (s.charAt(i) == '+' || s.charAt(i) == '-') && s.charAt(i + 3) == ':') {
      int oh = digits(s, i + 1, 2);
      int om = digits(s, i + 4, 2);
      if (oh < 0 || oh > 17 || om < 0 || om > 59) {
        return null;
      }
      offset = (s.charAt(i) == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    } else {
      return null;
    }
    long seconds = day * 86_400L + hour * 3600L + minute * 60L + second - offset;
    return seconds * 1_000_000L + micros;
  }

  /** The epoch day of the text's leading {@code yyyy-MM-dd} (year 1 to 9999), else MIN_VALUE. */
  private static long epochDay(String s) {
    if (s.charAt(4) != '-' || s.charAt(7) != '-') {
      return Long.MIN_VALUE;
    }
    int year = digits(s, 0, 4);
    int month = digits(s, 5, 2);
    int day = digits(s, 8, 2);
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > 31) {
      return Long.MIN_VALUE;
    }
    LocalDate start = LocalDate.of(year, month, 1);
    return day > start.lengthOfMonth() ? Long.MIN_VALUE : start.toEpochDay() + day - 1;
  }

  /** The value of {@code count} ASCII digits at {@code from}, or -1. */
  private static int digits(String s, int from, int count) {
    int value = 0;
    for (int i = from; i < from + count; i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      value = value * 10 + (c - '0');
    }
    return value;
  }
}
