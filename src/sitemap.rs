//! Sitemaps: sets of files built from the site's data ([`build`]), their
//! index ([`index`]), a static export's pages ([`export`]), serving the
//! folder at `/sitemaps/` ([`serve`]), and replacing a whole set at once
//! ([`SetWriter`]).
//!
//! A crawler may read any sitemap file at any instant, and a cron job that
//! writes in place lets it read half a file; a failure half-way through a
//! set leaves the site with a mix of old and new. [`SetWriter`] writes each
//! file of a set to a random temporary file beside its target (same
//! folder, so same filesystem), and only when every file has been written,
//! flushed and synced are they given mode 0664 (the web server reads them,
//! whatever the umask) and renamed into place; then the set's stale
//! numbered files (`<prefix>-[0-9]*.xml` and nothing else) are removed and
//! the folder is synced. A failure, or a writer dropped before
//! [`SetWriter::commit`], removes only its own temporary files: the
//! previous set stays whole. Each rename replaces one file atomically, so a
//! reader sees the complete old or the complete new file under every name.
//! A file whose new content is byte for byte the one in place is left
//! alone, date included, so that crawlers' conditional requests keep
//! getting 304 for what did not change.
//!
//! Two writers of one prefix at once (a cron job that overran its
//! interval) would mix their files and remove each other's: a prefixed
//! set holds an exclusive lock on `.<prefix>.lock` in the folder for its
//! whole life, and a second writer fails at once ([`SetError::Busy`]).
//! The lock is the kernel's (`flock`), released when the writer is
//! dropped or its process dies, so a crash leaves no stale lock; the
//! empty file stays, and is never served (names starting with `.` are
//! not).

use std::collections::BTreeSet;
use std::fs::{self, File, Permissions};
use std::io::{self, BufWriter};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::{NamedTempFile, TempPath};

pub mod build;
pub mod export;
pub mod index;
pub mod lastmod;
pub mod serve;
pub mod xml;

/// Where crawlgate serves the sitemap folder: `GET /sitemaps/<name>`.
/// robots.txt's `Sitemap:` line, the index's addresses and the server
/// all take it from here.
pub const SERVED_PATH: &str = "/sitemaps/";
/// The index's name in the folder; robots.txt advertises it while it
/// exists.
pub const INDEX_NAME: &str = "sitemap.xml";

/// The mode of every file of a set: the owner and its group write, every
/// process (the web server) reads.
pub const FILE_MODE: u32 = 0o664;

/// Why a set could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// A prefix or file name that cannot be used.
    #[error(
        "{0:?}: a name is 1 to 128 ASCII letters, digits, '-', '_' or '.', not starting with '.'"
    )]
    Name(String),
    /// The same file named twice in one set.
    #[error("{0}: named twice in one set")]
    Twice(String),
    /// Another writer holds the prefix's lock.
    #[error("{}: another build of the set {prefix:?} is writing in this folder; run one at a time", lock.display())]
    Busy {
        /// The set's prefix.
        prefix: String,
        /// The lock file.
        lock: PathBuf,
    },
    /// The folder or a file in it.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SetError + '_ {
    move |source| SetError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The file of a set being written: its buffer and descriptor are the
/// only ones a set holds open, whatever its number of files.
struct Current {
    name: String,
    temp: BufWriter<NamedTempFile>,
}

/// Writes one set of files into a folder, replacing the previous set only
/// when every file is complete.
pub struct SetWriter {
    dir: PathBuf,
    /// The set's prefix, whose stale numbered files a commit removes
    /// (`None`: a set of named files only, like the index).
    prefix: Option<String>,
    current: Option<Current>,
    /// Files written, synced and closed, waiting for the commit (each
    /// removed if dropped).
    done: Vec<(String, TempPath)>,
    /// The prefix's lock, held until the writer is dropped (the kernel
    /// releases it with the descriptor).
    _lock: Option<File>,
}

/// What a committed set changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// The files written, by name.
    pub written: Vec<String>,
    /// Stale numbered files of the prefix removed.
    pub removed: Vec<String>,
    /// Files written whose content was already in place, left alone.
    pub unchanged: Vec<String>,
}

