//! What an operator meets in the first hour, with the real binary: signals
//! that logrotate sends must not kill it, an unusable `RUST_LOG` must not
//! silence it, and a failing upstream must say why, a few lines a second.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::process::{self, free_addr};
use support::{get, Upstream, FIREFOX};
use tokio::net::TcpListener;

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
