//! The proxy as production runs it: bind every listener, serve on the
//! worker threads, and obey control events until a drain completes.
//!
//! [`Runner::bind`] binds the plain and TLS listeners once per worker
//! (`SO_REUSEPORT`), so a bind error is reported before anything serves
//! and the bound addresses (port 0 resolved) are known. [`Runner::run`]
//! starts the workers and then waits for [`Control`] events: a reload
//! reads config, rules and certificates again and reports the outcome;
//! a drain stops accepting and returns once the connections have finished
//! (within `proxy.shutdown_grace`); an exit returns at once.
//!
//! `main` only maps signals to these events and picks the exit code; the
//! tests and `crawlgate demo` send them directly, over the same code.
//!
//! Under systemd (`NOTIFY_SOCKET` set) it reports `READY=1` once every
//! listener is bound, `RELOADING=1` then `READY=1` around a reload with
//! the outcome in `STATUS=`, and `STOPPING=1` when a drain starts.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use sd_notify::NotifyState;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_rustls::TlsAcceptor;

use crate::config::Mode;
use crate::live::{Live, LoadError, Reloaded};
use crate::server::WorkerSockets;
use crate::state::Process;
use crate::tls::{certificate_notes, CertStore, TlsError};

/// What the process is told to do.
#[derive(Debug)]
pub enum Control {
    /// Load config, rules and certificates again and swap them in if all
    /// of it is valid. The outcome is logged, and sent to the reply when
    /// there is one.
    Reload(Option<oneshot::Sender<Result<Reloaded, LoadError>>>),
    /// Stop accepting, let the requests in flight finish (at most
    /// `proxy.shutdown_grace`), then return [`Stopped::Drained`].
    Drain,
    /// Return [`Stopped::Exited`] at once, without draining: the caller
    /// ends the process.
    Exit,
    /// Open the access-log file again by name (after logrotate moved it).
    ReopenLogs,
}

/// How [`Runner::run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// A drain completed: every connection finished or was closed at the
    /// end of the grace period.
    Drained,
    /// An exit was asked for; connections may still be open.
    Exited,
}

/// The addresses actually bound.
#[derive(Clone, Copy, Debug)]
pub struct Addrs {
    /// Plain HTTP.
    pub plain: SocketAddr,
    /// HTTPS, when configured.
    pub tls: Option<SocketAddr>,
    /// The admin listener, when configured.
    pub admin: Option<SocketAddr>,
}

/// Why the listeners could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// An address is taken or not ours to bind.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The underlying failure.
        #[source]
        source: io::Error,
    },
    /// The TLS listener's settings were refused.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// The listeners, bound, with the state they will serve.
pub struct Runner {
    live: Arc<Live>,
    sockets: Vec<WorkerSockets>,
    admin: Option<std::net::TcpListener>,
    addrs: Addrs,
    max_connections: usize,
}

impl Runner {
    /// Binds every listener of the running config, once per worker.
    pub fn bind(live: Arc<Live>) -> Result<Self, BindError> {
        let restart = live.config().restart;
        let workers = restart.workers;
        let bind = |addr: SocketAddr| {
            crate::server::bind_reuseport(addr, workers)
                .map_err(|source| BindError::Listen { addr, source })
        };
        let plain = bind(restart.listen)?;
        let tls: Vec<Option<(std::net::TcpListener, TlsAcceptor)>> =
            match (restart.tls_listen, &live.certs) {
                (Some(addr), Some(certs)) => {
                    let config = crate::tls::server_config(Arc::clone(certs), restart.tls_http2)?;
                    let acceptor = TlsAcceptor::from(Arc::new(config));
                    bind(addr)?
                        .into_iter()
                        .map(|l| Some((l, acceptor.clone())))
                        .collect()
                }
                _ => std::iter::repeat_with(|| None).take(plain.len()).collect(),
            };
        let admin = match restart.admin_listen {
            Some(addr) => {
                let listener = std::net::TcpListener::bind(addr)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(|source| BindError::Listen { addr, source })?;
                Some(listener)
            }
            None => None,
        };
        let local = |l: &std::net::TcpListener, configured: SocketAddr| {
            l.local_addr().unwrap_or(configured)
        };
        let addrs = Addrs {
            plain: local(&plain[0], restart.listen),
            tls: restart
                .tls_listen
                .zip(tls[0].as_ref())
                .map(|(addr, (l, _))| local(l, addr)),
            admin: restart
                .admin_listen
                .zip(admin.as_ref())
                .map(|(addr, l)| local(l, addr)),
        };
        let sockets = plain
            .into_iter()
            .zip(tls)
            .map(|(plain, tls)| WorkerSockets { plain, tls })
            .collect();
        Ok(Self {
            live,
            sockets,
            admin,
            addrs,
            max_connections: restart.max_connections,
        })
    }

