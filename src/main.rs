//! The `crawlgate` command: flags → config → server, and the exit code.

use std::io::{self, BufReader, IsTerminal};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use crawlgate::classify::{classify_lines, Classifier};
use crawlgate::cli::{Cli, Command, ExportFormat, RunArgs, SitemapCommand};
use crawlgate::config::Overrides;
use crawlgate::live::Live;
use crawlgate::rules::RuleLists;
use crawlgate::run::{Control, Runner, Stopped};
use crawlgate::tls::certificate_notes;

/// Exit code for a bad configuration (EX_USAGE), before anything is bound.
const EXIT_CONFIG: u8 = 64;
/// Exit code when a second shutdown signal cuts the drain short.
const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => run_proxy(cli.run),
        Some(Command::Demo { listen }) => run_demo(listen),
        Some(Command::Classify { explain, rules }) => classify(explain, rules),
        Some(Command::CheckConfig { file }) => check_config(&file),
        Some(Command::Sitemap(command)) => sitemap(command),
    }
}

fn run_proxy(args: RunArgs) -> ExitCode {
    let _log = init_tracing();
    let overrides = Overrides {
        default_state_dir: systemd_state_dir(),
        ..args.overrides
    };
    let live = match Live::start(args.config, overrides) {
        Ok(live) => Arc::new(live),
        Err(err) => return fail(EXIT_CONFIG, &Causes(&err)),
    };
    // This thread only turns signals into control events; the workers run
    // their own event loops.
    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime");
    let result = control.and_then(|rt| {
        let stopped = rt.block_on(async {
            // Handlers first, so that no signal meets the default action
            // once anything is bound.
            let signals = Signals::install()?;
            let server = Runner::bind(live)?;
            let (events, control) = tokio::sync::mpsc::channel(4);
            tokio::select! {
                stopped = server.run(control) => Ok(stopped?),
                () = signals.run(events) => Ok(Stopped::Exited),
            }
        });
        // Without waiting for the worker threads: after an exit they may
        // still hold connections.
        rt.shutdown_background();
        stopped
    });
    match result {
        Ok(Stopped::Drained) => ExitCode::SUCCESS,
        Ok(Stopped::Exited) => {
            tracing::warn!("second shutdown signal: exiting without draining");
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Err(err) => finish(Err(err)),
    }
}

fn run_demo(listen: Option<SocketAddr>) -> ExitCode {
    let _log = init_tracing();
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
        Err(err) => return fail(EXIT_CONFIG, &Causes(&err)),
    };
    let mut input = BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut output = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    match classify_lines(&classifier, explain, &mut input, &mut output) {
        Ok(_) => ExitCode::SUCCESS,
        // `crawlgate classify | head` is fine.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => fail(1, &Causes(&err)),
    }
}

/// `verify.state_dir` when the file sets none: systemd's `StateDirectory=`
/// (`$STATE_DIRECTORY`, the first folder when it names several) with
/// `verify` below it; outside systemd, none (the lists are kept in
/// memory).
fn systemd_state_dir() -> Option<PathBuf> {
    let dirs = std::env::var_os("STATE_DIRECTORY")?;
    let first = std::env::split_paths(&dirs).next()?;
    first.is_absolute().then(|| first.join("verify"))
}

/// The checks of a start without its side effects: `crawlgate::live::load`
/// is what `Live::start` runs before it creates the state folder and opens
/// the access log, so what passes here starts (ports aside).
fn check_config(file: &std::path::Path) -> ExitCode {
    let process = Arc::new(crawlgate::state::Process::new());
    let overrides = Overrides {
        default_state_dir: systemd_state_dir(),
        ..Overrides::default()
    };
    match crawlgate::live::load(Some(file), &overrides, &process, true) {
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
        Err(err) => fail(EXIT_CONFIG, &Causes(&err)),
    }
}

/// Exit code for input data that cannot be used (EX_DATAERR).
const EXIT_DATA: u8 = 65;
/// Exit code when another build of the same set is running: try again
/// later (EX_TEMPFAIL).
const EXIT_BUSY: u8 = 75;

