//! What an operator meets with the real binary, driven as a child process
//! with real signals, files, pipes and sockets: logrotate's SIGUSR1 reopens
//! the access log, and neither SIGUSR1 nor SIGUSR2 kills the process; a
//! log reader that stops reading never slows the proxy; systemd's notify
//! socket hears ready, reloading and the outcome; an unusable `RUST_LOG`
//! does not silence it; and a failing upstream says why, a few lines a
//! second.

mod support;

use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use support::process::{self, free_addr, start_env, Running};
use support::{get, h1_client, lines, Upstream, FIREFOX};
use tokio::net::TcpListener;

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

fn log_file(dir: &Path) -> (std::path::PathBuf, Stdio) {
    let path = dir.join("stderr.log");
    let file = std::fs::File::create(&path).expect("log file");
    (path, Stdio::from(file))
}

/// Waits (at most 5 s) until the log holds `needle`; returns the log.
fn wait_for_log(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < deadline, "log lacks {needle:?}:\n{text}");
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

/// Issue 10.6: SIGUSR1 and SIGUSR2 (logrotate's) never kill the process:
/// SIGUSR1 reopens the access log (here standard error: said so), SIGUSR2
/// is logged and ignored; the process keeps serving.
#[tokio::test]
async fn sigusr1_and_sigusr2_do_not_kill_the_process() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, stderr) = log_file(dir.path());
    let addr = free_addr();
    let mut running = process::start_logging(
        &["--listen", &addr.to_string(), "--upstream", &upstream.url()],
        addr,
        stderr,
        "info",
    );
    for signal in ["USR1", "USR2", "USR1"] {
        running.signal(signal);
    }
    let text = wait_for_log(&log, "signal ignored");
    assert!(text.contains("SIGUSR2"), "{text}");
    wait_for_log(&log, "nothing to reopen");
    assert!(
        running.0.try_wait().expect("wait").is_none(),
        "the process died"
    );
    let res = get(addr, "example.test", "/", Some(FIREFOX)).await;
    assert_eq!(res.status, 200);
    running.signal("TERM");
    assert!(running.wait_exit(Duration::from_secs(10)).success());
}

/// Issue 10.8: an unusable `RUST_LOG` is warned about and replaced by
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

/// `info`: the start-up line still appears.
#[test]
fn an_unusable_rust_log_falls_back_to_info() {
    for bad in ["verbose", "crawlgate=loud"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, stderr) = log_file(dir.path());
        let addr = free_addr();
        let running = process::start_logging(
            &[
                "--listen",
                &addr.to_string(),
                "--upstream",
                "http://127.0.0.1:9",
            ],
            addr,
            stderr,
            bad,
        );
        let text = wait_for_log(&log, "crawlgate started");
        assert!(
            text.contains("WARN") && text.contains("RUST_LOG"),
            "{bad}: {text}"
        );
        drop(running);
    }
}

/// Issue 10.8: a 502 or 504 logs its cause at `warn`, at most a few lines
/// a second however many requests fail.
#[tokio::test]
async fn upstream_failures_log_their_cause_a_few_times_a_second() {
    // A refusing upstream: a port that was free a moment ago.
    let dead = free_addr();
    // A hung upstream: accepts, reads, never answers.
    let hung = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hung_addr = hung.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hung.accept().await {
            held.push(stream);
        }
    });
    for (upstream, status, cause) in [
        (dead, 502, "connection refused"),
        (hung_addr, 504, "response timeout"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("c.toml");
        std::fs::write(&config, "[proxy]\nresponse_timeout = \"200ms\"\n").expect("write");
        let (log, stderr) = log_file(dir.path());
        let addr = free_addr();
        let running = process::start_logging(
            &[
                "--listen",
                &addr.to_string(),
                "--upstream",
                &format!("http://{upstream}"),
                "--config",
                config.to_str().expect("utf-8"),
            ],
            addr,
            stderr,
            "warn",
        );
        let requests = if status == 502 { 200 } else { 30 };
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..requests {
            tasks.push(tokio::spawn(async move {
                get(addr, "example.test", "/", Some(FIREFOX)).await.status
            }));
        }
        for task in tasks {
            assert_eq!(task.await.expect("task"), status);
        }
        let seconds = started.elapsed().as_secs() + 2;
        let text = wait_for_log(&log, cause);
        let lines = text.matches("upstream request failed").count();
        assert!(text.contains("WARN"), "{text}");
        assert!(
            (1..=5 * seconds as usize).contains(&lines),
            "{lines} lines for {requests} failures in {seconds} s:\n{text}"
        );
        drop(running);
    }
}
