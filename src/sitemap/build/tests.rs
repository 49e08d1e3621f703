use std::collections::BTreeMap;
use std::fs;

use super::*;
use crate::sitemap::tests::names;
use crate::sitemap::xml::{NAMESPACE, XHTML_NAMESPACE};

const BASE: &str = "https://www.example.com/shop/";

fn options(languages: Option<&str>) -> Options {
    Options::new(BASE, "sitemap", languages, None).expect("options")
}

/// Builds `input` into `dir`.
fn run(options: &Options, dir: &Path, input: &str) -> Result<Report, BuildError> {
    let set = SetWriter::new(dir, &options.prefix).expect("writer");
    build(options, "input", &mut input.as_bytes(), Target::Write(set))
}

fn dry(options: &Options, dir: &Path, input: &str) -> Result<Report, BuildError> {
    build(options, "input", &mut input.as_bytes(), Target::DryRun(dir))
}

/// Every file in the folder with its content.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    names(dir)
        .into_iter()
        .map(|name| {
            let bytes = fs::read(dir.join(&name)).expect("read");
            (name, bytes)
        })
        .collect()
}

/// One `<url>` as an XML parser reads it.
#[derive(Debug, PartialEq, Eq)]
struct ParsedUrl {
    loc: String,
    lastmod: Option<String>,
    alternates: Vec<(String, String)>,
}

/// Parses a urlset file, checking the namespaces and element names.
fn parse(path: &Path) -> Vec<ParsedUrl> {
    let text = fs::read_to_string(path).expect("read");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "urlset");
    assert_eq!(root.tag_name().namespace(), Some(NAMESPACE));
    root.children()
        .filter(|n| n.is_element())
        .map(|url| {
            assert_eq!(url.tag_name().name(), "url");
            assert_eq!(url.tag_name().namespace(), Some(NAMESPACE));
            let mut parsed = ParsedUrl {
                loc: String::new(),
                lastmod: None,
                alternates: Vec::new(),
            };
            for child in url.children().filter(|n| n.is_element()) {
                let name = child.tag_name();
                match (name.namespace(), name.name()) {
                    (Some(NAMESPACE), "loc") => parsed.loc = child.text().expect("loc").into(),
                    (Some(NAMESPACE), "lastmod") => parsed.lastmod = child.text().map(Into::into),
                    (Some(XHTML_NAMESPACE), "link") => {
                        assert_eq!(child.attribute("rel"), Some("alternate"));
                        parsed.alternates.push((
                            child.attribute("hreflang").expect("hreflang").into(),
                            child.attribute("href").expect("href").into(),
                        ));
                    }
                    other => panic!("unexpected element {other:?}"),
                }
            }
            assert!(!parsed.loc.is_empty(), "every url has a loc");
            parsed
        })
        .collect()
}

/// The locs of each file.
fn locs(dir: &Path) -> BTreeMap<String, Vec<String>> {
    names(dir)
        .into_iter()
        .map(|name| {
            let urls = parse(&dir.join(&name)).into_iter().map(|u| u.loc).collect();
            (name, urls)
        })
        .collect()
}

fn entries(ids: &[u64]) -> String {
    ids.iter()
        .map(|id| format!("{id}\t\t/item/{id}\n"))
        .collect()
}

#[test]
fn buckets_hold_45000_ids_and_their_edges_stay_put() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let report = run(
        &options(None),
        d,
        &entries(&[1, 45_000, 45_001, 90_000, 90_001]),
    )
    .expect("build");
    assert_eq!(report.entries, 5);
    let files = locs(d);
    let item = |id: u64| format!("https://www.example.com/item/{id}");
    assert_eq!(files["sitemap-0.xml"], [item(1), item(45_000)]);
    assert_eq!(files["sitemap-1.xml"], [item(45_001), item(90_000)]);
    assert_eq!(files["sitemap-2.xml"], [item(90_001)]);
    assert_eq!(files.len(), 3);

    // Deleting item 45,000 moves nothing into or out of the other files,
    // and leaves them byte for byte as they were.
    let before = fs::read(d.join("sitemap-1.xml")).expect("read");
    let report = run(&options(None), d, &entries(&[1, 45_001, 90_000, 90_001])).expect("build");
    assert_eq!(report.unchanged, ["sitemap-1.xml", "sitemap-2.xml"]);
    assert_eq!(fs::read(d.join("sitemap-1.xml")).expect("read"), before);
    assert_eq!(locs(d)["sitemap-0.xml"], [item(1)]);
}

