//! `crawlgate health`: the container health check. One GET to the admin
//! listener; 0 on a 200, 1 with one line on anything else (refused, a 503,
//! garbage, no answer within the timeout), 64 when there is nothing to ask.

mod support;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crawlgate::config::Overrides;
use support::process::{free_addr, BIN};
use support::Proxy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// `crawlgate health ARGS…`, run off the runtime (the servers under test
/// are on it).
async fn health(args: &[&str]) -> (Output, Duration) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let out = Command::new(BIN)
            .arg("health")
            .args(&args)
            .output()
            .expect("run crawlgate health");
        (out, started.elapsed())
    })
    .await
    .expect("health ran")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one line a failure prints.
fn one_line(out: &Output) -> String {
    let text = stderr(out);
    assert_eq!(text.lines().count(), 1, "one line on stderr: {text:?}");
    text.trim_end().to_owned()
}

/// A server that answers every connection with `answer` (after reading
/// the request head), or, with `None`, accepts and never answers.
async fn answering(answer: Option<&'static [u8]>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 512];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                match answer {
                    Some(bytes) => {
                        let _ = stream.write_all(bytes).await;
                        let _ = stream.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(60)).await,
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_crawlgate_is_healthy_by_addr_and_by_its_config() {
    let proxy = Proxy::start_with(
        "",
        Overrides {
            upstream: Some("http://127.0.0.1:9".to_owned()),
            admin_listen: Some("127.0.0.1:0".to_owned()),
            ..Overrides::default()
        },
    )
    .await;
    let admin = proxy.admin_addr.expect("admin listener").to_string();

    let (out, _) = health(&["--addr", &admin]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("/healthz: HTTP/1.1 200"), "{said}");

    // The config file's admin.listen; all addresses are asked on loopback.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("crawlgate.toml");
    let port = proxy.admin_addr.expect("admin").port();
    std::fs::write(&file, format!("[admin]\nlisten = \"0.0.0.0:{port}\"\n")).expect("write");
    let (out, _) = health(&["--config", file.to_str().expect("utf-8")]).await;
    assert!(out.status.success(), "{}", stderr(&out));

    // Another path that is not there: 404 is not healthy.
    let (out, _) = health(&["--addr", &admin, "--path", "/nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        one_line(&out).ends_with("/nope: status 404"),
        "{}",
        stderr(&out)
    );

    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_is_unhealthy_refused() {
    let addr = free_addr().to_string();
    let (out, _) = health(&["--addr", &addr]).await;
    assert_eq!(out.status.code(), Some(1));
    let line = one_line(&out);
    assert!(line.starts_with("crawlgate: error: unhealthy: "), "{line}");
    assert!(line.ends_with("connection refused"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_and_garbage_are_unhealthy_and_say_so() {
    let busy = answering(Some(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
    ))
    .await;
    let (out, _) = health(&["--addr", &busy.to_string()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line(&out).ends_with("status 503"), "{}", stderr(&out));

    let garbage = answering(Some(b"SSH-2.0-OpenSSH_9.2\r\n\xff\xfe")).await;
    let (out, _) = health(&["--addr", &garbage.to_string()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        one_line(&out).contains("not an HTTP answer"),
        "{}",
        stderr(&out)
    );

    let endless = answering(Some(&[b'x'; 4096])).await;
    let (out, _) = health(&["--addr", &endless.to_string()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        one_line(&out).contains("no status line"),
        "{}",
        stderr(&out)
    );

    let closed = answering(Some(b"")).await;
    let (out, _) = health(&["--addr", &closed.to_string()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        one_line(&out).contains("closed without an answer"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_unhealthy_within_the_timeout() {
    let silent = answering(None).await;
    let (out, took) = health(&["--addr", &silent.to_string(), "--timeout", "300ms"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        one_line(&out).ends_with("no answer within 300ms"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_ask_is_a_config_error() {
    let (out, _) = health(&[]).await;
    assert_eq!(out.status.code(), Some(64));
    assert!(one_line(&out).contains("give --addr"), "{}", stderr(&out));

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("crawlgate.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:8080\"\n").expect("write");
    let (out, _) = health(&["--config", file.to_str().expect("utf-8")]).await;
    assert_eq!(out.status.code(), Some(64));
    assert!(
        one_line(&out).contains("no admin listener"),
        "{}",
        stderr(&out)
    );

    let (out, _) = health(&["--addr", "127.0.0.1:1", "--path", "no slash"]).await;
    assert_eq!(out.status.code(), Some(64));
}
