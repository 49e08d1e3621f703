# Shared by bench/load.sh and bench/sitemap_serve.sh, which source it after
# setting BENCH (their name, for messages) and ROOT: the cores, the tools,
# the binary, a scratch folder whose processes are stopped on exit, ports
# below the ephemeral range, and waiting for a listener.

PROXY_CPU=${PROXY_CPU:-0}
if (($(nproc) > 1)); then LOAD_CPU=${LOAD_CPU:-1}; else LOAD_CPU=${LOAD_CPU:-0}; fi

# need_tools TOOL…: exits 2 naming the first one missing.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || {
            echo "$BENCH: $tool is missing (apt-get install nginx-light wrk curl python3 util-linux)" >&2
            exit 2
        }
    done
}

# Sets CRAWLGATE_BIN, building the release binary unless it is set.
crawlgate_bin() {
    if [[ -z ${CRAWLGATE_BIN:-} ]]; then
        cargo build --release --quiet
        CRAWLGATE_BIN=$ROOT/target/release/crawlgate
    fi
}

# scratch NAME: a fresh folder RUN under /tmp; every pid added to PIDS is
# stopped (TERM, then KILL after 5 s) and RUN removed when the script exits.
scratch() {
    RUN=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$RUN"
    PIDS=()
    trap cleanup EXIT
    ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
}

cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$RUN"
}

# port_base N: sets BASE so that BASE … BASE+N-1 are ports nothing listens
# on, below the ephemeral range (32768 and up by default) so that no
# outgoing connection holds a port the servers must bind. Scripts running
# at once (the test suite runs two) start 16 ports apart by their pid.
port_base() {
    local low span tries port free
    read -r low _ < /proc/sys/net/ipv4/ip_local_port_range
    span=$(((low - 10000) / 16))
    for tries in $(seq 0 99); do
        BASE=$((10000 + 16 * (($$ + tries * 7) % span)))
        free=1
        for port in $(seq "$BASE" $((BASE + $1 - 1))); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then free=0; break; fi
        done
        ((free)) && return 0
    done
    echo "$BENCH: no $1 free ports found" >&2
    exit 1
}

# wait_port PORT: until something listens on 127.0.0.1:PORT (10 s).
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$BENCH: nothing listens on port $1" >&2
    exit 1
}
