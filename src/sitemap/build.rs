//! `crawlgate sitemap build`: entries in, a set of urlset files out,
//! streaming.
//!
//! An entry is `id<TAB>lastmod<TAB>address[<TAB>address…]` (what
//! `mysql -B -N` and `psql -A -t -F$'\t'` print) or a JSON line with the
//! same fields, one address per language. Entries come in strictly
//! ascending id, and files are bucketed by id, so that deleting an item
//! never moves the others between files (a crawler's view of the
//! unchanged files stays unchanged): bucket size = 45,000 / languages,
//! bucket = (id − 1) / size, file `<prefix>-<bucket>.xml`, continued in
//! `<prefix>-<bucket>-1.xml`, `-2`, … when a file would pass 50,000 URLs
//! or 45 MiB. Memory does not grow with the input: one entry, one
//! rendered block and one file's buffer at a time.
//!
//! An entry whose every address is empty has no page: it is skipped and
//! counted, never a reason to keep the old set. An address must be on the
//! base URL's scheme, host and port (a sitemap lists its own site) unless
//! other hosts are allowed. A dry run compares each file it would write
//! with the one in place, as the commit does, so that its report is the
//! build's.

use std::borrow::Cow;
use std::io::{self, BufRead, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use time::UtcOffset;
use url::Url;

use super::lastmod::{self, Lastmod};
use super::xml::{escape_into, urlset_head, URLSET_FOOT};
use super::{check_name, Comparison, SetError, SetWriter};

/// A `loc` must be shorter than this (sitemaps.org).
pub const MAX_URL_LEN: usize = 2048;
/// At most this many languages (an entry's alternates grow as the square).
pub const MAX_LANGUAGES: usize = 64;
/// The longest input line read (an entry of 64 addresses of 2 KiB each
/// fits with room to spare); a longer one is an error, never a buffer
/// that grows with the input.
pub const MAX_LINE: u64 = 1024 * 1024;

/// How big files and buckets may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Entries × languages per bucket (45,000: room under the URL limit).
    pub bucket_urls: u64,
    /// URLs per file (sitemaps.org: 50,000).
    pub file_urls: u64,
    /// Bytes per file, uncompressed (45 MiB: room under the 50 MiB limit).
    pub file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            bucket_urls: 45_000,
            file_urls: 50_000,
            file_bytes: 45 * 1024 * 1024,
        }
    }
}

/// What a build is asked to do, checked.
#[derive(Clone, Debug)]
pub struct Options {
    /// The fixed site address relative addresses are joined to.
    pub base: Url,
    /// The files' prefix (`sitemap`).
    pub prefix: String,
    /// The languages, in the order of an entry's addresses (empty: one
    /// address, no alternates).
    pub languages: Vec<String>,
    /// The offset of times written without one.
    pub naive_offset: UtcOffset,
    /// Build even from an input with no entries (which removes the set).
    pub allow_empty: bool,
    /// Accept absolute addresses on another origin (scheme, host, port)
    /// than `base`, which the sitemaps protocol does not allow.
    pub allow_other_hosts: bool,
    /// The size limits.
    pub limits: Limits,
}

/// A bad option, before anything is read.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    /// `--base-url`.
    #[error(
        "--base-url {0:?}: an absolute http or https URL is needed, like https://example.com/"
    )]
    Base(String),
    /// `--languages`.
    #[error("--languages: {0}")]
    Languages(String),
    /// `--prefix`.
    #[error("--prefix: {0}")]
    Prefix(SetError),
    /// `--utc-offset`.
    #[error("--utc-offset {0:?}: an offset like +02:00, -05:30 or Z is needed")]
    Offset(String),
}

