//! `crawlgate sitemap from-dir`: a sitemap of a static export, one URL
//! per `*.html` page.
//!
//! `index.html` is its folder (with a trailing slash); dot-folders, dot
//! files and `404.html` pages are skipped; symbolic links are not
//! followed. Each path segment is percent-encoded from the file name's
//! bytes, the URLs are sorted and de-duplicated. An export without pages,
//! or an origin that is not a bare `scheme://host[:port]`, is refused and
//! the old file stays. Output that passes 50,000 URLs or 50 MiB is split:
//! as XML, into `<stem>-0.xml`, `<stem>-1.xml`, … beside the output file,
//! which becomes their index.

use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
use url::Url;

use super::xml::{escape_into, sitemap_index, urlset_head, URLSET_FOOT};
use super::{check_name, io_error, SetError, SetWriter};

/// URLs one file may hold (sitemaps.org).
pub const MAX_URLS: usize = 50_000;
/// Bytes one file may hold, uncompressed (sitemaps.org: 50 MiB).
pub const MAX_BYTES: usize = 50 * 1024 * 1024;

/// What a path segment keeps as is: RFC 3986 unreserved characters and
/// the sub-delimiters, `:` and `@` (`pchar`).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// The output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A urlset (split into an index and parts when too big).
    Xml,
    /// One URL per line.
    Txt,
}

impl Format {
    /// The format to write: `explicit` (`--format`) when given, else the
    /// one `out`'s extension names (`.xml`, `.txt`; XML to stdout). A
    /// compressed name (`.gz`) is refused whatever the format (its content
    /// would not be compressed), and so, without `--format`, is any
    /// other extension.
    pub fn choose(explicit: Option<Format>, out: Option<&Path>) -> Result<Format, ExportError> {
        let Some(out) = out else {
            return Ok(explicit.unwrap_or(Format::Xml));
        };
        let bad = |why: &str| ExportError::Out(out.display().to_string(), why.to_owned());
        let extension = out
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match (extension.as_deref(), explicit) {
            (Some("gz"), _) => Err(bad(
                "compressed output is not written; write sitemap.xml (crawlgate serves it, and a web server may compress it on the way)",
            )),
            (_, Some(format)) => Ok(format),
            (Some("xml"), None) => Ok(Format::Xml),
            (Some("txt"), None) => Ok(Format::Txt),
            _ => Err(bad(
                "the format comes from the extension, .xml (a urlset) or .txt (one URL a line); pass --format xml|txt for another name",
            )),
        }
    }
}

