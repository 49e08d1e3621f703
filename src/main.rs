//! The `crawlgate` command: flags → config → server, and the exit code.

use std::io::{self, BufReader, IsTerminal};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use crawlgate::classify::{classify_lines, Classifier};
use crawlgate::config::Overrides;
use crawlgate::live::Live;
use crawlgate::rules::RuleLists;
use crawlgate::server::WorkerSockets;
use crawlgate::tls::{CertStore, EXPIRY_WARNING_DAYS};
use tokio_rustls::TlsAcceptor;

/// Exit code for a bad configuration (EX_USAGE), before anything is bound.
const EXIT_CONFIG: u8 = 64;
/// Exit code when a second shutdown signal cuts the drain short.
const EXIT_INTERRUPTED: i32 = 130;

/// crawlgate: an edge reverse proxy that keeps robots off action links,
/// sends one canonical 301 for duplicate addresses, synthesizes robots.txt
/// and forwards everything else to the site, streaming.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args)]
struct RunArgs {
    /// Address to listen on for plain HTTP [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR", value_parser = socket_addr)]
    listen: Option<String>,
    /// The site to forward to, http://host:port [default: http://127.0.0.1:8000]
    #[arg(long, value_name = "URL", value_parser = upstream_url)]
    upstream: Option<String>,
    /// TOML config file (see deploy/crawlgate.toml); flags override it
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Folder holding sitemap.xml; robots.txt advertises it while it exists
    #[arg(long, value_name = "DIR")]
    sitemap_dir: Option<PathBuf>,
    /// Folder of *.txt User-Agent token lists replacing the built-in rules
    #[arg(long, value_name = "DIR")]
    rules: Option<PathBuf>,
    /// Address to listen on for HTTPS, e.g. 0.0.0.0:443 [default: none]
    #[arg(long, value_name = "ADDR", value_parser = socket_addr)]
    tls_listen: Option<String>,
    /// Certificate folder for HTTPS (see certs/README.md) [default: certs]
    #[arg(long, value_name = "DIR")]
    certs: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy in front of a built-in sample site and print curl commands to try
    Demo {
        /// Address for the demo proxy [default: 127.0.0.1:8080, or a free port]
        #[arg(long, value_name = "ADDR")]
        listen: Option<SocketAddr>,
    },
    /// Read User-Agents (one per line) on stdin; print `bot` or `human` for each
    Classify {
        /// Also print the rule that decided, after a tab
        #[arg(long)]
        explain: bool,
        /// Folder of token lists replacing the built-in rules
        #[arg(long, value_name = "DIR")]
        rules: Option<PathBuf>,
    },
    /// Validate a config file; exit non-zero with a message naming the key
    CheckConfig {
        /// The TOML file
        file: PathBuf,
    },
}

/// A flag value that must be an address: a bad one is a bad flag (exit 2).
fn socket_addr(value: &str) -> Result<String, String> {
    value
        .parse::<SocketAddr>()
        .map(|_| value.to_owned())
        .map_err(|_| format!("{value:?} is not an address like 127.0.0.1:8080"))
}

/// A flag value that must be an upstream URL.
fn upstream_url(value: &str) -> Result<String, String> {
    crawlgate::config::parse_upstream(value)
        .map(|_| value.to_owned())
        .map_err(|err| err.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => run_proxy(cli.run),
        Some(Command::Demo { listen }) => run_demo(listen),
        Some(Command::Classify { explain, rules }) => classify(explain, rules),
        Some(Command::CheckConfig { file }) => check_config(&file),
    }
}

