package peer;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.Redisson;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RScript;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A Redisson worker process for the nemesis suite (tests/nemesis_java.rs): the Java
 * counterpart of examples/lock_worker. Several threads ("tasks") take Redisson locks and
 * semaphores over and over on the names the Rust workers use, and log every step as one
 * JSON object per line (the suite's history schema) for the checker.
 *
 * <pre>
 * java -cp redisson-peer.jar peer.NemesisWorker &lt;redis-url&gt; &lt;worker-id&gt; &lt;history-file&gt;
 *      [--locks a,b] [--tasks N] [--lease-ms N] [--timeout-ms N] [--fair-wait-ms N]
 *      [--mix ENTRY,ENTRY,...] [--permits N]
 * </pre>
 *
 * <p>An ENTRY is {@code kind}, {@code kind@name} or {@code kind@name/permits}. A bare kind
 * takes one lock per base name of {@code --locks}, named as the Rust worker names them:
 * the base name for {@code fenced}, else {@code <base>-re}, {@code -fair}, {@code -rw}
 * (read and write share it), {@code -sem}, {@code -exp}; semaphores then have
 * {@code --permits} permits (default 2). Kinds: {@code reentrant} (RLock), {@code fenced} (RFencedLock, with a write to
 * the fenced store {@code nemesis:store:<name>} under its token), {@code fair}
 * (RFairLock), {@code read} and {@code write} (the two sides of RReadWriteLock),
 * {@code semaphore} (RSemaphore, {@code permits} set with trySetPermits) and
 * {@code expirable} (RPermitExpirableSemaphore, fixed-lease permits). The default mix is
 * {@code fenced}. The locks but the fenced one are re-entered a third of the time, 1 to 3
 * levels deep, each level with the hold's own lease. Redisson has no fast lock.
 *
 * <p>The watchdog lease (Redisson's {@code lockWatchdogTimeout}) is {@code --lease-ms}; a
 * fixed lease is drawn between half of it and all of it (never longer: Redisson's read-lock
 * renewal sets the shared key's TTL to the watchdog lease). Redis commands time out after
 * {@code --timeout-ms}, never retried (see {@code main}).
 *
 * <p>The history: {@code start}, {@code wait}, {@code grant} (with Redis {@code TIME}
 * stamps before and after, {@code l_send}/{@code l_recv} from this JVM's wall clock in
 * microseconds), {@code reenter}/{@code reexit}, {@code acquire_failed}, {@code write},
 * {@code release_start}, {@code release}, {@code stall} (a 10 ms heartbeat more than 25 ms
 * late) and {@code stop}. The {@code field} of a grant is what Redis shows for the hold:
 * {@code <client id>:<thread id>} (with {@code :write} for a write lock), the permit id for
 * an expirable permit, "" for a plain semaphore. Redisson cannot tell a holder that its
 * lock is gone, so this worker never logs {@code lost}: the checker judges its holds by
 * Redis time only.
 *
 * <p>Stdin {@code stop} (or end of input) makes every task finish its current hold and
 * unlock; the process then prints {@code stopped} and exits 0.
 */
public final class NemesisWorker {
    /** The fenced store: the same script as examples/lock_worker. */
    private static final String STORE_SCRIPT =
            "local max = tonumber(redis.call('hget', KEYS[1], 'token') or '0')\n"
            + "local t = redis.call('time')\n"
            + "if tonumber(ARGV[1]) >= max then\n"
            + "    redis.call('hset', KEYS[1], 'token', ARGV[1], 'by', ARGV[2])\n"
            + "    return {1, tonumber(t[1]), tonumber(t[2]), max}\n"
            + "end\n"
            + "return {0, tonumber(t[1]), tonumber(t[2]), max}\n";
    private static final String TIME_SCRIPT = "return redis.call('time')";
    /** A script's list reply: {@code MULTI} in Redisson 3.x, {@code LIST} in 4.x. */
    private static final RScript.ReturnType LIST = listReturnType();

    private static RScript.ReturnType listReturnType() {
        try {
            return RScript.ReturnType.valueOf("LIST");
        } catch (IllegalArgumentException e) {
            return RScript.ReturnType.valueOf("MULTI");
        }
    }

    /** One entry of the mix: a kind on one name. */
    private static final class Entry {
        final String kind;
        final String name;
        final int permits;

        Entry(String kind, String name, int permits) {
            this.kind = kind;
            this.name = name;
            this.permits = permits;
        }
    }

    private final RedissonClient client;
    private final String id;
    private final String impl;
    private final long worker;
    private final FileOutputStream history;
    private final List<Entry> mix;
    private final long leaseMs;
    private final Long fairWaitMs;
    private final AtomicLong holds = new AtomicLong();
    private volatile boolean stopping;

    private NemesisWorker(RedissonClient client, String version, long worker, FileOutputStream history,
            List<Entry> mix, long leaseMs, Long fairWaitMs) {
        this.client = client;
        this.id = client.getId();
        this.impl = "redisson-" + version;
        this.worker = worker;
        this.history = history;
        this.mix = mix;
        this.leaseMs = leaseMs;
        this.fairWaitMs = fairWaitMs;
    }

    public static void main(String[] args) throws Exception {
        String[] locks = {"nemesis-a", "nemesis-b"};
        int tasks = 3;
        long leaseMs = 1500;
        int timeoutMs = 400;
        long fairWaitMs = 5000;
        String mixSpec = "fenced";
        int permits = 2;
        List<String> positional = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                positional.add(args[i]);
                continue;
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(args[i] + " needs a value");
            }
            String value = args[++i];
            switch (args[i - 1]) {
                case "--locks": locks = value.split(","); break;
                case "--tasks": tasks = Integer.parseInt(value); break;
                case "--lease-ms": leaseMs = Long.parseLong(value); break;
                case "--timeout-ms": timeoutMs = Integer.parseInt(value); break;
                case "--fair-wait-ms": fairWaitMs = Long.parseLong(value); break;
                case "--mix": mixSpec = value; break;
                case "--permits": permits = Integer.parseInt(value); break;
                default: throw new IllegalArgumentException("unknown option " + args[i - 1]);
            }
        }
        if (positional.size() != 3) {
            System.err.println("usage: NemesisWorker <redis-url> <worker-id> <history-file> [--locks a,b] "
                    + "[--tasks N] [--lease-ms N] [--timeout-ms N] [--fair-wait-ms N] [--mix ENTRY,...] "
                    + "[--permits N]");
            System.exit(2);
        }
        String url = positional.get(0).replaceAll("/+$", "");
        long worker = Long.parseLong(positional.get(1));
        String historyPath = positional.get(2);
        List<Entry> mix = parseMix(mixSpec, locks, permits);
        Config config = new Config();
        config.setLockWatchdogTimeout(leaseMs);
        // No retries: Redisson resends a timed-out script as it was, and its acquire scripts
        // are not idempotent (a resent permit acquire takes a second permit under the same
        // permit id: one permit is gone for good; a resent lock acquire counts the hold
        // twice). A command that times out is reported as failed instead.
        config.useSingleServer()
                .setAddress(url)
                .setTimeout(timeoutMs)
                .setConnectTimeout(timeoutMs)
                .setRetryAttempts(0);
        Long perLockFairWait = fairWaitMs;
        try {
            Method set = Config.class.getMethod("setFairLockWaitTimeout", long.class);
            set.invoke(config, fairWaitMs);
            perLockFairWait = null; // Redisson 4.x: the config carries it
        } catch (ReflectiveOperationException e) {
            // Redisson 3.x: a constructor argument of each fair lock.
        }
        FileOutputStream history = new FileOutputStream(historyPath, true);
        RedissonClient client = create(config);
        String version = new java.util.jar.Manifest(NemesisWorker.class.getResourceAsStream("/META-INF/MANIFEST.MF"))
                .getMainAttributes().getValue("Redisson-Version");
        NemesisWorker me = new NemesisWorker(client, version, worker, history, mix, leaseMs, perLockFairWait);
        me.run(tasks);
    }

    /**
     * Connects, trying again while the connection's first PING times out: a cold JVM on a
     * busy machine may not answer within the command timeout, and no retry covers it.
     */
    private static RedissonClient create(Config config) {
        for (int attempt = 1; ; attempt++) {
            try {
                return Redisson.create(config);
            } catch (RuntimeException e) {
                if (attempt >= 50) {
                    throw e;
                }
                sleep(200);
            }
        }
    }

    /** The Rust worker's name for `kind`'s lock on base name `base`. */
    private static String lockName(String kind, String base) {
        switch (kind) {
            case "fenced": return base;
            case "reentrant": return base + "-re";
            case "fair": return base + "-fair";
            case "read": case "write": return base + "-rw";
            case "semaphore": return base + "-sem";
            case "expirable": return base + "-exp";
            default: throw new IllegalArgumentException(kind);
        }
    }

    private static List<Entry> parseMix(String spec, String[] locks, int defaultPermits) {
        List<Entry> mix = new ArrayList<>();
        for (String item : spec.split(",")) {
            item = item.trim();
            if (item.isEmpty()) {
                continue;
            }
            String kind = item;
            String name = null;
            int permits = 0;
            int at = item.indexOf('@');
            if (at >= 0) {
                kind = item.substring(0, at);
                name = item.substring(at + 1);
                int slash = name.indexOf('/');
                if (slash >= 0) {
                    permits = Integer.parseInt(name.substring(slash + 1));
                    name = name.substring(0, slash);
                }
            }
            switch (kind) {
                case "reentrant": case "fenced": case "fair": case "read": case "write":
                    break;
                case "semaphore": case "expirable":
                    if (permits <= 0) {
                        permits = defaultPermits;
                    }
                    break;
                default:
                    throw new IllegalArgumentException("kind `" + kind + "` is not in the Java mix");
            }
            if (name == null) {
                for (String base : locks) {
                    mix.add(new Entry(kind, lockName(kind, base), permits));
                }
            } else {
                mix.add(new Entry(kind, name, permits));
            }
        }
        if (mix.isEmpty()) {
            throw new IllegalArgumentException("empty --mix");
        }
        return mix;
    }

    private void run(int tasks) throws Exception {
        for (Entry e : mix) {
            // Idempotent (sets the permits only where none are set), so tried until it
            // answers: a cold JVM's first commands may take longer than the timeout.
            for (int attempt = 1; ; attempt++) {
                try {
                    if (e.kind.equals("semaphore")) {
                        client.getSemaphore(e.name).trySetPermits(e.permits);
                    } else if (e.kind.equals("expirable")) {
                        client.getPermitExpirableSemaphore(e.name).trySetPermits(e.permits);
                    }
                    break;
                } catch (RuntimeException err) {
                    if (attempt >= 50) {
                        throw err;
                    }
                    sleep(100);
                }
            }
        }
        log(0, "start", obj("client", id, "pid", ProcessHandle.current().pid(), "l", nowUs(), "impl", impl));
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            } catch (IOException e) {
                // end of input: stop as well
            }
            stopping = true;
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        Thread heartbeat = new Thread(this::watchStalls, "heartbeat");
        heartbeat.setDaemon(true);
        heartbeat.start();
        List<Thread> threads = new ArrayList<>();
        for (int t = 1; t <= tasks; t++) {
            final int task = t;
            Thread thread = new Thread(() -> {
                while (!stopping) {
                    try {
                        oneRound(task);
                    } catch (Throwable e) {
                        log(task, "error", obj("what", e.toString()));
                        pause(200);
                    }
                }
            }, "task-" + t);
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        log(0, "stop", obj("l", nowUs()));
        client.shutdown();
        System.out.println("stopped");
        System.out.flush();
        history.close();
        System.exit(0);
    }

    /** A 10 ms timer that fires more than 25 ms late is a stall (starved, frozen, or a GC). */
    private void watchStalls() {
        while (true) {
            long started = System.nanoTime();
            long from = nowUs();
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                return;
            }
            long lateMs = (System.nanoTime() - started) / 1_000_000 - 10;
            if (lateMs > 25) {
                log(0, "stall", obj("l_from", from, "l_to", nowUs(), "late_ms", lateMs));
            }
        }
    }

    private static void pause(long maxMs) {
        try {
            Thread.sleep(ThreadLocalRandom.current().nextLong(maxMs + 1));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private RLock lockOf(Entry e) {
        switch (e.kind) {
            case "reentrant": return client.getLock(e.name);
            case "fenced": return client.getFencedLock(e.name);
            case "read": return client.getReadWriteLock(e.name).readLock();
            case "write": return client.getReadWriteLock(e.name).writeLock();
            case "fair": return fairLock(e.name);
            default: throw new IllegalArgumentException(e.kind);
        }
    }

    private RLock fairLock(String name) {
        if (fairWaitMs == null) {
            return client.getFairLock(name);
        }
        try {
            Object executor = Redisson.class.getMethod("getCommandExecutor").invoke(client);
            for (Constructor<?> c : org.redisson.RedissonFairLock.class.getConstructors()) {
                Class<?>[] types = c.getParameterTypes();
                if (types.length == 3 && types[2] == long.class) {
                    return (RLock) c.newInstance(executor, name, fairWaitMs);
                }
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot set the fair lock wait time", e);
        }
        throw new IllegalStateException("this Redisson has no fair lock wait time to set");
    }

    /** The hold's field as Redis shows it (Redisson's lock name for this thread). */
    private String fieldOf(Entry e) {
        String owner = id + ":" + Thread.currentThread().getId();
        return e.kind.equals("write") ? owner + ":write" : owner;
    }

    private static String errorKind(Throwable e) {
        Throwable cause = e;
        while (cause.getCause() != null && cause.getCause() != cause) {
            cause = cause.getCause();
        }
        if (e instanceof IllegalMonitorStateException || cause instanceof IllegalMonitorStateException
                || cause instanceof IllegalArgumentException) {
            return "not_owner";
        }
        String name = cause.getClass().getSimpleName();
        if (name.contains("Timeout") || name.contains("Connection") || name.contains("Closed")) {
            return "unavailable";
        }
        return "other";
    }

    private void oneRound(int task) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        Entry e = mix.get(random.nextInt(mix.size()));
        boolean semaphore = e.kind.equals("semaphore") || e.kind.equals("expirable");
        long hold = holds.incrementAndGet();
        // Expirable permits always have a lease (a killed holder's permit must come back);
        // a plain semaphore has none; the locks take the watchdog half of the time.
        Long fixed = null;
        if (e.kind.equals("expirable") || (!semaphore && random.nextBoolean())) {
            fixed = leaseMs / 2 + random.nextLong(leaseMs / 2 + 1);
        }
        long lease = fixed == null ? -1 : fixed;
        String field = semaphore ? "" : fieldOf(e);
        long wait = random.nextLong(800);
        long lBefore = nowUs();
        Object tBefore = time();
        log(task, "wait", obj("hold", hold, "lock", e.name, "kind", e.kind, "field", field, "l", nowUs()));
        long lCall = nowUs();
        RLock lock = null;
        long token = 0;
        boolean acquired;
        try {
            switch (e.kind) {
                case "semaphore":
                    acquired = client.getSemaphore(e.name).tryAcquire(1, wait, TimeUnit.MILLISECONDS);
                    break;
                case "expirable": {
                    String permit = client.getPermitExpirableSemaphore(e.name)
                            .tryAcquire(wait, lease, TimeUnit.MILLISECONDS);
                    acquired = permit != null;
                    field = permit == null ? "" : permit;
                    break;
                }
                case "fenced": {
                    lock = lockOf(e);
                    Long t = ((RFencedLock) lock).tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS);
                    acquired = t != null;
                    token = t == null ? 0 : t;
                    break;
                }
                default:
                    lock = lockOf(e);
                    acquired = lock.tryLock(wait, lease, TimeUnit.MILLISECONDS);
            }
        } catch (Throwable err) {
            log(task, "acquire_failed", obj("hold", hold, "lock", e.name, "kind", e.kind, "field", field,
                    "error", errorKind(err), "what", String.valueOf(err), "l_call", lCall, "l_after", nowUs()));
            pause(150);
            return;
        }
        long lAfter = nowUs();
        if (!acquired) {
            log(task, "acquire_failed", obj("hold", hold, "lock", e.name, "kind", e.kind, "field", field,
                    "error", "timeout", "l_call", lCall, "l_after", lAfter));
            pause(150);
            return;
        }
        Object tAfter = time();
        log(task, "grant", obj("hold", hold, "lock", e.name, "kind", e.kind, "field", field, "token", token,
                "lease_ms", fixed, "permits", semaphore ? (Object) e.permits : null,
                "l_before", lBefore, "t_before", tBefore, "l_call", lCall, "l_after", lAfter, "t_after", tAfter));

        // Mostly short holds (many grants), some past the lease (the watchdog renews; a
        // fixed lease runs out under its holder, which Redisson cannot tell it).
        long holdMs = random.nextInt(4) != 0 ? 20 + random.nextLong(381)
                : 400 + random.nextLong(Math.max(1, 2 * leaseMs - 400));
        int depth = 0;
        boolean reenters = lock != null && !e.kind.equals("fenced");
        if (reenters && random.nextInt(3) == 0) {
            depth = 1 + random.nextInt(3);
        }
        int entered = 0;
        long slice = holdMs / (2 * depth + 1);
        for (int d = 1; d <= depth; d++) {
            sleep(slice);
            long lReenter = nowUs();
            try {
                // The same lease mode as the outer hold: a re-entry never shortens the key.
                // No waiting: a lock that ran out under this holder is not waited for.
                if (!lock.tryLock(0, lease, TimeUnit.MILLISECONDS)) {
                    log(task, "error", obj("hold", hold, "what", "re-entry refused: the lock is gone"));
                    break;
                }
            } catch (Throwable err) {
                log(task, "error", obj("hold", hold, "what", "re-entry: " + err));
                break;
            }
            entered = d;
            log(task, "reenter", obj("hold", hold, "lock", e.name, "kind", e.kind, "depth", d,
                    "lease_ms", fixed, "l_call", lReenter, "l", nowUs()));
        }
        if (e.kind.equals("fenced")) {
            sleep(holdMs / 2);
            storeWrite(task, hold, e.name, token);
            sleep(holdMs / 2);
        } else {
            sleep(depth == 0 ? holdMs : slice);
        }
        for (int d = entered; d >= 1; d--) {
            try {
                lock.unlock();
                log(task, "reexit", obj("hold", hold, "lock", e.name, "kind", e.kind, "depth", d, "l", nowUs()));
            } catch (Throwable err) {
                log(task, "error", obj("hold", hold, "what", "re-exit: " + err));
            }
            sleep(slice);
        }

        long lRelease = nowUs();
        Object tRelease = time();
        log(task, "release_start", obj("hold", hold, "lock", e.name, "kind", e.kind, "token", token,
                "l", lRelease, "t", tRelease, "was_lost", false));
        String result = "ok";
        try {
            switch (e.kind) {
                case "semaphore":
                    client.getSemaphore(e.name).release();
                    break;
                case "expirable":
                    client.getPermitExpirableSemaphore(e.name).release(field);
                    break;
                default:
                    lock.unlock();
            }
        } catch (Throwable err) {
            result = errorKind(err);
            log(task, "error", obj("hold", hold, "what", "release: " + err));
        }
        long lDone = nowUs();
        Object tDone = time();
        log(task, "release", obj("hold", hold, "lock", e.name, "kind", e.kind, "token", token,
                "result", result, "l", lDone, "t", tDone));
        pause(100);
    }

    private void storeWrite(int task, long hold, String name, long token) {
        String by = worker + "/" + task;
        long lSend = nowUs();
        try {
            List<Object> reply = client.getScript(StringCodec.INSTANCE).eval(RScript.Mode.READ_WRITE,
                    STORE_SCRIPT, LIST, Arrays.asList("nemesis:store:" + name),
                    Long.toString(token), by);
            long lRecv = nowUs();
            long accepted = ((Number) reply.get(0)).longValue();
            long t = ((Number) reply.get(1)).longValue() * 1_000_000 + ((Number) reply.get(2)).longValue();
            long max = ((Number) reply.get(3)).longValue();
            log(task, "write", obj("hold", hold, "lock", name, "kind", "fenced", "token", token,
                    "accepted", accepted == 1, "t", t, "max_before", max, "l_send", lSend, "l_recv", lRecv));
        } catch (Throwable err) {
            log(task, "write_failed", obj("hold", hold, "lock", name, "kind", "fenced", "token", token,
                    "error", String.valueOf(err), "l_send", lSend));
        }
    }

    /** Redis TIME with this JVM's wall clock around it, or null when Redis did not answer. */
    private Map<String, Object> time() {
        long lSend = nowUs();
        try {
            List<Object> reply = client.getScript(StringCodec.INSTANCE).eval(RScript.Mode.READ_ONLY,
                    TIME_SCRIPT, LIST, new ArrayList<>());
            long lRecv = nowUs();
            long t = Long.parseLong(String.valueOf(reply.get(0))) * 1_000_000
                    + Long.parseLong(String.valueOf(reply.get(1)));
            return obj("t", t, "l_send", lSend, "l_recv", lRecv);
        } catch (Throwable e) {
            return null;
        }
    }

    /** Microseconds since the Unix epoch on this JVM's wall clock. */
    private static long nowUs() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000 + now.getNano() / 1_000;
    }

    private static Map<String, Object> obj(Object... kv) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            map.put((String) kv[i], kv[i + 1]);
        }
        return map;
    }

    /** One JSON line per event, appended with one write (a SIGKILL loses at most one). */
    private void log(int task, String event, Map<String, Object> fields) {
        StringBuilder line = new StringBuilder("{\"ev\":\"").append(event).append("\",\"worker\":").append(worker)
                .append(",\"task\":").append(task);
        for (Map.Entry<String, Object> f : fields.entrySet()) {
            line.append(",\"").append(f.getKey()).append("\":");
            json(line, f.getValue());
        }
        line.append("}\n");
        byte[] bytes = line.toString().getBytes(StandardCharsets.UTF_8);
        synchronized (history) {
            try {
                history.write(bytes);
            } catch (IOException e) {
                System.err.println("NemesisWorker: cannot write history: " + e);
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static void json(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> f : ((Map<String, Object>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                out.append('"').append(f.getKey()).append("\":");
                json(out, f.getValue());
            }
            out.append('}');
        } else {
            out.append('"');
            for (char c : value.toString().toCharArray()) {
                if (c == '"' || c == '\\') {
                    out.append('\\').append(c);
                } else if (c < 0x20) {
                    out.append(String.format("\\u%04x", (int) c));
                } else {
                    out.append(c);
                }
            }
            out.append('"');
        }
    }
}