/// Why nothing was written. The old output stays.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// `--origin`.
    #[error("--origin {0:?}: a bare scheme://host[:port] is needed, like https://example.com (no path, query or credentials)")]
    Origin(String),
    /// No pages.
    #[error("{0}: no *.html pages; the old sitemap is kept")]
    Empty(String),
    /// The folder.
    #[error("{0}: {1}")]
    Walk(String, String),
    /// Too many URLs for the way it was asked to be written.
    #[error("{urls} URLs do not fit one file ({MAX_URLS} URLs, 50 MiB): {hint}")]
    TooBig {
        /// How many.
        urls: usize,
        /// What to do instead.
        hint: &'static str,
    },
    /// `--out` names a file crawlgate cannot write as a set.
    #[error("--out {0}: {1}")]
    Out(String, String),
    /// Writing.
    #[error(transparent)]
    Set(#[from] SetError),
    /// Writing to stdout.
    #[error("stdout: {0}")]
    Stdout(#[source] io::Error),
}

/// `https://host[:port]`, checked bare.
pub fn parse_origin(text: &str) -> Result<Url, ExportError> {
    let bad = || ExportError::Origin(text.to_owned());
    let url = super::build::parse_base(text).ok_or_else(bad)?;
    if url.path() != "/" || text.trim_end_matches('/').matches('/').count() != 2 {
        return Err(bad());
    }
    Ok(url)
}

/// Every page's URL under `origin`, sorted and de-duplicated.
pub fn page_urls(public: &Path, origin: &Url) -> Result<Vec<String>, ExportError> {
    let shown = || public.display().to_string();
    if !public.is_dir() {
        return Err(ExportError::Walk(shown(), "not a folder".to_owned()));
    }
    let root = origin.as_str().trim_end_matches('/');
    let mut urls = Vec::new();
    let walker = walkdir::WalkDir::new(public)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().as_bytes().starts_with(b"."));
    for entry in walker {
        let entry = entry.map_err(|e| ExportError::Walk(shown(), e.to_string()))?;
        let name = entry.file_name().as_bytes();
        if !entry.file_type().is_file() || !name.ends_with(b".html") || name == b"404.html" {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(public) else {
            continue;
        };
        let mut url = String::from(root);
        let segments: Vec<&[u8]> = relative.iter().map(|s| s.as_bytes()).collect();
        for (i, segment) in segments.iter().enumerate() {
            url.push('/');
            let last = i + 1 == segments.len();
            if !(last && *segment == b"index.html") {
                url.extend(percent_encode(segment, SEGMENT));
            }
        }
        urls.push(url);
    }
    if urls.is_empty() {
        return Err(ExportError::Empty(shown()));
    }
    urls.sort();
    urls.dedup();
    Ok(urls)
}

/// One file's worth of URLs at a time: as many as fit both limits.
fn chunks(urls: &[String], format: Format) -> Vec<&[String]> {
    let fixed = match format {
        Format::Xml => urlset_head(false).len() + URLSET_FOOT.len(),
        Format::Txt => 0,
    };
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, fixed);
    for (i, url) in urls.iter().enumerate() {
        let size = match format {
            // Escaping grows a URL at most 6-fold ('&' → "&amp;" is 5).
            Format::Xml => escaped_len(url) + "<url><loc></loc></url>\n".len(),
            Format::Txt => url.len() + 1,
        };
        if i > start && (i - start == MAX_URLS || bytes + size > MAX_BYTES) {
            out.push(&urls[start..i]);
            (start, bytes) = (i, fixed);
        }
        bytes += size;
    }
    out.push(&urls[start..]);
    out
}

fn escaped_len(text: &str) -> usize {
    let mut out = Vec::new();
    escape_into(&mut out, text);
    out.len()
}

fn urlset(urls: &[String]) -> Vec<u8> {
    let mut out = urlset_head(false);
    for url in urls {
        out.extend_from_slice(b"<url><loc>");
        escape_into(&mut out, url);
        out.extend_from_slice(b"</loc></url>\n");
    }
    out.extend_from_slice(URLSET_FOOT);
    out
}

fn lines(urls: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for url in urls {
        out.extend_from_slice(url.as_bytes());
        out.push(b'\n');
    }
    out
}

/// What was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Pages found.
    pub urls: usize,
    /// The files written, by name (the index first when split).
    pub files: Vec<String>,
}