#[test]
fn the_language_count_sets_the_bucket_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Two languages: 22,500 entries (45,000 URLs) a bucket.
    let input = "22500\t\t/a\t/en/a\n22501\t\t/b\t/en/b\n";
    let report = run(&options(Some("cs,en")), d, input).expect("build");
    let names: Vec<&str> = report.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["sitemap-0.xml", "sitemap-1.xml"]);
    assert_eq!(report.urls, 4);
    // Three: 15,000.
    let input = "15000\t\t/a\t/en/a\t/de/a\n15001\t\t/b\t/en/b\t/de/b\n";
    let report = run(&options(Some("cs,en,de")), d, input).expect("build");
    let names: Vec<&str> = report.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["sitemap-0.xml", "sitemap-1.xml"]);
    assert_eq!(report.urls, 6);
    assert_eq!(options(Some("cs,en,de")).bucket_size(), 15_000);
    assert_eq!(options(Some("cs,en,de,pl,sk,hu,fr")).bucket_size(), 6_428);
}

#[test]
fn a_full_file_continues_in_dash_one_dash_two() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut small = options(None);
    small.limits.file_urls = 3;
    let ids: Vec<u64> = (1..=8).collect();
    let report = run(&small, d, &entries(&ids)).expect("build");
    let files: Vec<(&str, u64)> = report
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.urls))
        .collect();
    assert_eq!(
        files,
        [
            ("sitemap-0.xml", 3),
            ("sitemap-0-1.xml", 3),
            ("sitemap-0-2.xml", 2)
        ]
    );
    // By bytes: each file stays under the limit, whole entries only.
    let mut small = options(Some("cs,en"));
    small.limits.file_bytes = 2_000;
    let input: String = (1..=20)
        .map(|id| format!("{id}\t2024-05-01\t/a/{id}\t/en/a/{id}\n"))
        .collect();
    let report = run(&small, d, &input).expect("build");
    assert!(report.files.len() > 2, "{report:?}");
    assert_eq!(report.urls, 40);
    for file in &report.files {
        let len = fs::metadata(d.join(&file.name)).expect("meta").len();
        assert_eq!(len, file.bytes);
        assert!(len <= 2_000, "{}: {len}", file.name);
        let urls = parse(&d.join(&file.name));
        assert_eq!(urls.len() as u64, file.urls);
        assert_eq!(urls.len() % 2, 0, "an entry's languages stay together");
    }
    // The first build's continuation files are gone: only this set remains.
    let on_disk = names(d);
    let mut reported: Vec<String> = report.files.iter().map(|f| f.name.clone()).collect();
    reported.sort();
    assert_eq!(on_disk, reported);
}

#[test]
fn alternates_list_every_language_version_itself_included() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let input =
        "7\t2024-05-01 10:00:00+02\t/kniha?id=7&x='1'\t/en/book/7\thttps://example.de/buch/7\n\
                 8\t\t/kniha/8\t\t/de/8\n\
                 9\t\t\t/en/only\t\n";
    // The German version lives on a site of its own.
    let mut options = options(Some("cs,en,de"));
    options.allow_other_hosts = true;
    run(&options, d, input).expect("build");
    let urls = parse(&d.join("sitemap-0.xml"));
    let seven: Vec<(String, String)> = vec![
        (
            "cs".into(),
            "https://www.example.com/kniha?id=7&x=%271%27".into(),
        ),
        ("en".into(), "https://www.example.com/en/book/7".into()),
        ("de".into(), "https://example.de/buch/7".into()),
    ];
    for (i, (_, loc)) in seven.iter().enumerate() {
        assert_eq!(urls[i].loc, *loc);
        assert_eq!(
            urls[i].lastmod.as_deref(),
            Some("2024-05-01T10:00:00+02:00")
        );
        assert_eq!(urls[i].alternates, seven);
    }
    // A language without a version is left out of the alternates.
    assert_eq!(urls[3].loc, "https://www.example.com/kniha/8");
    assert_eq!(
        urls[3].alternates,
        [
            (
                "cs".to_owned(),
                "https://www.example.com/kniha/8".to_owned()
            ),
            ("de".to_owned(), "https://www.example.com/de/8".to_owned())
        ]
    );
    assert_eq!(urls[4].loc, "https://www.example.com/de/8");
    // One version alone has no alternates.
    assert_eq!(urls[5].loc, "https://www.example.com/en/only");
    assert!(urls[5].alternates.is_empty());
    assert_eq!(urls.len(), 6);
    let text = fs::read_to_string(d.join("sitemap-0.xml")).expect("read");
    assert!(text.contains("id=7&amp;x="), "{text}");
}

