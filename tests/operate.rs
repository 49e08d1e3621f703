//! Issue 11 with the real binary: logrotate's SIGUSR1, a log reader that
//! stops reading, and systemd's notify socket.

mod support;

use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use support::process::{free_addr, start_env, Running};
use support::{get, h1_client, lines, Upstream, FIREFOX};

/// Starts the binary with `config` and `env`, stderr to `stderr`.
fn start(config: &Path, addr: SocketAddr, env: &[(&str, &str)], stderr: Stdio) -> Running {
    let config = config.to_str().expect("utf-8 path");
    start_env(&["--config", config], env, addr, stderr)
}

/// Waits (at most 5 s) until `path` has `n` lines.
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = lines(path);
        if got.len() >= n || Instant::now() > deadline {
            assert_eq!(got.len(), n, "{}: {got:?}", path.display());
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn sigusr1_reopens_a_log_file_that_logrotate_moved() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\n[log]\nfile = \"access.log\"\n",
            upstream.url()
        ),
    )
    .expect("write");
    let running = start(&config, addr, &[], Stdio::null());
    let log = dir.path().join("access.log");
    let rotated = dir.path().join("access.log.1");

    assert_eq!(
        get(addr, "example.com", "/one", Some(FIREFOX)).await.status,
        200
    );
    wait_lines(&log, 1);
    // logrotate: move the file, then signal.
    std::fs::rename(&log, &rotated).expect("rename");
    assert_eq!(
        get(addr, "example.com", "/two", Some(FIREFOX)).await.status,
        200
    );
    // Still written to the moved file until the signal.
    wait_lines(&rotated, 2);
    running.signal("USR1");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !log.exists() {
        assert!(Instant::now() < deadline, "the log was not reopened");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        get(addr, "example.com", "/three", Some(FIREFOX))
            .await
            .status,
        200
    );
    let new = wait_lines(&log, 1);
    assert!(new[0].contains("GET /three "), "{new:?}");
    let old = lines(&rotated);
    assert_eq!(old.len(), 2, "{old:?}");
    assert!(
        old[0].contains("GET /one ") && old[1].contains("GET /two "),
        "{old:?}"
    );
}

/// The access log on a pipe whose reader never reads: the pipe fills, the
/// queue fills, and requests keep completing while lines are dropped and
/// counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_reader_that_stops_reading_never_slows_the_proxy() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let admin = free_addr();
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\n[admin]\nlisten = \"{admin}\"\n",
            upstream.url()
        ),
    )
    .expect("write");
    // stderr is a pipe this test holds and never reads.
    let mut running = start(&config, addr, &[], Stdio::piped());
    let _unread = running.0.stderr.take().expect("stderr pipe");

    // More requests than the pipe (64 KiB) and the queue (8192 lines) hold.
    let per_connection = 2500;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..8 {
        tasks.push(tokio::spawn(async move {
            let mut client = h1_client::<Empty<Bytes>>(addr).await;
            for i in 0..per_connection {
                let req = http::Request::get(format!("/page?c={c}&i={i}"))
                    .header("host", "example.com")
                    .header("user-agent", FIREFOX)
                    .body(Empty::new())
                    .expect("request");
                let res = tokio::time::timeout(Duration::from_secs(5), client.send_request(req))
                    .await
                    .expect("a request stalled behind the log")
                    .expect("response");
                assert_eq!(res.status(), 200);
                res.into_body().collect().await.expect("body");
            }
        }));
    }
    for task in tasks {
        task.await.expect("client task");
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(60),
        "8000 requests took {elapsed:?}"
    );

    let metrics = get(admin, "localhost", "/metrics", None).await.text();
    let scrape = prometheus_parse::Scrape::parse(metrics.lines().map(|l| Ok(l.to_owned())))
        .expect("exposition");
    let dropped: f64 = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "crawlgate_access_log_dropped_lines_total")
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum();
    assert!(dropped > 5000.0, "only {dropped} lines dropped of 20000");
    running.signal("TERM");
    // The exit does not wait for the stuck pipe.
    assert!(running.wait_exit(Duration::from_secs(10)).success());
}

/// Receives notify datagrams until one contains `needle` (at most 10 s);
/// returns everything received.
fn wait_notify(socket: &UnixDatagram, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains(needle) {
        assert!(Instant::now() < deadline, "no {needle:?} in {seen:?}");
        if let Ok(n) = socket.recv(&mut buf) {
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            seen.push('|');
        }
    }
    seen
}

#[tokio::test]
async fn systemd_hears_ready_reloading_and_the_outcome() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind notify socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let addr = free_addr();
    let config = dir.path().join("crawlgate.toml");
    let good = format!("listen = \"{addr}\"\nupstream = \"{}\"\n", upstream.url());
    std::fs::write(&config, &good).expect("write");
    let notify = socket_path.to_str().expect("utf-8 path");
    let mut running = start(&config, addr, &[("NOTIFY_SOCKET", notify)], Stdio::null());

    let ready = wait_notify(&socket, "READY=1");
    assert!(
        ready.contains(&format!("STATUS=serving on {addr}")),
        "{ready}"
    );

    running.signal("HUP");
    let reload = wait_notify(&socket, "STATUS=reloaded");
    assert!(reload.contains("RELOADING=1"), "{reload}");
    assert!(reload.contains("MONOTONIC_USEC="), "{reload}");
    let after = reload.split("RELOADING=1").nth(1).unwrap_or_default();
    assert!(after.contains("READY=1"), "{reload}");

    std::fs::write(&config, format!("{good}[redirect]\nwww = \"sideways\"\n")).expect("write");
    running.signal("HUP");
    let failed = wait_notify(&socket, "STATUS=reload failed");
    assert!(failed.contains("redirect.www"), "{failed}");

    running.signal("TERM");
    wait_notify(&socket, "STOPPING=1");
    assert!(running.wait_exit(Duration::from_secs(10)).success());
}