impl Options {
    /// Checks the command's flags.
    pub fn new(
        base_url: &str,
        prefix: &str,
        languages: Option<&str>,
        utc_offset: Option<&str>,
    ) -> Result<Self, OptionError> {
        let base = parse_base(base_url).ok_or_else(|| OptionError::Base(base_url.to_owned()))?;
        check_name(prefix).map_err(OptionError::Prefix)?;
        let languages = match languages {
            None => Vec::new(),
            Some(list) => parse_languages(list).map_err(OptionError::Languages)?,
        };
        let naive_offset = match utc_offset {
            None => UtcOffset::UTC,
            Some(text) => {
                lastmod::parse_offset(text).ok_or_else(|| OptionError::Offset(text.to_owned()))?
            }
        };
        Ok(Self {
            base,
            prefix: prefix.to_owned(),
            languages,
            naive_offset,
            allow_empty: false,
            allow_other_hosts: false,
            limits: Limits::default(),
        })
    }

    /// Addresses per entry.
    fn width(&self) -> usize {
        self.languages.len().max(1)
    }

    /// Entries per bucket.
    fn bucket_size(&self) -> u64 {
        (self.limits.bucket_urls / self.width() as u64).max(1)
    }
}

/// An absolute http(s) URL without credentials, query or fragment.
pub(crate) fn parse_base(text: &str) -> Option<Url> {
    let url = Url::parse(text).ok()?;
    let ok = matches!(url.scheme(), "http" | "https")
        && url.host().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    ok.then_some(url)
}

/// `cs,en,x-default`: language tags (letters, digits, `-`), no repeats.
fn parse_languages(list: &str) -> Result<Vec<String>, String> {
    let mut languages: Vec<String> = Vec::new();
    for tag in list.split(',').map(str::trim) {
        let well_formed = tag.split('-').all(|part| {
            (1..=8).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_alphanumeric())
        }) && tag.as_bytes().first().is_some_and(u8::is_ascii_alphabetic);
        if !well_formed {
            return Err(format!(
                "{tag:?} is not a language tag like cs, en or pt-BR (or x-default)"
            ));
        }
        if languages.iter().any(|l| l.eq_ignore_ascii_case(tag)) {
            return Err(format!("{tag:?} is listed twice"));
        }
        languages.push(tag.to_owned());
    }
    if languages.len() > MAX_LANGUAGES {
        return Err(format!("at most {MAX_LANGUAGES} languages"));
    }
    Ok(languages)
}

/// Why a build failed. Nothing was replaced.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A line of the input.
    #[error("{source_name}:{line}: {message}")]
    Line {
        /// The input's name (`stdin` or the file).
        source_name: String,
        /// 1-based.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Reading the input.
    #[error("{0}: {1}")]
    Read(String, #[source] io::Error),
    /// No entries at all, or none with an address.
    #[error("{source_name}: {}; the previous set is kept (an export that failed prints nothing; pass --allow-empty to remove the set)", no_entries(*.skipped))]
    Empty {
        /// The input's name.
        source_name: String,
        /// Entries read without any address.
        skipped: u64,
    },
    /// Writing the set.
    #[error(transparent)]
    Set(#[from] SetError),
}

fn no_entries(skipped: u64) -> String {
    match skipped {
        0 => "no entries".to_owned(),
        1 => "no entry with an address (1 skipped: every address empty)".to_owned(),
        n => format!("no entry with an address ({n} skipped: every address empty)"),
    }
}

/// One file of a set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// Its name in the folder.
    pub name: String,
    /// `<url>` elements.
    pub urls: u64,
    /// Its size.
    pub bytes: u64,
}

/// What a build wrote (or, dry, would write).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Entries written (each one `<url>` per address).
    pub entries: u64,
    /// Entries left out because every address was empty (`NULL`): a row
    /// with no version in any language.
    pub skipped: u64,
    /// `<url>` elements written.
    pub urls: u64,
    /// The files of the set, in order.
    pub files: Vec<FileReport>,
    /// Stale numbered files removed (for a dry run: that would be).
    pub removed: Vec<String>,
    /// Files whose content was already in place (kept, with their date;
    /// for a dry run: that would be).
    pub unchanged: Vec<String>,
}

/// Where a build goes.
pub enum Target<'a> {
    /// Replace the set.
    Write(SetWriter),
    /// Only count, and list what would be removed from this folder and
    /// which of its files would be left alone, reading them and writing
    /// nothing.
    DryRun(&'a Path),
}

