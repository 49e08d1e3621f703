use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;

/// Every file in `dir`, sorted (the sitemap modules' tests share it).
pub(in crate::sitemap) fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        // The sets' lock files (`.<prefix>.lock`) stay; they are not files
        // of a set. Temporary files (also hidden) are listed.
        .filter(|n| !(n.starts_with('.') && n.ends_with(".lock")))
        .collect();
    names.sort();
    names
}

fn read(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).expect("read")
}

fn write_set(dir: &Path, files: &[(&str, &str)]) -> Committed {
    let mut set = SetWriter::new(dir, "sitemap").expect("writer");
    for (name, text) in files {
        set.create(name)
            .expect("create")
            .write_all(text.as_bytes())
            .expect("write");
    }
    set.commit().expect("commit")
}

#[test]
fn the_pattern_is_numbered_files_of_the_prefix_only() {
    for name in ["sitemap-0.xml", "sitemap-12.xml", "sitemap-3-1.xml"] {
        assert!(is_numbered("sitemap", name), "{name}");
    }
    for name in [
        "sitemap.xml",
        "sitemap-categories.xml",
        "sitemap-.xml",
        "sitemap-1.txt",
        "sitemaps-1.xml",
        "products-1.xml",
        "xsitemap-1.xml",
    ] {
        assert!(!is_numbered("sitemap", name), "{name}");
    }
    assert!(is_numbered("products", "products-4.xml"));
}

#[test]
fn a_set_replaces_the_old_one_and_spares_look_alikes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    fs::write(d.join("sitemap-categories.xml"), "theirs").expect("write");
    fs::write(d.join("products-1.xml"), "another set").expect("write");
    write_set(
        d,
        &[
            ("sitemap-0.xml", "a0"),
            ("sitemap-1.xml", "a1"),
            ("sitemap-1-1.xml", "a11"),
        ],
    );
    let second = write_set(d, &[("sitemap-0.xml", "b0")]);
    assert_eq!(second.written, ["sitemap-0.xml"]);
    assert_eq!(second.removed, ["sitemap-1-1.xml", "sitemap-1.xml"]);
    assert_eq!(
        names(d),
        ["products-1.xml", "sitemap-0.xml", "sitemap-categories.xml"],
        "no temporary file is left, look-alikes and other sets are spared"
    );
    assert_eq!(read(d, "sitemap-0.xml"), "b0");
    assert_eq!(read(d, "sitemap-categories.xml"), "theirs");
}

#[test]
fn files_are_0664_whatever_the_umask() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_set(dir.path(), &[("sitemap-0.xml", "x")]);
    let mode = fs::metadata(dir.path().join("sitemap-0.xml"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, FILE_MODE);
}

/// A set abandoned half-way (an error while writing its second file, say)
/// leaves the previous set whole and no temporary file behind.
#[test]
fn a_failure_mid_set_leaves_the_old_set_intact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write_set(d, &[("sitemap-0.xml", "old0"), ("sitemap-1.xml", "old1")]);
    {
        let mut set = SetWriter::new(d, "sitemap").expect("writer");
        set.create("sitemap-0.xml")
            .expect("create")
            .write_all(b"new0")
            .expect("write");
        set.create("sitemap-1.xml")
            .expect("create")
            .write_all(b"new1 half")
            .expect("write");
        // The input fails here: the writer is dropped without commit.
        assert!(matches!(
            set.create("sitemap-0.xml"),
            Err(SetError::Twice(_))
        ));
        assert!(matches!(set.create("../x.xml"), Err(SetError::Name(_))));
    }
    assert_eq!(names(d), ["sitemap-0.xml", "sitemap-1.xml"]);
    assert_eq!(read(d, "sitemap-0.xml"), "old0");
    assert_eq!(read(d, "sitemap-1.xml"), "old1");
}

/// A reader opening the files while sets are rewritten in a loop always
/// reads a whole file of one set, never a part.
#[test]
fn a_concurrent_reader_never_sees_a_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_owned();
    let body = |generation: u32| {
        let line = format!("<url>{generation}</url>\n");
        format!("<urlset>\n{}</urlset>\n", line.repeat(2000))
    };
    write_set(&d, &[("sitemap-0.xml", &body(0))]);
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = Arc::clone(&done);
        let d = d.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let text = fs::read_to_string(d.join("sitemap-0.xml")).expect("always there");
                assert!(
                    text.starts_with("<urlset>\n") && text.ends_with("</urlset>\n"),
                    "partial file"
                );
                let first = text.lines().nth(1).expect("a url");
                assert!(
                    text.lines().skip(1).take(2000).all(|l| l == first),
                    "mixed file"
                );
                reads += 1;
            }
            reads
        })
    };
    for generation in 1..200 {
        write_set(&d, &[("sitemap-0.xml", &body(generation))]);
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader");
    assert!(reads > 0);
    assert_eq!(names(&d), ["sitemap-0.xml"]);
}

#[test]
fn bad_prefixes_and_folders_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for prefix in ["", ".hidden", "a/b", "a b"] {
        assert!(SetWriter::new(dir.path(), prefix).is_err(), "{prefix:?}");
    }
    assert!(SetWriter::new(&dir.path().join("missing"), "sitemap").is_err());
}

#[test]
fn one_writer_per_prefix_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut first = SetWriter::new(d, "books").expect("writer");
    first.create("books-1.xml").expect("create");
    first.write_current(b"<urlset/>").expect("write");
    let busy = SetWriter::new(d, "books")
        .err()
        .expect("second writer refused");
    assert!(matches!(busy, SetError::Busy { .. }), "{busy}");
    let message = busy.to_string();
    assert!(
        message.contains(".books.lock") && message.contains("\"books\""),
        "{message}"
    );
    // Another prefix, the index and a dry run's check are not held up.
    SetWriter::new(d, "products").expect("another prefix");
    SetWriter::named(d).expect("named set");
    SetWriter::check(d, "books").expect("check");
    first.commit().expect("commit");
    // Committed (or dropped): the next build goes ahead.
    let second = SetWriter::new(d, "books").expect("after the first");
    drop(second);
    SetWriter::new(d, "books").expect("after a dropped writer");
    assert_eq!(names(d), ["books-1.xml"]);
    assert!(d.join(".books.lock").is_file());
}