/// Writes the sitemap of `urls` to `out` (or stdout), split when needed.
/// `public` and `origin` give the parts' addresses when `out` lies in the
/// export; otherwise they are served by crawlgate at `/sitemaps/`.
pub fn write(
    urls: &[String],
    format: Format,
    out: Option<&Path>,
    public: &Path,
    origin: &Url,
) -> Result<Written, ExportError> {
    let parts = chunks(urls, format);
    let Some(out) = out else {
        if parts.len() > 1 {
            return Err(ExportError::TooBig {
                urls: urls.len(),
                hint: "write to a folder with --out FILE, which splits it",
            });
        }
        let body = match format {
            Format::Xml => urlset(urls),
            Format::Txt => lines(urls),
        };
        let mut stdout = io::stdout().lock();
        stdout
            .write_all(&body)
            .and_then(|()| stdout.flush())
            .map_err(ExportError::Stdout)?;
        return Ok(Written {
            urls: urls.len(),
            files: Vec::new(),
        });
    };
    let bad_out = |why: &str| ExportError::Out(out.display().to_string(), why.to_owned());
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| check_name(n).is_ok())
        .ok_or_else(|| bad_out("a file name of letters, digits, '-', '_' and '.'"))?;
    let (stem, extension) = name
        .rsplit_once('.')
        .filter(|(stem, _)| !stem.is_empty())
        .ok_or_else(|| bad_out("a name with an extension, like sitemap.xml"))?;
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut files = vec![name.to_owned()];
    if parts.len() == 1 {
        let body = match format {
            Format::Xml => urlset(urls),
            Format::Txt => lines(urls),
        };
        // Replacing a split sitemap removes its parts, `<stem>-<n>.xml`.
        let mut set = SetWriter::new(&dir, stem)?;
        set.create(name)?;
        set.write_current(&body)?;
        set.commit()?;
    } else {
        if format == Format::Txt {
            return Err(ExportError::TooBig {
                urls: urls.len(),
                hint: "use --format xml, which splits into an index and its parts",
            });
        }
        if extension != "xml" {
            return Err(bad_out("the index of a split sitemap is a .xml file"));
        }
        // The parts first, then the index that names them (with their
        // dates: a part whose content did not change keeps its own), then
        // the parts no index names any more: at every instant the index
        // in place names files that are there.
        let mut set = SetWriter::named(&dir)?;
        for (n, part) in parts.iter().enumerate() {
            let part_name = format!("{stem}-{n}.xml");
            set.create(&part_name)?;
            set.write_current(&urlset(part))?;
            files.push(part_name);
        }
        set.commit()?;
        let base = parts_base(&dir, public, origin);
        let mut listed = Vec::with_capacity(parts.len());
        for part_name in &files[1..] {
            let path = dir.join(part_name);
            let modified = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .map_err(io_error(&path))?;
            listed.push((format!("{base}{part_name}"), modified));
        }
        let index = sitemap_index(listed.iter().map(|(loc, t)| (loc.as_str(), *t)));
        let mut set = SetWriter::named(&dir)?;
        set.create(name)?;
        set.write_current(&index)?;
        set.commit()?;
        let keep = files.iter().cloned().collect();
        super::remove_stale(&dir, stem, &keep)?;
    }
    Ok(Written {
        urls: urls.len(),
        files,
    })
}

