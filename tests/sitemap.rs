//! Sitemaps end to end: the `crawlgate sitemap` commands as a cron job
//! runs them, their output read with an XML parser, and the folder served
//! by the proxy over a real socket (validators, 304, refused traversal),
//! with robots.txt pointing at the index only while it exists.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crawlgate::config::Overrides;
use support::process;
use support::{get, request, Proxy, Upstream, GOOGLEBOT};

const NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";

/// Runs `crawlgate sitemap ARGS` with `stdin`.
fn sitemap(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(process::BIN)
        .arg("sitemap")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run crawlgate");
    let mut input = child.stdin.take().expect("stdin");
    // A command that fails before it reads its input (a refused flag, a
    // set another build holds) may be gone already.
    match input.write_all(stdin.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
        _ => {}
    }
    drop(input);
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The folder's files, without the sets' lock files (`.<prefix>.lock`).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .filter(|n| !(n.starts_with('.') && n.ends_with(".lock")))
        .collect();
    names.sort();
    names
}

/// The `loc`s of a urlset or a sitemap index, checked against the schema's
/// element names and namespace.
fn locs(xml: &str, root: &str, item: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(xml).expect("well-formed XML");
    let top = doc.root_element();
    assert_eq!(
        (top.tag_name().namespace(), top.tag_name().name()),
        (Some(NS), root)
    );
    top.children()
        .filter(|n| n.is_element())
        .map(|n| {
            assert_eq!(
                (n.tag_name().namespace(), n.tag_name().name()),
                (Some(NS), item)
            );
            let loc = n
                .children()
                .find(|c| c.tag_name().name() == "loc")
                .and_then(|c| c.text())
                .expect("a loc");
            let lastmod = n.children().find(|c| c.tag_name().name() == "lastmod");
            if root == "sitemapindex" {
                assert!(lastmod.is_some(), "the index gives each file's lastmod");
            }
            loc.to_owned()
        })
        .collect()
}

/// `count` TSV entries with ids spread over two buckets.
fn export(ids: impl Iterator<Item = u64>) -> String {
    ids.map(|id| format!("{id}\t2024-05-01 10:00:00\t/product/{id}?ref=a&b=c\n"))
        .collect()
}

