//! Serving the sitemap folder: `GET|HEAD /sitemaps/<name>`.
//!
//! Only a regular file directly named by the request is served: the name
//! is letters, digits, `-`, `_` and `.` (so no `/`, no `%`-encoding, no
//! `..`), not starting with `.` (temporary files), ending `.xml`,
//! `.xml.gz` or `.txt`; and the file, symlinks resolved, must lie inside
//! the folder. Anything else is 404. The file is streamed from disk with
//! `ETag` (its size and modification time) and `Last-Modified`, and a
//! conditional request that still matches gets 304. Since a set is
//! replaced by renames, an open file is always one whole version: a
//! response that began streaming finishes the version it began.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, ReadBuf};

use super::{is_plain_name, SERVED_PATH};

/// How much of a file one body frame carries.
const CHUNK: usize = 64 * 1024;

/// The sitemap folder as the request path serves it.
#[derive(Clone, Debug)]
pub struct Sitemaps {
    /// The folder.
    pub dir: PathBuf,
    /// `Cache-Control` of the files served.
    pub cache_control: HeaderValue,
}

/// A file's kind, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `.xml`: `application/xml`.
    Xml,
    /// `.xml.gz`: `application/gzip`.
    XmlGz,
    /// `.txt`: `text/plain`.
    Text,
}

impl Kind {
    /// The `Content-Type`.
    pub fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Kind::Xml => "application/xml; charset=utf-8",
            Kind::XmlGz => "application/gzip",
            Kind::Text => "text/plain; charset=utf-8",
        })
    }
}

/// The file a request path names, if it names a servable one:
/// `/sitemaps/<name>` with a plain name of a served kind.
pub fn file_name(path: &str) -> Option<(&str, Kind)> {
    let name = path.strip_prefix(SERVED_PATH)?;
    if !is_plain_name(name) {
        return None;
    }
    let kind = if name.ends_with(".xml.gz") {
        Kind::XmlGz
    } else if name.ends_with(".xml") {
        Kind::Xml
    } else if name.ends_with(".txt") {
        Kind::Text
    } else {
        return None;
    };
    Some((name, kind))
}

/// An open file to serve, with its validators (from the open file, so
/// they describe what is sent).
#[derive(Debug)]
pub struct Opened {
    /// What is sent.
    pub content: Content,
    /// Its size.
    pub len: u64,
    /// Its modification time, whole seconds (an HTTP date has no more).
    pub modified: SystemTime,
    /// Its strong tag: size and modification time to the nanosecond.
    pub etag: HeaderValue,
}

/// A file's bytes: still on disk, or already read.
#[derive(Debug)]
pub enum Content {
    /// The open file, at its start, to be streamed.
    File(tokio::fs::File),
    /// The whole file, read with the open (a small file asked for whole).
    Read(Bytes),
}

impl Sitemaps {
    /// Opens `name` in the folder; with `read_small`, a file of at most
    /// one chunk is read whole at once. `Ok(None)`: nothing servable
    /// there (no such file, not a regular file, or a link leading out of
    /// the folder).
    ///
    /// Resolving, opening, the metadata and the small read are blocking
    /// calls: they run together in one trip to the blocking pool, not one
    /// trip each.
    pub async fn open(&self, name: &str, read_small: bool) -> io::Result<Option<Opened>> {
        let dir = self.dir.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || open_blocking(&dir, &name, read_small))
            .await
            .map_err(io::Error::other)?
    }
}

