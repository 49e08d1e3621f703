#!/usr/bin/env bash
# Serving a sitemap folder: crawlgate (--sitemap-dir, answered before the
# site) against nginx serving the same folder as static files, as an
# operator would configure it (one worker, sendfile, its default ETag and
# Last-Modified). On 127.0.0.1 only, alternated A B A B, with a crawler's
# request head. See bench/README.md §6 for the method and results.
#
#   bench/sitemap_serve.sh
#
# The folder is built by `crawlgate sitemap build` from 45,000 generated
# entries (one full file, the size crawlers fetch most) plus its index.
# Three scenarios, each DURATION seconds with CONNS connections:
#   full   GET /sitemaps/sitemap-0.xml, the whole file every time
#   304    the same GET with the If-None-Match each server sent (a crawler
#          re-checking an unchanged file)
#   index  GET /sitemaps/sitemap.xml (a small file)
#
# Environment: DURATION (s, default 10), ROUNDS (default 3), CONNS (16),
# CRAWLGATE_BIN (default: build target/release/crawlgate),
# PROXY_CPU / LOAD_CPU (cores for the server and for wrk: 0 / 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-16}
BENCH=bench/sitemap_serve.sh
# shellcheck source=bench/common.sh
source bench/common.sh
need_tools nginx wrk python3 curl taskset
NGINX=$(command -v nginx)
crawlgate_bin
scratch crawlgate-sitemap-bench
port_base 3
NGINX_PORT=$BASE CG_PORT=$((BASE + 1)) SITE_PORT=$((BASE + 2))

# --- the folder ------------------------------------------------------------
mkdir "$RUN/sitemaps"
python3 - > "$RUN/rows.tsv" <<'PY'
for i in range(1, 45001):
    print(f"{i}\t2026-11-{1 + i % 28:02d} 10:{i % 60:02d}:00\t/product/{i}-a-product-name-of-usual-length")
PY
"$CRAWLGATE_BIN" sitemap build --quiet --dir "$RUN/sitemaps" --base-url https://example.com/ --input "$RUN/rows.tsv"
"$CRAWLGATE_BIN" sitemap index --quiet "$RUN/sitemaps" --base-url https://example.com/
chmod -R a+rX "$RUN/sitemaps"
FULL_BYTES=$(stat -c %s "$RUN/sitemaps/sitemap-0.xml")
INDEX_BYTES=$(stat -c %s "$RUN/sitemaps/sitemap.xml")

# --- nginx: the folder as static files; also the site crawlgate forwards to -
cat > "$RUN/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $RUN/nginx.pid;
error_log $RUN/nginx-error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    server_tokens off;
    sendfile on;
    tcp_nopush on;
    types { application/xml xml; }
    server {
        listen 127.0.0.1:$NGINX_PORT reuseport backlog=4096;
        location /sitemaps/ {
            alias $RUN/sitemaps/;
            add_header Cache-Control "max-age=3600";
        }
    }
    server {
        listen 127.0.0.1:$SITE_PORT;
        location / { return 404; }
    }
}
CONF
taskset -c "$PROXY_CPU" "$NGINX" -c "$RUN/nginx.conf" -p "$RUN" &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
wait_port "$NGINX_PORT"
wait_port "$SITE_PORT"

cat > "$RUN/crawlgate.toml" <<CONF
[log]
access = false
CONF
RUST_LOG=warn taskset -c "$PROXY_CPU" "$CRAWLGATE_BIN" --config "$RUN/crawlgate.toml" \
    --listen "127.0.0.1:$CG_PORT" --upstream "http://127.0.0.1:$SITE_PORT" \
    --sitemap-dir "$RUN/sitemaps" 2> "$RUN/crawlgate.log" &
CG_PID=$!
PIDS+=("$CG_PID")
wait_port "$CG_PORT"

