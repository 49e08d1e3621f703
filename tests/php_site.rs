//! End to end with a real PHP site (`php -S`): a robot's `?do=vote`, in
//! every spelling PHP or a Nette-style parser reads as `do`, never reaches
//! the site; a human's vote does.
//!
//! Needs `php` on PATH. Without it the test is skipped, unless
//! CRAWLGATE_REQUIRE_PHP is set (as `.ci/run` does), in which case it fails.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{get, lines, Proxy, FIREFOX, GOOGLEBOT};

struct PhpServer {
    child: Child,
    addr: SocketAddr,
}

impl Drop for PhpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_php(php: &Path, votes: &Path) -> PhpServer {
    // A port no parallel test's bind(0) can take before php binds it.
    let addr = support::process::free_addr();
    let site = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/php-site");
    let child = Command::new(php)
        .args([
            "-S",
            &addr.to_string(),
            "-t",
            site,
            &format!("{site}/index.php"),
        ])
        .env("VOTES_FILE", votes)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start php -S");
    let server = PhpServer { child, addr };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "php -S did not start on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// Spellings of "do=vote", with how the site reads them.
const SPELLINGS: &[(&str, &str)] = &[
    ("/?do=vote", "get+framework"),
    ("/page?id=1&do=vote", "get+framework"),
    ("/?%64o=vote", "get+framework"),
    ("/?%64%6f=vote", "get+framework"),
    ("/?do[]=vote", "none"), // an array, not the string "vote": still blocked
    ("/?do%5B%5D=vote", "none"),
    ("/?do%5D=vote", "framework"),
    ("/?+do=vote", "get"),
    ("/?%20%20do=vote", "get"),
    ("/?do%00x=vote", "get"),
];

#[tokio::test]
async fn robots_cannot_vote_through_crawlgate_humans_can() {
    let Some(php) = crawlgate::testing::php_binary() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let votes = dir.path().join("votes.txt");
    let site = start_php(&php, &votes);

    // Sanity: the site itself counts every spelling that yields a string.
    for &(target, via) in SPELLINGS {
        let res = get(site.addr, "example.com", target, Some(FIREFOX)).await;
        assert_eq!(res.status, 200, "php site answers {target}");
        let want = if via == "none" {
            "voted: no"
        } else {
            &format!("voted: {via}")
        };
        assert!(
            res.text().contains(want),
            "site reads {target} as {}",
            res.text()
        );
    }
    let direct = lines(&votes).len();
    assert_eq!(
        direct,
        SPELLINGS.iter().filter(|(_, v)| *v != "none").count()
    );

    let proxy = Proxy::start("", &format!("http://{}", site.addr)).await;
    for &(target, _) in SPELLINGS {
        for ua in [Some(GOOGLEBOT), Some("python-requests/2.32"), None] {
            let res = get(proxy.addr, "example.com", target, ua).await;
            assert_eq!(res.status, 403, "{target} as {ua:?}");
        }
    }
    assert_eq!(
        lines(&votes).len(),
        direct,
        "a robot's vote reached the site"
    );

    for &(target, via) in SPELLINGS {
        let res = get(proxy.addr, "example.com", target, Some(FIREFOX)).await;
        assert_eq!(res.status, 200, "{target}");
        assert!(res.text().contains("X-Crawler: 0"), "{}", res.text());
        if via != "none" {
            let last = lines(&votes).pop().unwrap_or_default();
            assert_eq!(last, format!("vote via={via} crawler=0"), "{target}");
        }
    }
    assert_eq!(lines(&votes).len(), 2 * direct);

    // A robot's ordinary page view reaches the site, labelled.
    let res = get(proxy.addr, "example.com", "/page?id=1", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 200);
    assert!(res.text().contains("X-Crawler: 1"), "{}", res.text());
    assert!(res.text().contains("voted: no"));
    proxy.stop().await;
}
