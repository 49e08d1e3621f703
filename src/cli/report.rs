//! `crawlgate report`: a crawl report per robot from access logs (plain,
//! gzip or standard input), in one streaming pass; the I/O around
//! [`crate::report`]: opening inputs, reading bounded lines, the
//! progress bar, the sources of rules, ranges and robots.txt, the output.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use super::{Failure, Outcome, EXIT_CONFIG, EXIT_DATA};
use crate::classify::Classifier;
use crate::config::{Config, Overrides};
use crate::report::line::Skip;
use crate::report::model::{RangesUsed, Report};
use crate::report::{Capacity, Filter, Sources, Tally};
use crate::robots::matcher::RobotsTxt;
use crate::robots::Robots;
use crate::rules::RuleLists;
use crate::verify::store::{read_local, Source};
use crate::verify::{parse_ranges, Operators, PrefixTable};

/// The longest line read; longer ones are counted as too long and
/// skipped without being held.
pub const MAX_LINE: usize = 64 * 1024;
/// The most of a robots.txt read (as Google reads).
const MAX_ROBOTS: u64 = 500 * 1024;

/// The flags of `crawlgate report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Access logs: Apache or nginx combined, common or vhost_combined, crawlgate's own
    /// (combined or JSON); plain or gzip (rotated `.gz` files too); `-` or none: standard input
    #[arg(value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// Output form
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
    /// Write the report to FILE (replaced whole) [default: stdout]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// crawlgate config whose rules, blocked parameters, synthesized robots.txt and saved
    /// range lists (`verify.state_dir`, local `verify.ranges`) the report uses
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Folder of token lists replacing the built-in rules (as `rules_dir`)
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Folder of range lists saved as `<operator>.<list>.json` (a `verify.state_dir`)
    #[arg(long, value_name = "DIR")]
    pub ranges: Option<PathBuf>,
    /// The site's robots.txt to measure compliance against [default: the one crawlgate
    /// synthesizes from --config; none without --config]
    #[arg(long, value_name = "FILE")]
    pub robots: Option<PathBuf>,
    /// Only requests for this host (lines whose log names no host are kept and counted apart)
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Only requests from this time on (RFC 3339, or a date YYYY-MM-DD, UTC)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub since: Option<i64>,
    /// Only requests before this time (RFC 3339, or a date YYYY-MM-DD, UTC)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub until: Option<i64>,
    /// No progress bar (one is drawn on standard error when it is a terminal)
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `crawlgate report` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// For a terminal
    Text,
    /// One self-contained page, readable offline
    Html,
    /// For other tools
    Json,
}

/// `2026-12-01T00:00:00Z` or `2026-12-01` (midnight UTC) → seconds.
fn parse_time(text: &str) -> Result<i64, String> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = time::OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(t.unix_timestamp());
    }
    let date = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(text, &date)
        .map(|d| d.midnight().assume_utc().unix_timestamp())
        .map_err(|_| format!("{text:?} is not a time (2026-12-01T08:00:00Z or 2026-12-01)"))
}

/// Runs the report.
pub fn run(args: ReportArgs) -> Outcome {
    let sources = sources(&args)?;
    let filter = Filter {
        host: args.host.clone(),
        since: args.since,
        until: args.until,
    };
    let mut tally = Tally::new(Arc::new(sources), filter, Capacity::FILE);
    let stdin_only = args.logs.is_empty();
    if stdin_only && io::stdin().is_terminal() {
        return Err(Failure::new(
            EXIT_CONFIG,
            &"no log given: name the files, or pipe one in (`zcat access.log.*.gz | crawlgate report`)",
        ));
    }
    let logs: Vec<PathBuf> = match stdin_only {
        true => vec![PathBuf::from("-")],
        false => args.logs.clone(),
    };
    let progress = Progress::new(!args.quiet && io::stderr().is_terminal(), &logs);
    for log in &logs {
        tally.input_named(&log.display().to_string());
        read_log(log, &mut tally, &progress)?;
    }
    progress.finish();
    let report = tally.finish(format!("crawlgate {}", super::version::SHORT));
    write_report(&report, &args)
}

/// Reads one input into the tally.
fn read_log(path: &Path, tally: &mut Tally, progress: &Progress) -> Outcome {
    let fail = |err: io::Error| Failure::new(EXIT_DATA, &format_args!("{}: {err}", path.display()));
    let raw: Box<dyn Read> = if path == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(path).map_err(fail)?)
    };
    let counted = progress.reader(raw);
    let mut input = BufReader::with_capacity(256 * 1024, counted);
    let gzip = input.fill_buf().map_err(fail)?.starts_with(&[0x1f, 0x8b]);
    let result = if gzip {
        let mut inner =
            BufReader::with_capacity(256 * 1024, flate2::bufread::MultiGzDecoder::new(input));
        read_lines(&mut inner, |line| tally_line(tally, line))
    } else {
        read_lines(&mut input, |line| tally_line(tally, line))
    };
    result.map_err(fail)
}