#[test]
fn addresses_are_joined_to_the_base_and_escaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let input = "1\t\t/root\n2\t\trelative/page\n3\t\thttps://WWW.example.com:443/x\n\
                 4\t\t/a b/žluť?q=a<b\n5\t\t//www.example.com/y\n";
    run(&options(None), d, input).expect("build");
    assert_eq!(
        locs(d)["sitemap-0.xml"],
        [
            "https://www.example.com/root",
            "https://www.example.com/shop/relative/page",
            "https://www.example.com/x",
            "https://www.example.com/a%20b/%C5%BElu%C5%A5?q=a%3Cb",
            "https://www.example.com/y",
        ]
    );
}

/// The sitemaps protocol lists one site's URLs: an absolute address on
/// another host (or scheme, or port) is an error naming the line, unless
/// allowed.
#[test]
fn addresses_on_another_host_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    run(&options(None), d, &entries(&[1])).expect("build");
    let before = snapshot(d);
    for (address, words) in [
        (
            "https://example.com/x",
            "\"https://example.com/x\" is not on https://www.example.com",
        ),
        ("//cdn.example.com/y", "is not on https://www.example.com"),
        (
            "http://www.example.com/x",
            "is not on https://www.example.com",
        ),
        (
            "https://www.example.com:8443/x",
            "is not on https://www.example.com",
        ),
    ] {
        let input = format!("1\t\t/a\n2\t\t{address}\n");
        let err = run(&options(None), d, &input)
            .expect_err(address)
            .to_string();
        assert!(err.starts_with("input:2: address "), "{err}");
        assert!(err.contains(words), "{err}");
        assert!(err.contains("--allow-other-hosts"), "{err}");
        assert_eq!(snapshot(d), before, "nothing replaced");
    }
    // An alternate on another host is refused the same way.
    let err = run(
        &options(Some("cs,de")),
        d,
        "1\t\t/a\thttps://example.de/a\n",
    )
    .expect_err("alternate");
    assert!(
        err.to_string()
            .starts_with("input:1: address \"https://example.de/a\" is not on"),
        "{err}"
    );
    let mut allow = options(None);
    allow.allow_other_hosts = true;
    run(
        &allow,
        d,
        "1\t\thttp://other.example.com/x\n2\t\t//cdn.example.com/y\n",
    )
    .expect("allowed");
    assert_eq!(
        locs(d)["sitemap-0.xml"],
        ["http://other.example.com/x", "https://cdn.example.com/y"]
    );
}

/// A row whose every address is empty (no version in any language) is
/// left out and counted; the rest of the set is built. An input of such
/// rows only is refused like an empty one.
#[test]
fn an_entry_without_any_address_is_skipped_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let input = "1\t\t/a\t/en/a\n2\t2024-01-01\tNULL\tNULL\n3\t\t\t/en/c\n\
                 {\"id\": 4, \"address\": [null, \"\"]}\n5\t\t\\N\t\n";
    let report = run(&options(Some("cs,en")), d, input).expect("build");
    assert_eq!((report.entries, report.skipped, report.urls), (2, 3, 3));
    assert_eq!(
        locs(d)["sitemap-0.xml"],
        [
            "https://www.example.com/a",
            "https://www.example.com/en/a",
            "https://www.example.com/en/c",
        ]
    );
    let report = dry(&options(Some("cs,en")), d, input).expect("dry");
    assert_eq!((report.entries, report.skipped), (2, 3));
    // Ids are still checked on a skipped row.
    let err = run(&options(None), d, "3\t\t/a\n2\t\t\n").expect_err("order");
    assert!(err.to_string().starts_with("input:2: id 2"), "{err}");
    // One language too.
    let report = run(&options(None), d, "1\t\t/a\n2\t\tNULL\n").expect("build");
    assert_eq!((report.entries, report.skipped), (1, 1));
    let before = snapshot(d);
    let err = run(&options(Some("cs,en")), d, "1\t\t\t\n2\t\tNULL\tNULL\n").expect_err("none");
    assert!(matches!(err, BuildError::Empty { skipped: 2, .. }), "{err}");
    assert!(
        err.to_string().contains(
            "no entry with an address (2 skipped: every address empty); the previous set is kept"
        ),
        "{err}"
    );
    assert_eq!(snapshot(d), before, "the old set is kept");
}

