// A Java throughput workload for the JVM agent's overhead: two threads doing a mix of small
// allocations, HashMap work and a briefly contended monitor. Prints the operations completed
// in each 250 ms, one number a line, until killed.
import java.util.HashMap;

public class Throughput {
    static final Object lock = new Object();
    static long shared;
    static final long[] ops = new long[2];

    static void work(int id) {
        HashMap<Integer, int[]> map = new HashMap<>();
        long n = 0;
        while (true) {
            for (int i = 0; i < 1000; i++) {
                map.put(i & 1023, new int[8 + (i & 15)]);
                n += map.get((i * 7) & 1023) == null ? 0 : 1;
            }
            synchronized (lock) {
                shared += n;
            }
            synchronized (ops) {
                ops[id]++;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        for (int t = 0; t < 2; t++) {
            final int id = t;
            Thread th = new Thread(() -> work(id), "worker-" + t);
            th.setDaemon(true);
            th.start();
        }
        long last = 0;
        while (true) {
            Thread.sleep(250);
            long now;
            synchronized (ops) {
                now = ops[0] + ops[1];
            }
            System.out.println(now - last);
            System.out.flush();
            last = now;
        }
    }
}
