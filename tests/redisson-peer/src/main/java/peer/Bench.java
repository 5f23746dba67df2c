package peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.MasterSlaveServersConfig;

/**
 * Redisson as the peer of the speed benchmark (lock-actors/benches/lock_bench.rs, module
 * redisson.rs): one Redisson client with its default connection pools, driven over
 * stdin/stdout.
 *
 * <pre>
 * java -cp redisson-peer.jar peer.Bench URL[,REPLICA-URL...] CLIENT-NAME [WATCHDOG-MS]
 * </pre>
 *
 * <p>With replica URLs after the primary's, Redisson runs in master/slave mode with its
 * defaults, so every lock waits for the replicas as Redisson's {@code checkLockSyncedSlaves}
 * says.
 *
 * <p>CLIENT-NAME is Redisson's {@code clientName} (CLIENT SETNAME on every connection), so
 * the benchmark can count this process's connections in CLIENT LIST. On start it prints
 * {@code {"ready":true,"version":"..."}}; then every command line gets exactly one reply,
 * a JSON object on one line. All locks are taken without a lease (the watchdog keeps them),
 * as the benchmark's own locks are. Times are {@code System.nanoTime()}, which on Linux is
 * CLOCK_MONOTONIC: the same clock in every process of the machine.
 *
 * <pre>
 * uncontended async|sync TASKS ROUND-MS -> {"pairs_per_s":F}
 *     TASKS holders, each on its own name, lock + unlock in a loop: async = TASKS chains of
 *     lockAsync(id)/unlockAsync(id) in flight (each its own owner id); sync = TASKS threads
 *     calling lock()/unlock(). 200 ms of warm-up, then ROUND-MS counted.
 * single N                 -> {"p50_us":F}   N times lock() (timed) then unlock(), one thread
 * hold NAME                -> {"held":true}  lock() on the main thread
 * release NAME             -> {"t0_ns":N}    nanoTime just before unlock() on the main thread
 * wait NAME                -> {"waiting":true} at once, later {"t1_ns":N}: lock() on the
 *                             waiter thread, nanoTime when it returns, then unlock()
 * memory N SETTLE-MS       -> {"rss_before_kb":N,"rss_after_kb":N,"heap_before":N,"heap_after":N,
 *                              "held":N,"unlock_failed":N} N locks taken by lockAsync (64 in
 *                             flight, 64 owner ids), measured SETTLE-MS later, then unlocked;
 *                             measurements after two System.gc()
 * exit                     -> shuts the client down
 * </pre>
 */
public final class Bench {
    /** Owner ids of the memory measurement's holds: 64 owners, as 64 threads would be (no
     *  thread of this JVM has these ids). */
    private static final long MEMORY_OWNER = 1_000_000L;
    /** Owner ids of the async uncontended chains: BASE + 1 .. BASE + TASKS. */
    private static final long ASYNC_OWNER_BASE = 2_000_000L;
    private final RedissonClient client;
    private final ExecutorService waiter = Executors.newSingleThreadExecutor();

    private Bench(RedissonClient client) {
        this.client = client;
    }

