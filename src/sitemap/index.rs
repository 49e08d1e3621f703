//! `crawlgate sitemap index`: `DIR/sitemap.xml`, the index of the urlset
//! files present, which robots.txt's `Sitemap:` line follows.

use std::cmp::Ordering;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use serde::Serialize;
use url::Url;

use super::xml::sitemap_index;
use super::{check_name, io_error, SetError, SetWriter, INDEX_NAME, SERVED_PATH};

/// Files one index may list (sitemaps.org).
pub const MAX_FILES: usize = 50_000;

/// Why no index was written. The previous one is kept.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// `--base-url` or `--files-url`.
    #[error("{flag} {value:?}: an absolute http or https URL is needed")]
    Url {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
    },
    /// `--prefix`.
    #[error("--prefix: {0}")]
    Prefix(SetError),
    /// Nothing to list.
    #[error(
        "{dir}: no sitemap files ({wanted}); the previous index is kept; {}",
        prefix_hint(others)
    )]
    Empty {
        /// The folder.
        dir: String,
        /// The names looked for, `sitemap-*.xml, books-*.xml`.
        wanted: String,
        /// The prefixes of the other sets the folder holds (numbered
        /// urlsets `<prefix>-<digit>….xml` that no prefix asked for).
        others: Vec<String>,
    },
    /// Too much to list.
    #[error("{0}: {1} sitemap files, more than the {MAX_FILES} one index may list")]
    TooMany(String, usize),
    /// Reading the folder or writing the index.
    #[error(transparent)]
    Set(#[from] SetError),
}

/// What to do about an empty index: name the sets that are there.
fn prefix_hint(others: &[String]) -> String {
    if others.is_empty() {
        return "build a set into this folder first (crawlgate sitemap build --dir), or name its prefix with --prefix NAME".to_owned();
    }
    let flags: Vec<String> = others.iter().map(|p| format!("--prefix {p}")).collect();
    format!(
        "the folder holds the set{} {}: list {} with {}",
        if others.len() == 1 { "" } else { "s" },
        others.join(", "),
        if others.len() == 1 { "it" } else { "them" },
        flags.join(" ")
    )
}

/// One file listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// Its name in the folder.
    pub name: String,
    /// The address crawlers fetch it at.
    pub loc: String,
}

/// What an index run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IndexReport {
    /// The files listed, in order.
    pub listed: Vec<Listed>,
    /// Files of a listed prefix that are not urlsets, left out.
    pub skipped: Vec<String>,
    /// Whether the index already held exactly this.
    pub unchanged: bool,
}

/// Where the files are served: `files_url` (a folder URL), or else
/// `sitemaps/` below `base_url` (its path kept, as a folder:
/// `https://example.com/shop` lists `https://example.com/shop/sitemaps/…`),
/// where crawlgate serves them.
pub fn files_base(base_url: &str, files_url: Option<&str>) -> Result<Url, IndexError> {
    let bad = |flag, value: &str| IndexError::Url {
        flag,
        value: value.to_owned(),
    };
    let base = super::build::parse_base(base_url).ok_or_else(|| bad("--base-url", base_url))?;
    match files_url {
        Some(text) => {
            let mut url = super::build::parse_base(text).ok_or_else(|| bad("--files-url", text))?;
            if !url.path().ends_with('/') {
                let path = format!("{}/", url.path());
                url.set_path(&path);
            }
            Ok(url)
        }
        None => {
            let mut base = base;
            if !base.path().ends_with('/') {
                let path = format!("{}/", base.path());
                base.set_path(&path);
            }
            base.join(SERVED_PATH.trim_start_matches('/'))
                .map_err(|_| bad("--base-url", base_url))
        }
    }
}

