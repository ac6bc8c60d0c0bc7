// Test workload that starts like a server deploying (issue 48; tests/it/java_deploy.rs,
// benches/java/deploy_vs_jfr.py): every DEPLOY_MS a new class loader loads its own copy
// of Deploy$App from this class's directory, and the worker thread "deploy-worker"
// switches to it. Each copy is new code to HotSpot: interpreted, compiled by C1, then
// by C2 (App.outer with mixA and mixB inlined), within tens of milliseconds; the copies
// left behind are unloaded with their loaders (a System.gc() every GC_EVERY deploys)
// and their code freed. Prints "ready" once the worker runs, then runs until the
// worker's CPU time reaches the first argument in milliseconds (or until killed,
// without one).
import java.lang.management.ManagementFactory;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.function.LongUnaryOperator;

public class Deploy {
    static final long DEPLOY_MS = 150;
    static final int GC_EVERY = 8;
    static volatile LongUnaryOperator current;
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        URL dir = Deploy.class.getProtectionDomain().getCodeSource().getLocation();
        current = deploy(dir);
        Thread worker = new Thread(Deploy::work, "deploy-worker");
        worker.setDaemon(true);
        worker.start();
        System.out.println("ready");
        System.out.flush();
        long want = args.length > 0 ? Long.parseLong(args[0]) * 1_000_000L : Long.MAX_VALUE;
        long id = worker.getId();
        for (int n = 1; ManagementFactory.getThreadMXBean().getThreadCpuTime(id) < want; n++) {
            Thread.sleep(DEPLOY_MS);
            current = deploy(dir);
            if (n % GC_EVERY == 0) {
                System.gc();
            }
        }
    }

    // A fresh copy of App, in a loader of its own (its parent the bootstrap loader, so
    // that App is not found there first).
    static LongUnaryOperator deploy(URL dir) throws Exception {
        URLClassLoader loader = new URLClassLoader(new URL[] {dir}, null);
        Class<?> app = loader.loadClass("Deploy$App");
        return (LongUnaryOperator) app.getDeclaredConstructor().newInstance();
    }

    static void work() {
        long x = 1;
        while (true) {
            x = current.applyAsLong(x);
            sink = x;
        }
    }

    public static class App implements LongUnaryOperator {
        public long applyAsLong(long x) {
            for (int i = 0; i < 20; i++) {
                x = outer(x);
            }
            return x;
        }

        static long outer(long x) {
            x = mixA(x);
            return mixB(x);
        }

        static long mixA(long x) {
            for (int i = 0; i < 300; i++) {
                x = x * 6364136223846793005L + i;
            }
            return x;
        }

        static long mixB(long x) {
            for (int i = 0; i < 100; i++) {
                x = x * 2862933555777941757L + i;
            }
            return x;
        }
    }
}
