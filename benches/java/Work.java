// The Java workload of benches/java/cost.py: THREADS threads doing work units, each a
// recursive descent of 1 to 6 frames (Work.descend) into one of a dozen ordinary library
// tasks (formatting, maps, sorting, streams, regex, BigInteger, java.time, string
// splitting, queues, UUIDs) or into one of the many small methods of Gen (a class
// benches/java/cost.py generates: Gen.call(i, x) reaches method i of Gen.COUNT through
// two levels of switches), so that the JVM compiles some thousands of methods the way a
// service does, allocates, and collects garbage. Started with no profiling flag.
//
// Every PERIOD seconds the main thread prints "tick SECONDS UNITS": the monotonic clock
// (System.nanoTime, which HotSpot reads from CLOCK_MONOTONIC on Linux, the clock of
// Python's time.monotonic) and the units all threads have finished so far. Runs until
// killed.
//
// usage: java -cp DIR Work THREADS PERIOD
import java.math.BigInteger;
import java.time.LocalDate;
import java.time.format.DateTimeFormatter;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

public class Work implements Runnable {
    static final int TASKS = 13;
    static final Pattern WORDS = Pattern.compile("([a-z]+)-(\\d+)");
    static final DateTimeFormatter DATE = DateTimeFormatter.ofPattern("yyyy-MM-dd EEE");
    static AtomicLongArray units;
    static volatile long sink;
    final int id;

    Work(int id) {
        this.id = id;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long period = (long) (Double.parseDouble(args[1]) * 1e9);
        units = new AtomicLongArray(threads);
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(new Work(i), "work-" + i);
            t.setDaemon(true);
            t.start();
        }
        long next = System.nanoTime();
        while (true) {
            next += period;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            long total = 0;
            for (int i = 0; i < threads; i++) {
                total += units.get(i);
            }
            System.out.printf("tick %.6f %d%n", System.nanoTime() / 1e9, total);
            System.out.flush();
        }
    }

    public void run() {
        long seed = id * 7919L;
        while (true) {
            sink += descend(seed, 1 + (int) (seed % 6));
            units.incrementAndGet(id);
            seed++;
        }
    }

    static long descend(long seed, int depth) {
        if (depth == 0) {
            return task(seed);
        }
        return descend(seed * 31 + depth, depth - 1) + 1;
    }

    static long task(long seed) {
        int n = (int) ((seed & 0x7fffffffL) % 1000);
        switch ((int) Math.floorMod(seed, TASKS)) {
            case 0: return format(n);
            case 1: return hashMap(n);
            case 2: return treeMap(n);
            case 3: return sortList(n);
            case 4: return streams(n);
            case 5: return regex(n);
            case 6: return bigInteger(n);
            case 7: return dates(n);
            case 8: return split(n);
            case 9: return queues(n);
            case 10: return uuids(n);
            case 11: return arrays(n);
            default: return many(seed);
        }
    }

    static long many(long seed) {
        long sum = 0;
        int first = (int) ((seed >>> 4) % Gen.COUNT);
        for (int j = 0; j < 8; j++) {
            sum += Gen.call((first + j * (Gen.COUNT / 8)) % Gen.COUNT, seed + j);
        }
        return sum;
    }

    static long format(int n) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 20; i++) {
            sb.append(String.format("%05d:%s:%.3f;", n + i, Integer.toHexString(n * i), n / (i + 1.0)));
        }
        return sb.length();
    }

    static long hashMap(int n) {
        Map<String, Integer> m = new HashMap<>();
        for (int i = 0; i < 200; i++) {
            m.merge("k" + ((n + i * 7) % 97), i, Integer::sum);
        }
        return m.values().stream().mapToLong(Integer::longValue).sum();
    }

    static long treeMap(int n) {
        TreeMap<Integer, String> m = new TreeMap<>();
        for (int i = 0; i < 200; i++) {
            m.put((n * 31 + i * 17) % 1009, "v" + i);
        }
        Integer above = m.ceilingKey(n % 1000 + 1);
        return m.headMap(500).size() + (above == null ? 0 : above) + m.firstKey();
    }

    static long sortList(int n) {
        List<String> l = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            l.add(Long.toString((n + 1L) * (i + 13) * 2654435761L % 100000));
        }
        l.sort(Comparator.comparing(String::length).thenComparing(Comparator.reverseOrder()));
        return l.get(0).hashCode();
    }

    static long streams(int n) {
        Map<Integer, List<Integer>> g = IntStream.range(0, 300)
                .map(i -> i * n % 1013)
                .filter(i -> i % 3 != 0)
                .boxed()
                .collect(Collectors.groupingBy(i -> i % 7));
        return g.values().stream().mapToInt(List::size).max().orElse(0);
    }

    static long regex(int n) {
        String text = "alpha-" + n + " beta-" + (n * 3) + " gamma-" + (n * 7) + " delta-x";
        long sum = 0;
        for (int r = 0; r < 10; r++) {
            Matcher m = WORDS.matcher(text);
            while (m.find()) {
                sum += m.group(1).length() + Integer.parseInt(m.group(2));
            }
        }
        return sum;
    }

    static long bigInteger(int n) {
        BigInteger a = BigInteger.valueOf(n + 2).pow(40);
        BigInteger b = BigInteger.valueOf(1_000_003L);
        return a.multiply(a).mod(b).longValue() + a.bitLength();
    }

    static long dates(int n) {
        LocalDate d = LocalDate.of(2020, 1, 1);
        long sum = 0;
        for (int i = 0; i < 20; i++) {
            sum += d.plusDays(n + i * 13).format(DATE).length();
        }
        return sum;
    }

    static long split(int n) {
        String csv = IntStream.range(0, 60).mapToObj(i -> Integer.toString(i * n)).collect(Collectors.joining(","));
        return Arrays.stream(csv.split(",")).mapToLong(String::length).sum() + csv.toUpperCase().indexOf('9');
    }

    static long queues(int n) {
        PriorityQueue<Long> pq = new PriorityQueue<>();
        ArrayDeque<Long> dq = new ArrayDeque<>();
        for (long i = 0; i < 200; i++) {
            pq.add((i * 2654435761L + n) % 10007);
            dq.addFirst(i);
        }
        long sum = 0;
        for (int i = 0; i < 50; i++) {
            sum += pq.poll() + dq.pollLast();
        }
        return sum;
    }

    static long uuids(int n) {
        long sum = 0;
        for (int i = 0; i < 10; i++) {
            sum += UUID.nameUUIDFromBytes(("u" + n + ":" + i).getBytes()).toString().hashCode();
        }
        return sum;
    }

    static long arrays(int n) {
        double[] a = new double[400];
        for (int i = 0; i < a.length; i++) {
            a[i] = Math.sin(n + i);
        }
        Arrays.sort(a);
        return Arrays.binarySearch(a, 0.5) + (long) (a[200] * 1000);
    }
}
