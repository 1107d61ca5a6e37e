// SPDX-License-Identifier: Apache-2.0
// Allocation throughput for bench/modes: allocates 4 KiB arrays in a loop
// and prints the rounds of each second. Usage: AllocRate SECONDS
public class AllocRate {
    static volatile Object sink;

    static void round() {
        for (int i = 0; i < 1000; i++) sink = new byte[4096];
    }

    public static void main(String[] args) {
        int secs = Integer.parseInt(args.length > 0 ? args[0] : "20");
        for (int s = 0; s < secs; s++) {
            long end = System.nanoTime() + 1000000000L, n = 0;
            while (System.nanoTime() < end) {
                round();
                n++;
            }
            System.out.println("rate " + n);
            System.out.flush();
        }
    }
}
