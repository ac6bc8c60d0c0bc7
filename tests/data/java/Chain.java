// Test workload for profiling a JVM with no profiling flags (tests/it/java.rs,
// docs/benchmarks.md "Java"): a thread named "chain-worker" spends its time at the end of
// a known call chain, Chain.run -> Chain.levelA -> Chain.levelB -> Chain.recurse (DEPTH
// times) -> Chain.spin. Started with -XX:CompileCommand=dontinline,Chain::* so that each
// method keeps a frame of its own (the chain is then exact to check); prints "ready" once
// the chain has run long enough to be compiled. A second thread, "chain-sleeper", waits
// on a monitor held by the main thread (a Java lock wait). Runs until killed, or with an
// argument MS for MS milliseconds (then the JVM exits by itself).
public class Chain implements Runnable {
    static final int DEPTH = 8;
    static volatile long sink;
    static final Object LOCK = new Object();

    public static void main(String[] args) throws Exception {
        long until = args.length > 0
                ? System.currentTimeMillis() + Long.parseLong(args[0])
                : Long.MAX_VALUE;
        Thread worker = new Thread(new Chain(), "chain-worker");
        worker.setDaemon(true);
        worker.start();
        Thread sleeper = new Thread(Chain::waitForLock, "chain-sleeper");
        sleeper.setDaemon(true);
        synchronized (LOCK) {
            sleeper.start();
            Thread.sleep(Math.min(2000, Math.max(0, until - System.currentTimeMillis())));
            System.out.println("ready");
            System.out.flush();
            for (long left; (left = until - System.currentTimeMillis()) > 0; ) {
                Thread.sleep(Math.min(1000, left));
            }
        }
    }

    static void waitForLock() {
        synchronized (LOCK) {
            sink++;
        }
    }

    public void run() {
        while (true) {
            levelA();
        }
    }

    static void levelA() {
        for (int i = 0; i < 100; i++) {
            levelB(i);
        }
    }

    static void levelB(int i) {
        sink += recurse(DEPTH, i);
    }

    static long recurse(int n, long acc) {
        if (n == 0) {
            return spin(acc);
        }
        return recurse(n - 1, acc + n) + 1;
    }

    static long spin(long x) {
        for (int i = 0; i < 20000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }
}