fn tally_line(tally: &mut Tally, line: Result<&[u8], Skip>) {
    match line {
        Ok(line) => tally.line(line),
        Err(skip) => tally.skip(skip),
    }
}

/// Calls `each` with every line of `input` (without its line end), or
/// [`Skip::TooLong`] for a line over [`MAX_LINE`], which is never held
/// whole. A last line without a line end counts.
pub fn read_lines(
    input: &mut impl BufRead,
    mut each: impl FnMut(Result<&[u8], Skip>),
) -> io::Result<()> {
    let mut held: Vec<u8> = Vec::new();
    let mut too_long = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            if too_long {
                each(Err(Skip::TooLong));
            } else if !held.is_empty() {
                each(Ok(&held));
            }
            return Ok(());
        }
        let (taken, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(nl) => (nl + 1, Some(nl)),
            None => (buf.len(), None),
        };
        let part = &buf[..end.unwrap_or(buf.len())];
        if !too_long && held.len() + part.len() > MAX_LINE {
            too_long = true;
            held = Vec::new();
        }
        match (end, too_long) {
            (Some(_), true) => {
                each(Err(Skip::TooLong));
                too_long = false;
            }
            (Some(_), false) if held.is_empty() => each(Ok(part)),
            (Some(_), false) => {
                held.extend_from_slice(part);
                each(Ok(&held));
                held.clear();
            }
            (None, true) => {}
            (None, false) => held.extend_from_slice(part),
        }
        input.consume(taken);
    }
}

/// The rules, operators, ranges and robots.txt of the report.
fn sources(args: &ReportArgs) -> Result<Sources, Failure> {
    let config = match &args.config {
        Some(path) => Some(
            Config::load(Some(path), &Overrides::default())
                .map_err(|err| Failure::chain(EXIT_CONFIG, &err))?,
        ),
        None => None,
    };
    let defaults = Config::load(None, &Overrides::default())
        .map_err(|err| Failure::chain(EXIT_CONFIG, &err))?;
    let used = config.as_ref().unwrap_or(&defaults);
    let rules_dir = args.rules.as_deref().or(used.rules_dir.as_deref());
    let lists = match rules_dir {
        Some(dir) => RuleLists::from_dir(dir),
        None => Ok(RuleLists::embedded()),
    };
    let classifier = lists
        .and_then(|l| Classifier::new(&l))
        .map_err(|err| Failure::chain(EXIT_CONFIG, &err))?;
    let operators = match rules_dir {
        Some(dir) => Operators::from_dir(dir),
        None => Ok(Operators::embedded()),
    }
    .map_err(|err| Failure::chain(EXIT_CONFIG, &err))?;
    let (ranges, loaded, ranges_used) = ranges(args, config.as_ref(), &operators)?;
    let robots = match (&args.robots, &config) {
        (Some(file), _) => {
            let mut text = Vec::new();
            File::open(file)
                .and_then(|f| f.take(MAX_ROBOTS).read_to_end(&mut text))
                .map_err(|err| {
                    Failure::new(EXIT_DATA, &format_args!("{}: {err}", file.display()))
                })?;
            Some((RobotsTxt::parse(&text), file.display().to_string()))
        }
        (None, Some(config)) => {
            let mut robots = Robots::new(
                &config.blocked_params,
                &config.robots_disallow,
                &config.robots_extra,
                None,
            );
            if let Some(ai) = &config.ai {
                robots = robots.with_ai(ai, &operators);
            }
            let from = args
                .config
                .as_deref()
                .map_or_else(String::new, |p| p.display().to_string());
            Some((
                RobotsTxt::parse(robots.fixed_body()),
                format!("synthesized from {from}"),
            ))
        }
        (None, None) => None,
    };
    Ok(Sources {
        classifier: Arc::new(classifier),
        operators: Arc::new(operators),
        ranges,
        loaded,
        ranges_used,
        robots,
        blocked_params: used.blocked_params.clone(),
    })
}