/// Reads entries from `input` (named `source_name` in errors) and writes
/// the set, or only counts for a dry run.
pub fn build(
    options: &Options,
    source_name: &str,
    input: &mut dyn BufRead,
    target: Target<'_>,
) -> Result<Report, BuildError> {
    let (set, dry) = match target {
        Target::Write(set) => (Some(set), None),
        Target::DryRun(dir) => (None, Some(dir)),
    };
    let header = urlset_head(!options.languages.is_empty());
    let mut out = Output {
        set,
        dry,
        current: None,
        report: Report::default(),
        header: &header,
    };
    let mut line = Vec::with_capacity(1024);
    let mut number = 0u64;
    let mut previous: Option<u64> = None;
    let mut urls: Vec<Option<Url>> = Vec::with_capacity(options.width());
    let mut block = Vec::with_capacity(4096);
    let bucket_size = options.bucket_size();
    loop {
        line.clear();
        let n = (&mut *input)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| BuildError::Read(source_name.to_owned(), e))?;
        if n == 0 {
            break;
        }
        number += 1;
        let at = |message: String| BuildError::Line {
            source_name: source_name.to_owned(),
            line: number,
            message,
        };
        if n as u64 > MAX_LINE {
            return Err(at(format!("longer than {MAX_LINE} bytes")));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| at("not UTF-8 (export the data as UTF-8)".to_owned()))?;
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        let mut addresses = Vec::with_capacity(options.width());
        let (id, lastmod) =
            parse_entry(text, options, &mut addresses).map_err(|m| at(hint(m, number)))?;
        if let Some(previous) = previous {
            if id <= previous {
                return Err(at(format!(
                    "id {id} is not above the previous id {previous}: entries must come in strictly ascending id (ORDER BY id)"
                )));
            }
        }
        previous = Some(id);
        urls.clear();
        for address in &addresses {
            urls.push(join(options, address).map_err(&at)?);
        }
        check_distinct(&urls, &options.languages).map_err(&at)?;
        block.clear();
        let count = render(&mut block, &urls, lastmod, &options.languages);
        if count == 0 {
            // A row with no version in any language (a LEFT JOIN of
            // translations, a NULL slug) has no page to list; one such
            // row is no reason to keep the whole site's old set.
            out.report.skipped += 1;
            continue;
        }
        let bucket = (id - 1) / bucket_size;
        out.add(bucket, &block, count, options)
            .map_err(|e| match e {
                AddError::TooBig => at(format!(
                    "the entry alone is {} bytes, more than a file may hold",
                    block.len()
                )),
                AddError::Set(e) => BuildError::Set(e),
            })?;
        out.report.entries += 1;
    }
    if out.report.entries == 0 && !options.allow_empty {
        return Err(BuildError::Empty {
            source_name: source_name.to_owned(),
            skipped: out.report.skipped,
        });
    }
    let mut report = out.finish()?;
    if let Some(dir) = dry {
        let keep = report.files.iter().map(|f| f.name.clone()).collect();
        report.removed = super::stale(dir, &options.prefix, &keep)?;
    }
    Ok(report)
}

/// A hint for the usual first-line mistake: a header row.
fn hint(message: String, line: u64) -> String {
    if line == 1 {
        format!("{message} (a header row? mysql -N and psql -t leave it out)")
    } else {
        message
    }
}