impl SetWriter {
    /// A set of `prefix`'s files in `dir` (which must exist), holding the
    /// prefix's lock: [`SetError::Busy`] while another writer holds it.
    pub fn new(dir: &Path, prefix: &str) -> Result<Self, SetError> {
        Self::check(dir, prefix)?;
        let path = dir.join(format!(".{prefix}.lock"));
        // Read-only is enough to lock, so any user who may read the set
        // may take its lock; the first build creates the file, readable
        // and writable by the group as the set's files are.
        let lock = match File::open(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .and_then(|file| {
                    fs::set_permissions(&path, Permissions::from_mode(FILE_MODE))?;
                    Ok(file)
                }),
            opened => opened,
        }
        .map_err(io_error(&path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(SetError::Busy {
                    prefix: prefix.to_owned(),
                    lock: path,
                })
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_error(&path)(e)),
        }
        Ok(Self::in_dir(dir, Some(prefix.to_owned()), Some(lock)))
    }

    /// What [`SetWriter::new`] checks before it takes the lock (a usable
    /// prefix, an existing folder), without writing anything: for dry
    /// runs.
    pub fn check(dir: &Path, prefix: &str) -> Result<(), SetError> {
        check_name(prefix)?;
        check_dir(dir)
    }

    /// A set of named files in `dir` that removes nothing else (the
    /// index). Unlocked: each file is replaced whole, whoever writes it.
    pub fn named(dir: &Path) -> Result<Self, SetError> {
        check_dir(dir)?;
        Ok(Self::in_dir(dir, None, None))
    }

    fn in_dir(dir: &Path, prefix: Option<String>, lock: Option<File>) -> Self {
        Self {
            dir: dir.to_owned(),
            prefix,
            current: None,
            done: Vec::new(),
            _lock: lock,
        }
    }

    /// Appends to the file created last.
    pub fn write_current(&mut self, bytes: &[u8]) -> Result<(), SetError> {
        use std::io::Write;
        let Some(file) = &mut self.current else {
            return Err(SetError::Io {
                path: self.dir.clone(),
                source: io::Error::other("no file created"),
            });
        };
        let dir = &self.dir;
        file.temp.write_all(bytes).map_err(|source| SetError::Io {
            path: dir.join(&file.name),
            source,
        })
    }

    /// A new file `name` of the set, to be written through the returned
    /// writer (a random temporary file beside the target). The file
    /// written before is finished: flushed, synced, given its mode and
    /// closed.
    pub fn create(&mut self, name: &str) -> Result<&mut BufWriter<NamedTempFile>, SetError> {
        check_name(name)?;
        let twice = self.done.iter().any(|(n, _)| n == name)
            || self.current.as_ref().is_some_and(|c| c.name == name);
        if twice {
            return Err(SetError::Twice(name.to_owned()));
        }
        self.finish_current()?;
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(&self.dir)
            .map_err(io_error(&self.dir))?;
        let current = self.current.insert(Current {
            name: name.to_owned(),
            temp: BufWriter::with_capacity(64 * 1024, temp),
        });
        Ok(&mut current.temp)
    }

    /// Flushes, syncs and closes the file being written, with its mode.
    fn finish_current(&mut self) -> Result<(), SetError> {
        let Some(file) = self.current.take() else {
            return Ok(());
        };
        let path = self.dir.join(&file.name);
        let temp = file
            .temp
            .into_inner()
            .map_err(|e| io_error(&path)(e.into_error()))?;
        temp.as_file().sync_all().map_err(io_error(&path))?;
        fs::set_permissions(temp.path(), Permissions::from_mode(FILE_MODE))
            .map_err(io_error(&path))?;
        self.done.push((file.name, temp.into_temp_path()));
        Ok(())
    }

    /// Finishes the last file, then renames each into place (or leaves
    /// the one in place when it already holds the same bytes), removes
    /// the stale numbered files of the prefix that the set does not hold,
    /// and syncs the folder. On an error before the renames, nothing is
    /// replaced and every temporary file is removed.
    pub fn commit(mut self) -> Result<Committed, SetError> {
        // The last thing that can fail before anything is replaced.
        self.finish_current()?;
        // The lock, if any, is held until the stale files are removed.
        let Self {
            dir,
            prefix,
            done,
            _lock,
            ..
        } = self;
        let written: BTreeSet<String> = done.iter().map(|(name, _)| name.clone()).collect();
        let mut committed = Committed::default();
        for (name, temp) in done {
            let path = dir.join(&name);
            if same_content(&temp, &path).map_err(io_error(&path))? {
                // Dropping the temporary file removes it.
                committed.unchanged.push(name.clone());
            } else {
                temp.persist(&path).map_err(|e| io_error(&path)(e.error))?;
            }
            committed.written.push(name);
        }
        let Some(prefix) = prefix else {
            return sync_dir(&dir).map(|()| committed);
        };
        committed.removed = remove_stale(&dir, &prefix, &written)?;
        sync_dir(&dir)?;
        Ok(committed)
    }
}

