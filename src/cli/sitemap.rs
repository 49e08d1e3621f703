//! `crawlgate sitemap build|index|from-dir`: sitemap sets from the site's
//! data, their index, and a static export's sitemap, each with its report
//! and its exit codes.

use std::io::{self, BufReader};
use std::path::Path;

use super::{ExportFormat, Failure, Outcome, SitemapCommand};
use super::{EXIT_BUSY, EXIT_CONFIG, EXIT_DATA};
use crate::sitemap::build::{self, BuildError, Options, Target};
use crate::sitemap::export::{self, ExportError, Format};
use crate::sitemap::{index, SetError, SetWriter};

/// Runs a `crawlgate sitemap` subcommand and prints its report.
pub fn run(command: SitemapCommand) -> Outcome {
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
                Err(err) => return Err(Failure::new(EXIT_CONFIG, &err)),
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
                Err(err @ SetError::Busy { .. }) => return Err(Failure::new(EXIT_BUSY, &err)),
                Err(err) => return Err(Failure::new(EXIT_CONFIG, &err)),
            };
            let (name, mut reader): (String, Box<dyn io::BufRead>) = match &input {
                None => ("stdin".to_owned(), Box::new(io::stdin().lock())),
                Some(path) => match std::fs::File::open(path) {
                    Ok(f) => (
                        path.display().to_string(),
                        Box::new(BufReader::with_capacity(256 * 1024, f)),
                    ),
                    Err(err) => {
                        return Err(Failure::new(
                            EXIT_CONFIG,
                            &format!("{}: {err}", path.display()),
                        ))
                    }
                },
            };
            match build::build(&options, &name, &mut reader, target) {
                Ok(report) if dry_run => {
                    let mut out = io::stdout().lock();
                    match build::write_json(&report, &mut out) {
                        Ok(()) => Ok(()),
                        Err(err) => Err(Failure::new(1, &err)),
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
                    Ok(())
                }
                Err(err @ (BuildError::Line { .. } | BuildError::Empty { .. })) => {
                    Err(Failure::new(EXIT_DATA, &err))
                }
                Err(err) => Err(Failure::new(1, &err)),
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
                Err(err) => return Err(Failure::new(EXIT_CONFIG, &err)),
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
                            dir.join(crate::sitemap::INDEX_NAME).display(),
                            if n == 1 { "" } else { "s" },
                        );
                    }
                    Ok(())
                }
                Err(err @ (index::IndexError::Url { .. } | index::IndexError::Prefix(_))) => {
                    Err(Failure::new(EXIT_CONFIG, &err))
                }
                Err(err @ (index::IndexError::Empty { .. } | index::IndexError::TooMany(..))) => {
                    Err(Failure::new(EXIT_DATA, &err))
                }
                Err(err) => Err(Failure::new(1, &err)),
            }
        }
        SitemapCommand::FromDir {
            public_dir,
            origin,
            format,
            out,
            quiet,
        } => from_dir(&public_dir, &origin, format, out.as_deref(), quiet),
    }
}

/// `sitemap from-dir`: the URLs of a static export's pages, to `out` or
/// stdout.
fn from_dir(
    public_dir: &Path,
    origin: &str,
    format: Option<ExportFormat>,
    out: Option<&Path>,
    quiet: bool,
) -> Outcome {
    let origin = match export::parse_origin(origin) {
        Ok(origin) => origin,
        Err(err) => return Err(Failure::new(EXIT_CONFIG, &err)),
    };
    let format = format.map(|format| match format {
        ExportFormat::Xml => Format::Xml,
        ExportFormat::Txt => Format::Txt,
    });
    let format = match Format::choose(format, out) {
        Ok(format) => format,
        Err(err) => return Err(Failure::new(EXIT_CONFIG, &err)),
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
            Ok(())
        }
        Err(err @ (ExportError::Empty(_) | ExportError::TooBig { .. })) => {
            Err(Failure::new(EXIT_DATA, &err))
        }
        Err(err @ ExportError::Out(..)) => Err(Failure::new(EXIT_CONFIG, &err)),
        Err(err @ ExportError::Set(crate::sitemap::SetError::Busy { .. })) => {
            Err(Failure::new(EXIT_BUSY, &err))
        }
        Err(err) => Err(Failure::new(1, &err)),
    }
}