fn sitemap(command: SitemapCommand) -> ExitCode {
    use crawlgate::sitemap::build::{self, BuildError, Options, Target};
    use crawlgate::sitemap::{index, SetError, SetWriter};
    match command {
        SitemapCommand::Build {
            dir,
            base_url,
            prefix,
            languages,
            input,
            utc_offset,
            dry_run,
            allow_empty,
            allow_other_hosts,
            quiet,
        } => {
            let options = Options::new(
                &base_url,
                &prefix,
                languages.as_deref(),
                utc_offset.as_deref(),
            );
            let mut options = match options {
                Ok(options) => options,
                Err(err) => return fail(EXIT_CONFIG, &err),
            };
            options.allow_empty = allow_empty;
            options.allow_other_hosts = allow_other_hosts;
            let target = if dry_run {
                SetWriter::check(&dir, &options.prefix).map(|()| Target::DryRun(&dir))
            } else {
                SetWriter::new(&dir, &options.prefix).map(Target::Write)
            };
            let target = match target {
                Ok(target) => target,
                Err(err @ SetError::Busy { .. }) => return fail(EXIT_BUSY, &err),
                Err(err) => return fail(EXIT_CONFIG, &err),
            };
            let (name, mut reader): (String, Box<dyn io::BufRead>) = match &input {
                None => ("stdin".to_owned(), Box::new(io::stdin().lock())),
                Some(path) => match std::fs::File::open(path) {
                    Ok(f) => (
                        path.display().to_string(),
                        Box::new(BufReader::with_capacity(256 * 1024, f)),
                    ),
                    Err(err) => return fail(EXIT_CONFIG, &format!("{}: {err}", path.display())),
                },
            };
            match build::build(&options, &name, &mut reader, target) {
                Ok(report) if dry_run => {
                    let mut out = io::stdout().lock();
                    match build::write_json(&report, &mut out) {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(err) => fail(1, &err),
                    }
                }
                Ok(report) => {
                    if !quiet {
                        let n = report.files.len();
                        let mut line = format!(
                            "{}: {n} file{}, {} URLs from {} entries",
                            dir.display(),
                            if n == 1 { "" } else { "s" },
                            report.urls,
                            report.entries
                        );
                        if !report.unchanged.is_empty() {
                            line.push_str(&format!(", {} unchanged", report.unchanged.len()));
                        }
                        if report.skipped > 0 {
                            line.push_str(&format!(", {} skipped (no address)", report.skipped));
                        }
                        if !report.removed.is_empty() {
                            line.push_str(&format!("; removed {}", report.removed.join(" ")));
                        }
                        println!("{line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(err @ (BuildError::Line { .. } | BuildError::Empty { .. })) => {
                    fail(EXIT_DATA, &err)
                }
                Err(err) => fail(1, &err),
            }
        }
        SitemapCommand::Index {
            dir,
            base_url,
            files_url,
            prefix,
            quiet,
        } => {
            let files = match index::files_base(&base_url, files_url.as_deref()) {
                Ok(files) => files,
                Err(err) => return fail(EXIT_CONFIG, &err),
            };
            let mut prefixes = vec!["sitemap".to_owned()];
            prefixes.extend(prefix.into_iter().filter(|p| p != "sitemap"));
            match index::write_index(&dir, &files, &prefixes) {
                Ok(report) => {
                    for name in &report.skipped {
                        eprintln!(
                            "crawlgate: warning: {name}: not a urlset, left out of the index"
                        );
                    }
                    if !quiet {
                        let state = if report.unchanged { " (unchanged)" } else { "" };
                        let n = report.listed.len();
                        println!(
                            "{}: lists {n} file{}{state}",
                            dir.join(crawlgate::sitemap::INDEX_NAME).display(),
                            if n == 1 { "" } else { "s" },
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(err @ (index::IndexError::Url { .. } | index::IndexError::Prefix(_))) => {
                    fail(EXIT_CONFIG, &err)
                }
                Err(err @ (index::IndexError::Empty { .. } | index::IndexError::TooMany(..))) => {
                    fail(EXIT_DATA, &err)
                }
                Err(err) => fail(1, &err),
            }
        }
        SitemapCommand::FromDir {
            public_dir,
            origin,
            format,
            out,
            quiet,
        } => sitemap_from_dir(&public_dir, &origin, format, out.as_deref(), quiet),
    }
}

fn sitemap_from_dir(
    public_dir: &std::path::Path,
    origin: &str,
    format: Option<ExportFormat>,
    out: Option<&std::path::Path>,
    quiet: bool,
) -> ExitCode {
    use crawlgate::sitemap::export::{self, ExportError, Format};
    let origin = match export::parse_origin(origin) {
        Ok(origin) => origin,
        Err(err) => return fail(EXIT_CONFIG, &err),
    };
    let format = format.map(|format| match format {
        ExportFormat::Xml => Format::Xml,
        ExportFormat::Txt => Format::Txt,
    });
    let format = match Format::choose(format, out) {
        Ok(format) => format,
        Err(err) => return fail(EXIT_CONFIG, &err),
    };
    let written = export::page_urls(public_dir, &origin)
        .and_then(|urls| export::write(&urls, format, out, public_dir, &origin));
    match written {
        Ok(written) => {
            if let (Some(out), false) = (out, quiet) {
                let parts = written.files.len().saturating_sub(1);
                let split = if parts > 0 {
                    format!(" (an index of {parts} files)")
                } else {
                    String::new()
                };
                println!("{}: {} URLs{split}", out.display(), written.urls);
            }
            ExitCode::SUCCESS
        }
        Err(err @ (ExportError::Empty(_) | ExportError::TooBig { .. })) => fail(EXIT_DATA, &err),
        Err(err @ ExportError::Out(..)) => fail(EXIT_CONFIG, &err),
        Err(err @ ExportError::Set(crawlgate::sitemap::SetError::Busy { .. })) => {
            fail(EXIT_BUSY, &err)
        }
        Err(err) => fail(1, &err),
    }
}

/// Prints `crawlgate: error: <err>` and returns exit code `code`.
fn fail(code: u8, err: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("crawlgate: error: {err}");
    ExitCode::from(code)
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(1, &Causes(err.as_ref())),
    }
}

/// An error and its causes on one line, `error: cause: cause`, each said
/// once: many errors already put their source in their own message (so
/// that a log line carries it), and the chain is not repeated after them.
struct Causes<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&chain_text(self.0))
    }
}

fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

/// Logs to stderr, filtered by `RUST_LOG`; an unusable `RUST_LOG` is
/// warned about and replaced by `info`, never left to silence every line.
/// Lines are written by a thread of their own: a stderr nobody reads (a
/// stuck pipe) loses lines, never stalls a worker. Keep the guard: it
/// writes what is left when dropped.
fn init_tracing() -> tracing_appender::non_blocking::WorkerGuard {
    let value = std::env::var("RUST_LOG").ok();
    let (filter, warning) = crawlgate::logging::filter(value.as_deref());
    let (writer, guard) = tracing_appender::non_blocking(io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(writer)
        .init();
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    guard
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
