//! The `crawlgate` command: parse the command line, hand it to the
//! subcommand (`crawlgate::cli`), map signals to control events and the
//! outcome to the exit code.

use std::process::ExitCode;

use clap::Parser;
use crawlgate::cli::{self, Cli, Command, Failure};
use crawlgate::run::Control;

/// mimalloc instead of the system's malloc, in a build with `--features
/// mimalloc` (see bench/README.md §8 for what it changes).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        None => cli::run::proxy(cli.run, |events| Ok(Signals::install()?.run(events))),
        Some(Command::Demo { listen }) => cli::demo::run(listen, shutdown_signal()),
        Some(Command::Classify { explain, rules }) => cli::classify::run(explain, rules.as_deref()),
        Some(Command::CheckConfig { file }) => cli::check_config::run(&file),
        Some(Command::Health {
            config,
            addr,
            path,
            timeout,
        }) => cli::health::run(config.as_deref(), addr.as_deref(), &path, timeout),
        Some(Command::Report(args)) => cli::report::run(args),
        Some(Command::Sitemap(command)) => cli::sitemap::run(command),
        Some(Command::Man { out }) => cli::man::run(&out),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure { code, message }) => {
            if let Some(message) = message {
                eprintln!("crawlgate: error: {message}");
            }
            ExitCode::from(code)
        }
    }
}

/// The proxy's signals, as [`Control`] events: SIGHUP reloads; the first
/// SIGTERM or SIGINT drains; a second one exits at once; SIGUSR1 reopens
/// the access log (logrotate's convention). SIGUSR2 is caught and logged,
/// so that a script sending it cannot kill the process (its default
/// action).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
        })
    }

    /// Sends the events the signals mean, for as long as the server takes
    /// them.
    async fn run(mut self, events: tokio::sync::mpsc::Sender<Control>) {
        let mut stopping = false;
        loop {
            let event = tokio::select! {
                _ = self.term.recv() => stop(&mut stopping),
                _ = self.int.recv() => stop(&mut stopping),
                _ = self.hup.recv() => Control::Reload(None),
                _ = self.usr1.recv() => Control::ReopenLogs,
                _ = self.usr2.recv() => {
                    ignored("SIGUSR2");
                    continue;
                }
            };
            if events.send(event).await.is_err() {
                // The server has returned; main is finishing.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The first shutdown signal drains, the next one exits.
fn stop(stopping: &mut bool) -> Control {
    if std::mem::replace(stopping, true) {
        Control::Exit
    } else {
        tracing::info!("shutdown signal received");
        Control::Drain
    }
}

/// A signal with no meaning: logged, never fatal.
fn ignored(signal: &str) {
    tracing::info!(signal, "signal ignored: it has no meaning to crawlgate");
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
