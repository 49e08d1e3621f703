//! The `crawlgate` command: flags → config → server, and the exit code.

use std::io::{self, BufReader, IsTerminal};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use crawlgate::classify::{classify_lines, Classifier};
use crawlgate::config::{Config, ConfigError, Overrides};
use crawlgate::rules::RuleLists;
use crawlgate::service::Shared;
use tracing_subscriber::EnvFilter;

/// Exit code for a bad configuration (EX_USAGE), before anything is bound.
const EXIT_CONFIG: u8 = 64;

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
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The site to forward to, http://host:port [default: http://127.0.0.1:8000]
    #[arg(long, value_name = "URL")]
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
    };
    let config = match Config::load(args.config.as_deref(), &overrides) {
        Ok(config) => config,
        Err(err) => return config_error(&err),
    };
    let shared = match Shared::new(&config) {
        Ok(shared) => shared,
        Err(err) => {
            eprintln!("crawlgate: error: {err}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .with_context(|| format!("cannot listen on {}", config.listen))?;
            tracing::info!(
                listen = %config.listen,
                upstream = %config.upstream.authority,
                rules = %shared.rules_source.as_deref().map_or("built-in".into(), |p| p.display().to_string()),
                "crawlgate started",
            );
            crawlgate::server::serve(listener, Arc::new(shared), shutdown_signal()).await?;
            Ok(())
        })
    });
    finish(result)
}

fn run_demo(listen: Option<SocketAddr>) -> ExitCode {
    init_tracing();
    let result = runtime().and_then(|rt| {
        rt.block_on(crawlgate::demo::run(listen, shutdown_signal()))
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
    let checked = Config::load(Some(file), &Overrides::default()).map(|config| {
        let rules = Shared::new(&config);
        (config, rules)
    });
    match checked {
        Ok((_, Err(err))) => {
            eprintln!("crawlgate: error: {err}");
            ExitCode::from(EXIT_CONFIG)
        }
        Ok((config, Ok(_))) => {
            println!(
                "{}: ok (listen {}, upstream {})",
                file.display(),
                config.listen,
                config.upstream.authority
            );
            ExitCode::SUCCESS
        }
        Err(err) => config_error(&err),
    }
}

fn config_error(err: &ConfigError) -> ExitCode {
    eprintln!("crawlgate: config error: {err}");
    ExitCode::from(EXIT_CONFIG)
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

fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(io::stderr)
        .init();
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("shutdown signal received");
}
