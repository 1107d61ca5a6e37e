// CPU-bound Java workload for bench/java: worker threads run a mix of
// arithmetic, HashMap work, string building and allocation (so profilers
// see deep-ish stacks, inlining, GC), and every second the main thread
// prints "<epoch ms> <operations in that second>".
//
// Usage: java Bench <threads> <seconds>
import java.util.HashMap;
import java.util.concurrent.atomic.LongAdder;

public class Bench {
  static final LongAdder ops = new LongAdder();
  static volatile boolean stop;
  static volatile long sink;

  static long mix(long x) {
    x ^= x << 13;
    x ^= x >>> 7;
    return x ^ (x << 17);
  }

  static long arith(long seed) {
    long x = seed | 1;
    for (int i = 0; i < 2_000; i++) x = mix(x + i);
    return x;
  }

  static long maps(long seed) {
    HashMap<Long, Long> m = new HashMap<>();
    for (int i = 0; i < 200; i++) m.merge(mix(seed + i) & 127, 1L, Long::sum);
    return m.size();
  }

  static long strings(long seed) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 50; i++) sb.append(seed + i).append(',');
    return sb.toString().hashCode();
  }

  static void work(long seed) {
    long x = seed;
    while (!stop) {
      x += arith(x);
      x += maps(x);
      x += strings(x);
      ops.increment();
    }
    sink = x;
  }

  public static void main(String[] args) throws Exception {
    int threads = Integer.parseInt(args[0]);
    int seconds = Integer.parseInt(args[1]);
    for (int i = 0; i < threads; i++) {
      final long s = i + 1;
      Thread t = new Thread(() -> work(s), "bench-" + i);
      t.setDaemon(true);
      t.start();
    }
    long next = System.currentTimeMillis() + 1000;
    for (int i = 0; i < seconds; i++) {
      Thread.sleep(Math.max(1, next - System.currentTimeMillis()));
      next += 1000;
      System.out.println(System.currentTimeMillis() + " " + ops.sumThenReset());
      System.out.flush();
    }
    stop = true;
  }
}