/// The range lists: from `--ranges`, else the config's `verify.state_dir`,
/// with the config's local `verify.ranges` files over both.
fn ranges(
    args: &ReportArgs,
    config: Option<&Config>,
    operators: &Operators,
) -> Result<(PrefixTable, u64, RangesUsed), Failure> {
    let verify = config.and_then(|c| c.verify.as_ref());
    let dir = args
        .ranges
        .clone()
        .or_else(|| verify.and_then(|v| v.state_dir.clone()));
    let mut used = RangesUsed::default();
    let mut lists = vec![Vec::new(); operators.lists.len()];
    let mut loaded = 0u64;
    if let Some(dir) = &dir {
        if !dir.is_dir() {
            return Err(Failure::new(
                EXIT_CONFIG,
                &format_args!("{}: no such folder of range lists", dir.display()),
            ));
        }
        used.sources.push(dir.display().to_string());
        for (i, spec) in operators.lists.iter().enumerate() {
            let path = dir.join(format!("{}.json", spec.name));
            let Ok(body) = std::fs::read(&path) else {
                continue;
            };
            let nets = parse_ranges(&body).map_err(|err| {
                Failure::new(EXIT_DATA, &format_args!("{}: {err}", path.display()))
            })?;
            lists[i] = nets;
        }
    }
    for (operator, list, source) in verify.map(|v| v.ranges.as_slice()).unwrap_or_default() {
        let Source::File(path) = Source::parse(source) else {
            continue;
        };
        let Some(i) = operators.list(&format!("{operator}.{list}")) else {
            continue;
        };
        lists[i] = read_local(&path).map_err(|err| Failure::chain(EXIT_DATA, &err))?;
        used.sources.push(path.display().to_string());
    }
    for (i, nets) in lists.iter().enumerate() {
        if !nets.is_empty() && i < PrefixTable::MAX_LISTS {
            loaded |= 1 << i;
            used.loaded.push(operators.lists[i].name.to_string());
        }
    }
    Ok((PrefixTable::new(&lists), loaded, used))
}

/// Writes the report in its form, to `--out` (replaced whole) or stdout.
fn write_report(report: &Report, args: &ReportArgs) -> Outcome {
    let render = |out: &mut dyn Write| -> io::Result<()> {
        match args.format {
            ReportFormat::Json => {
                serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
                out.write_all(b"\n")
            }
            ReportFormat::Text => crate::report::text::write(report, out, 80),
            ReportFormat::Html => crate::report::html::write(report, out),
        }
    };
    match &args.out {
        None => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            match render(&mut out).and_then(|()| out.flush()) {
                Ok(()) => Ok(()),
                Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
                Err(err) => Err(Failure::new(1, &err)),
            }
        }
        Some(path) => {
            let fail = |err: io::Error| Failure::new(1, &format_args!("{}: {err}", path.display()));
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let mut file = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
            {
                let mut out = io::BufWriter::new(file.as_file_mut());
                render(&mut out).and_then(|()| out.flush()).map_err(fail)?;
            }
            // A report is for reading: not the temporary file's 0600.
            use std::os::unix::fs::PermissionsExt;
            file.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
                .map_err(fail)?;
            file.persist(path).map_err(|err| fail(err.error))?;
            Ok(())
        }
    }
}

/// A progress bar on standard error, by bytes read of the inputs' total
/// size (compressed bytes for gzip); nothing when off.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(on: bool, logs: &[PathBuf]) -> Self {
        if !on {
            return Self { bar: None };
        }
        let total: Option<u64> = logs
            .iter()
            .map(|p| {
                std::fs::metadata(p)
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
            })
            .sum();
        let bar = match total {
            Some(total) => indicatif::ProgressBar::new(total),
            None => indicatif::ProgressBar::no_length(),
        };
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} {bytes}/{total_bytes} [{bar:30}] {binary_bytes_per_sec} eta {eta}",
        )
        .map(|s| s.progress_chars("=> "));
        if let Ok(style) = style {
            bar.set_style(style);
        }
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
        Self { bar: Some(bar) }
    }

    fn reader<R: Read + 'static>(&self, inner: R) -> Box<dyn Read + '_> {
        match &self.bar {
            Some(bar) => Box::new(bar.wrap_read(inner)),
            None => Box::new(inner),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], chunk: usize) -> Vec<Result<Vec<u8>, Skip>> {
        let mut out = Vec::new();
        let mut reader = BufReader::with_capacity(chunk, input);
        read_lines(&mut reader, |l| out.push(l.map(<[u8]>::to_vec))).expect("read");
        out
    }

    #[test]
    fn lines_across_buffer_ends_and_too_long_ones_skipped_unheld() {
        let mut input = b"one\r\ntwo\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend_from_slice(b"\nthree");
        for chunk in [1, 7, 4096, 1 << 20] {
            let got = lines(&input, chunk);
            assert_eq!(
                got,
                [
                    Ok(b"one\r".to_vec()),
                    Ok(b"two".to_vec()),
                    Err(Skip::TooLong),
                    Ok(b"three".to_vec())
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("2026-01-01"), Ok(1_767_225_600));
        assert_eq!(parse_time("2026-01-01T01:00:00+01:00"), Ok(1_767_225_600));
        assert!(parse_time("yesterday").is_err());
    }
}
