//! The command line: what `crawlgate` and its subcommands accept (clap's
//! types, which `main` parses), and each subcommand's work and report.

use std::io::{self, IsTerminal};
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::Overrides;

pub mod check_config;
pub mod classify;
pub mod demo;
pub mod health;
pub mod man;
pub mod reference;
pub mod report;
pub mod run;
pub mod sitemap;
pub mod version;

/// Exit code for a bad configuration (EX_USAGE), before anything is bound.
pub const EXIT_CONFIG: u8 = 64;
/// Exit code for input data that cannot be used (EX_DATAERR).
pub const EXIT_DATA: u8 = 65;
/// Exit code when another build of the same set is running: try again
/// later (EX_TEMPFAIL).
pub const EXIT_BUSY: u8 = 75;
/// Exit code when a second shutdown signal cuts the drain short.
pub const EXIT_INTERRUPTED: u8 = 130;

/// How a subcommand failed: the process's exit code, and the line `main`
/// prints after `crawlgate: error: ` (none when the logs already said
/// it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// The error, on one line.
    pub message: Option<String>,
}

impl Failure {
    /// Exit code `code`, with `err` as the message.
    pub fn new(code: u8, err: &dyn std::fmt::Display) -> Self {
        Self {
            code,
            message: Some(err.to_string()),
        }
    }

    /// Exit code `code`, with `err` and its causes ([`chain_text`]) as the
    /// message.
    pub fn chain(code: u8, err: &(dyn std::error::Error + 'static)) -> Self {
        Self {
            code,
            message: Some(chain_text(err)),
        }
    }

    /// Exit code `code`, nothing printed.
    pub fn silent(code: u8) -> Self {
        Self {
            code,
            message: None,
        }
    }
}

/// What a subcommand returns: success (exit code 0) or how it failed.
pub type Outcome = Result<(), Failure>;

/// An error and its causes on one line, `error: cause: cause`, each said
/// once: many errors already put their source in their own message (so
/// that a log line carries it), and the chain is not repeated after them.
pub fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
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

/// `verify.state_dir` when the file sets none: systemd's `StateDirectory=`
/// (`$STATE_DIRECTORY`, the first folder when it names several) with
/// `verify` below it; outside systemd, none (the lists are kept in
/// memory).
fn systemd_state_dir() -> Option<PathBuf> {
    let dirs = std::env::var_os("STATE_DIRECTORY")?;
    let first = std::env::split_paths(&dirs).next()?;
    first.is_absolute().then(|| first.join("verify"))
}

/// Log lines waiting for stderr at most; past them, lines are lost (and
/// counted: `crawlgate_log_dropped_lines_total`). The
/// queue's slots are made up front, 40 bytes each: tracing-appender's
/// default of 128,000 lines held 4 MiB of every process's memory, a
/// quarter of it at rest.
const LOG_LINES_QUEUED: usize = 16 * 1024;

/// Logs to stderr, filtered by `RUST_LOG`; an unusable `RUST_LOG` is
/// warned about and replaced by `info`, never left to silence every line.
/// Lines are written by a thread of their own: a stderr nobody reads (a
/// stuck pipe) loses lines, never stalls a worker. Keep the guard: it
/// writes what is left when dropped.
fn init_tracing() -> tracing_appender::non_blocking::WorkerGuard {
    let value = std::env::var("RUST_LOG").ok();
    let (filter, warning) = crate::logging::filter(value.as_deref());
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_LINES_QUEUED)
        .finish(io::stderr());
    crate::logging::count_dropped_lines(writer.error_counter());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(writer)
        .init();
    if let Some(warning) = warning {
        // Logged as the binary's own line, as before the move.
        tracing::warn!(target: "crawlgate", "{warning}");
    }
    guard
}