/// The numbered files of `prefix` in `dir` that `keep` does not name:
/// what a commit of the set `keep` removes.
pub fn stale(dir: &Path, prefix: &str, keep: &BTreeSet<String>) -> Result<Vec<String>, SetError> {
    let mut stale = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if is_numbered(prefix, &name) && !keep.contains(&name) && entry.path().is_file() {
            stale.push(name);
        }
    }
    stale.sort();
    Ok(stale)
}

/// Removes what [`stale`] lists, and returns it (sorted).
pub fn remove_stale(
    dir: &Path,
    prefix: &str,
    keep: &BTreeSet<String>,
) -> Result<Vec<String>, SetError> {
    let names = stale(dir, prefix, keep)?;
    for name in &names {
        let path = dir.join(name);
        fs::remove_file(&path).map_err(io_error(&path))?;
    }
    Ok(names)
}

fn check_dir(dir: &Path) -> Result<(), SetError> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(SetError::Io {
            path: dir.to_owned(),
            source: io::Error::new(io::ErrorKind::NotFound, "not a folder"),
        })
    }
}

fn sync_dir(dir: &Path) -> Result<(), SetError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(dir))
}

/// Whether the regular file at `path` holds exactly what the file at
/// `new` holds.
fn same_content(new: &Path, path: &Path) -> io::Result<bool> {
    use std::io::Read;
    let mut old = match File::open(path) {
        Ok(old) => old,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let meta = old.metadata()?;
    let mut new = File::open(new)?;
    if !meta.is_file() || meta.len() != new.metadata()?.len() {
        return Ok(false);
    }
    let (mut a, mut b) = (vec![0; 64 * 1024], vec![0; 64 * 1024]);
    loop {
        let n = old.read(&mut a)?;
        if n == 0 {
            return Ok(true);
        }
        new.read_exact(&mut b[..n])?;
        if a[..n] != b[..n] {
            return Ok(false);
        }
    }
}

/// Compares a file being produced, piece by piece, with the one in place
/// under its name, without writing anything: what a dry run uses to
/// predict which files [`SetWriter::commit`] would leave alone. It holds
/// one read buffer, whatever the file's size, and decides as
/// `same_content` does: the same bytes in a regular file.
pub struct Comparison {
    path: PathBuf,
    /// The file in place while it still matches (`None`: no file, not a
    /// regular file, or a difference found).
    old: Option<io::BufReader<File>>,
    buffer: Vec<u8>,
}

impl Comparison {
    /// Starts comparing with `dir/name`.
    pub fn open(dir: &Path, name: &str) -> Result<Self, SetError> {
        let path = dir.join(name);
        let old = match File::open(&path) {
            Ok(file) => {
                let meta = file.metadata().map_err(io_error(&path))?;
                meta.is_file()
                    .then(|| io::BufReader::with_capacity(64 * 1024, file))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&path)(e)),
        };
        Ok(Self {
            path,
            old,
            buffer: Vec::new(),
        })
    }

    /// The next bytes of the new file.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), SetError> {
        use std::io::Read;
        let Some(old) = &mut self.old else {
            return Ok(());
        };
        self.buffer.resize(bytes.len(), 0);
        match old.read_exact(&mut self.buffer) {
            Ok(()) if self.buffer == bytes => Ok(()),
            Ok(()) => {
                self.old = None;
                Ok(())
            }
            // The file in place is shorter.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.old = None;
                Ok(())
            }
            Err(e) => Err(io_error(&self.path)(e)),
        }
    }

    /// Whether the file in place holds exactly the bytes written, no more.
    pub fn finish(self) -> Result<bool, SetError> {
        use std::io::BufRead;
        let Some(mut old) = self.old else {
            return Ok(false);
        };
        let rest = old.fill_buf().map_err(io_error(&self.path))?;
        Ok(rest.is_empty())
    }
}

/// Whether `name` is one of `prefix`'s numbered files:
/// `<prefix>-[0-9]*.xml` (a digit right after the dash).
pub fn is_numbered(prefix: &str, name: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|rest| {
            rest.as_bytes().first().is_some_and(u8::is_ascii_digit) && rest.ends_with(".xml")
        })
}

/// A name crawlgate writes or serves in the sitemap folder: 1 to 128
/// ASCII letters, digits, `-`, `_` or `.`, not starting with `.` (the
/// temporary files do): nothing to escape, no way out of the folder.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub(crate) fn check_name(name: &str) -> Result<(), SetError> {
    if is_plain_name(name) {
        Ok(())
    } else {
        Err(SetError::Name(name.to_owned()))
    }
}

#[cfg(test)]
mod tests;
