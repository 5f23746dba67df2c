package peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A Redisson client driven line by line over stdin/stdout: the Java peer of
 * tests/redisson_java.rs.
 *
 * <pre>
 * java -jar redisson-peer.jar (--single URL | --cluster URL,URL,...)
 *      [--watchdog-ms N] [--fair-wait-ms N] [--namespace NS] [--timeout-ms N]
 *      [--retry-attempts N] [--retry-interval-ms N]
 * </pre>
 *
 * <p>{@code --timeout-ms}, {@code --retry-attempts} and {@code --retry-interval-ms} set
 * Redisson's command timeout and how often (and after how long) it resends a command that
 * timed out; Redisson's defaults otherwise.
 *
 * <p>{@code --namespace NS} configures a {@code NameMapper} that maps every object name
 * {@code name} to {@code NS:name} (and back): the Java side of the Rust client's
 * {@code ClientConfig::namespace}. Lock names in commands are then unmapped names.
 *
 * <p>On start it prints {@code ready <client-id> <redisson-version>}. Every command line is
 * {@code <slot> <command> <args...>}; a slot is a thread of its own (Redisson's lock owner is
 * {@code <client-id>:<thread-id>}), created on first use, so one slot can block in
 * {@code lock} while others go on. Commands of one slot run in order; each prints exactly one
 * reply line {@code <slot> <reply...>}, or {@code <slot> error <ExceptionClass> <message>}.
 *
 * <p>Lock kinds {@code K}: {@code lock} (RLock), {@code fair} (RFairLock), {@code read} and
 * {@code write} (the two sides of RReadWriteLock), {@code fenced} (RFencedLock), {@code spin}
 * (RSpinLock, Redisson's default backoff).
 *
 * <pre>
 * owner                           -> owner uuid:threadId      (this slot's lock owner field)
 * lock K name [leaseMs]           -> locked [token]           (blocks until granted)
 * try K name waitMs [leaseMs]     -> acquired [token] | busy
 * unlock K name                   -> unlocked                 (error IllegalMonitorStateException: not the owner)
 * force K name                    -> forced true|false
 * state K name                    -> state locked=B mine=B count=N ttl=MS
 * count K name key n [leaseMs]    -> counted n                (n times: lock; key := key + 1; unlock)
 * sem_try_set name n              -> set true|false           (RSemaphore)
 * sem_add name n                  -> added
 * sem_acquire name n              -> acquired                 (blocks)
 * sem_try name n waitMs           -> acquired | busy
 * sem_release name n              -> released
 * sem_available name              -> available N
 * sem_count name key n            -> counted n                (a 1-permit semaphore as the mutex)
 * psem_try_set name n             -> set true|false           (RPermitExpirableSemaphore)
 * psem_add name n                 -> added
 * psem_acquire name [leaseMs]     -> permit ID                (blocks)
 * psem_try name waitMs [leaseMs]  -> permit ID | busy
 * psem_release name id            -> released
 * psem_available name             -> available N
 * psem_count name key n leaseMs   -> counted n
 * latch_...                       -> the count-down latch's commands: see LatchCommands
 * ping                            -> pong
 * </pre>
 *
 * <p>Leases and owners by thread id: see {@link LeasePeer}.
 *
 * <p>The line {@code exit} (no slot) shuts the client down and exits. End of stdin halts
 * the JVM at once, without unlocking anything: like a crashed service, its locks then
 * expire at their lease.
 */
public final class Peer {
    private final RedissonClient client;
    private final Long fairWaitMs;
    private final Map<String, ExecutorService> slots = new HashMap<>();

    private Peer(RedissonClient client, Long fairWaitMs) {
        this.client = client;
        this.fairWaitMs = fairWaitMs;
    }

    public static void main(String[] args) throws Exception {
        Config config = new Config();
        Long fairWaitMs = null;
        String single = null;
        String cluster = null;
        String namespace = null;
        Integer timeoutMs = null;
        Integer retryAttempts = null;
        Integer retryIntervalMs = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--single": single = value; break;
                case "--cluster": cluster = value; break;
                case "--watchdog-ms": config.setLockWatchdogTimeout(Long.parseLong(value)); break;
                case "--fair-wait-ms": fairWaitMs = Long.parseLong(value); break;
                case "--namespace": namespace = value; break;
                case "--timeout-ms": timeoutMs = Integer.parseInt(value); break;
                case "--retry-attempts": retryAttempts = Integer.parseInt(value); break;
                case "--retry-interval-ms": retryIntervalMs = Integer.parseInt(value); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Object serverConfig;
        if (single != null) {
            serverConfig = config.useSingleServer().setAddress(single);
        } else if (cluster != null) {
            // Redisson's defaults otherwise (subscription mode, sharded pub/sub where the
            // version has it): the peer is a service as deployed.
            serverConfig = config.useClusterServers().addNodeAddress(cluster.split(","));
        } else {
            throw new IllegalArgumentException("need --single URL or --cluster URL,URL");
        }
        if (single != null) {
            org.redisson.config.SingleServerConfig server = (org.redisson.config.SingleServerConfig) serverConfig;
            if (timeoutMs != null) {
                server.setTimeout(timeoutMs);
            }
            if (retryAttempts != null) {
                server.setRetryAttempts(retryAttempts);
            }
            if (retryIntervalMs != null) {
                server.setRetryInterval(retryIntervalMs);
            }
        }
        if (namespace != null) {
            setPrefixMapper(config, serverConfig, namespace + ":");
        }
        if (fairWaitMs != null && setFairWaitInConfig(config, fairWaitMs)) {
            fairWaitMs = null; // the config carries it (Redisson 4.x)
        }
        RedissonClient client = Redisson.create(config);
        String version = new java.util.jar.Manifest(Peer.class.getResourceAsStream("/META-INF/MANIFEST.MF"))
                .getMainAttributes().getValue("Redisson-Version");
        say("ready " + client.getId() + " " + version);
        new Peer(client, fairWaitMs).run();
    }

    /**
     * Maps every object name to {@code prefix + name}. A service writes this as a plain
     * {@code NameMapper} implementation (see the README's Namespaces section); the peer
     * builds it as a proxy because the interface moved between the Redisson versions it is
     * built against ({@code org.redisson.api} in 3.x, {@code org.redisson.config} in 4.x),
     * and so did the setter (the server config in 3.x, {@code Config} in 4.x).
     */
    private static void setPrefixMapper(Config config, Object serverConfig, String prefix)
            throws ReflectiveOperationException {
        Class<?> mapperType;
        try {
            mapperType = Class.forName("org.redisson.config.NameMapper");
        } catch (ClassNotFoundException e) {
            mapperType = Class.forName("org.redisson.api.NameMapper");
        }
        Object mapper = Proxy.newProxyInstance(mapperType.getClassLoader(), new Class<?>[] {mapperType},
                (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "map":
                            return prefix + args[0];
                        case "unmap": {
                            String name = (String) args[0];
                            return name.startsWith(prefix) ? name.substring(prefix.length()) : name;
                        }
                        case "equals":
                            return proxy == args[0];
                        case "hashCode":
                            return System.identityHashCode(proxy);
                        case "toString":
                            return "PrefixNameMapper(" + prefix + ")";
                        default:
                            throw new UnsupportedOperationException(method.getName());
                    }
                });
        try {
            Config.class.getMethod("setNameMapper", mapperType).invoke(config, mapper);
        } catch (NoSuchMethodException e) {
            serverConfig.getClass().getMethod("setNameMapper", mapperType).invoke(serverConfig, mapper);
        }
    }

    /** Redisson 4.x has {@code Config.setFairLockWaitTimeout}; 3.x takes it per lock. */
    private static boolean setFairWaitInConfig(Config config, long ms) {
        try {
            Method set = Config.class.getMethod("setFairLockWaitTimeout", long.class);
            set.invoke(config, ms);
            return true;
        } catch (ReflectiveOperationException e) {
            return false;
        }
    }

    private void run() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("exit")) {
                client.shutdown();
                say("bye");
                System.exit(0);
            }
            String[] words = line.split("\\s+");
            String slot = words[0];
            String[] command = Arrays.copyOfRange(words, 1, words.length);
            slots.computeIfAbsent(slot, s -> Executors.newSingleThreadExecutor())
                    .execute(() -> answer(slot, command));
        }
        // Stdin closed: vanish like a crashed process (no unlock, no renewal from now on).
        Runtime.getRuntime().halt(0);
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private void answer(String slot, String[] command) {
        String reply;
        try {
            reply = execute(command);
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause.getCause() != null && cause.getCause() != cause) {
                cause = cause.getCause();
            }
            String message = String.valueOf(cause.getMessage()).replaceAll("\\s+", " ");
            reply = "error " + cause.getClass().getSimpleName() + " " + message;
        }
        say(slot + " " + reply);
    }

    private RLock lockOf(String kind, String name) {
        switch (kind) {
            case "lock": return client.getLock(name);
            case "fair": return fairLock(name);
            case "read": return client.getReadWriteLock(name).readLock();
            case "write": return client.getReadWriteLock(name).writeLock();
            case "fenced": return client.getFencedLock(name);
            case "spin": return client.getSpinLock(name);
            default: throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    private RLock fairLock(String name) {
        if (fairWaitMs == null) {
            return client.getFairLock(name);
        }
        // Redisson 3.x: the wait time is a constructor argument of RedissonFairLock.
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

    private static long ms(String[] c, int i, long otherwise) {
        return c.length > i ? Long.parseLong(c[i]) : otherwise;
    }

    private String execute(String[] c) throws Exception {
        switch (c[0]) {
            case "ping":
                return "pong";
            case "owner":
                return "owner " + client.getId() + ":" + Thread.currentThread().getId();
            case "lock": {
                RLock lock = lockOf(c[1], c[2]);
                long lease = ms(c, 3, -1);
                if (lock instanceof RFencedLock) {
                    RFencedLock fenced = (RFencedLock) lock;
                    Long token = lease > 0 ? fenced.lockAndGetToken(lease, TimeUnit.MILLISECONDS)
                                           : fenced.lockAndGetToken();
                    return "locked " + token;
                }
                if (lease > 0) {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                } else {
                    lock.lock();
                }
                return "locked";
            }
            case "try": {
                RLock lock = lockOf(c[1], c[2]);
                long wait = Long.parseLong(c[3]);
                long lease = ms(c, 4, -1);
                if (lock instanceof RFencedLock) {
                    Long token = ((RFencedLock) lock).tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS);
                    return token == null ? "busy" : "acquired " + token;
                }
                return lock.tryLock(wait, lease, TimeUnit.MILLISECONDS) ? "acquired" : "busy";
            }
            case "unlock":
                lockOf(c[1], c[2]).unlock();
                return "unlocked";
            case "force":
                return "forced " + lockOf(c[1], c[2]).forceUnlock();
            case "state": {
                RLock lock = lockOf(c[1], c[2]);
                return "state locked=" + lock.isLocked() + " mine=" + lock.isHeldByCurrentThread()
                        + " count=" + lock.getHoldCount() + " ttl=" + lock.remainTimeToLive();
            }
            case "count": {
                RLock lock = lockOf(c[1], c[2]);
                RBucket<String> counter = client.getBucket(c[3], StringCodec.INSTANCE);
                int n = Integer.parseInt(c[4]);
                long lease = ms(c, 5, -1);
                for (int i = 0; i < n; i++) {
                    if (lease > 0) {
                        lock.lock(lease, TimeUnit.MILLISECONDS);
                    } else {
                        lock.lock();
                    }
                    try {
                        increment(counter);
                    } finally {
                        lock.unlock();
                    }
                }
                return "counted " + n;
            }
            case "sem_try_set":
                return "set " + client.getSemaphore(c[1]).trySetPermits(Integer.parseInt(c[2]));
            case "sem_add":
                client.getSemaphore(c[1]).addPermits(Integer.parseInt(c[2]));
                return "added";
            case "sem_acquire":
                client.getSemaphore(c[1]).acquire(Integer.parseInt(c[2]));
                return "acquired";
            case "sem_try":
                return client.getSemaphore(c[1]).tryAcquire(Integer.parseInt(c[2]),
                        Long.parseLong(c[3]), TimeUnit.MILLISECONDS) ? "acquired" : "busy";
            case "sem_release":
                client.getSemaphore(c[1]).release(Integer.parseInt(c[2]));
                return "released";
            case "sem_available":
                return "available " + client.getSemaphore(c[1]).availablePermits();
            case "sem_count": {
                RSemaphore semaphore = client.getSemaphore(c[1]);
                RBucket<String> counter = client.getBucket(c[2], StringCodec.INSTANCE);
                int n = Integer.parseInt(c[3]);
                for (int i = 0; i < n; i++) {
                    semaphore.acquire();
                    try {
                        increment(counter);
                    } finally {
                        semaphore.release();
                    }
                }
                return "counted " + n;
            }
            case "psem_try_set":
                return "set " + client.getPermitExpirableSemaphore(c[1]).trySetPermits(Integer.parseInt(c[2]));
            case "psem_add":
                client.getPermitExpirableSemaphore(c[1]).addPermits(Integer.parseInt(c[2]));
                return "added";
            case "psem_acquire": {
                RPermitExpirableSemaphore semaphore = client.getPermitExpirableSemaphore(c[1]);
                long lease = ms(c, 2, -1);
                String id = lease > 0 ? semaphore.acquire(lease, TimeUnit.MILLISECONDS) : semaphore.acquire();
                return "permit " + id;
            }
            case "psem_try": {
                RPermitExpirableSemaphore semaphore = client.getPermitExpirableSemaphore(c[1]);
                long wait = Long.parseLong(c[2]);
                long lease = ms(c, 3, -1);
                String id = semaphore.tryAcquire(wait, lease, TimeUnit.MILLISECONDS);
                return id == null ? "busy" : "permit " + id;
            }
            case "psem_release":
                client.getPermitExpirableSemaphore(c[1]).release(c[2]);
                return "released";
            case "psem_available":
                return "available " + client.getPermitExpirableSemaphore(c[1]).availablePermits();
            case "psem_count": {
                RPermitExpirableSemaphore semaphore = client.getPermitExpirableSemaphore(c[1]);
                RBucket<String> counter = client.getBucket(c[2], StringCodec.INSTANCE);
                int n = Integer.parseInt(c[3]);
                long lease = Long.parseLong(c[4]);
                for (int i = 0; i < n; i++) {
                    String id = semaphore.acquire(lease, TimeUnit.MILLISECONDS);
                    try {
                        increment(counter);
                    } finally {
                        semaphore.release(id);
                    }
                }
                return "counted " + n;
            }
            default: {
                String latch = LatchCommands.execute(client, c);
                if (latch != null) {
                    return latch;
                }
                String lease = LeasePeer.execute(client, c);
                if (lease != null) {
                    return lease;
                }
                throw new IllegalArgumentException("unknown command " + c[0]);
            }
        }
    }

    /** Read, then write one more: two commands, so only mutual exclusion keeps it exact. */
    private static void increment(RBucket<String> counter) {
        String value = counter.get();
        long next = (value == null ? 0 : Long.parseLong(value)) + 1;
        counter.set(Long.toString(next));
    }
}
