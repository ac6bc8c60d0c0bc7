// Test workload for compiled Java frames with methods inlined into them (issue 30;
// tests/it/java_frames.rs, benches/java/frames_vs_jfr.py): a thread "inline-worker"
// loops calling outer(), which calls mixA() (three quarters of the work) and mixB()
// (one quarter). No flag keeps them apart: C2 inlines all three into the loop's
// compiled code. Prints "ready" once the worker runs, then runs until the worker's CPU
// time reaches the argument in milliseconds (or until killed, without one).
import java.lang.management.ManagementFactory;

public class Inline {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Thread worker = new Thread(Inline::work, "inline-worker");
        worker.setDaemon(true);
        worker.start();
        System.out.println("ready");
        System.out.flush();
        long want = args.length > 0 ? Long.parseLong(args[0]) * 1_000_000L : Long.MAX_VALUE;
        while (ManagementFactory.getThreadMXBean().getThreadCpuTime(worker.getId()) < want) {
            Thread.sleep(20);
        }
    }

    static void work() {
        long x = 1;
        while (true) {
            x = outer(x);
            sink = x;
        }
    }

    static long outer(long x) {
        x = mixA(x);
        return mixB(x);
    }

    static long mixA(long x) {
        for (int i = 0; i < 3000; i++) {
            x = x * 6364136223846793005L + i;
        }
        return x;
    }

    static long mixB(long x) {
        for (int i = 0; i < 1000; i++) {
            x = x * 2862933555777941757L + i;
        }
        return x;
    }
}