    /// The addresses bound.
    pub fn addrs(&self) -> Addrs {
        self.addrs
    }

    /// Serves until a [`Control::Drain`] has completed or a
    /// [`Control::Exit`] arrives. A closed `control` channel drains.
    pub async fn run(self, control: mpsc::Receiver<Control>) -> io::Result<Stopped> {
        let process = Arc::clone(&self.live.process);
        let stopped = self.serve(Workers::Threads, control).await;
        flush_log(&process).await;
        stopped
    }

    /// [`Runner::run`] with every worker served as a task on the current
    /// runtime instead of on a thread of its own
    /// ([`crate::server::serve_workers_here`]): what tests use to run
    /// crawlgate under a paused clock
    /// (`#[tokio::test(start_paused = true)]`), which then governs every
    /// timer of the process, the connections' timeouts included.
    pub async fn run_here(self, control: mpsc::Receiver<Control>) -> io::Result<Stopped> {
        let process = Arc::clone(&self.live.process);
        let stopped = self.serve(Workers::Here, control).await;
        flush_log(&process).await;
        stopped
    }

    async fn serve(
        self,
        workers: Workers,
        mut control: mpsc::Receiver<Control>,
    ) -> io::Result<Stopped> {
        let Runner {
            live,
            sockets,
            admin,
            addrs,
            max_connections,
        } = self;
        log_start(&live, addrs);
        let process = Arc::clone(&live.process);
        // Served on this thread, apart from the workers; ends with `run`.
        let _admin = match admin {
            Some(listener) => {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                Some(AbortOnDrop(tokio::spawn(crate::admin::serve(
                    listener,
                    Arc::clone(&live),
                ))))
            }
            None => None,
        };
        // The crawler range lists are kept fresh on this thread, apart
        // from the workers; the task ends with `run`.
        let _ranges = AbortOnDrop(tokio::spawn(Arc::clone(&process.ranges).run()));
        // Shedding's clock, on this thread too: the level follows the load
        // when no request comes along (an idle site ends its shedding).
        let _shed_clock = AbortOnDrop(tokio::spawn(shed_clock(Arc::clone(&live))));
        let (stop_tx, stop_rx) = watch::channel(false);
        let slots = live.workers.clone();
        let served = match workers {
            Workers::Threads => tokio::task::spawn_blocking(move || {
                crate::server::run_workers(sockets, slots, max_connections, stop_rx)
            }),
            Workers::Here => tokio::spawn(crate::server::serve_workers_here(
                sockets,
                slots,
                max_connections,
                stop_rx,
            )),
        };
        tokio::pin!(served);
        process.health.set_serving();
        let status = format!("serving on {}", addrs.plain);
        notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
        let workers_ended = |joined: Result<io::Result<()>, tokio::task::JoinError>| {
            joined.map_err(|_| io::Error::other("the workers' supervisor panicked"))?
        };
        loop {
            tokio::select! {
                joined = &mut served => {
                    workers_ended(joined)?;
                    return Ok(Stopped::Drained);
                }
                event = control.recv() => match event {
                    Some(Control::Reload(reply)) => {
                        // Reading files and compiling the rules blocks: off
                        // this thread's event loop.
                        let live = Arc::clone(&live);
                        notify_reloading();
                        let outcome = tokio::task::spawn_blocking(move || {
                            let outcome = live.reload();
                            report_reload(&live, &outcome);
                            let status = match &outcome {
                                Ok(_) => format!("reloaded at {}", crate::clock::unix_now()),
                                Err(err) => format!("reload failed, previous config serving: {err}"),
                            };
                            notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
                            outcome
                        })
                        .await;
                        if let (Ok(outcome), Some(reply)) = (outcome, reply) {
                            let _ = reply.send(outcome);
                        }
                    }
                    Some(Control::ReopenLogs) => process.reopen_log(),
                    Some(Control::Drain) | None => break,
                    Some(Control::Exit) => return Ok(Stopped::Exited),
                },
            }
        }
        tracing::info!("draining connections; a second shutdown signal exits at once");
        process.health.set_draining();
        notify(&[NotifyState::Stopping, NotifyState::Status("draining")]);
        let _ = stop_tx.send(true);
        loop {
            tokio::select! {
                joined = &mut served => {
                    workers_ended(joined)?;
                    tracing::info!("stopped");
                    return Ok(Stopped::Drained);
                }
                event = control.recv() => match event {
                    Some(Control::Exit) => return Ok(Stopped::Exited),
                    Some(Control::Reload(_)) => {
                        tracing::info!("reload ignored: draining");
                    }
                    Some(Control::ReopenLogs) => process.reopen_log(),
                    Some(Control::Drain) => {}
                    // Nobody can ask for an exit any more: wait for the drain.
                    None => {
                        workers_ended((&mut served).await)?;
                        return Ok(Stopped::Drained);
                    }
                },
            }
        }
    }
}