#[test]
fn build_then_index_as_a_cron_job_would() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    std::fs::write(dir.path().join("sitemap-categories.xml"), {
        format!("<?xml version=\"1.0\"?>\n<urlset xmlns=\"{NS}\"><url><loc>https://shop.example.com/c/1</loc></url></urlset>\n")
    })
    .expect("their own file");
    std::fs::write(dir.path().join("sitemap-notes.xml"), "<notes/>").expect("not a urlset");

    let base = ["--dir", d, "--base-url", "https://shop.example.com/"];
    let out = sitemap(
        &[&["build"], &base[..]].concat(),
        &export((1..=3).chain(45_001..=45_002)),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{d}: 2 files, 5 URLs from 5 entries\n")
    );
    let zero = std::fs::read_to_string(dir.path().join("sitemap-0.xml")).expect("read");
    assert_eq!(
        locs(&zero, "urlset", "url"),
        (1..=3)
            .map(|id| format!("https://shop.example.com/product/{id}?ref=a&b=c"))
            .collect::<Vec<_>>()
    );
    assert!(zero.contains("<lastmod>2024-05-01T10:00:00Z</lastmod>"));

    let out = sitemap(&["index", d, "--base-url", "https://shop.example.com"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("sitemap-notes.xml: not a urlset"),
        "{}",
        text(&out.stderr)
    );
    let index = std::fs::read_to_string(dir.path().join("sitemap.xml")).expect("index");
    assert_eq!(
        locs(&index, "sitemapindex", "sitemap"),
        [
            "https://shop.example.com/sitemaps/sitemap-0.xml",
            "https://shop.example.com/sitemaps/sitemap-1.xml",
            "https://shop.example.com/sitemaps/sitemap-categories.xml",
        ]
    );

    // The next night item 3 is gone and the second bucket is empty: its
    // file is removed, the look-alikes stay, the index follows.
    let out = sitemap(&[&["build", "--quiet"], &base[..]].concat(), &export(1..=2));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "--quiet");
    assert_eq!(
        listing(dir.path()),
        [
            "sitemap-0.xml",
            "sitemap-categories.xml",
            "sitemap-notes.xml",
            "sitemap.xml"
        ]
    );
    let out = sitemap(
        &[
            "index",
            d,
            "--base-url",
            "https://shop.example.com",
            "--files-url",
            "https://cdn.example.com/maps",
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let index = std::fs::read_to_string(dir.path().join("sitemap.xml")).expect("index");
    assert_eq!(
        locs(&index, "sitemapindex", "sitemap"),
        [
            "https://cdn.example.com/maps/sitemap-0.xml",
            "https://cdn.example.com/maps/sitemap-categories.xml",
        ]
    );
}

#[test]
fn dry_run_prints_json_and_errors_name_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let base = ["--dir", d, "--base-url", "https://example.com"];
    let out = sitemap(
        &[&["build", "--dry-run", "--languages", "cs,en"], &base[..]].concat(),
        "1\t\t/a\t/en/a\n22501\t\t/b\t\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["entries"], 2);
    assert_eq!(report["urls"], 3);
    let files: Vec<(&str, u64)> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["name"].as_str().expect("name"),
                f["urls"].as_u64().expect("urls"),
            )
        })
        .collect();
    assert_eq!(files, [("sitemap-0.xml", 2), ("sitemap-1.xml", 1)]);
    let all = std::fs::read_dir(dir.path()).expect("dir").count();
    assert_eq!(all, 0, "a dry run writes nothing, not even a lock file");

    let out = sitemap(
        &[&["build"], &base[..]].concat(),
        "1\t\t/a\n2\t\t/b\n2\t\t/c\n",
    );
    assert_eq!(out.status.code(), Some(65), "EX_DATAERR");
    assert_eq!(
        text(&out.stderr),
        "crawlgate: error: stdin:3: id 2 is not above the previous id 2: entries must come in strictly ascending id (ORDER BY id)\n"
    );
    assert!(listing(dir.path()).is_empty(), "nothing written");

    let out = sitemap(&[&["build"], &base[..]].concat(), "");
    assert_eq!(out.status.code(), Some(65));
    assert!(text(&out.stderr).contains("no entries; the previous set is kept"));

    let out = sitemap(&["build", "--dir", d, "--base-url", "example.com"], "");
    assert_eq!(out.status.code(), Some(64), "a bad flag value is EX_USAGE");
    assert!(text(&out.stderr).contains("--base-url \"example.com\""));

    let out = sitemap(&["index", d, "--base-url", "https://example.com"], "");
    assert_eq!(
        out.status.code(),
        Some(65),
        "nothing to write is EX_DATAERR"
    );
    assert_eq!(
        text(&out.stderr),
        format!("crawlgate: error: {d}: no sitemap files (sitemap-*.xml); the previous index is kept; build a set into this folder first (crawlgate sitemap build --dir), or name its prefix with --prefix NAME\n")
    );
    assert!(!dir.path().join("sitemap.xml").exists());
}

