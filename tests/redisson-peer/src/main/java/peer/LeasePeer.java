package peer;

import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The peer's commands about leases and owners known by id: a permit's lease set again
 * ({@code RPermitExpirableSemaphore.updateLeaseTime}), and locks taken, checked and released
 * for a thread id other than the slot's ({@code lockAsync(leaseTime, unit, threadId)},
 * {@code isHeldByThread}, {@code unlockAsync(threadId)}), as the Rust side's
 * {@code LockOwner::from_id} does. Lock kinds {@code K}: {@code lock}, {@code read},
 * {@code write}.
 *
 * <pre>
 * psem_update name id leaseMs       -> updated true|false
 * psem_try_release name id          -> released true|false
 * lock_as K name threadId [leaseMs] -> locked                 (blocks until granted)
 * held_by K name threadId           -> held true|false
 * unlock_as K name threadId         -> unlocked               (error IllegalMonitorStateException: not the owner)
 * </pre>
 */
final class LeasePeer {
    private LeasePeer() {}

    /** The reply to {@code c}, or {@code null} when it is not one of these commands. */
    static String execute(RedissonClient client, String[] c) throws Exception {
        switch (c[0]) {
            case "psem_update": {
                RPermitExpirableSemaphore semaphore = client.getPermitExpirableSemaphore(c[1]);
                return "updated " + semaphore.updateLeaseTime(c[2], Long.parseLong(c[3]), TimeUnit.MILLISECONDS);
            }
            case "psem_try_release":
                return "released " + client.getPermitExpirableSemaphore(c[1]).tryRelease(c[2]);
            case "lock_as": {
                long lease = c.length > 4 ? Long.parseLong(c[4]) : -1;
                lockOf(client, c[1], c[2]).lockAsync(lease, TimeUnit.MILLISECONDS, Long.parseLong(c[3])).get();
                return "locked";
            }
            case "held_by":
                return "held " + lockOf(client, c[1], c[2]).isHeldByThread(Long.parseLong(c[3]));
            case "unlock_as":
                lockOf(client, c[1], c[2]).unlockAsync(Long.parseLong(c[3])).get();
                return "unlocked";
            default:
                return null;
        }
    }

    private static RLock lockOf(RedissonClient client, String kind, String name) {
        switch (kind) {
            case "lock": return client.getLock(name);
            case "read": return client.getReadWriteLock(name).readLock();
            case "write": return client.getReadWriteLock(name).writeLock();
            default: throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }
}
