// A JVM with known threads: a monitor deadlock (mon-a, mon-b), a ReentrantLock deadlock
// (juc-a, juc-b), a thread spinning on CPU (spinner), a thread blocked behind a sleeping
// lock holder that is no deadlock (waiter, holder), and idle threads. Prints "ready" once
// both deadlocks are formed.
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

public class Threads {
    static final Object monA = new Object(), monB = new Object(), held = new Object();
    static final ReentrantLock jucA = new ReentrantLock(), jucB = new ReentrantLock();
    static final CountDownLatch firstLocks = new CountDownLatch(4);
    static volatile long sink;

    static void monitorCycle(Object first, Object second) {
        synchronized (first) {
            firstLocks.countDown();
            await();
            synchronized (second) {
                sink++;
            }
        }
    }

    static void lockCycle(ReentrantLock first, ReentrantLock second) {
        first.lock();
        try {
            firstLocks.countDown();
            await();
            second.lock();
            second.unlock();
        } finally {
            first.unlock();
        }
    }

    static void await() {
        try {
            firstLocks.await();
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static void spin() {
        long x = 0;
        while (true) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            if (x == 42)
                sink = x;
        }
    }

    static void holdAndSleep() {
        synchronized (held) {
            sleep(3600_000);
        }
    }

    static void waitBehindHolder() {
        sleep(200);
        synchronized (held) {
            sink++;
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
        }
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        start("mon-a", () -> monitorCycle(monA, monB));
        start("mon-b", () -> monitorCycle(monB, monA));
        start("juc-a", () -> lockCycle(jucA, jucB));
        start("juc-b", () -> lockCycle(jucB, jucA));
        start("spinner", Threads::spin);
        start("holder", Threads::holdAndSleep);
        start("waiter", Threads::waitBehindHolder);
        start("idle-1", () -> sleep(3600_000));
        firstLocks.await();
        sleep(300);
        System.out.println("ready");
        System.out.flush();
        sleep(3600_000);
    }
}
