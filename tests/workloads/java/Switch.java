// Two threads that use the CPU at different times: "early-spin" spins from the start until a
// line "switch" comes on stdin; then it sleeps and "late-spin", asleep until then, spins.
// Prints "ready" at the start and "switched" once late-spin has taken over.
public class Switch {
    static volatile boolean switched;
    static volatile long sink;

    static void spinWhile(boolean whenSwitched) {
        long x = 0;
        while (switched == whenSwitched) {
            for (int i = 0; i < 100_000; i++)
                x = x * 6364136223846793005L + 1442695040888963407L;
            sink = x;
        }
    }

    static void early() {
        spinWhile(false);
        sleepForever();
    }

    static void late() {
        while (!switched)
            sleep(10);
        spinWhile(true);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
        }
    }

    static void sleepForever() {
        sleep(3600_000);
    }

    public static void main(String[] args) throws Exception {
        Thread e = new Thread(Switch::early, "early-spin"), l = new Thread(Switch::late, "late-spin");
        e.setDaemon(true);
        l.setDaemon(true);
        e.start();
        l.start();
        System.out.println("ready");
        System.out.flush();
        var in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        if (!"switch".equals(in.readLine()))
            return;
        switched = true;
        System.out.println("switched");
        System.out.flush();
        sleepForever();
    }
}
