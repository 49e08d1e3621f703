//! `crawlgate demo`: the proxy in front of a tiny built-in site, on
//! loopback, with curl commands that show every feature.
//!
//! The sample site behaves like a legacy PHP site: `?do=vote` (read the
//! way PHP reads parameter names) records a vote, which is exactly what a
//! robot must not be able to do. Each page shows what reached the site, so
//! the `X-Crawler` header and the forwarding headers are visible.
//!
//! Crawler verification is off in the demo: it would fetch the operators'
//! range lists from the internet, and the demo talks to loopback only.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::config::Overrides;
use crate::live::Live;
use crate::run::{Control, Runner};

/// Runs the demo until `shutdown` completes. `listen` defaults to
/// `127.0.0.1:8080`, or a free port if that one is taken. `program` is how
/// the printed hints call crawlgate (the binary the user started).
pub async fn run(
    listen: Option<SocketAddr>,
    program: &str,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DemoError> {
    let site = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(DemoError::Site)?;
    let site_addr = site.local_addr().map_err(DemoError::Site)?;
    let votes = Arc::new(AtomicU64::new(0));
    let site_task = tokio::spawn(serve_site(site, Arc::clone(&votes)));

    let sitemap_dir = tempfile::Builder::new()
        .prefix("crawlgate-demo-")
        .tempdir()
        .map_err(DemoError::Sitemap)?;
    let overrides = |listen: SocketAddr| Overrides {
        listen: Some(listen.to_string()),
        upstream: Some(format!("http://{site_addr}")),
        sitemap_dir: Some(sitemap_dir.path().to_owned()),
        // Verification would fetch the operators' range lists from the
        // internet (and every loopback claim would be spoofed anyway): the
        // demo contacts nothing but its own sample site.
        verify: Some(false),
        ..Overrides::default()
    };
    let start = |listen: SocketAddr| -> Result<Runner, DemoError> {
        let live = Live::start(None, overrides(listen)).map_err(DemoError::Load)?;
        Runner::bind(Arc::new(live)).map_err(DemoError::Bind)
    };
    let server = match listen {
        Some(addr) => start(addr)?,
        // 8080 when it is free, else any free port.
        None => start(SocketAddr::from(([127, 0, 0, 1], 8080)))
            .or_else(|_| start(SocketAddr::from(([127, 0, 0, 1], 0))))?,
    };
    let addr = server.addrs().plain;
    write_sitemaps(sitemap_dir.path(), addr)?;

    println!("{}", instructions(addr, site_addr, program));
    let (events, control) = tokio::sync::mpsc::channel(1);
    let stop = async move {
        shutdown.await;
        let _ = events.send(Control::Drain).await;
        // Keep the sender until the drain is over: a closed channel would
        // mean the same, but this says it.
        std::future::pending::<()>().await;
    };
    let result = tokio::select! {
        stopped = server.run(control) => stopped.map(drop),
        () = stop => Ok(()),
    };
    site_task.abort();
    drop(sitemap_dir);
    result.map_err(DemoError::Site)
}

/// What the demo prints: where it listens and what to try; `program` is
/// the command that runs crawlgate, already quoted for a shell.
pub fn instructions(addr: SocketAddr, site: SocketAddr, program: &str) -> String {
    let base = format!("http://{addr}");
    let port = addr.port();
    let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
    format!(
        "crawlgate demo: proxy listening on {base} in front of a sample site on http://{site}\n\
         \n\
         Try these (curl's own User-Agent counts as a robot):\n\
         \n\
         # a robot clicking an action link: 403, the site never sees it\n\
         curl -i '{base}/?do=vote'\n\
         # ... in any spelling PHP would read as `do`\n\
         curl -i '{base}/?%64o=vote'\n\
         curl -i '{base}/?do[]=vote'\n\
         # a human's click goes through (the page counts the vote)\n\
         curl -i -A '{firefox}' '{base}/?do=vote'\n\
         # duplicate addresses: one 301 to the canonical one, path and query kept\n\
         curl -i -H 'Host: www.localhost:{port}' '{base}/www/page?id=1'\n\
         # robots.txt, synthesized (with a Sitemap line: the demo has a sitemap index)\n\
         curl -i '{base}/robots.txt'\n\
         # the sitemap index and its file, served from the sitemap folder\n\
         curl -i '{base}/sitemaps/sitemap.xml'\n\
         curl -s '{base}/sitemaps/sitemap-0.xml'\n\
         # everything else is forwarded; the site is told who is a robot (X-Crawler)\n\
         curl -i '{base}/page?id=1'\n\
         curl -i -A '{firefox}' '{base}/page?id=1'\n\
         # classify User-Agents offline\n\
         echo 'Mozilla/5.0 (compatible; Googlebot/2.1)' | {program} classify --explain\n\
         \n\
         Crawler verification is off here: the demo contacts nothing but its sample site on\n\
         loopback. In front of a real site it is on by default and fetches the crawler\n\
         operators' published IP ranges (docs/verification.md).\n\
         \n\
         Access log below. Ctrl-C stops the demo."
    )
}

/// `path` quoted for a POSIX shell when it holds anything but plain
/// path characters.
pub fn shell_quote(path: &str) -> String {
    let plain = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b));
    if plain && !path.is_empty() {
        path.to_owned()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

async fn serve_site(listener: TcpListener, votes: Arc<AtomicU64>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let votes = Arc::clone(&votes);
        let service = service_fn(move |req| {
            let votes = Arc::clone(&votes);
            async move { Ok::<_, Infallible>(site_page(&req, &votes)) }
        });
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
    }
}