fn run_proxy(args: RunArgs) -> ExitCode {
    init_tracing();
    let overrides = Overrides {
        listen: args.listen,
        upstream: args.upstream,
        sitemap_dir: args.sitemap_dir,
        rules_dir: args.rules,
        tls_listen: args.tls_listen,
        certs_dir: args.certs,
    };
    let live = match Live::start(args.config, overrides) {
        Ok(live) => Arc::new(live),
        Err(err) => {
            eprintln!("crawlgate: error: {err}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let config = live.config();
    // This thread only handles signals and reloads; the workers run their
    // own event loops.
    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime");
    let result = control.and_then(|rt| {
        rt.block_on(async {
            // Handlers first, so that no signal meets the default action
            // once anything is bound.
            let signals = Signals::install()?;
            let restart = &config.restart;
            let workers = restart.workers;
            let plain = bind(restart.listen, workers)?;
            let tls: Vec<Option<TlsSocket>> = match (restart.tls_listen, &live.certs) {
                (Some(tls_listen), Some(certs)) => {
                    let server =
                        crawlgate::tls::server_config(Arc::clone(certs), restart.tls_http2)?;
                    let acceptor = TlsAcceptor::from(Arc::new(server));
                    bind(tls_listen, workers)?
                        .into_iter()
                        .map(|l| Some((l, acceptor.clone())))
                        .collect()
                }
                _ => std::iter::repeat_with(|| None).take(workers).collect(),
            };
            let sockets: Vec<WorkerSockets> = plain
                .into_iter()
                .zip(tls)
                .map(|(plain, tls)| WorkerSockets { plain, tls })
                .collect();
            let bound = sockets.first().map(|s| {
                let addr = |l: &std::net::TcpListener| l.local_addr().ok();
                (addr(&s.plain), s.tls.as_ref().and_then(|(l, _)| addr(l)))
            });
            log_start(&config, &live, bound.unwrap_or_default());
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            let cells = live.shared.clone();
            let max_connections = restart.max_connections;
            let served = tokio::task::spawn_blocking(move || {
                crawlgate::server::run_workers(sockets, cells, max_connections, stop_rx)
            });
            tokio::select! {
                served = served => served.context("the workers' supervisor failed")??,
                () = signals.run(&live, stop_tx) => {}
            }
            tracing::info!("stopped");
            Ok(())
        })
    });
    finish(result)
}

/// A worker's HTTPS socket and the acceptor holding the certificates.
type TlsSocket = (std::net::TcpListener, TlsAcceptor);

/// The start-up log line: the addresses actually bound (port 0 resolved),
/// the upstream, the rules, the certificates.
fn log_start(
    config: &crawlgate::config::Config,
    live: &Live,
    (listen, tls_listen): (Option<SocketAddr>, Option<SocketAddr>),
) {
    let shared = live.shared[0].load();
    let rules = shared
        .rules_source
        .as_deref()
        .map_or_else(|| "built-in".to_owned(), |p| p.display().to_string());
    let upstream = &config.upstream;
    tracing::info!(
        listen = %listen.unwrap_or(config.restart.listen),
        tls_listen = tls_listen.map(tracing::field::display),
        certificates = live.certs.as_ref().map(|c| c.current().loaded.len()),
        upstream = %format_args!("{}://{}", upstream.scheme, upstream.authority),
        rules = %rules,
        workers = config.restart.workers,
        "crawlgate started",
    );
    if let Some(certs) = &live.certs {
        log_certificates(&certs.current());
    }
}

/// Binds `addr` once per worker.
fn bind(addr: SocketAddr, workers: usize) -> anyhow::Result<Vec<std::net::TcpListener>> {
    crawlgate::server::bind_reuseport(addr, workers)
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Logs what [`certificate_notes`] says, warnings at `warn`.
fn log_certificates(store: &CertStore) {
    for (warning, line) in certificate_notes(store) {
        if warning {
            tracing::warn!("{line}");
        } else {
            tracing::info!("{line}");
        }
    }
}

/// What an operator needs to know of the certificates, the same at
/// start-up, on reload and from `check-config`: each one served, with its
/// names and expiry date; a warning for each that expires within
/// [`EXPIRY_WARNING_DAYS`] and for each pair skipped; (is a warning, line).
fn certificate_notes(store: &CertStore) -> Vec<(bool, String)> {
    let now = crawlgate::tls::unix_now();
    let mut notes = Vec::with_capacity(store.loaded.len() + store.skipped.len());
    for cert in &store.loaded {
        let days = cert.days_left(now);
        let soon = days < EXPIRY_WARNING_DAYS;
        let when = if soon {
            format!("expires {} (in {days} days: renew it)", cert.expires)
        } else {
            format!("expires {}", cert.expires)
        };
        notes.push((
            soon,
            format!(
                "certificate {}: serves {}, {when}",
                cert.path.display(),
                cert.names.join(" ")
            ),
        ));
    }
    for skipped in &store.skipped {
        notes.push((true, format!("certificate skipped: {skipped}")));
    }
    if let Some(warning) = &store.default_warning {
        notes.push((true, warning.clone()));
    }
    notes
}

fn run_demo(listen: Option<SocketAddr>) -> ExitCode {
    init_tracing();
    let result = runtime().and_then(|rt| {
        // The hints call the binary that is running, wherever it is.
        let program = std::env::current_exe()
            .map(|p| crawlgate::demo::shell_quote(&p.display().to_string()))
            .unwrap_or_else(|_| "crawlgate".to_owned());
        rt.block_on(crawlgate::demo::run(listen, &program, shutdown_signal()))
            .map_err(anyhow::Error::from)
    });
    finish(result)
}

fn classify(explain: bool, rules: Option<PathBuf>) -> ExitCode {
    let lists = match rules {
        Some(dir) => RuleLists::from_dir(&dir),
        None => Ok(RuleLists::embedded()),
    };
    let classifier = match lists.and_then(|l| Classifier::new(&l)) {
        Ok(c) => c,
        Err(err) => {
            eprintln!("crawlgate: error: {err}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let mut input = BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut output = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    match classify_lines(&classifier, explain, &mut input, &mut output) {
        Ok(_) => ExitCode::SUCCESS,
        // `crawlgate classify | head` is fine.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("crawlgate: error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn check_config(file: &std::path::Path) -> ExitCode {
    match crawlgate::live::load(Some(file), &Overrides::default()) {
        Ok(loaded) => {
            let config = loaded.config;
            let tls = config
                .restart
                .tls_listen
                .map(|listen| {
                    let n = loaded.certs.as_ref().map_or(0, |c| c.loaded.len());
                    let plural = if n == 1 { "" } else { "s" };
                    format!(", tls {listen} with {n} certificate{plural}")
                })
                .unwrap_or_default();
            println!(
                "{}: ok (listen {}{tls}, upstream {}://{})",
                file.display(),
                config.restart.listen,
                config.upstream.scheme,
                config.upstream.authority
            );
            for (warning, line) in loaded
                .certs
                .as_ref()
                .map(certificate_notes)
                .unwrap_or_default()
            {
                let mark = if warning { "warning: " } else { "" };
                println!("  {mark}{line}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("crawlgate: error: {err}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("crawlgate: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

/// Logs to stderr, filtered by `RUST_LOG`; an unusable `RUST_LOG` is
/// warned about and replaced by `info`, never left to silence every line.
fn init_tracing() {
    let value = std::env::var("RUST_LOG").ok();
    let (filter, warning) = crawlgate::logging::filter(value.as_deref());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(io::stderr)
        .init();
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
}

/// The proxy's signals: SIGHUP reloads; the first SIGTERM or SIGINT starts
/// the graceful shutdown; a second one exits at once. SIGUSR1 and SIGUSR2
/// are caught and logged, so that a logrotate script sending them cannot
/// kill the process (their default action).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let install = |kind: SignalKind| signal(kind).context("cannot install a signal handler");
        Ok(Self {
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
            hup: install(SignalKind::hangup())?,
            usr1: install(SignalKind::user_defined1())?,
            usr2: install(SignalKind::user_defined2())?,
        })
    }

    /// Handles signals until the second shutdown signal, which exits the
    /// process; the first one sets `stop`.
    async fn run(mut self, live: &Arc<Live>, stop: tokio::sync::watch::Sender<bool>) {
        loop {
            tokio::select! {
                _ = self.term.recv() => break,
                _ = self.int.recv() => break,
                _ = self.hup.recv() => {
                    // Reading files and compiling the rules blocks: off
                    // this thread's event loop.
                    let live = Arc::clone(live);
                    let _ = tokio::task::spawn_blocking(move || reload(&live)).await;
                }
                _ = self.usr1.recv() => ignored("SIGUSR1"),
                _ = self.usr2.recv() => ignored("SIGUSR2"),
            }
        }
        tracing::info!(
            "shutdown signal received: draining connections; a second signal exits at once"
        );
        let _ = stop.send(true);
        loop {
            tokio::select! {
                _ = self.term.recv() => break,
                _ = self.int.recv() => break,
                _ = self.usr1.recv() => ignored("SIGUSR1"),
                _ = self.usr2.recv() => ignored("SIGUSR2"),
            }
        }
        tracing::warn!("second shutdown signal: exiting without draining");
        std::process::exit(EXIT_INTERRUPTED);
    }
}

/// A signal with no meaning yet (logs go to stderr, so there is no log
/// file to reopen): logged, never fatal.
fn ignored(signal: &str) {
    tracing::info!(
        signal,
        "signal ignored: crawlgate has no log file to reopen (logs go to stderr)"
    );
}

fn reload(live: &Live) {
    match live.reload() {
        Ok(done) => {
            for (key, running, wanted) in &done.restart_needed {
                tracing::warn!(
                    key,
                    running = %running,
                    config = %wanted,
                    "reload: this setting changed but needs a restart; still using the running value",
                );
            }
            tracing::info!(
                certificates = done.certificates,
                "reload: new config, rules and certificates in effect",
            );
            if let Some(certs) = &live.certs {
                log_certificates(&certs.current());
            }
        }
        Err(err) => tracing::error!(
            error = %err,
            "reload failed; the previous configuration keeps serving",
        ),
    }
}

/// Completes on SIGTERM or SIGINT (Ctrl-C): the demo's shutdown.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("shutdown signal received");
}