#[test]
fn bad_lines_are_errors_naming_the_line_and_replace_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    run(&options(None), d, &entries(&[1, 50_000])).expect("build");
    let before = snapshot(d);
    let long = format!("/{}", "x".repeat(MAX_URL_LEN));
    for (input, line, words) in [
        (
            "1\t\t/a\n2\t\t/b\n2\t\t/c\n",
            3,
            "id 2 is not above the previous id 2",
        ),
        (
            "5\t\t/a\n3\t\t/b\n",
            2,
            "id 3 is not above the previous id 5",
        ),
        ("id\tlastmod\turl\n", 1, "a header row?"),
        ("0\t\t/a\n", 1, "ids start at 1"),
        ("-4\t\t/a\n", 1, "not a whole number"),
        ("1\t2024-13-01\t/a\n", 1, "lastmod \"2024-13-01\""),
        ("1\n", 1, "no lastmod field"),
        ("1\t\t/a\t/b\n", 1, "2 addresses, expected 1"),
        ("1\t\tmailto:a@example.com\n", 1, "not an http or https URL"),
        ("1\t\tjavascript:alert(1)\n", 1, "not an http or https URL"),
        ("1\t\thttps://u:p@example.com/\n", 1, "credentials"),
        ("1\t\t/a#top\n", 1, "#fragment"),
        ("1\t\thttp://[::1\n", 1, "address"),
        (&format!("1\t\t{long}\n"), 1, "characters long"),
        ("{\"id\": 1, \"address\": 5}\n", 1, "not a JSON entry"),
        ("1\t\t/a\n\n3\t\t/b\n45001\t\t/c\n7\t\t/d\n", 5, "id 7"),
    ] {
        let err = run(&options(None), d, input).expect_err(input).to_string();
        assert!(err.starts_with(&format!("input:{line}: ")), "{err}");
        assert!(err.contains(words), "{input:?}: {err}");
        assert_eq!(
            snapshot(d),
            before,
            "{input:?}: the old set is whole, no temporary file left"
        );
    }
    let set = SetWriter::new(d, "sitemap").expect("writer");
    let latin1: &[u8] = b"1\t\t/a\n2\t\t/b\xff\n";
    let err = build(&options(None), "input", &mut &*latin1, Target::Write(set))
        .map(|_| ())
        .expect_err("latin-1");
    assert!(err.to_string().starts_with("input:2: not UTF-8"), "{err}");
    let huge = format!("1\t\t/a\n2\t\t/{}\n", "x".repeat(MAX_LINE as usize));
    let err = run(&options(None), d, &huge).expect_err("huge");
    assert!(err.to_string().starts_with("input:2: longer than"), "{err}");
    let err = run(&options(Some("cs,en")), d, "1\t\t/a\t/a\n").expect_err("same");
    assert!(
        err.to_string()
            .contains("the cs and en addresses are the same URL"),
        "{err}"
    );
}

#[test]
fn json_lines_and_tsv_mix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let input = "{\"id\": 1, \"lastmod\": \"2024-01-02\", \"address\": [\"/a\", \"/en/a\"]}\n\
                 2\t2024-01-03\t/b\t/en/b\n\
                 {\"id\": 3, \"lastmod\": null, \"addresses\": [\"/c\\u0020d\", null]}\n";
    let report = run(&options(Some("cs,en")), d, input).expect("build");
    assert_eq!((report.entries, report.urls), (3, 5));
    let urls = parse(&d.join("sitemap-0.xml"));
    assert_eq!(urls[0].lastmod.as_deref(), Some("2024-01-02"));
    assert_eq!(urls[4].loc, "https://www.example.com/c%20d");
    assert_eq!(urls[4].lastmod, None);
}

#[test]
fn empty_input_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    run(&options(None), d, &entries(&[1])).expect("build");
    let err = run(&options(None), d, "").expect_err("empty");
    assert!(matches!(err, BuildError::Empty { skipped: 0, .. }), "{err}");
    assert_eq!(names(d), ["sitemap-0.xml"]);
    let mut allow = options(None);
    allow.allow_empty = true;
    let report = run(&allow, d, "\n").expect("allowed");
    assert_eq!(report.removed, ["sitemap-0.xml"]);
    assert!(names(d).is_empty());
}