fn site_page(req: &Request<Incoming>, votes: &AtomicU64) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    let voted = req
        .uri()
        .query()
        .is_some_and(|q| crate::query::action_param(q.as_bytes(), &["do"]).is_some());
    let count = if voted {
        votes.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        votes.load(Ordering::Relaxed)
    };
    let body = format!(
        "sample site: {method} {uri}\n\
         votes recorded: {count}{note}\n\
         X-Crawler: {crawler}\n\
         X-Forwarded-For: {xff}\n\
         Host: {host}\n",
        method = req.method(),
        uri = req.uri(),
        note = if voted { " (this request voted)" } else { "" },
        crawler = header("x-crawler"),
        xff = header("x-forwarded-for"),
        host = header("host"),
    );
    let mut res = Response::new(Full::new(Bytes::from(body)));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// The sample site's sitemap set and index, built the way a cron job
/// builds a real one, for the proxy at `addr`.
fn write_sitemaps(dir: &Path, addr: SocketAddr) -> Result<(), DemoError> {
    use crate::sitemap::{build, index, SetWriter};
    let base = format!("http://{addr}/");
    let fail = |e: &dyn std::fmt::Display| DemoError::Sitemap(io::Error::other(e.to_string()));
    let options = build::Options::new(&base, "sitemap", None, None).map_err(|e| fail(&e))?;
    let set = SetWriter::new(dir, "sitemap").map_err(|e| fail(&e))?;
    let mut entries: &[u8] = b"1\t2026-01-01\t/\n2\t2026-01-02\t/page?id=1\n3\t\t/page?id=2\n";
    build::build(&options, "demo", &mut entries, build::Target::Write(set))
        .map_err(|e| fail(&e))?;
    let files = index::files_base(&base, None).map_err(|e| fail(&e))?;
    index::write_index(dir, &files, &["sitemap".to_owned()]).map_err(|e| fail(&e))?;
    Ok(())
}

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The sample site or the proxy socket failed.
    #[error("demo site")]
    Site(#[source] io::Error),
    /// The proxy address could not be bound.
    #[error(transparent)]
    Bind(crate::run::BindError),
    /// The demo's sitemap folder could not be written.
    #[error("cannot create the demo sitemap folder")]
    Sitemap(#[source] io::Error),
    /// The generated config or the embedded rules were refused (a bug).
    #[error(transparent)]
    Load(crate::live::LoadError),
}
