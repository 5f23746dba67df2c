# shellcheck shell=bash
# Shared helpers for scripts/test and scripts/demo. Source it; do not execute it.

# Prints a short step header to stderr.
step() {
    # The time since the script started, so a slow step stands out in a CI log.
    printf '\n==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2
}

# Runs a command as root: directly when already root, via sudo when available.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "error: need root (or sudo) to run: $*" >&2
        return 1
    fi
}

# Makes sure `redis-server` (and `redis-cli`) are on PATH, installing the Debian package
# `redis-server` when they are missing. Starts, stops or disables no service.
ensure_redis_server() {
    if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: redis-server is not installed and apt-get is not available; install redis-server manually" >&2
        return 1
    fi
    apt_install redis-server
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "error: redis-server still not on PATH after installing it" >&2
        return 1
    fi
}

# Makes sure `redis-benchmark` is on PATH (Debian's redis-tools, which redis-server pulls in;
# installed alone when missing): the benchmark's upper bound.
ensure_redis_benchmark() {
    if command -v redis-benchmark >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: redis-benchmark is not installed and apt-get is not available; install redis-tools manually" >&2
        return 1
    fi
    apt_install redis-tools
}

# Makes sure `valkey-server` and `valkey-cli` (Valkey 8) are on PATH, for the suites run
# against Valkey (LOCK_TEST_SERVER=valkey). Debian 12 ships Valkey 8 in bookworm-backports:
# that suite is added to apt's sources when missing, and the package taken from it.
# Starts, stops or disables no service.
ensure_valkey_server() {
    if command -v valkey-server >/dev/null 2>&1 && command -v valkey-cli >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: valkey-server is not installed and apt-get is not available; install Valkey 8 manually" >&2
        return 1
    fi
    local codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    if ! grep -rqs "${codename}-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
        step "adding ${codename}-backports to apt's sources (Valkey 8)"
        echo "deb http://deb.debian.org/debian ${codename}-backports main" |
            as_root tee "/etc/apt/sources.list.d/${codename}-backports.list" >/dev/null
    fi
    step "installing valkey-server (apt-get, ${codename}-backports)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -t "${codename}-backports" valkey-server
    if ! command -v valkey-server >/dev/null 2>&1; then
        echo "error: valkey-server still not on PATH after installing it" >&2
        return 1
    fi
}

# Makes sure `ip` (iproute2) and `iptables` are on PATH for the nemesis suite
# (tests/nemesis.rs builds network namespaces and cuts links with iptables), installing the
# Debian packages `iproute2` and `iptables` when they are missing.
ensure_netns_tools() {
    local missing=()
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    command -v iptables >/dev/null 2>&1 || missing+=(iptables)
    # `tc` (the slow and lossy link of tests/nemesis_faults.rs) comes with iproute2.
    command -v tc >/dev/null 2>&1 || missing+=(iproute2)
    if [ "${#missing[@]}" -eq 0 ]; then
        ensure_netem_note
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: ${missing[*]} not installed and apt-get is not available; install them manually" >&2
        return 1
    fi
    apt_install "${missing[@]}"
    ensure_netem_note
}

# `tc qdisc ... netem` needs the kernel's sch_netem (CONFIG_NET_SCH_NETEM, built in or a
# module). Without it the slow-link scenario shapes the link with `tbf` and drops with
# `iptables -m statistic` instead; say so plainly.
ensure_netem_note() {
    { command -v modprobe && modprobe sch_netem; } >/dev/null 2>&1 || true
    local ns="nznetemprobe$$"
    ip netns add "$ns" 2>/dev/null || return 0
    local ok=0
    if ip -n "$ns" link add nzq0 type veth peer name nzq1 2>/dev/null &&
        ip netns exec "$ns" tc qdisc add dev nzq0 root netem delay 1ms 2>/dev/null; then
        ok=1
    fi
    ip netns del "$ns" 2>/dev/null
    if [ "$ok" -eq 0 ]; then
        echo "note: this kernel has no sch_netem (tc netem); tests/nemesis_faults.rs makes its slow and lossy link with tbf and iptables statistic instead" >&2
    fi
}

# Makes sure the inspector page's browser test (tests/inspector_page.rs) has what it drives:
# Debian's `chromium` (headless), `node` and `npm` (installing the Debian packages
# `chromium`, `nodejs` and `npm` when missing), and `playwright-core` in tests/browser
# (`npm ci` from its package-lock.json when node_modules lacks it).
ensure_browser_test_tools() {
    local missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    if [ "${#missing[@]}" -gt 0 ]; then
        if ! command -v apt-get >/dev/null 2>&1; then
            echo "error: ${missing[*]} not installed and apt-get is not available; install Chromium, Node.js (18+) and npm manually" >&2
            return 1
        fi
        apt_install "${missing[@]}"
    fi
    if [ ! -f tests/browser/node_modules/playwright-core/package.json ]; then
        step "npm ci in tests/browser (playwright-core)"
        (cd tests/browser && npm ci --no-audit --no-fund)
    fi
}

# Installs Debian packages: apt-get update first (a fresh machine has no package lists).
apt_install() {
    step "installing $* (apt-get)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

# Fails with a clear message when cargo is missing.
ensure_cargo() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "error: cargo not found on PATH; install Rust (https://rustup.rs) first" >&2
        return 1
    fi
}

# Makes sure `java` and `mvn` are on PATH (the Redisson peer of tests/redisson_java.rs is a
# Maven project), installing the Debian packages `default-jdk-headless` and `maven` when
# either is missing.
ensure_java_maven() {
    if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: java or mvn is not installed and apt-get is not available; install a JDK (17+) and Maven manually" >&2
        return 1
    fi
    apt_install default-jdk-headless maven
    if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
        echo "error: java or mvn still not on PATH after installing them" >&2
        return 1
    fi
}

# Builds the Redisson peer jars (tests/redisson-peer/target/<version>/redisson-peer.jar) for
# every Redisson version the interop suite runs against. Fails with Maven's output.
build_redisson_peers() {
    step "building the Redisson peer (newest release and the 3.21 line)"
    (cd tests/redisson-peer && mvn -B -q -Dstyle.color=never package \
        && mvn -B -q -Dstyle.color=never package -P redisson-3.21)
}

# Installs cargo-nextest (`cargo install --locked`, a few minutes once per machine) when it is
# missing: it runs the test binaries side by side, so one binary's long tests no longer hold
# up the rest. When the install fails (no registry), scripts/test falls back to `cargo test`
# and says so.
ensure_nextest() {
    if cargo nextest --version >/dev/null 2>&1; then
        return 0
    fi
    step "installing cargo-nextest (cargo install --locked)"
    if ! cargo install --locked cargo-nextest; then
        echo "note: cargo-nextest could not be installed; the tests run with cargo test" >&2
    fi
}
