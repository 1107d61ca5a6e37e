// System-test workload, Java: burns CPU in SysWork.sysJavaHot for BUSY_MS
// out of every PERIOD_MS, for at most LIFETIME_S seconds (see sys_work.c).
//
// Usage: java -cp DIR SysWork BUSY_MS PERIOD_MS LIFETIME_S
public class SysWork {
    static long sink;

    static long sysJavaHot(long ms) {
        long end = System.nanoTime() + ms * 1_000_000L;
        long x = sink;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 20000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
        return x;
    }

    public static void main(String[] args) throws Exception {
        long busy = Long.parseLong(args[0]), period = Long.parseLong(args[1]);
        long end = System.nanoTime() + Long.parseLong(args[2]) * 1_000_000_000L;
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            sysJavaHot(busy);
            long left = period - (System.nanoTime() - t0) / 1_000_000L;
            if (left > 0) Thread.sleep(left);
        }
    }
}
