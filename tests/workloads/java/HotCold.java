// CPU-bound workload with known hot spots for the java plugin's tests.
//
// Every worker thread calls hotWork three times for each coldWork call, with
// the same amount of work per call, so a CPU profile shows hotWork : coldWork
// at 3 : 1. Workers are started as a lambda, an inner class and an
// anonymous class; mix() is small enough to be inlined by the JIT; interpWork
// is meant to be excluded from compilation by the test
// (-XX:CompileCommand=exclude,HotCold.interpWork) so it stays interpreted.
//
// Usage: java HotCold <seconds> [threads] [delay-ms]. The workers start
// after delay-ms, so a test can attach first and the JIT compiles the hot
// code with the profiler's debug information on. Prints "ready" once the
// workers run and "done" at the end; nothing else, so a test can check that
// profiling left the output unchanged.
public class HotCold {
  static volatile long sink;
  static volatile boolean stop;

  static long mix(long x) {
    x ^= x << 13;
    x ^= x >>> 7;
    return x ^ (x << 17);
  }

  static long hotWork(long seed) {
    long x = seed | 1;
    for (int i = 0; i < 200_000; i++) x = mix(x + i);
    return x;
  }

  // the String parameter puts a ';' into the JVM signature, which the
  // collapsed output shows as '|': HotCold.coldWork(Ljava/lang/String|J)J
  static long coldWork(String tag, long seed) {
    long x = (seed + tag.length()) | 1;
    for (int i = 0; i < 200_000; i++) x = mix(x + i);
    return x;
  }

  static long interpWork(long seed) {
    long x = seed | 1;
    for (int i = 0; i < 20_000; i++) x = mix(x + i);
    return x;
  }

  static void loop(long seed) {
    long x = seed;
    int round = 0;
    while (!stop) {
      x += hotWork(x);
      x += hotWork(x);
      x += hotWork(x);
      x += coldWork("cold", x);
      if ((++round & 7) == 0) x += interpWork(x);
    }
    sink = x;
  }

  class InnerWorker implements Runnable {
    public void run() {
      loop(2);
    }
  }

  public static void main(String[] args) throws Exception {
    int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 30;
    int nthreads = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    long delayMs = args.length > 2 ? Long.parseLong(args[2]) : 0;
    Thread.sleep(delayMs);
    HotCold outer = new HotCold();
    Thread[] threads = new Thread[nthreads];
    for (int i = 0; i < nthreads; i++) {
      Runnable r;
      switch (i % 3) {
        case 0:
          final long s = i + 1;
          r = () -> loop(s);
          break;
        case 1:
          r = outer.new InnerWorker();
          break;
        default:
          r = new Runnable() {
            public void run() {
              loop(3);
            }
          };
      }
      threads[i] = new Thread(r, "worker-" + i);
      threads[i].start();
    }
    System.out.println("ready");
    System.out.flush();
    Thread.sleep(seconds * 1000L);
    stop = true;
    for (Thread t : threads) t.join();
    System.out.println("done");
  }
}
