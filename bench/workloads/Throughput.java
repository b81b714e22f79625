// A Java throughput workload for the JVM agent's overhead: worker threads (the argument,
// default 2) doing a mix of small allocations, HashMap work and a briefly held shared monitor.
// Prints the operations completed in each 250 ms, one number a line, until killed.
import java.util.HashMap;

public class Throughput {
    static final Object lock = new Object();
    static long shared;
    static long[] ops;

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
        int workers = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        ops = new long[workers];
        for (int t = 0; t < workers; t++) {
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
                now = 0;
                for (long n : ops)
                    now += n;
            }
            System.out.println(now - last);
            System.out.flush();
            last = now;
        }
    }
}
