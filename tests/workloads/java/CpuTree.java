// Known on-CPU split: thread "cpu-tree" runs work(), which spends 3/4 of its time in heavy()
// and 1/4 in light(), both in spin(). Prints "ready" once it runs.
public class CpuTree {
    static volatile long sink;

    static long spin(long n) {
        long x = 1;
        for (long i = 0; i < n; i++)
            x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }

    static void heavy() {
        sink = spin(3_000_000);
    }

    static void light() {
        sink = spin(1_000_000);
    }

    static void work() {
        while (true) {
            heavy();
            light();
        }
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(CpuTree::work, "cpu-tree");
        t.setDaemon(true);
        t.start();
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
