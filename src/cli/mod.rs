//! The command line: what `crawlgate` and its subcommands accept (clap's
//! types, which `main` parses), and each subcommand's work and report.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::Overrides;

/// crawlgate: an edge reverse proxy that keeps robots off action links,
/// sends one canonical 301 for duplicate addresses, synthesizes robots.txt
/// and forwards everything else to the site, streaming.
#[derive(Parser)]
#[command(version, about, long_about = None)]
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
    /// Build sitemaps from the site's data, index them, or convert a static export
    #[command(subcommand)]
    Sitemap(SitemapCommand),
}

/// The subcommands of `crawlgate sitemap`.
#[derive(Subcommand)]
pub enum SitemapCommand {
    /// Read entries (id, lastmod, address per language; TSV or JSON lines)
    /// and replace the set <prefix>-<bucket>.xml in DIR, all files at once
    Build {
        /// Folder to write the set into (crawlgate's --sitemap-dir)
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// The site's canonical address, the one that does not redirect (https://example.com/
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
        /// The site's canonical address; files are listed at <base-url>/sitemaps/<file> (its path kept)
        #[arg(long, value_name = "URL")]
        base_url: String,
        /// Where the files are served instead, for sites that serve them elsewhere
        #[arg(long, value_name = "URL")]
        files_url: Option<String>,
        /// Also list the <NAME>-*.xml files of another set (repeatable)
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
        /// The site's bare address, scheme://host[:port]
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
