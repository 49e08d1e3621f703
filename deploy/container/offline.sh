#!/bin/sh
# Builds crawlgate's image without a registry: from a crawlgate binary
# built on this machine (glibc-linked), its shared libraries as ldd lists
# them, /etc/passwd and /etc/group with nonroot (65532), the CA
# certificates and deploy/container/crawlgate.toml, on an empty base
# (`buildah from scratch`). The result has the same layout, user, ports,
# volumes, health check and entry point as deploy/container/Containerfile.
#
#   deploy/container/offline.sh [BINARY [IMAGE]]
#
# BINARY defaults to target/release/crawlgate, IMAGE to
# localhost/crawlgate:offline. BUILDAH (default `buildah`) is the command
# with its global flags, e.g. BUILDAH="buildah --storage-driver vfs".
# Prints the image's id on its last line.
set -eu

bin=${1:-target/release/crawlgate}
image=${2:-localhost/crawlgate:offline}
buildah=${BUILDAH:-buildah}
# HEALTHCHECK and STOPSIGNAL are Docker image fields; OCI has none.
export BUILDAH_FORMAT=docker
here=$(cd "$(dirname "$0")" && pwd)

[ -x "$bin" ] || { echo "offline.sh: $bin is not an executable (cargo build --release first)" >&2; exit 1; }

root=$(mktemp -d)
ctr=
cleanup() {
    rm -rf "$root"
    if [ -n "$ctr" ]; then $buildah rm "$ctr" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT INT TERM

# The root: the binary, the libraries it loads, users, certificates, config.
install -D -m 0755 "$bin" "$root/usr/local/bin/crawlgate"
if command -v strip >/dev/null 2>&1; then strip --strip-debug "$root/usr/local/bin/crawlgate"; fi
ldd "$bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u |
while read -r lib; do
    install -D -m 0755 "$lib" "$root$lib"
done
mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
chmod 1777 "$root/tmp"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' >"$root/etc/group"
printf '%s\n' 'hosts: files dns' >"$root/etc/nsswitch.conf"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
else
    echo "offline.sh: warning: no /etc/ssl/certs/ca-certificates.crt (https upstreams and range lists need it)" >&2
fi
owned="$root.owned"
mkdir -p "$owned/etc/crawlgate" "$owned/var/lib/crawlgate/verify" "$owned/home/nonroot"
install -m 0644 "$here/crawlgate.toml" "$owned/etc/crawlgate/crawlgate.toml"

commit=$(git -C "$here" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
ctr=$($buildah from scratch)
$buildah copy "$ctr" "$root" / >/dev/null
$buildah copy --chown 65532:65532 "$ctr" "$owned" / >/dev/null
rm -rf "$owned"
$buildah config \
    --user 65532:65532 \
    --port 8080 --port 8443 --port 9090 \
    --volume /etc/crawlgate --volume /var/lib/crawlgate \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --healthcheck 'CMD /usr/local/bin/crawlgate health --config /etc/crawlgate/crawlgate.toml' \
    --healthcheck-interval 30s --healthcheck-timeout 5s \
    --healthcheck-start-period 10s --healthcheck-retries 3 \
    --stop-signal SIGTERM \
    --entrypoint '["/usr/local/bin/crawlgate"]' \
    --cmd '["--config", "/etc/crawlgate/crawlgate.toml"]' \
    --label org.opencontainers.image.title=crawlgate \
    --label org.opencontainers.image.revision="$commit" \
    "$ctr"
$buildah commit --quiet --rm --format docker "$ctr" "$image"
ctr=