/// The address of the folder the parts are written to: its place in the
/// export, or crawlgate's `/sitemaps/`.
fn parts_base(dir: &Path, public: &Path, origin: &Url) -> String {
    let root = origin.as_str().trim_end_matches('/');
    let (Ok(dir), Ok(public)) = (dir.canonicalize(), public.canonicalize()) else {
        return format!("{root}{}", super::SERVED_PATH);
    };
    match dir.strip_prefix(&public) {
        Ok(relative) => {
            let mut base = String::from(root);
            for segment in relative.iter() {
                base.push('/');
                base.extend(percent_encode(segment.as_bytes(), SEGMENT));
            }
            base.push('/');
            base
        }
        Err(_) => format!("{root}{}", super::SERVED_PATH),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_must_be_bare() {
        for ok in [
            "https://example.com",
            "http://example.com:8080/",
            "https://[::1]:8443",
        ] {
            assert!(parse_origin(ok).is_ok(), "{ok}");
        }
        for bad in [
            "example.com",
            "https://example.com/docs",
            "https://example.com/?q",
            "https://u@example.com",
            "ftp://example.com",
            "https://example.com#x",
            "https://example.com//",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }

    fn locs(path: &Path, root: &str) -> Vec<String> {
        let xml = std::fs::read_to_string(path).expect("read");
        let doc = roxmltree::Document::parse(&xml).expect("XML");
        assert_eq!(doc.root_element().tag_name().name(), root);
        let namespace = Some(crate::sitemap::xml::NAMESPACE);
        assert_eq!(doc.root_element().tag_name().namespace(), namespace);
        doc.descendants()
            .filter(|n| n.tag_name().name() == "loc")
            .map(|n| n.text().expect("text").to_owned())
            .collect()
    }

    /// Past 50,000 pages the output is an index of parts, written beside
    /// it and addressed where the export serves them; a stale part goes,
    /// and a smaller export later removes the parts again.
    #[test]
    fn a_large_export_is_an_index_and_parts() {
        let public = tempfile::tempdir().expect("tempdir");
        let maps = public.path().join("maps");
        std::fs::create_dir(&maps).expect("mkdir");
        std::fs::write(maps.join("sitemap-7.xml"), "stale").expect("write");
        std::fs::write(maps.join("sitemap-extra.xml"), "theirs").expect("write");
        let origin = parse_origin("https://example.com").expect("origin");
        let urls: Vec<String> = (0..55_000)
            .map(|i| format!("https://example.com/p/{i:05}.html"))
            .collect();
        let out = maps.join("sitemap.xml");
        let written = write(&urls, Format::Xml, Some(&out), public.path(), &origin).expect("write");
        assert_eq!(
            written.files,
            ["sitemap.xml", "sitemap-0.xml", "sitemap-1.xml"]
        );
        assert_eq!(
            locs(&out, "sitemapindex"),
            [
                "https://example.com/maps/sitemap-0.xml",
                "https://example.com/maps/sitemap-1.xml"
            ]
        );
        let first = locs(&maps.join("sitemap-0.xml"), "urlset");
        let second = locs(&maps.join("sitemap-1.xml"), "urlset");
        assert_eq!((first.len(), second.len()), (50_000, 5_000));
        assert_eq!([first, second].concat(), urls);
        assert_eq!(
            crate::sitemap::tests::names(&maps),
            [
                "sitemap-0.xml",
                "sitemap-1.xml",
                "sitemap-extra.xml",
                "sitemap.xml"
            ]
        );
        assert!(matches!(
            write(&urls, Format::Txt, Some(&out), public.path(), &origin),
            Err(ExportError::TooBig { urls: 55_000, .. })
        ));

        // Outside the export, the parts are where crawlgate serves them.
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let out = elsewhere.path().join("sitemap.xml");
        write(&urls, Format::Xml, Some(&out), public.path(), &origin).expect("write");
        assert_eq!(
            locs(&out, "sitemapindex")[0],
            "https://example.com/sitemaps/sitemap-0.xml"
        );

        // Smaller again: one urlset, the parts removed.
        let out = maps.join("sitemap.xml");
        write(&urls[..10], Format::Xml, Some(&out), public.path(), &origin).expect("write");
        assert_eq!(locs(&out, "urlset").len(), 10);
        assert!(!maps.join("sitemap-0.xml").exists());
        assert!(maps.join("sitemap-extra.xml").exists());
    }

    #[test]
    fn the_format_follows_the_extension_unless_given() {
        let choose = |explicit, out: Option<&str>| Format::choose(explicit, out.map(Path::new));
        assert_eq!(choose(None, None).ok(), Some(Format::Xml));
        assert_eq!(choose(Some(Format::Txt), None).ok(), Some(Format::Txt));
        assert_eq!(
            choose(None, Some("maps/sitemap.txt")).ok(),
            Some(Format::Txt)
        );
        assert_eq!(choose(None, Some("sitemap.TXT")).ok(), Some(Format::Txt));
        assert_eq!(choose(None, Some("sitemap.xml")).ok(), Some(Format::Xml));
        assert_eq!(
            choose(Some(Format::Xml), Some("urls.txt")).ok(),
            Some(Format::Xml)
        );
        assert_eq!(
            choose(Some(Format::Txt), Some("urls.list")).ok(),
            Some(Format::Txt)
        );
        for refused in ["sitemap.html", "sitemap", "sitemap.xml.gz"] {
            assert!(
                matches!(choose(None, Some(refused)), Err(ExportError::Out(..))),
                "{refused}"
            );
        }
        assert!(choose(Some(Format::Xml), Some("sitemap.xml.gz")).is_err());
    }

    #[test]
    fn splits_at_the_url_count() {
        let urls: Vec<String> = (0..MAX_URLS * 2 + 1)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let sizes: Vec<usize> = chunks(&urls, Format::Xml).iter().map(|c| c.len()).collect();
        assert_eq!(sizes, [MAX_URLS, MAX_URLS, 1]);
    }

    #[test]
    fn splits_at_the_byte_size() {
        let long = "x".repeat(1900);
        let urls: Vec<String> = (0..40_000)
            .map(|i| format!("https://example.com/{long}/{i}"))
            .collect();
        let parts = chunks(&urls, Format::Txt);
        assert!(parts.len() == 2, "{}", parts.len());
        for part in &parts {
            assert!(lines(part).len() <= MAX_BYTES);
        }
        for part in chunks(&urls, Format::Xml) {
            assert!(urlset(part).len() <= MAX_BYTES);
        }
    }
}
