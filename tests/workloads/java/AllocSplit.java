// SPDX-License-Identifier: Apache-2.0
// Allocation workload with a known answer: per round, allocBig allocates
// three times the bytes allocSmall does (byte arrays of the same size, three
// against one), so an allocation profile splits 3:1 between the two.
// Usage: AllocSplit SECONDS
public class AllocSplit {
    static volatile Object sink;

    static void allocBig() {
        for (int i = 0; i < 3; i++) sink = new byte[4096];
    }

    static void allocSmall() {
        sink = new byte[4096];
    }

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + Long.parseLong(args.length > 0 ? args[0] : "30") * 1000000000L;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                allocBig();
                allocSmall();
            }
            Thread.sleep(1);
        }
    }
}