#[test]
fn a_dry_run_counts_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    fs::write(d.join("sitemap-5.xml"), "old").expect("write");
    fs::write(d.join("sitemap-extra.xml"), "theirs").expect("write");
    let report = dry(&options(None), d, &entries(&[1, 2, 45_001])).expect("dry");
    assert_eq!(report.entries, 3);
    let files: Vec<(&str, u64)> = report
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.urls))
        .collect();
    assert_eq!(files, [("sitemap-0.xml", 2), ("sitemap-1.xml", 1)]);
    assert_eq!(report.removed, ["sitemap-5.xml"]);
    assert_eq!(names(d), ["sitemap-5.xml", "sitemap-extra.xml"]);
    // The byte counts are those a real build writes.
    let real = run(&options(None), d, &entries(&[1, 2, 45_001])).expect("build");
    assert_eq!(real.files, report.files);
    assert_eq!(
        names(d),
        ["sitemap-0.xml", "sitemap-1.xml", "sitemap-extra.xml"]
    );
}

/// A dry run reads the files in place and names those the build would
/// leave alone, exactly as the build then reports them.
#[test]
fn a_dry_run_predicts_the_unchanged_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let first = entries(&[1, 2, 45_001, 90_001]);
    let report = dry(&options(None), d, &first).expect("dry");
    assert!(report.unchanged.is_empty(), "no file in place yet");
    run(&options(None), d, &first).expect("build");

    let same = dry(&options(None), d, &first).expect("dry");
    assert_eq!(
        same.unchanged,
        ["sitemap-0.xml", "sitemap-1.xml", "sitemap-2.xml"]
    );
    // Item 2 gone, one more in bucket 2, and sitemap-1.xml truncated (a
    // file in place that is a prefix of the new one is not the same), or
    // grown (the new one is a prefix of it).
    let next = entries(&[1, 45_001, 90_001, 90_002]);
    let predicted = dry(&options(None), d, &next).expect("dry");
    assert_eq!(predicted.unchanged, ["sitemap-1.xml"]);
    let whole = fs::read(d.join("sitemap-1.xml")).expect("read");
    for changed in [&whole[..whole.len() - 1], &[&whole[..], b"\n"].concat()[..]] {
        fs::write(d.join("sitemap-1.xml"), changed).expect("write");
        let predicted = dry(&options(None), d, &first).expect("dry");
        assert_eq!(predicted.unchanged, ["sitemap-0.xml", "sitemap-2.xml"]);
    }
    fs::write(d.join("sitemap-1.xml"), &whole).expect("write");
    let before = snapshot(d);
    let predicted = dry(&options(None), d, &next).expect("dry");
    assert_eq!(snapshot(d), before, "a dry run writes nothing");
    let real = run(&options(None), d, &next).expect("build");
    assert_eq!(real.unchanged, predicted.unchanged);
    assert_eq!(real, predicted);
    // A folder in the place of a file is not the same content.
    fs::remove_file(d.join("sitemap-0.xml")).expect("remove");
    fs::create_dir(d.join("sitemap-0.xml")).expect("mkdir");
    let predicted = dry(&options(None), d, &next).expect("dry");
    assert_eq!(predicted.unchanged, ["sitemap-1.xml", "sitemap-2.xml"]);
}

#[test]
fn options_are_checked() {
    assert!(Options::new("www.example.com", "sitemap", None, None).is_err());
    assert!(Options::new("ftp://example.com/", "sitemap", None, None).is_err());
    assert!(Options::new("https://example.com/?q", "sitemap", None, None).is_err());
    assert!(Options::new(BASE, "../x", None, None).is_err());
    assert!(Options::new(BASE, "sitemap", Some("cs,,en"), None).is_err());
    assert!(Options::new(BASE, "sitemap", Some("cs,CS"), None).is_err());
    assert!(Options::new(BASE, "sitemap", Some("cs,en_US"), None).is_err());
    assert!(Options::new(BASE, "sitemap", None, Some("+25:00")).is_err());
    let ok = Options::new(
        BASE,
        "products",
        Some("cs, pt-BR ,x-default"),
        Some("-05:00"),
    )
    .expect("ok");
    assert_eq!(ok.languages, ["cs", "pt-BR", "x-default"]);
}