# A crawler's request head; the ETag, for the 304 scenario, is the one each
# server sent.
cat > "$RUN/head.lua" <<'LUA'
local etag = os.getenv("ETAG")
wrk.headers["Host"] = "example.com"
wrk.headers["User-Agent"] = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
wrk.headers["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
wrk.headers["Accept-Encoding"] = "identity"
wrk.headers["From"] = "googlebot(at)googlebot.com"
if etag and etag ~= "" then wrk.headers["If-None-Match"] = etag end
LUA

etag_of() { # port path
    curl -s -o /dev/null -D - -H 'Host: example.com' "http://127.0.0.1:$1$2" |
        awk 'tolower($1) == "etag:" { sub(/\r$/, ""); $1 = ""; sub(/^ /, ""); print }'
}

# Check that both serve the same bytes, and answer 304 to their own ETag.
for port in "$NGINX_PORT" "$CG_PORT"; do
    got=$(curl -s -H 'Host: example.com' "http://127.0.0.1:$port/sitemaps/sitemap-0.xml" | cmp - "$RUN/sitemaps/sitemap-0.xml" && echo same)
    [[ $got == same ]] || { echo "port $port does not serve the file" >&2; exit 1; }
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: example.com' \
        -H "If-None-Match: $(etag_of "$port" /sitemaps/sitemap-0.xml)" "http://127.0.0.1:$port/sitemaps/sitemap-0.xml")
    [[ $code == 304 ]] || { echo "port $port answers $code to its own ETag" >&2; exit 1; }
done

cpu_ticks() { read -r -a f < "/proc/$1/stat"; echo $((f[13] + f[14])); }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
RESULTS=$RUN/results.tsv
: > "$RESULTS"

# run NAME SERVER PORT PID PATH ETAG: one measured run, one TSV row.
run() {
    local name=$1 server=$2 port=$3 pid=$4 path=$5 etag=$6
    # The server's process; nginx's worker is its child.
    local worker=$pid
    [[ $server == nginx ]] && worker=$(pgrep -P "$pid" | head -1)
    ETAG=$etag taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d1s -s "$RUN/head.lua" "http://127.0.0.1:$port$path" > /dev/null
    local before after
    before=$(cpu_ticks "$worker")
    ETAG=$etag taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$RUN/head.lua" "http://127.0.0.1:$port$path" > "$RUN/wrk.out"
    after=$(cpu_ticks "$worker")
    local rps errors
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$RUN/wrk.out")
    errors=$(awk '/Non-2xx or 3xx/ { n = $5 } /Socket errors/ { s = $0 } END { sub(/^ +/, "", s); print (n ? n : 0) (s ? " " s : "") }' "$RUN/wrk.out")
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$server" "$rps" "$(((after - before) * TICK_US))" "$errors" >> "$RESULTS"
}

echo "# crawlgate $("$CRAWLGATE_BIN" --version) vs $("$NGINX" -v 2>&1 | sed 's/.*: //'), $(nproc) CPUs, server on CPU $PROXY_CPU, wrk on CPU $LOAD_CPU"
echo "# ${ROUNDS} rounds, ${DURATION}s per run, ${CONNS} connections; sitemap-0.xml ${FULL_BYTES} bytes, sitemap.xml ${INDEX_BYTES} bytes"
NGINX_ETAG=$(etag_of "$NGINX_PORT" /sitemaps/sitemap-0.xml)
CG_ETAG=$(etag_of "$CG_PORT" /sitemaps/sitemap-0.xml)
for round in $(seq "$ROUNDS"); do
    order=(crawlgate nginx)
    ((round % 2 == 0)) && order=(nginx crawlgate)
    for scenario in full 304 index; do
        for server in "${order[@]}"; do
            if [[ $server == nginx ]]; then port=$NGINX_PORT pid=$NGINX_PID etag=$NGINX_ETAG; else port=$CG_PORT pid=$CG_PID etag=$CG_ETAG; fi
            case $scenario in
                full) run full "$server" "$port" "$pid" /sitemaps/sitemap-0.xml "" ;;
                304) run 304 "$server" "$port" "$pid" /sitemaps/sitemap-0.xml "$etag" ;;
                index) run index "$server" "$port" "$pid" /sitemaps/sitemap.xml "" ;;
            esac
        done
    done
done
CG_RSS=$(awk '/^VmHWM:/ { print $2 }' "/proc/$CG_PID/status")

python3 - "$RESULTS" "$FULL_BYTES" "$CG_RSS" "$DURATION" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
full_bytes, cg_rss, duration = int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
by = {}
for name, server, rps, cpu_us, errors in rows:
    by.setdefault((name, server), []).append((float(rps), int(cpu_us), errors))
print("| scenario | server | req/s (median; runs) | CPU µs per request (median) | not 2xx/3xx | crawlgate ÷ nginx, req/s |")
print("| --- | --- | --- | --- | --- | --- |")
for name in ["full", "304", "index"]:
    med = {}
    for server in ["crawlgate", "nginx"]:
        runs = by.get((name, server), [])
        rps = [r for r, _, _ in runs]
        cpu = [c / (r * duration) for r, c, _ in runs if r > 0]
        med[server] = statistics.median(rps)
        extra = ""
        if name == "full":
            extra = f" ({statistics.median(rps) * full_bytes / 1048576:.0f} MiB/s)"
        errs = ",".join(sorted({e for _, _, e in runs}))
        ratio = f"{med['crawlgate'] / med['nginx']:.2f}" if server == "nginx" else ""
        print(f"| {name} | {server} | {med[server]:,.0f}{extra}; {' / '.join(f'{r:,.0f}' for r in rps)} | {statistics.median(cpu):.1f} | {errs} | {ratio} |")
print(f"\ncrawlgate peak RSS after all runs: {cg_rss} KiB")
PY
