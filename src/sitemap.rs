//! Sitemaps (issue 15), part one: replacing a whole set of files at once.
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
//!
//! Not yet here: building the urlset files from entries, the index, the
//! static-export conversion and serving (the rest of issue 15).

use std::collections::BTreeSet;
use std::fs::{self, File, Permissions};
use std::io::{self, BufWriter};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// The mode of every file of a set: the owner and its group write, every
/// process (the web server) reads.
pub const FILE_MODE: u32 = 0o664;

/// Why a set could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// A prefix or file name that cannot be used.
    #[error(
        "{0:?}: a name is 1 to 64 ASCII letters, digits, '-', '_' or '.', not starting with '.'"
    )]
    Name(String),
    /// The same file named twice in one set.
    #[error("{0}: named twice in one set")]
    Twice(String),
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

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SetError + '_ {
    move |source| SetError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One file of a set being written.
struct Pending {
    name: String,
    temp: BufWriter<NamedTempFile>,
}

/// Writes one set of files into a folder, replacing the previous set only
/// when every file is complete.
pub struct SetWriter {
    dir: PathBuf,
    prefix: String,
    files: Vec<Pending>,
}

/// What a committed set changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// The files written, by name.
    pub written: Vec<String>,
    /// Stale numbered files of the prefix removed.
    pub removed: Vec<String>,
}

impl SetWriter {
    /// A set of `prefix`'s files in `dir` (which must exist).
    pub fn new(dir: &Path, prefix: &str) -> Result<Self, SetError> {
        check_name(prefix)?;
        if !dir.is_dir() {
            return Err(SetError::Io {
                path: dir.to_owned(),
                source: io::Error::new(io::ErrorKind::NotFound, "not a folder"),
            });
        }
        Ok(Self {
            dir: dir.to_owned(),
            prefix: prefix.to_owned(),
            files: Vec::new(),
        })
    }

    /// A new file `name` of the set, to be written through the returned
    /// writer (a random temporary file beside the target).
    pub fn create(&mut self, name: &str) -> Result<&mut BufWriter<NamedTempFile>, SetError> {
        check_name(name)?;
        if self.files.iter().any(|f| f.name == name) {
            return Err(SetError::Twice(name.to_owned()));
        }
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(&self.dir)
            .map_err(io_error(&self.dir))?;
        self.files.push(Pending {
            name: name.to_owned(),
            temp: BufWriter::with_capacity(64 * 1024, temp),
        });
        let last = self.files.len() - 1;
        Ok(&mut self.files[last].temp)
    }

    /// Flushes and syncs every file, then gives each its mode and renames
    /// it into place, removes the stale numbered files of the prefix that
    /// the set does not hold, and syncs the folder. On an error before the
    /// renames, nothing is replaced and every temporary file is removed.
    pub fn commit(self) -> Result<Committed, SetError> {
        let Self { dir, prefix, files } = self;
        // Everything that can fail before anything is replaced.
        let mut ready = Vec::with_capacity(files.len());
        for file in files {
            let path = dir.join(&file.name);
            let temp = file
                .temp
                .into_inner()
                .map_err(|e| io_error(&path)(e.into_error()))?;
            temp.as_file().sync_all().map_err(io_error(&path))?;
            fs::set_permissions(temp.path(), Permissions::from_mode(FILE_MODE))
                .map_err(io_error(&path))?;
            ready.push((file.name, temp));
        }
        let written: BTreeSet<String> = ready.iter().map(|(name, _)| name.clone()).collect();
        let mut committed = Committed::default();
        for (name, temp) in ready {
            let path = dir.join(&name);
            temp.persist(&path).map_err(|e| io_error(&path)(e.error))?;
            committed.written.push(name);
        }
        for entry in fs::read_dir(&dir).map_err(io_error(&dir))? {
            let entry = entry.map_err(io_error(&dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_numbered(&prefix, &name) && !written.contains(&name) {
                let path = entry.path();
                if path.is_file() {
                    fs::remove_file(&path).map_err(io_error(&path))?;
                    committed.removed.push(name);
                }
            }
        }
        committed.removed.sort();
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error(&dir))?;
        Ok(committed)
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

fn check_name(name: &str) -> Result<(), SetError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(SetError::Name(name.to_owned()))
    }
}

#[cfg(test)]
mod tests;
