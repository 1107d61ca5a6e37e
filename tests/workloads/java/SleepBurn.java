// SPDX-License-Identifier: Apache-2.0
// Profile types with a known answer: one thread sleeps in sleeper(), one
// burns CPU in burner(); a wall profile shows both, a cpu profile only the
// burner. Usage: SleepBurn SECONDS [idle] (idle: no burner, for the cost
// of sampling a JVM that only waits)
public class SleepBurn {
    static volatile long sink;

    static void sleeper() throws InterruptedException {
        while (true) Thread.sleep(50);
    }

    static void burner() {
        long x = 0;
        while (true) {
            x += x * 31 + 7;
            sink = x;
        }
    }

    public static void main(String[] args) throws Exception {
        Thread s = new Thread(() -> {
            try {
                sleeper();
            } catch (InterruptedException e) {
                // the program ends
            }
        }, "sleeper");
        Thread b = new Thread(SleepBurn::burner, "burner");
        s.setDaemon(true);
        b.setDaemon(true);
        s.start();
        if (args.length < 2 || !args[1].equals("idle")) b.start();
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(Long.parseLong(args.length > 0 ? args[0] : "30") * 1000L);
    }
}