/// How long a stopping process waits for its access log's last lines.
const LOG_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Writes the access-log lines still queued (the writer gathers them for
/// [`crate::access_log::BATCH`]) before the process goes: the requests
/// answered just before a stop keep their lines.
async fn flush_log(process: &Arc<Process>) {
    let process = Arc::clone(process);
    let flushed = tokio::task::spawn_blocking(move || {
        process
            .access_log()
            .is_none_or(|log| log.flush_wait(LOG_FLUSH_WAIT))
    })
    .await;
    if !matches!(flushed, Ok(true)) {
        tracing::warn!("the access log's last lines may not all be written");
    }
}

/// Where the workers run.
enum Workers {
    /// One thread each, with its own event loop.
    Threads,
    /// Tasks on the runtime that runs the [`Runner`].
    Here,
}

/// The start-up log line: the addresses actually bound (port 0 resolved),
/// the upstream, the rules, the certificates.
fn log_start(live: &Live, addrs: Addrs) {
    let config = live.config();
    let shared = live.current.load();
    let rules = shared
        .rules_source
        .as_deref()
        .map_or_else(|| "built-in".to_owned(), |p| p.display().to_string());
    let upstream = &config.upstream;
    tracing::info!(
        listen = %addrs.plain,
        tls_listen = addrs.tls.map(tracing::field::display),
        certificates = live.certs.as_ref().map(|c| c.current().loaded.len()),
        upstream = %format_args!("{}://{}", upstream.scheme, upstream.authority),
        rules = %rules,
        workers = config.restart.workers,
        "crawlgate started",
    );
    log_mode(config.mode);
    if let Some(certs) = &live.certs {
        log_certificates(&certs.current());
        certificate_metrics(live, &certs.current());
    }
    match &config.verify {
        Some(verify) => {
            let lists = live.process.ranges.status(std::time::SystemTime::now());
            // Copies read from state_dir only: a local file is not one.
            let saved = live.process.ranges.saved_copies();
            tracing::info!(
                lists = lists.len(),
                from_saved_copies = saved,
                dns = verify.dns,
                signatures = verify.signatures,
                spoofed = if verify.spoofed == crate::config::Spoofed::Block {
                    "block"
                } else {
                    "log"
                },
                "crawler verification on; range lists are fetched in the background",
            );
        }
        None => tracing::info!("crawler verification off"),
    }
}

/// The expiry time of every name served, as metrics.
fn certificate_metrics(live: &Live, store: &CertStore) {
    let served = store
        .loaded
        .iter()
        .flat_map(|cert| cert.names.iter().map(|name| (&**name, cert.not_after)));
    live.process.metrics.certificates(served);
}

/// The line saying what is done with decisions, at start and each reload.
fn log_mode(mode: Mode) {
    match mode {
        Mode::Enforce => tracing::info!("mode: enforce — decisions are carried out"),
        Mode::Observe => tracing::info!("mode: observe — decisions are logged, not carried out"),
    }
}

/// Tells systemd (`Type=notify`, `NOTIFY_SOCKET`) where the process is;
/// nothing without `NOTIFY_SOCKET`.
fn notify(states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(states) {
        tracing::warn!(error = %err, "cannot notify systemd");
    }
}

/// `RELOADING=1` with the clock systemd 253 and later require beside it.
fn notify_reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// Steps the shedding level every [`crate::shed::CHECK_EVERY`] with the
/// state in effect (a reload may turn shedding on or off).
async fn shed_clock(live: Arc<Live>) {
    let mut tick = tokio::time::interval(crate::shed::CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        crate::service::tick_shedding(&live.current.load());
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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

fn report_reload(live: &Live, outcome: &Result<Reloaded, LoadError>) {
    live.process.metrics.reloaded(outcome.is_ok());
    match outcome {
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
            log_mode(live.current.load().mode);
            if let Some(certs) = &live.certs {
                log_certificates(&certs.current());
                certificate_metrics(live, &certs.current());
            }
        }
        Err(err) => tracing::error!(
            error = %err,
            "reload failed; the previous configuration keeps serving",
        ),
    }
}