    public static void main(String[] args) throws Exception {
        Config config = new Config();
        // "primary,replica,...": Redisson's master/slave mode, in which a lock waits for
        // the replicas (checkLockSyncedSlaves, on by default); one address: a single server.
        String[] addresses = args[0].split(",");
        if (addresses.length > 1) {
            MasterSlaveServersConfig pair = config.useMasterSlaveServers()
                    .setMasterAddress(addresses[0])
                    .setClientName(args[1]);
            for (int i = 1; i < addresses.length; i++) {
                pair.addSlaveAddress(addresses[i]);
            }
        } else {
            config.useSingleServer().setAddress(args[0]).setClientName(args[1]);
        }
        if (args.length > 2) {
            config.setLockWatchdogTimeout(Long.parseLong(args[2]));
        }
        RedissonClient client = Redisson.create(config);
        String version = new java.util.jar.Manifest(Bench.class.getResourceAsStream("/META-INF/MANIFEST.MF"))
                .getMainAttributes().getValue("Redisson-Version");
        say("{\"ready\":true,\"version\":\"" + version + "\"}");
        new Bench(client).run();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private void run() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            try {
                switch (w[0]) {
                    case "uncontended":
                        double pairs = w[1].equals("async")
                                ? uncontendedAsync(Integer.parseInt(w[2]), Long.parseLong(w[3]))
                                : uncontendedSync(Integer.parseInt(w[2]), Long.parseLong(w[3]));
                        say("{\"pairs_per_s\":" + pairs + "}");
                        break;
                    case "single":
                        say("{\"p50_us\":" + single(Integer.parseInt(w[1])) + "}");
                        break;
                    case "hold":
                        client.getLock(w[1]).lock();
                        say("{\"held\":true}");
                        break;
                    case "release": {
                        RLock lock = client.getLock(w[1]);
                        long t0 = System.nanoTime();
                        lock.unlock();
                        say("{\"t0_ns\":" + t0 + "}");
                        break;
                    }
                    case "wait": {
                        RLock lock = client.getLock(w[1]);
                        waiter.execute(() -> {
                            lock.lock();
                            long t1 = System.nanoTime();
                            lock.unlock();
                            say("{\"t1_ns\":" + t1 + "}");
                        });
                        say("{\"waiting\":true}");
                        break;
                    }
                    case "memory":
                        say(memory(Integer.parseInt(w[1]), Long.parseLong(w[2])));
                        break;
                    case "exit":
                        client.shutdown();
                        System.exit(0);
                        break;
                    default:
                        say("{\"error\":\"unknown command " + w[0] + "\"}");
                }
            } catch (Exception e) {
                say("{\"error\":\"" + e.toString().replace('"', '\'') + "\"}");
            }
        }
        Runtime.getRuntime().halt(0);
    }

    private double uncontendedAsync(int tasks, long roundMs) throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong count = new AtomicLong();
        List<CompletableFuture<Void>> done = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            RLock lock = client.getLock("bench:redisson:async:" + i);
            // Each chain is its own owner, an id no thread of this JVM has.
            long owner = ASYNC_OWNER_BASE + i + 1;
            CompletableFuture<Void> finished = new CompletableFuture<>();
            asyncLoop(lock, owner, stop, count, finished);
            done.add(finished);
        }
        return countRound(stop, count, roundMs, () -> {
            for (CompletableFuture<Void> f : done) {
                f.get(30, TimeUnit.SECONDS);
            }
        });
    }

    private static void asyncLoop(RLock lock, long owner, AtomicBoolean stop, AtomicLong count,
                                  CompletableFuture<Void> finished) {
        if (stop.get()) {
            finished.complete(null);
            return;
        }
        lock.lockAsync(owner)
                .thenCompose(v -> lock.unlockAsync(owner))
                .whenComplete((v, e) -> {
                    if (e != null) {
                        finished.completeExceptionally(e);
                        return;
                    }
                    count.incrementAndGet();
                    asyncLoop(lock, owner, stop, count, finished);
                });
    }

    private double uncontendedSync(int tasks, long roundMs) throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong count = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            RLock lock = client.getLock("bench:redisson:sync:" + i);
            Thread t = new Thread(() -> {
                while (!stop.get()) {
                    lock.lock();
                    lock.unlock();
                    count.incrementAndGet();
                }
            });
            t.start();
            threads.add(t);
        }
        return countRound(stop, count, roundMs, () -> {
            for (Thread t : threads) {
                t.join();
            }
        });
    }

    private interface Join {
        void run() throws Exception;
    }

    private static double countRound(AtomicBoolean stop, AtomicLong count, long roundMs, Join join)
            throws Exception {
        Thread.sleep(200);
        long before = count.get();
        long t0 = System.nanoTime();
        Thread.sleep(roundMs);
        long n = count.get() - before;
        long elapsed = System.nanoTime() - t0;
        stop.set(true);
        join.run();
        return n / (elapsed / 1e9);
    }

    private double single(int n) throws Exception {
        RLock lock = client.getLock("bench:redisson:single");
        double[] us = new double[n];
        // One thread of its own, as a service's request thread would be.
        Thread t = new Thread(() -> {
            for (int i = 0; i < n; i++) {
                long t0 = System.nanoTime();
                lock.lock();
                us[i] = (System.nanoTime() - t0) / 1e3;
                lock.unlock();
            }
        });
        t.start();
        t.join();
        return percentile(us, 50.0);
    }

    /** Nearest rank, as the Rust side computes it. */
    private static double percentile(double[] samples, double p) {
        double[] sorted = samples.clone();
        Arrays.sort(sorted);
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(1, Math.min(rank, sorted.length)) - 1];
    }

    private String memory(int n, long settleMs) throws Exception {
        long[] before = settledMemory();
        List<RLock> locks = new ArrayList<>(n);
        Semaphore inFlight = new Semaphore(64);
        List<CompletableFuture<Void>> taken = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            RLock lock = client.getLock("bench:redisson:watchdog:" + i);
            locks.add(lock);
            inFlight.acquire();
            CompletableFuture<Void> f = lock.lockAsync(memoryOwner(i)).toCompletableFuture();
            f.whenComplete((v, e) -> inFlight.release());
            taken.add(f);
        }
        for (CompletableFuture<Void> f : taken) {
            f.get(60, TimeUnit.SECONDS);
        }
        taken.clear();
        Thread.sleep(settleMs);
        long[] after = settledMemory();
        int held = 0;
        for (int i = 0; i < n; i++) {
            if (locks.get(i).isHeldByThread(memoryOwner(i))) {
                held++;
            }
        }
        List<CompletableFuture<Void>> released = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            inFlight.acquire();
            CompletableFuture<Void> f = locks.get(i).unlockAsync(memoryOwner(i)).toCompletableFuture();
            f.whenComplete((v, e) -> inFlight.release());
            released.add(f);
        }
        int unlockFailed = 0;
        for (CompletableFuture<Void> f : released) {
            try {
                f.get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                unlockFailed++; // a hold the watchdog did not keep
            }
        }
        return "{\"rss_before_kb\":" + before[0] + ",\"rss_after_kb\":" + after[0]
                + ",\"heap_before\":" + before[1] + ",\"heap_after\":" + after[1]
                + ",\"held\":" + held + ",\"unlock_failed\":" + unlockFailed + "}";
    }

    private static long memoryOwner(int i) {
        return MEMORY_OWNER + i % 64;
    }

    /** VmRSS in kB and used heap in bytes, after two full collections. */
    private static long[] settledMemory() throws Exception {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 2; i++) {
            System.gc();
            Thread.sleep(200);
        }
        long heap = rt.totalMemory() - rt.freeMemory();
        long rss = -1;
        for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (l.startsWith("VmRSS:")) {
                rss = Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        }
        return new long[] {rss, heap};
    }
}