/// crawlgate: an edge reverse proxy that keeps robots off action links,
/// sends one canonical 301 for duplicate addresses, synthesizes robots.txt
/// and forwards everything else to the site, streaming.
#[derive(Parser)]
#[command(
    version = version::SHORT,
    long_version = version::LONG,
    about,
    long_about = None
)]
pub struct Cli {
    /// The subcommand; none runs the proxy.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The proxy's flags, for a run without a subcommand.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The flags of a run: the config file and the flags that override it.
#[derive(Args)]
pub struct RunArgs {
    /// The flags that override the file, each declared with its key.
    #[command(flatten)]
    pub overrides: Overrides,
    /// TOML config file (see deploy/crawlgate.toml); flags override it
    // Listed between --upstream and --sitemap-dir (see Overrides).
    #[arg(long, value_name = "FILE", display_order = 3)]
    pub config: Option<PathBuf>,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
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
    /// Ask the admin listener for /healthz (a container's HEALTHCHECK): exit 0 on 200, 1 otherwise
    Health {
        /// Config file whose `admin.listen` to ask (0.0.0.0 and [::] are asked on loopback)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The admin listener's address, instead of the config file's
        #[arg(long, value_name = "HOST:PORT")]
        addr: Option<String>,
        /// The path to ask for
        #[arg(long, value_name = "PATH", default_value = "/healthz")]
        path: String,
        /// How long the whole exchange may take
        #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// A crawl report per robot from access logs: requests, verification, wasted crawl budget, robots.txt compliance
    Report(report::ReportArgs),
    /// Build sitemaps from the site's data, index them, or convert a static export
    #[command(subcommand)]
    Sitemap(SitemapCommand),
    /// Write the manual pages: crawlgate(1), one per subcommand, and crawlgate.toml(5)
    #[command(hide = true)]
    Man {
        /// Folder to write them into (created if missing); for a `man1` folder,
        /// crawlgate.toml.5 goes to the `man5` beside it
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// The subcommands of `crawlgate sitemap`.
#[derive(Subcommand)]
pub enum SitemapCommand {
    /// Read entries (id, lastmod, address per language; TSV or JSON lines)
    /// and replace the set `<prefix>-<bucket>.xml` in DIR, all files at once
    Build {
        /// Folder to write the set into (crawlgate's --sitemap-dir)
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// The site's canonical address, the one that does not redirect (`https://example.com/`
        /// under the default redirect.www = "apex"); relative addresses are joined to it
        #[arg(long, value_name = "URL")]
        base_url: String,
        /// File name prefix of the set
        #[arg(long, value_name = "NAME", default_value = "sitemap")]
        prefix: String,
        /// Languages of an entry's addresses, in order (hreflang alternates), e.g. cs,en
        #[arg(long, value_name = "LIST")]
        languages: Option<String>,
        /// Read entries from FILE [default: stdin]
        #[arg(long, value_name = "FILE")]
        input: Option<PathBuf>,
        /// Offset of lastmod times written without one [default: Z (UTC)]
        #[arg(long, value_name = "OFFSET", allow_hyphen_values = true)]
        utc_offset: Option<String>,
        /// Print as JSON the files and URL counts it would write, the entries it would skip
        /// and the files it would remove or leave unchanged; write nothing
        #[arg(long)]
        dry_run: bool,
        /// Accept an input without entries (removes the set) instead of refusing it
        #[arg(long)]
        allow_empty: bool,
        /// Accept absolute addresses on another scheme, host or port than --base-url
        /// (the sitemaps protocol does not)
        #[arg(long)]
        allow_other_hosts: bool,
        /// Print nothing on success (for cron)
        #[arg(long, short)]
        quiet: bool,
    },
    /// Write DIR/sitemap.xml, the index of the sitemap-*.xml files in DIR
    Index {
        /// The sitemap folder
        dir: PathBuf,
        /// The site's canonical address; files are listed at `<base-url>/sitemaps/<file>` (its path kept)
        #[arg(long, value_name = "URL")]
        base_url: String,
        /// Where the files are served instead, for sites that serve them elsewhere
        #[arg(long, value_name = "URL")]
        files_url: Option<String>,
        /// Also list the `<NAME>-*.xml` files of another set (repeatable)
        #[arg(long, value_name = "NAME")]
        prefix: Vec<String>,
        /// Print nothing on success (for cron)
        #[arg(long, short)]
        quiet: bool,
    },
    /// A sitemap of a static export: one URL per *.html page below PUBLIC_DIR
    FromDir {
        /// The exported site's folder
        public_dir: PathBuf,
        /// The site's bare address, `scheme://host[:port]`
        #[arg(long, value_name = "URL")]
        origin: String,
        /// Output format [default: from --out's extension, .xml or .txt; xml to stdout]
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
        /// Write to FILE, replaced whole (split into FILE's index and parts when too big) [default: stdout]
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Print nothing on success (for cron)
        #[arg(long, short)]
        quiet: bool,
    },
}

/// What `sitemap from-dir` writes.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    /// A sitemaps.org urlset
    Xml,
    /// One URL per line
    Txt,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(text: &'static str, source: Option<Layer>) -> Layer {
        Layer {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn a_chain_is_one_line_each_cause_said_once() {
        let io = layer("permission denied", None);
        let inner = layer("cannot open /x: permission denied", Some(io));
        let outer = layer("cannot load", Some(inner));
        assert_eq!(
            chain_text(&outer),
            "cannot load: cannot open /x: permission denied"
        );
        let failure = Failure::chain(EXIT_CONFIG, &outer);
        assert_eq!(failure.code, 64);
        assert_eq!(
            failure.message.as_deref(),
            Some(chain_text(&outer).as_str())
        );
        assert_eq!(Failure::silent(EXIT_INTERRUPTED).message, None);
    }
}