/// Fills `addresses` (one per language, maybe empty) from one line.
fn parse_entry<'a>(
    text: &'a str,
    options: &Options,
    addresses: &mut Vec<Cow<'a, str>>,
) -> Result<(u64, Option<Lastmod>), String> {
    let width = options.width();
    let (id, lastmod) = if text.trim_start().starts_with('{') {
        let entry: JsonEntry<'a> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON entry: {e}"))?;
        let found = match entry.address {
            JsonAddress::One(a) => {
                addresses.push(a);
                1
            }
            JsonAddress::Many(list) => {
                let n = list.len();
                addresses.extend(list.into_iter().map(Option::unwrap_or_default));
                n
            }
        };
        if found != width {
            return Err(count_message(found, width));
        }
        let lastmod = entry.lastmod.unwrap_or_default();
        (
            entry.id,
            lastmod::parse(lastmod.trim(), options.naive_offset),
        )
    } else {
        let mut fields = text.split('\t');
        let id = fields.next().unwrap_or_default();
        let id = id
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("id {:?} is not a whole number", truncated(id)))?;
        let lastmod = fields
            .next()
            .ok_or("no lastmod field (TAB-separated: id, lastmod, address…)")?;
        addresses.extend(fields.map(|f| Cow::Borrowed(f.trim())));
        if addresses.len() != width {
            return Err(count_message(addresses.len(), width));
        }
        (id, lastmod::parse(lastmod.trim(), options.naive_offset))
    };
    if id == 0 {
        return Err("id 0: ids start at 1".to_owned());
    }
    let lastmod = lastmod.map_err(|e| e.to_string())?;
    Ok((id, lastmod))
}

fn count_message(found: usize, width: usize) -> String {
    format!("{found} addresses, expected {width} (one per language of --languages, in order; an empty one where a language has no version)")
}

fn truncated(text: &str) -> String {
    text.chars().take(40).collect()
}

