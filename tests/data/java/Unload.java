// Test workload for naming interpreted Java methods across class unloading
// (tests/it/java_frames.rs): loads class Gen from directory ARG0 with a class loader of
// its own, runs its huge (never compiled) method on thread "phase-one" for ARG1 ms of
// that thread's CPU time, drops the loader and collects until the class is unloaded
// (prints "unloaded"), then does the same with class Other on thread "phase-two" (each
// phase a second away from the unloading): the freed metadata may be reused for
// Other's, and a profiler must never name one for the other.
import java.lang.management.ManagementFactory;
import java.lang.ref.WeakReference;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

public class Unload {
    public static void main(String[] args) throws Exception {
        URL dir = new java.io.File(args[0]).toURI().toURL();
        long cpuMs = Long.parseLong(args[1]);
        WeakReference<ClassLoader> gone = run(dir, "Gen", "phase-one", cpuMs);
        // A profiler reading the count of unloaded classes now and then cannot tell on
        // which side of the unloading a sample taken between two reads is: a second
        // apart, the phases' samples are surely not.
        Thread.sleep(1000);
        for (int i = 0; i < 100 && gone.get() != null; i++) {
            System.gc();
            Thread.sleep(20);
        }
        if (gone.get() != null) {
            throw new Error("Gen was not unloaded");
        }
        System.out.println("unloaded");
        Thread.sleep(1000);
        run(dir, "Other", "phase-two", cpuMs);
    }

    static volatile boolean stop;
    static volatile long sink;

    static WeakReference<ClassLoader> run(URL dir, String name, String thread, long cpuMs)
            throws Exception {
        URLClassLoader loader = new URLClassLoader(new URL[] {dir}, null);
        Method huge = loader.loadClass(name).getDeclaredMethod("huge", long.class);
        stop = false;
        Thread t = new Thread(() -> {
            try {
                long x = 1;
                while (!stop) {
                    x = (long) huge.invoke(null, x);
                    sink = x;
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, thread);
        t.start();
        long want = cpuMs * 1_000_000L;
        while (t.isAlive()
                && ManagementFactory.getThreadMXBean().getThreadCpuTime(t.getId()) < want) {
            Thread.sleep(20);
        }
        stop = true;
        t.join();
        loader.close();
        return new WeakReference<>(loader);
    }
}
