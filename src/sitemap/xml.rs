//! The sitemaps.org 0.9 documents as every sitemap command writes them:
//! the urlset's and the index's opening and closing, the index's entries,
//! XML escaping and W3C dates, in one place.

use std::time::SystemTime;

/// The sitemaps.org namespace.
pub const NAMESPACE: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";
/// The namespace of the `xhtml:link` alternates.
pub const XHTML_NAMESPACE: &str = "http://www.w3.org/1999/xhtml";
/// The end of a urlset file.
pub const URLSET_FOOT: &[u8] = b"</urlset>\n";

/// The start of a urlset file, declaring the `xhtml` namespace when its
/// URLs carry hreflang alternates.
pub fn urlset_head(alternates: bool) -> Vec<u8> {
    let mut head =
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"{NAMESPACE}\"");
    if alternates {
        head.push_str(&format!(" xmlns:xhtml=\"{XHTML_NAMESPACE}\""));
    }
    head.push_str(">\n");
    head.into_bytes()
}

/// A sitemap index of `files`, each its address and modification time.
pub fn sitemap_index<'a>(files: impl IntoIterator<Item = (&'a str, SystemTime)>) -> Vec<u8> {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"{NAMESPACE}\">\n"
    )
    .into_bytes();
    for (loc, modified) in files {
        out.extend_from_slice(b"<sitemap><loc>");
        escape_into(&mut out, loc);
        out.extend_from_slice(b"</loc><lastmod>");
        out.extend_from_slice(w3c_utc(modified).as_bytes());
        out.extend_from_slice(b"</lastmod></sitemap>\n");
    }
    out.extend_from_slice(b"</sitemapindex>\n");
    out
}

/// XML-escapes `text` (for element text and double-quoted attributes).
pub fn escape_into(out: &mut Vec<u8>, text: &str) {
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let entity: &[u8] = match b {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&apos;",
            _ => continue,
        };
        out.extend_from_slice(&text.as_bytes()[start..i]);
        out.extend_from_slice(entity);
        start = i + 1;
    }
    out.extend_from_slice(&text.as_bytes()[start..]);
}

/// `2024-05-01T10:00:00Z`.
pub fn w3c_utc(time: SystemTime) -> String {
    const W3C: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::from(time)
        .format(W3C)
        .unwrap_or_default()
}
