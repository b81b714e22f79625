// Known allocation and contention: "allocator" spends its time in allocateBig (64 KiB arrays)
// and a little in allocateSmall; three "contender-N" threads fight over one monitor in
// contended(), each holding it ~2 ms. Prints "ready" once all run; then for each line
// "bytes" on stdin, the bytes the allocator thread has allocated so far (the JVM's count).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;

public class Hot {
    static final Object lock = new Object();
    static volatile Object sink;
    static volatile long counter;

    static void allocateBig() {
        sink = new byte[64 * 1024];
    }

    static void allocateSmall() {
        sink = new byte[16];
    }

    static void allocate() {
        while (true) {
            for (int i = 0; i < 100; i++)
                allocateBig();
            allocateSmall();
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static void contended() {
        synchronized (lock) {
            long end = System.nanoTime() + 2_000_000;
            while (System.nanoTime() < end)
                counter++;
        }
    }

    static void contend() {
        while (true) {
            contended();
            Thread.yield();
        }
    }

    public static void main(String[] args) throws Exception {
        Thread a = new Thread(Hot::allocate, "allocator");
        a.setDaemon(true);
        a.start();
        for (int i = 1; i <= 3; i++) {
            Thread t = new Thread(Hot::contend, "contender-" + i);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("ready");
        System.out.flush();
        var tmx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        var in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("bytes"))
                System.out.println(tmx.getThreadAllocatedBytes(a.getId()));
            System.out.flush();
        }
        Thread.sleep(3600_000);
    }
}
