// Class unloading under profiling: loads UnloadTarget again and again
// through fresh class loaders (parent: the platform loader, so each load is
// a new class), runs its hot method until compiled, drops the loader and
// forces GCs so the classes are unloaded while the profiler samples and
// resolves their methods.
//
// Usage: java Unload <seconds>. Prints "ready" and "done" only.
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

public class Unload {
  public static void main(String[] args) throws Exception {
    int seconds = Integer.parseInt(args[0]);
    URL here = Unload.class.getProtectionDomain().getCodeSource().getLocation();
    long end = System.currentTimeMillis() + seconds * 1000L;
    long sum = 0;
    int round = 0;
    System.out.println("ready");
    System.out.flush();
    while (System.currentTimeMillis() < end) {
      URLClassLoader l = new URLClassLoader(new URL[] {here}, ClassLoader.getPlatformClassLoader());
      Class<?> c = l.loadClass("UnloadTarget");
      Method m = c.getMethod("spin", long.class);
      long t0 = System.currentTimeMillis();
      while (System.currentTimeMillis() - t0 < 150) sum += (Long) m.invoke(null, sum);
      l.close();
      if (++round % 4 == 0) System.gc();
    }
    System.out.println(sum == 42 ? "done." : "done");
  }
}
