//! `crawlgate health`: one plain HTTP/1.1 `GET` to the admin listener,
//! for a container's `HEALTHCHECK` where there is no shell and no curl
//! (distroless): exit 0 on a 200, 1 otherwise with one line saying why.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Failure, Outcome, EXIT_CONFIG};
use crate::config::{Config, Overrides};

/// Exit code of an answer other than 200, or of none (what a container
/// runtime reads as unhealthy).
pub const EXIT_UNHEALTHY: u8 = 1;

/// The most of the answer read to find its status line.
const STATUS_LINE_MAX: usize = 1024;

/// Checks `path` on the admin listener: `addr` when given, else
/// `admin.listen` of the config file (an unspecified address, `0.0.0.0`
/// or `[::]`, is asked on loopback). The whole exchange, name lookup
/// included, is bounded by `timeout`.
pub fn run(config: Option<&Path>, addr: Option<&str>, path: &str, timeout: Duration) -> Outcome {
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(Failure::new(
            EXIT_CONFIG,
            &format!("--path {path:?} is not a request path like /healthz"),
        ));
    }
    let target = match (addr, config) {
        (Some(addr), _) => addr.to_owned(),
        (None, Some(file)) => admin_addr(file)?.to_string(),
        (None, None) => {
            return Err(Failure::new(
                EXIT_CONFIG,
                &"no admin address: give --addr HOST:PORT or --config FILE",
            ))
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Failure::new(EXIT_UNHEALTHY, &format!("cannot start: {err}")))?;
    let url = format!("http://{target}{path}");
    let checked = runtime.block_on(async {
        tokio::time::timeout(timeout, check(&target, path))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within {}",
                    humantime::format_duration(timeout)
                ))
            })
    });
    match checked {
        Ok(status_line) => {
            println!("{url}: {status_line}");
            Ok(())
        }
        Err(why) => Err(Failure::new(
            EXIT_UNHEALTHY,
            &format!("unhealthy: {url}: {why}"),
        )),
    }
}

/// `admin.listen` of `file`, on loopback when it is unspecified.
fn admin_addr(file: &Path) -> Result<SocketAddr, Failure> {
    let config = Config::load(Some(file), &Overrides::default())
        .map_err(|err| Failure::chain(EXIT_CONFIG, &err))?;
    let Some(listen) = config.restart.admin_listen else {
        return Err(Failure::new(
            EXIT_CONFIG,
            &format!(
                "{}: no admin listener ([admin] listen is not set); give --addr",
                file.display()
            ),
        ));
    };
    Ok(loopback_if_unspecified(listen))
}

/// `addr` with an unspecified IP (`0.0.0.0`, `::`) replaced by loopback of
/// the same family: a listener bound to all addresses answers there.
pub fn loopback_if_unspecified(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), addr.port())
        }
        _ => addr,
    }
}

/// One `GET path` to `target`; the status line of a 200, or why not.
async fn check(target: &str, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(target)
        .await
        .map_err(|err| connect_error(&err))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: crawlgate-health\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|err| format!("sending the request failed: {err}"))?;
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    let line = loop {
        if let Some(end) = answer.windows(2).position(|w| w == b"\r\n") {
            break answer[..end].to_vec();
        }
        if answer.len() >= STATUS_LINE_MAX {
            return Err(format!(
                "no status line in the first {STATUS_LINE_MAX} bytes"
            ));
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|err| format!("reading the answer failed: {err}"))?;
        if n == 0 {
            return Err(if answer.is_empty() {
                "connection closed without an answer".to_owned()
            } else {
                "connection closed in the status line".to_owned()
            });
        }
        answer.extend_from_slice(&chunk[..n]);
    };
    match status_of(&line) {
        Some(200) => Ok(String::from_utf8_lossy(&line).into_owned()),
        Some(status) => Err(format!("status {status}")),
        None => Err(format!(
            "not an HTTP answer: {:?}",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        )),
    }
}

/// The status code of an HTTP/1.x status line (`HTTP/1.1 200 OK`).
pub fn status_of(line: &[u8]) -> Option<u16> {
    let rest = line
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| line.strip_prefix(b"HTTP/1.0 "))?;
    let code = rest.get(..3)?;
    if !code.iter().all(u8::is_ascii_digit) || rest.get(3).is_some_and(|&b| b != b' ') {
        return None;
    }
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// A failed connect in a few words: refused, unreachable, or the error.
fn connect_error(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        _ => format!("cannot connect: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_gives_its_code_and_garbage_none() {
        assert_eq!(status_of(b"HTTP/1.1 200 OK"), Some(200));
        assert_eq!(status_of(b"HTTP/1.0 503 Service Unavailable"), Some(503));
        assert_eq!(status_of(b"HTTP/1.1 204"), Some(204));
        assert_eq!(status_of(b"HTTP/1.1 20"), None);
        assert_eq!(status_of(b"HTTP/1.1 2000 OK"), None);
        assert_eq!(status_of(b"HTTP/2 200"), None);
        assert_eq!(status_of(b"SSH-2.0-OpenSSH"), None);
        assert_eq!(status_of(b""), None);
        assert_eq!(status_of(&[0xff; 20]), None);
    }

    #[test]
    fn an_unspecified_listen_address_is_asked_on_loopback() {
        let v4: SocketAddr = "0.0.0.0:9090".parse().expect("address");
        assert_eq!(loopback_if_unspecified(v4).to_string(), "127.0.0.1:9090");
        let v6: SocketAddr = "[::]:9090".parse().expect("address");
        assert_eq!(loopback_if_unspecified(v6).to_string(), "[::1]:9090");
        let named: SocketAddr = "10.0.0.5:9090".parse().expect("address");
        assert_eq!(loopback_if_unspecified(named), named);
    }
}
