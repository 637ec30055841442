import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import slipstream.jvm.StrictJsonParser;

/**
 * The JVM parser alone over `trending`'s view records (bench/parserbench.py): every line of the
 * `.jsonl` files under args[0], parsed `rounds` times (args[1]) by one StrictJsonParser, as
 * one line a round: nanoseconds per record and records rejected.
 */
public final class ParserBench {
  public static void main(String[] args) throws Exception {
    List<byte[]> lines = new ArrayList<>();
    try (Stream<Path> files = Files.walk(Path.of(args[0]))) {
      for (Path file : files.filter(p -> p.toString().endsWith(".jsonl")).sorted().toList()) {
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
          lines.add(line.getBytes(StandardCharsets.UTF_8));
        }
      }
    }
    StrictJsonParser parser =
        new StrictJsonParser(
            new String[] {"event_id", "article_id", "user_id", "ts"},
            new String[] {"string", "string", "string", "timestamp"},
            new boolean[] {true, true, true, true},
            "UTC");
    int rounds = Integer.parseInt(args[1]);
    for (int round = 0; round < rounds; round++) {
      long start = System.nanoTime();
      int rejected = 0;
      for (byte[] line : lines) {
        Object[] out = parser.parse(line);
        if (out != null && out[out.length - 1] != null) {
          rejected++;
        }
      }
      double ns = (System.nanoTime() - start) / (double) lines.size();
      System.out.printf("%d %.1f %d %d%n", round, ns, rejected, lines.size());
    }
  }
}