#[derive(Deserialize)]
struct JsonEntry<'a> {
    id: u64,
    #[serde(default, borrow)]
    lastmod: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "addresses", alias = "loc")]
    address: JsonAddress<'a>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum JsonAddress<'a> {
    One(#[serde(borrow)] Cow<'a, str>),
    Many(Vec<Option<Cow<'a, str>>>),
}

/// The absolute URL of `address` (`None`: empty, no version in this
/// language).
fn join(options: &Options, address: &str) -> Result<Option<Url>, String> {
    if address.is_empty() || address == "NULL" || address == "\\N" {
        return Ok(None);
    }
    let base = &options.base;
    let url = base
        .join(address)
        .map_err(|e| format!("address {:?}: {e}", truncated(address)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "address {:?} is not an http or https URL",
            truncated(address)
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "address {:?} carries credentials",
            truncated(address)
        ));
    }
    if url.fragment().is_some() {
        return Err(format!(
            "address {:?} has a #fragment, which crawlers ignore",
            truncated(address)
        ));
    }
    if url.as_str().len() >= MAX_URL_LEN {
        return Err(format!(
            "address {:?} is {} characters long; a sitemap URL is under {MAX_URL_LEN}",
            truncated(address),
            url.as_str().len()
        ));
    }
    let same_origin = url.scheme() == base.scheme()
        && url.host_str() == base.host_str()
        && url.port_or_known_default() == base.port_or_known_default();
    if !(same_origin || options.allow_other_hosts) {
        return Err(format!(
            "address {:?} is not on {} (--base-url's scheme, host and port): a sitemap lists only its own site's URLs (--allow-other-hosts lets it through)",
            truncated(address),
            base.origin().ascii_serialization()
        ));
    }
    Ok(Some(url))
}

/// Two languages of one entry at the same address would be one page
/// claimed twice.
fn check_distinct(urls: &[Option<Url>], languages: &[String]) -> Result<(), String> {
    for (i, a) in urls.iter().enumerate() {
        let Some(a) = a else { continue };
        if let Some(j) = urls[i + 1..].iter().position(|b| b.as_ref() == Some(a)) {
            return Err(format!(
                "the {} and {} addresses are the same URL",
                languages.get(i).map_or("", String::as_str),
                languages.get(i + 1 + j).map_or("", String::as_str)
            ));
        }
    }
    Ok(())
}

/// Appends one `<url>` per present address; each lists every present
/// language version, itself included, when there are two or more.
/// Returns the number of `<url>` elements.
fn render(
    block: &mut Vec<u8>,
    urls: &[Option<Url>],
    lastmod: Option<Lastmod>,
    languages: &[String],
) -> u64 {
    let present = urls.iter().flatten().count();
    for url in urls.iter().flatten() {
        block.extend_from_slice(b"<url><loc>");
        escape_into(block, url.as_str());
        block.extend_from_slice(b"</loc>");
        if let Some(lastmod) = lastmod {
            block.extend_from_slice(b"<lastmod>");
            block.extend_from_slice(lastmod.as_str().as_bytes());
            block.extend_from_slice(b"</lastmod>");
        }
        if present > 1 {
            for (language, alternate) in languages.iter().zip(urls) {
                let Some(alternate) = alternate else { continue };
                block.extend_from_slice(b"<xhtml:link rel=\"alternate\" hreflang=\"");
                block.extend_from_slice(language.as_bytes());
                block.extend_from_slice(b"\" href=\"");
                escape_into(block, alternate.as_str());
                block.extend_from_slice(b"\"/>");
            }
        }
        block.extend_from_slice(b"</url>\n");
    }
    present as u64
}

enum AddError {
    TooBig,
    Set(SetError),
}

/// The file being written.
struct Current {
    bucket: u64,
    part: u64,
    report: FileReport,
    /// For a dry run: the comparison with the file in place.
    comparison: Option<Comparison>,
}

struct Output<'h, 'd> {
    set: Option<SetWriter>,
    /// For a dry run: the folder whose files are compared.
    dry: Option<&'d Path>,
    current: Option<Current>,
    report: Report,
    /// The start of every file.
    header: &'h [u8],
}

impl Output<'_, '_> {
    /// Adds one entry's block of `urls` `<url>` elements to its bucket's
    /// file, opening the bucket's next file when it would pass a limit.
    fn add(
        &mut self,
        bucket: u64,
        block: &[u8],
        urls: u64,
        options: &Options,
    ) -> Result<(), AddError> {
        let limits = options.limits;
        let fixed = (self.header.len() + URLSET_FOOT.len()) as u64;
        if fixed + block.len() as u64 > limits.file_bytes || urls > limits.file_urls {
            return Err(AddError::TooBig);
        }
        let next_part = match &self.current {
            Some(c) if c.bucket == bucket => {
                let fits = c.report.bytes + block.len() as u64 + URLSET_FOOT.len() as u64
                    <= limits.file_bytes
                    && c.report.urls + urls <= limits.file_urls;
                (!fits).then_some(c.part + 1)
            }
            _ => Some(0),
        };
        if let Some(part) = next_part {
            self.close().map_err(AddError::Set)?;
            let name = if part == 0 {
                format!("{}-{bucket}.xml", options.prefix)
            } else {
                format!("{}-{bucket}-{part}.xml", options.prefix)
            };
            if let Some(set) = &mut self.set {
                set.create(&name).map_err(AddError::Set)?;
            }
            let comparison = match self.dry {
                Some(dir) => Some(Comparison::open(dir, &name).map_err(AddError::Set)?),
                None => None,
            };
            self.current = Some(Current {
                bucket,
                part,
                report: FileReport {
                    name,
                    urls: 0,
                    bytes: 0,
                },
                comparison,
            });
            self.write(self.header).map_err(AddError::Set)?;
        }
        self.write(block).map_err(AddError::Set)?;
        if let Some(current) = &mut self.current {
            current.report.urls += urls;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), SetError> {
        let Some(current) = &mut self.current else {
            return Ok(());
        };
        current.report.bytes += bytes.len() as u64;
        if let Some(comparison) = &mut current.comparison {
            comparison.write(bytes)?;
        }
        if let Some(set) = &mut self.set {
            set.write_current(bytes)?;
        }
        Ok(())
    }

    /// Ends the current file.
    fn close(&mut self) -> Result<(), SetError> {
        if self.current.is_none() {
            return Ok(());
        }
        self.write(URLSET_FOOT)?;
        if let Some(current) = self.current.take() {
            if let Some(comparison) = current.comparison {
                if comparison.finish()? {
                    self.report.unchanged.push(current.report.name.clone());
                }
            }
            self.report.urls += current.report.urls;
            self.report.files.push(current.report);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Report, BuildError> {
        self.close()?;
        if let Some(set) = self.set.take() {
            let committed = set.commit()?;
            self.report.removed = committed.removed;
            self.report.unchanged = committed.unchanged;
        }
        Ok(self.report)
    }
}

/// Writes `report` as one JSON document, for `--dry-run`.
pub fn write_json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests;