/// `sitemap index` without the set's prefix finds nothing: it exits 65,
/// as documented, and names the sets the folder holds and the flag that
/// lists them. A base URL with a path keeps it.
#[test]
fn index_names_the_sets_it_was_not_told_about_and_keeps_the_base_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    for prefix in ["books", "products"] {
        let out = sitemap(
            &[
                "build",
                "--dir",
                d,
                "--base-url",
                "https://example.com/shop/",
                "--prefix",
                prefix,
            ],
            "1\t\t/a\n45001\t\t/b\n",
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    std::fs::write(dir.path().join("notes-1.xml"), "<notes/>").expect("not a urlset");
    let out = sitemap(&["index", d, "--base-url", "https://example.com/shop/"], "");
    assert_eq!(out.status.code(), Some(65), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!("crawlgate: error: {d}: no sitemap files (sitemap-*.xml); the previous index is kept; the folder holds the sets books, products: list them with --prefix books --prefix products\n")
    );
    assert!(!dir.path().join("sitemap.xml").exists());
    let out = sitemap(
        &[
            "index",
            d,
            "--base-url",
            "https://example.com/shop/",
            "--prefix",
            "books",
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let index = std::fs::read_to_string(dir.path().join("sitemap.xml")).expect("index");
    assert_eq!(
        locs(&index, "sitemapindex", "sitemap"),
        [
            "https://example.com/shop/sitemaps/books-0.xml",
            "https://example.com/shop/sitemaps/books-1.xml",
        ]
    );
    let out = sitemap(
        &[
            "index",
            d,
            "--base-url",
            "https://example.com/shop",
            "--prefix",
            "products",
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let index = std::fs::read_to_string(dir.path().join("sitemap.xml")).expect("index");
    assert_eq!(
        locs(&index, "sitemapindex", "sitemap")[0],
        "https://example.com/shop/sitemaps/products-0.xml"
    );
}

/// The dry run predicts what the build reports: the files it would leave
/// alone, and the entries it skips for want of any address; an address on
/// another host is refused unless allowed.
#[test]
fn dry_run_predicts_the_build_and_rows_without_addresses_are_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let base = [
        "--dir",
        d,
        "--base-url",
        "https://example.com/",
        "--languages",
        "cs,en",
    ];
    let input = "1\t\t/a\t/en/a\n2\t\tNULL\tNULL\n22501\t\t/b\t\n";
    let out = sitemap(&[&["build"], &base[..]].concat(), input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{d}: 2 files, 3 URLs from 2 entries, 1 skipped (no address)\n")
    );
    let out = sitemap(&[&["build", "--dry-run"], &base[..]].concat(), input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["skipped"], 1);
    assert_eq!(report["entries"], 2);
    assert_eq!(
        report["unchanged"],
        serde_json::json!(["sitemap-0.xml", "sitemap-1.xml"])
    );
    let out = sitemap(&[&["build"], &base[..]].concat(), input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{d}: 2 files, 3 URLs from 2 entries, 2 unchanged, 1 skipped (no address)\n")
    );

    let before = std::fs::read(dir.path().join("sitemap-0.xml")).expect("read");
    let other = "1\t\t/a\t/en/a\n2\t\t/c\thttps://www.example.com/en/c\n";
    let out = sitemap(&[&["build"], &base[..]].concat(), other);
    assert_eq!(out.status.code(), Some(65), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "crawlgate: error: stdin:2: address \"https://www.example.com/en/c\" is not on https://example.com (--base-url's scheme, host and port): a sitemap lists only its own site's URLs (--allow-other-hosts lets it through)\n"
    );
    assert_eq!(
        std::fs::read(dir.path().join("sitemap-0.xml")).expect("read"),
        before
    );
    let out = sitemap(
        &[&["build", "--allow-other-hosts"], &base[..]].concat(),
        other,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let zero = std::fs::read_to_string(dir.path().join("sitemap-0.xml")).expect("read");
    assert!(
        locs(&zero, "urlset", "url").contains(&"https://www.example.com/en/c".to_owned()),
        "{zero}"
    );
}

/// A build that starts while another build of the same set runs (a cron
/// job that overran) stops at once with EX_TEMPFAIL and touches nothing;
/// once the first is done, the next goes ahead. The first build is played
/// by this process holding the set's lock.
#[test]
fn a_second_build_of_one_set_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let args = [
        "build",
        "--dir",
        d,
        "--base-url",
        "https://example.com",
        "--prefix",
        "books",
    ];
    let lock = std::fs::File::create(dir.path().join(".books.lock")).expect("lock file");
    lock.try_lock().expect("lock");
    let out = sitemap(&args, "1\t\t/a\n");
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("another build of the set \"books\" is writing in this folder"),
        "{stderr}"
    );
    assert!(listing(dir.path()).is_empty(), "nothing written");
    // Another set is not held up.
    let other = [&args[..5], &["--prefix", "products"]].concat();
    let out = sitemap(&other, "1\t\t/p\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    drop(lock);
    let out = sitemap(&args, "1\t\t/a\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(listing(dir.path()), ["books-0.xml", "products-0.xml"]);
}

/// Starts a proxy serving `dir` at /sitemaps/, in front of a recording
/// upstream.
async fn serving(dir: &Path, toml: &str) -> (Upstream, Proxy) {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_with(
        toml,
        Overrides {
            upstream: Some(upstream.url()),
            sitemap_dir: Some(dir.to_owned()),
            ..Overrides::default()
        },
    )
    .await;
    (upstream, proxy)
}

#[tokio::test]
async fn robots_txt_leads_to_the_index_and_the_index_to_the_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let (upstream, proxy) = serving(dir.path(), "").await;
    let host = "shop.example.com";

    let robots = get(proxy.addr, host, "/robots.txt", Some(GOOGLEBOT)).await;
    assert!(!robots.text().contains("Sitemap:"), "no index yet");
    let res = get(proxy.addr, host, "/sitemaps/sitemap.xml", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 404);

    let out = sitemap(
        &[
            "build",
            "--dir",
            d,
            "--base-url",
            "http://shop.example.com/",
        ],
        &export(1..=1000),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = sitemap(&["index", d, "--base-url", "http://shop.example.com/"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The existence check is cached for at most a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let robots = get(proxy.addr, host, "/robots.txt", Some(GOOGLEBOT)).await;
    let line = robots
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("Sitemap: ").map(str::to_owned))
        .expect("a Sitemap line");
    assert_eq!(line, "http://shop.example.com/sitemaps/sitemap.xml");
    let path = line
        .strip_prefix("http://shop.example.com")
        .expect("same host");
    let index = get(proxy.addr, host, path, Some(GOOGLEBOT)).await;
    assert_eq!(index.status, 200);
    assert_eq!(
        index.header("content-type"),
        Some("application/xml; charset=utf-8")
    );
    let files = locs(&index.text(), "sitemapindex", "sitemap");
    assert_eq!(files, ["http://shop.example.com/sitemaps/sitemap-0.xml"]);
    let path = files[0]
        .strip_prefix("http://shop.example.com")
        .expect("same host");
    let file = get(proxy.addr, host, path, Some(GOOGLEBOT)).await;
    assert_eq!(file.status, 200);
    assert_eq!(locs(&file.text(), "urlset", "url").len(), 1000);
    assert_eq!(
        file.body,
        std::fs::read(dir.path().join("sitemap-0.xml")).expect("read"),
        "streamed whole"
    );

    std::fs::remove_file(dir.path().join("sitemap.xml")).expect("remove the index");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let robots = get(proxy.addr, host, "/robots.txt", Some(GOOGLEBOT)).await;
    assert!(
        !robots.text().contains("Sitemap:"),
        "the line goes with the index"
    );
    assert!(
        upstream.requests().is_empty(),
        "none of this reached the site"
    );
    proxy.stop().await;
}

#[tokio::test]
async fn validators_304_head_and_cache_control() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = format!(
        "<?xml version=\"1.0\"?>\n<urlset xmlns=\"{NS}\">{}</urlset>\n",
        "<url><loc>https://example.com/x</loc></url>".repeat(50_000)
    );
    std::fs::write(dir.path().join("sitemap-0.xml"), &body).expect("write");
    std::fs::write(dir.path().join("urls.txt"), "https://example.com/x\n").expect("write");
    let (upstream, proxy) = serving(
        dir.path(),
        "sitemap_cache_control = \"public, max-age=600\"\n",
    )
    .await;

    let res = get(proxy.addr, "example.com", "/sitemaps/sitemap-0.xml", None).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.body, body.as_bytes(), "all {} bytes", body.len());
    assert_eq!(res.header("content-length"), Some(&*body.len().to_string()));
    assert_eq!(res.header("cache-control"), Some("public, max-age=600"));
    let etag = res.header("etag").expect("ETag").to_owned();
    let modified = res
        .header("last-modified")
        .expect("Last-Modified")
        .to_owned();

    let head = request(
        proxy.addr,
        "HEAD",
        "example.com",
        "/sitemaps/sitemap-0.xml",
        None,
        "",
    )
    .await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        head.header("content-length"),
        Some(&*body.len().to_string())
    );
    assert_eq!(head.header("etag"), Some(&*etag));

    let conditional = |condition: String| async move {
        let res = request(
            proxy.addr,
            "GET",
            "example.com",
            "/sitemaps/sitemap-0.xml",
            None,
            &condition,
        )
        .await;
        (condition, res)
    };
    for condition in [
        format!("If-None-Match: {etag}\r\n"),
        format!("If-None-Match: \"other\", W/{etag}\r\n"),
        format!("If-Modified-Since: {modified}\r\n"),
    ] {
        let (condition, res) = conditional(condition).await;
        assert_eq!(res.status, 304, "{condition}");
        assert!(res.body.is_empty());
        assert_eq!(res.header("etag"), Some(&*etag));
        assert_eq!(res.header("cache-control"), Some("public, max-age=600"));
    }
    let (_, stale) = conditional("If-None-Match: \"other\"\r\n".to_owned()).await;
    assert_eq!(stale.status, 200);

    // A new version (renamed into place) has a new tag.
    std::thread::sleep(Duration::from_millis(20));
    let out = sitemap(
        &[
            "build",
            "--dir",
            dir.path().to_str().expect("utf-8"),
            "--base-url",
            "https://example.com",
        ],
        "1\t\t/y\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (_, res) = conditional(format!("If-None-Match: {etag}\r\n")).await;
    assert_eq!(res.status, 200);
    assert_ne!(res.header("etag"), Some(&*etag));
    assert_eq!(
        locs(&res.text(), "urlset", "url"),
        ["https://example.com/y"]
    );

    let txt = get(proxy.addr, "example.com", "/sitemaps/urls.txt", None).await;
    assert_eq!(txt.status, 200);
    assert_eq!(
        txt.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert!(upstream.requests().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn only_plain_files_inside_the_folder_are_served() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("maps");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(root.path().join("secret.xml"), "<secret/>").expect("write");
    std::fs::write(dir.join("sitemap-0.xml"), "<urlset/>").expect("write");
    std::fs::write(dir.join(".sitemap-1.xml.x1y2.tmp"), "<half").expect("write");
    std::fs::write(dir.join("notes.php"), "<?php").expect("write");
    std::fs::create_dir(dir.join("folder.xml")).expect("mkdir");
    std::os::unix::fs::symlink(root.path().join("secret.xml"), dir.join("leak.xml"))
        .expect("symlink");
    std::os::unix::fs::symlink(dir.join("sitemap-0.xml"), dir.join("alias.xml")).expect("symlink");
    // A named pipe: opening it to read would wait for a writer forever.
    let made = Command::new("mkfifo")
        .arg(dir.join("pipe.xml"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let (upstream, proxy) = serving(&dir, "").await;

    let ok = get(proxy.addr, "example.com", "/sitemaps/alias.xml", None).await;
    assert_eq!(
        (ok.status, ok.text().as_str()),
        (200, "<urlset/>"),
        "a link inside is fine"
    );
    let with_query = get(
        proxy.addr,
        "example.com",
        "/sitemaps/sitemap-0.xml?x=1",
        None,
    )
    .await;
    assert_eq!(with_query.status, 200);
    for target in [
        "/sitemaps/../secret.xml",
        "/sitemaps/..%2fsecret.xml",
        "/sitemaps/%2e%2e/secret.xml",
        "/sitemaps/%2E%2E%2Fsecret.xml",
        "/sitemaps/maps%2f..%2f..%2fsecret.xml",
        "/sitemaps/leak.xml",
        "/sitemaps/.sitemap-1.xml.x1y2.tmp",
        "/sitemaps/notes.php",
        "/sitemaps/folder.xml",
        "/sitemaps/pipe.xml",
        "/sitemaps/missing.xml",
        "/sitemaps/",
        "/sitemaps/sitemap-0.xml/",
        "/sitemaps//etc/passwd",
    ] {
        let res = tokio::time::timeout(
            Duration::from_secs(10),
            get(proxy.addr, "example.com", target, None),
        )
        .await
        .unwrap_or_else(|_| panic!("{target}: no answer in 10 s"));
        assert_eq!(res.status, 404, "{target}");
        assert!(!res.text().contains("secret"), "{target}");
    }
    assert!(
        upstream.requests().is_empty(),
        "crawlgate answers for the folder"
    );
    // Other methods are the site's business.
    let post = request(
        proxy.addr,
        "POST",
        "example.com",
        "/sitemaps/sitemap-0.xml",
        None,
        "Content-Length: 0\r\n",
    )
    .await;
    assert_eq!(post.status, 200);
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}

/// A crawler fetching a file while the set is rebuilt in a loop always
/// gets a whole, well-formed file of one build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawler_never_reads_a_half_written_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8").to_owned();
    let build = move |generation: u64| {
        let entries: String = (1..=3000)
            .map(|id| format!("{id}\t\t/g{generation}/item/{id}\n"))
            .collect();
        let out = sitemap(
            &[
                "build",
                "--quiet",
                "--dir",
                &d,
                "--base-url",
                "https://example.com",
            ],
            &entries,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    build(0);
    let (_upstream, proxy) = serving(dir.path(), "").await;
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut generation = 1;
            while !done.load(Ordering::Relaxed) && generation < 200 {
                build(generation);
                generation += 1;
            }
            generation
        })
    };
    let mut reads = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        let res = get(proxy.addr, "example.com", "/sitemaps/sitemap-0.xml", None).await;
        assert_eq!(res.status, 200);
        let urls = locs(&res.text(), "urlset", "url");
        assert_eq!(urls.len(), 3000, "a whole file");
        let generation = urls[0].split('/').nth(3).expect("generation").to_owned();
        assert!(
            urls.iter()
                .all(|u| u.split('/').nth(3) == Some(generation.as_str())),
            "one build's file"
        );
        reads += 1;
    }
    done.store(true, Ordering::Relaxed);
    let generations = writer.join().expect("writer");
    assert!(
        reads > 10 && generations > 2,
        "{reads} reads over {generations} builds"
    );
    assert_eq!(
        listing(dir.path()),
        ["sitemap-0.xml"],
        "no temporary file left"
    );
    proxy.stop().await;
}

#[test]
fn a_missing_sitemap_folder_is_a_start_up_error() {
    let out = Command::new(process::BIN)
        .args([
            "--sitemap-dir",
            "/nonexistent/maps",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    assert!(
        text(&out.stderr).contains("--sitemap-dir: /nonexistent/maps: no such folder"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_static_export_becomes_a_sitemap() {
    let public = tempfile::tempdir().expect("tempdir");
    let p = public.path();
    let page = |path: &str| {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, "<html></html>").expect("write");
    };
    for path in [
        "index.html",
        "about/index.html",
        "blog/first-post.html",
        "a b/žluťoučký kůň.html",
        "404.html",
        ".git/hooks/x.html",
        ".hidden.html",
        "style.css",
        "docs/index.htm",
    ] {
        page(path);
    }
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("sitemap.xml");
    let o = out.to_str().expect("utf-8");
    let from_dir = |origin: &str, extra: &[&str]| {
        let args = [
            &["from-dir", p.to_str().expect("utf-8"), "--origin", origin][..],
            extra,
        ]
        .concat();
        sitemap(&args, "")
    };
    let run = from_dir("https://example.com", &["--out", o]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout), format!("{o}: 4 URLs\n"));
    let read = || {
        let xml = std::fs::read_to_string(&out).expect("read");
        locs(&xml, "urlset", "url")
    };
    assert_eq!(
        read(),
        [
            "https://example.com/",
            "https://example.com/a%20b/%C5%BElu%C5%A5ou%C4%8Dk%C3%BD%20k%C5%AF%C5%88.html",
            "https://example.com/about/",
            "https://example.com/blog/first-post.html",
        ]
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&out).expect("meta").permissions(),
    );
    assert_eq!(mode & 0o777, 0o664);

    // A page added, a page removed.
    page("blog/second-post.html");
    std::fs::remove_file(p.join("about/index.html")).expect("remove");
    let run = from_dir("https://example.com:8443/", &["--out", o, "--quiet"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(
        read(),
        [
            "https://example.com:8443/",
            "https://example.com:8443/a%20b/%C5%BElu%C5%A5ou%C4%8Dk%C3%BD%20k%C5%AF%C5%88.html",
            "https://example.com:8443/blog/first-post.html",
            "https://example.com:8443/blog/second-post.html",
        ]
    );

    // Refusals leave the old file as it was.
    let before = std::fs::read(&out).expect("read");
    for (origin, code, words) in [
        (
            "https://example.com/blog",
            64,
            "a bare scheme://host[:port]",
        ),
        ("example.com", 64, "a bare scheme://host[:port]"),
    ] {
        let run = from_dir(origin, &["--out", o]);
        assert_eq!(run.status.code(), Some(code), "{origin}");
        assert!(text(&run.stderr).contains(words), "{}", text(&run.stderr));
    }
    let empty = tempfile::tempdir().expect("tempdir");
    std::fs::write(empty.path().join("404.html"), "").expect("write");
    let run = sitemap(
        &[
            "from-dir",
            empty.path().to_str().expect("utf-8"),
            "--origin",
            "https://example.com",
            "--out",
            o,
        ],
        "",
    );
    assert_eq!(run.status.code(), Some(65));
    assert!(text(&run.stderr).contains("no *.html pages; the old sitemap is kept"));
    assert_eq!(std::fs::read(&out).expect("read"), before);
    assert_eq!(
        listing(out_dir.path()),
        ["sitemap.xml"],
        "no temporary file"
    );

    // The format follows --out's extension, unless --format says.
    let txt = out_dir.path().join("sitemap.txt");
    let t = txt.to_str().expect("utf-8");
    let run = from_dir("https://example.com", &["--out", t]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let listed = std::fs::read_to_string(&txt).expect("read");
    assert_eq!(listed.lines().count(), 4, "{listed}");
    assert!(listed.starts_with("https://example.com/\n"), "{listed}");
    let run = from_dir("https://example.com", &["--out", t, "--format", "xml"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let xml = std::fs::read_to_string(&txt).expect("read");
    assert_eq!(locs(&xml, "urlset", "url").len(), 4);
    for name in ["sitemap.html", "sitemap.xml.gz"] {
        let refused = out_dir.path().join(name);
        let run = from_dir(
            "https://example.com",
            &["--out", refused.to_str().expect("utf-8")],
        );
        assert_eq!(run.status.code(), Some(64), "{name}");
        assert!(
            text(&run.stderr)
                .starts_with(&format!("crawlgate: error: --out {}: ", refused.display())),
            "{}",
            text(&run.stderr)
        );
        assert!(!refused.exists());
    }

    // The text format, to stdout.
    let run = from_dir("http://example.com", &["--format", "txt"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(
        text(&run.stdout).lines().collect::<Vec<_>>(),
        [
            "http://example.com/",
            "http://example.com/a%20b/%C5%BElu%C5%A5ou%C4%8Dk%C3%BD%20k%C5%AF%C5%88.html",
            "http://example.com/blog/first-post.html",
            "http://example.com/blog/second-post.html",
        ]
    );
}

/// The SQLite export of docs/sitemaps.md, run as written (the database path aside)
/// with the real `sqlite3`, is input `build` takes: TAB-separated, no
/// header, NULL an empty field (no version in that language), a row
/// without any version skipped. Needs `sqlite3` (`.ci/run` installs it).
#[test]
fn the_readme_sqlite_export_feeds_a_build() {
    let Some(sqlite3) = crawlgate::testing::required_tool("sqlite3", "CRAWLGATE_REQUIRE_SQLITE")
    else {
        return;
    };
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sitemaps.md"))
        .expect("docs/sitemaps.md");
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("sqlite3 "))
        .expect("docs/sitemaps.md has an sqlite3 export");
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.ends_with("> \"$rows\""))
            .expect("it writes to $rows");
    let export = lines[start..=end].join("\n");
    assert!(export.contains("/var/lib/shop/shop.db"), "{export}");

    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("shop.db");
    let schema = "CREATE TABLE article (id INTEGER PRIMARY KEY, updated_at TEXT, \
                  slug_cs TEXT, slug_en TEXT, published INTEGER);\n\
                  INSERT INTO article VALUES\n\
                  (1, '2024-05-01 10:00:00', 'prvni', 'first', 1),\n\
                  (2, '2024-05-02 11:00:00', 'druhy', NULL, 1),\n\
                  (3, NULL, NULL, NULL, 1),\n\
                  (4, '2024-05-03', 'skryty', 'hidden', 0),\n\
                  (22501, '2024-05-04', NULL, 'tab\"quote', 1);\n";
    let made = Command::new(&sqlite3)
        .arg(&db)
        .arg(schema)
        .output()
        .expect("run sqlite3");
    assert!(made.status.success(), "{}", text(&made.stderr));
    let rows = dir.path().join("rows.tsv");
    let script = export.replace("/var/lib/shop/shop.db", db.to_str().expect("utf-8"));
    let ran = Command::new("sh")
        .args(["-euc", &script])
        .env("rows", &rows)
        .output()
        .expect("run sh");
    assert!(ran.status.success(), "{script}\n{}", text(&ran.stderr));

    let maps = dir.path().join("maps");
    std::fs::create_dir(&maps).expect("mkdir");
    let m = maps.to_str().expect("utf-8");
    let out = sitemap(
        &[
            "build",
            "--dir",
            m,
            "--base-url",
            "https://example.com/",
            "--prefix",
            "articles",
            "--languages",
            "cs,en",
            "--input",
            rows.to_str().expect("utf-8"),
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{m}: 2 files, 4 URLs from 3 entries, 1 skipped (no address)\n")
    );
    let zero = std::fs::read_to_string(maps.join("articles-0.xml")).expect("read");
    assert_eq!(
        locs(&zero, "urlset", "url"),
        [
            "https://example.com/clanek/prvni",
            "https://example.com/en/article/first",
            "https://example.com/clanek/druhy",
        ]
    );
    assert!(
        zero.contains("<lastmod>2024-05-01T10:00:00Z</lastmod>"),
        "{zero}"
    );
    let one = std::fs::read_to_string(maps.join("articles-1.xml")).expect("read");
    assert_eq!(
        locs(&one, "urlset", "url"),
        ["https://example.com/en/article/tab%22quote"]
    );
}
