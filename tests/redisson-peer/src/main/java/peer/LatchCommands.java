package peer;

import java.util.concurrent.TimeUnit;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RedissonClient;

/**
 * The peer's count-down latch commands (Redisson's {@code RCountDownLatch}), dispatched from
 * {@link Peer}. Each runs on its slot's thread like every other command; {@code latch_await}
 * blocks that slot until the latch opens.
 *
 * <pre>
 * latch_try_set name n            -> set true|false
 * latch_count_down name           -> counted
 * latch_count name                -> count N
 * latch_await name                -> opened                   (blocks)
 * latch_await name waitMs         -> opened | timeout
 * latch_delete name               -> deleted true|false
 * </pre>
 */
final class LatchCommands {
    private LatchCommands() {
    }

    /** The reply to command {@code c}, or {@code null} when it is not a latch command. */
    static String execute(RedissonClient client, String[] c) throws InterruptedException {
        if (!c[0].startsWith("latch_")) {
            return null;
        }
        RCountDownLatch latch = client.getCountDownLatch(c[1]);
        switch (c[0]) {
            case "latch_try_set":
                return "set " + latch.trySetCount(Long.parseLong(c[2]));
            case "latch_count_down":
                latch.countDown();
                return "counted";
            case "latch_count":
                return "count " + latch.getCount();
            case "latch_await":
                if (c.length > 2) {
                    return latch.await(Long.parseLong(c[2]), TimeUnit.MILLISECONDS) ? "opened" : "timeout";
                }
                latch.await();
                return "opened";
            case "latch_delete":
                return "deleted " + latch.delete();
            default:
                return null;
        }
    }
}
