//! The real `crawlgate` binary as a child process: start, signal, wait.

use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_crawlgate");

/// Kills the child when dropped, so a failing test leaves nothing behind.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// Sends `signal` (`TERM`, `HUP`, `INT`) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.0.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "still running after {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts the binary with `args` (stderr to `stderr`) and waits until `addr`
/// accepts connections.
pub fn start(args: &[&str], addr: SocketAddr, stderr: Stdio) -> Running {
    start_logging(args, addr, stderr, "warn")
}

/// [`start`] with `RUST_LOG` set to `rust_log`.
pub fn start_logging(args: &[&str], addr: SocketAddr, stderr: Stdio, rust_log: &str) -> Running {
    start_env(args, &[("RUST_LOG", rust_log)], addr, stderr)
}

/// [`start`] with the environment variables `env` set (`RUST_LOG` is
/// `warn` unless `env` sets it).
pub fn start_env(args: &[&str], env: &[(&str, &str)], addr: SocketAddr, stderr: Stdio) -> Running {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut running = Running(command.spawn().expect("spawn"));
    await_listening(addr, || running.0.try_wait().expect("wait"));
    running
}

/// Waits (at most 10 s) until `addr` accepts connections.
pub fn wait_listening(addr: SocketAddr) {
    await_listening(addr, || None);
}

/// Waits (at most 10 s) until `addr` accepts connections; fails at once,
/// saying so, when `exited` tells the child has exited.
fn await_listening(addr: SocketAddr, mut exited: impl FnMut() -> Option<ExitStatus>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        if let Some(status) = exited() {
            panic!("crawlgate exited ({status}) before listening on {addr}; its standard error says why");
        }
        assert!(
            Instant::now() < deadline,
            "crawlgate did not start on {addr} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free loopback address for a child to listen on, taken below the
/// kernel's ephemeral range. A port from `bind(0)` that is let go can be
/// handed by the kernel to the next `bind(0)` of a test running at the
/// same time (its upstream, say) before the child binds it, and the child
/// then exits at start-up; no `bind(0)` ever lands below that range. Each
/// port is handed out once per test process, starting from a place of the
/// process's own.
pub fn free_addr() -> SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&low| low > 12_000)
        .unwrap_or(32_768);
    let (base, span) = (low - 12_000, 12_000);
    let first = (u64::from(std::process::id()) * 7_919 % u64::from(span)) as u32;
    for _ in 0..span {
        let port = base + (first + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let addr = SocketAddr::from(([127, 0, 0, 1], port as u16));
        if std::net::TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
    panic!("no free loopback port in {base}..{}", base + span)
}

/// The child's standard error (piped), line by line as it comes, read by
/// a thread of its own so that a test can wait for a line with a timeout.
pub fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Polls `check` every 50 ms until it holds, for at most 10 s (`what`
/// names it in the failure).
pub async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
