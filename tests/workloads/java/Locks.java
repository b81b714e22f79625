// Known lock waits, timed by the program itself. On a line "go" on stdin, for 4 s: three
// "juc-N" threads take one ReentrantLock in turn, each holding it 5..60 ms (seeded random)
// and then staying away 0..20 ms; two "sync-N" threads do the same with a synchronized block;
// "cond-waiter" waits on a Condition (of a lock no one else takes) and "latch-waiter" on a
// CountDownLatch all along: parked too, but on no Lock's synchronizer. Each thread adds up the time it spent getting its lock
// (System.nanoTime around lock() or around entering the block). At the end it prints
// "juc <us>" and "sync <us>", the totals of each kind, then "done"; every thread then ends.
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

public class Locks {
    static final long RUN_NS = 4_000_000_000L;
    static final ReentrantLock lock = new ReentrantLock();
    static final Object monitor = new Object();
    static final AtomicLong jucWaitNs = new AtomicLong(), syncWaitNs = new AtomicLong();
    static volatile long end;

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static void jucWait(Random rnd) {
        long t0 = System.nanoTime();
        lock.lock();
        try {
            jucWaitNs.addAndGet(System.nanoTime() - t0);
            sleep(5 + rnd.nextInt(56));
        } finally {
            lock.unlock();
        }
    }

    static void syncWait(Random rnd) {
        long t0 = System.nanoTime();
        synchronized (monitor) {
            syncWaitNs.addAndGet(System.nanoTime() - t0);
            sleep(5 + rnd.nextInt(56));
        }
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        if (!"go".equals(new java.io.BufferedReader(new java.io.InputStreamReader(System.in))
                         .readLine()))
            return;
        end = System.nanoTime() + RUN_NS;
        ReentrantLock condLock = new ReentrantLock();
        Condition never = condLock.newCondition();
        CountDownLatch latch = new CountDownLatch(1);
        Thread cond = start("cond-waiter", () -> {
            condLock.lock();
            try {
                while (System.nanoTime() < end)
                    never.awaitNanos(end - System.nanoTime());
            } catch (InterruptedException e) {
            } finally {
                condLock.unlock();
            }
        });
        Thread latchWaiter = start("latch-waiter", () -> {
            try {
                latch.await();
            } catch (InterruptedException e) {
            }
        });
        Thread[] workers = new Thread[5];
        for (int i = 0; i < 5; i++) {
            final boolean juc = i < 3;
            final Random rnd = new Random(i);
            workers[i] = start(juc ? "juc-" + (i + 1) : "sync-" + (i - 2), () -> {
                while (System.nanoTime() < end) {
                    if (juc)
                        jucWait(rnd);
                    else
                        syncWait(rnd);
                    sleep(rnd.nextInt(21));
                }
            });
        }
        for (Thread t : workers)
            t.join();
        latch.countDown();
        cond.join();
        latchWaiter.join();
        System.out.println("juc " + jucWaitNs.get() / 1000);
        System.out.println("sync " + syncWaitNs.get() / 1000);
        System.out.println("done");
        System.out.flush();
        sleep(3600_000);
    }
}