/// The blocking half of [`Sitemaps::open`].
fn open_blocking(dir: &Path, name: &str, read_small: bool) -> io::Result<Option<Opened>> {
    use std::io::Read;
    let dir = match std::fs::canonicalize(dir) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let path = match std::fs::canonicalize(dir.join(name)) {
        Ok(path) => path,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    if !inside(&dir, &path) {
        return Ok(None);
    }
    // Only a regular file is opened: opening a named pipe or a device to
    // read can wait forever (and hold up shutdown, which waits for this
    // thread). The open file is checked again below, in case it was
    // replaced in between.
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    let len = meta.len();
    let since_epoch = meta
        .modified()?
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let content = if read_small && len <= CHUNK as u64 {
        let mut buf = Vec::with_capacity(len as usize);
        (&mut file).take(len).read_to_end(&mut buf)?;
        if buf.len() as u64 != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file became shorter while it was read",
            ));
        }
        Content::Read(Bytes::from(buf))
    } else {
        // Needs no runtime: the reads run on the pool when polled.
        Content::File(tokio::fs::File::from_std(file))
    };
    let etag = format!("\"{len:x}-{:x}\"", since_epoch.as_nanos());
    Ok(Some(Opened {
        content,
        len,
        modified: UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs()),
        etag: HeaderValue::try_from(etag).unwrap_or(HeaderValue::from_static("\"0\"")),
    }))
}

/// Not there, or not for us to read.
fn gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied | io::ErrorKind::NotADirectory
    )
}

/// Whether the resolved `path` lies inside the resolved `dir`.
fn inside(dir: &Path, path: &Path) -> bool {
    path.starts_with(dir) && path != dir
}

/// A file's body, streamed in chunks, exactly `len` bytes: a file that
/// turns out shorter (truncated in place by something else) ends the body
/// with an error, so the response is cut off, never passed off as
/// complete.
#[derive(Debug)]
pub struct FileBody {
    file: tokio::fs::File,
    remaining: u64,
    buf: BytesMut,
}

impl FileBody {
    /// The first `len` bytes of `file`.
    pub fn new(file: tokio::fs::File, len: u64) -> Self {
        Self {
            file,
            remaining: len,
            buf: BytesMut::new(),
        }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = usize::try_from(this.remaining).map_or(CHUNK, |r| r.min(CHUNK));
        if this.buf.len() != want {
            this.buf.resize(want, 0);
        }
        let mut read = ReadBuf::new(&mut this.buf);
        match Pin::new(&mut this.file).poll_read(cx, &mut read) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) => {
                let n = read.filled().len();
                if n == 0 {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file became shorter while it was sent",
                    ))));
                }
                this.remaining -= n as u64;
                let chunk = this.buf.split_to(n).freeze();
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Whether a request's validators let it have 304 for `opened`.
pub fn not_modified(headers: &HeaderMap, opened: &Opened) -> bool {
    crate::validators::not_modified(
        headers,
        Some(&opened.etag),
        Some(opened.modified),
        SystemTime::now(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_of_served_kinds() {
        for (path, kind) in [
            ("/sitemaps/sitemap.xml", Kind::Xml),
            ("/sitemaps/sitemap-0-1.xml", Kind::Xml),
            ("/sitemaps/products_2024.xml.gz", Kind::XmlGz),
            ("/sitemaps/sitemap.txt", Kind::Text),
        ] {
            assert_eq!(file_name(path).map(|(_, k)| k), Some(kind), "{path}");
        }
        for path in [
            "/sitemaps/",
            "/sitemaps",
            "/sitemaps/../etc/passwd",
            "/sitemaps/..",
            "/sitemaps/.sitemap-0.xml.abc.tmp",
            "/sitemaps/%2e%2e%2fetc%2fpasswd.xml",
            "/sitemaps/a%2Fb.xml",
            "/sitemaps/sub/sitemap.xml",
            "/sitemaps/sitemap.xml/",
            "/sitemaps/sitemap.php",
            "/sitemaps/sitemap.xml.bak",
            "/sitemaps/sitemap xml.xml",
            "/sitemaps/a\\b.xml",
            "/other/sitemap.xml",
            "//sitemaps/sitemap.xml",
        ] {
            assert_eq!(file_name(path), None, "{path}");
        }
    }

    #[test]
    fn resolved_paths_stay_inside() {
        let dir = Path::new("/srv/maps");
        assert!(inside(dir, Path::new("/srv/maps/sitemap.xml")));
        assert!(!inside(dir, Path::new("/srv/maps")));
        assert!(!inside(dir, Path::new("/srv/mapsx/sitemap.xml")));
        assert!(!inside(dir, Path::new("/etc/passwd")));
    }
}
