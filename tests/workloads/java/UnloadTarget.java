// Loaded by Unload through throw-away class loaders; see Unload.java.
public class UnloadTarget {
  public static long spin(long seed) {
    long x = seed | 1;
    for (int i = 0; i < 20_000; i++) {
      Runnable r = () -> {};
      r.run();
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
    }
    return x;
  }
}