/// Writes `dir/sitemap.xml` listing every urlset file `<prefix>-*.xml`
/// of `prefixes` in `dir`, each at `files` + its name, with its
/// modification time as lastmod.
pub fn write_index(
    dir: &Path,
    files: &Url,
    prefixes: &[String],
) -> Result<IndexReport, IndexError> {
    for prefix in prefixes {
        check_name(prefix).map_err(IndexError::Prefix)?;
    }
    let mut found = Vec::new();
    // Numbered files of other prefixes, for the hint when nothing is found.
    let mut others = Vec::new();
    let mut report = IndexReport::default();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let listed = prefixes.iter().any(|p| {
            name.strip_prefix(p.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|rest| rest.len() > 4 && rest.ends_with(".xml"))
        });
        if !listed {
            if let Some(prefix) = numbered_prefix(&name) {
                others.push((prefix.to_owned(), entry.path()));
            }
            continue;
        }
        if check_name(&name).is_err() || name == INDEX_NAME {
            continue;
        }
        let path = entry.path();
        let meta = fs::metadata(&path).map_err(io_error(&path))?;
        if !meta.is_file() {
            continue;
        }
        if !is_urlset(&path).map_err(io_error(&path))? {
            report.skipped.push(name);
            continue;
        }
        let modified = meta.modified().map_err(io_error(&path))?;
        found.push((name, modified));
    }
    let wanted = prefixes
        .iter()
        .map(|p| format!("{p}-*.xml"))
        .collect::<Vec<_>>()
        .join(", ");
    let shown = dir.display().to_string();
    if found.is_empty() {
        let mut prefixes = std::collections::BTreeSet::new();
        for (prefix, path) in others {
            if !prefixes.contains(&prefix) && path.is_file() && is_urlset(&path).unwrap_or(false) {
                prefixes.insert(prefix);
            }
        }
        return Err(IndexError::Empty {
            dir: shown,
            wanted,
            others: prefixes.into_iter().collect(),
        });
    }
    if found.len() > MAX_FILES {
        return Err(IndexError::TooMany(shown, found.len()));
    }
    found.sort_by(|a, b| natural(&a.0, &b.0));
    report.skipped.sort();

    let mut dates = Vec::with_capacity(found.len());
    for (name, modified) in found {
        // Names are checked: letters, digits, '-', '_' and '.' only.
        let loc = files
            .join(&name)
            .map(String::from)
            .unwrap_or_else(|_| format!("{files}{name}"));
        report.listed.push(Listed { name, loc });
        dates.push(modified);
    }
    let body = sitemap_index(report.listed.iter().map(|l| l.loc.as_str()).zip(dates));

    let mut set = SetWriter::named(dir)?;
    set.create(INDEX_NAME)?;
    set.write_current(&body)?;
    let committed = set.commit()?;
    report.unchanged = !committed.unchanged.is_empty();
    Ok(report)
}

/// The prefix of a numbered set file, `<prefix>-<digit>….xml`, as
/// `build` names them (the part before the first `-` and digit):
/// `books` of `books-0.xml` and `books-3-1.xml`.
fn numbered_prefix(name: &str) -> Option<&str> {
    if !name.ends_with(".xml") || check_name(name).is_err() {
        return None;
    }
    let at = name
        .as_bytes()
        .windows(2)
        .position(|w| w[0] == b'-' && w[1].is_ascii_digit())?;
    Some(&name[..at]).filter(|p| !p.is_empty())
}

/// Whether the file's root element is `urlset` (read from its first
/// 4 KiB).
fn is_urlset(path: &Path) -> io::Result<bool> {
    let mut head = Vec::with_capacity(4096);
    fs::File::open(path)?.take(4096).read_to_end(&mut head)?;
    Ok(head.windows(7).any(|w| w == b"<urlset"))
}

/// Name order with digit runs compared as numbers: `sitemap-2.xml`
/// before `sitemap-10.xml`, `sitemap-1.xml` before `sitemap-1-1.xml`.
fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                let order = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (&a[da..], &b[db..]);
            }
            (Some(x), Some(y)) => {
                // '.' (the extension) sorts before '-' (a continuation).
                let rank = |c: u8| if c == b'.' { 0 } else { u16::from(c) + 1 };
                let order = rank(*x).cmp(&rank(*y));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (&a[1..], &b[1..]);
            }
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&d| d == b'0').count();
    &digits[zeros.min(digits.len().saturating_sub(1))..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut names = vec![
            "sitemap-10.xml",
            "sitemap-2.xml",
            "sitemap-1-1.xml",
            "sitemap-1.xml",
            "sitemap-0.xml",
            "sitemap-1-10.xml",
            "sitemap-1-2.xml",
            "products-3.xml",
        ];
        names.sort_by(|a, b| natural(a, b));
        assert_eq!(
            names,
            [
                "products-3.xml",
                "sitemap-0.xml",
                "sitemap-1.xml",
                "sitemap-1-1.xml",
                "sitemap-1-2.xml",
                "sitemap-1-10.xml",
                "sitemap-2.xml",
                "sitemap-10.xml",
            ]
        );
    }

    #[test]
    fn numbered_prefixes() {
        for (name, prefix) in [
            ("books-0.xml", Some("books")),
            ("books-12-1.xml", Some("books")),
            ("my-books-3.xml", Some("my-books")),
            ("sitemap-categories.xml", None),
            ("books-0.txt", None),
            ("-0.xml", None),
            (".books-0.xml", None),
        ] {
            assert_eq!(numbered_prefix(name), prefix, "{name}");
        }
    }

    #[test]
    fn files_are_served_under_sitemaps_unless_told() {
        let url = |base, files| files_base(base, files).map(String::from).expect("ok");
        // The base URL's path is kept, with or without its slash.
        assert_eq!(
            url("https://example.com/shop/", None),
            "https://example.com/shop/sitemaps/"
        );
        assert_eq!(
            url("https://example.com/shop", None),
            "https://example.com/shop/sitemaps/"
        );
        assert_eq!(
            url("https://example.com", None),
            "https://example.com/sitemaps/"
        );
        assert_eq!(
            url("https://example.com", Some("https://cdn.example.com/maps")),
            "https://cdn.example.com/maps/"
        );
        assert!(files_base("example.com", None).is_err());
        assert!(files_base("https://example.com", Some("ftp://x/")).is_err());
    }
}
