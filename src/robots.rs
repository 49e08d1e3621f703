//! The synthesized robots.txt.
//!
//! The fixed part is rendered once, at load time, from the same blocked
//! parameter list that the request path enforces (one source of truth), the
//! configured disallowed prefixes and extra lines. Per request only the
//! `Sitemap:` line is added: for the scheme and host asked, and only while
//! `<sitemap-dir>/sitemap.xml` exists (checked at most once a second).
//!
//! Each answer carries a strong `ETag` (of its bytes) and a
//! `Last-Modified` (when this configuration was loaded, or when the
//! sitemap index last appeared or disappeared, whichever is later), so
//! that a crawler's conditional request is answered `304`.

pub mod matcher;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::HeaderValue;

use crate::canonical::split_authority;
use crate::config::{AiConfig, AiKind};
use crate::sitemap::{INDEX_NAME, SERVED_PATH};
use crate::validators::etag_of;
use crate::verify::Operators;

/// How long a sitemap existence check is reused.
const SITEMAP_RECHECK: Duration = Duration::from_secs(1);

/// The robots.txt responder state.
#[derive(Debug)]
pub struct Robots {
    body: Bytes,
    /// The fixed body's tag.
    etag: HeaderValue,
    /// When this state was built, whole seconds.
    built: SystemTime,
    sitemap: Option<SitemapProbe>,
}

/// One robots.txt answer: the body and its validators.
#[derive(Clone, Debug)]
pub struct Representation {
    /// The text.
    pub body: Bytes,
    /// Its strong entity tag.
    pub etag: HeaderValue,
    /// When it last changed, as far as crawlgate knows.
    pub last_modified: SystemTime,
}

impl Robots {
    /// Renders the fixed part.
    pub fn new<N: AsRef<str>>(
        blocked_params: &[N],
        disallow: &[String],
        extra: &[String],
        sitemap_dir: Option<PathBuf>,
    ) -> Self {
        let mut body = String::from("User-agent: *\nAllow: /\n");
        for name in blocked_params {
            let name = name.as_ref();
            body.push_str(&format!("Disallow: /*?{name}=\nDisallow: /*&{name}=\n"));
        }
        for path in disallow {
            body.push_str(&format!("Disallow: {path}\n"));
        }
        for line in extra {
            body.push_str(line);
            body.push('\n');
        }
        let body = Bytes::from(body);
        Self {
            etag: etag_of(&body),
            body,
            built: whole_seconds(SystemTime::now()),
            sitemap: sitemap_dir.map(|dir| SitemapProbe::new(dir.join(INDEX_NAME))),
        }
    }

    /// The same robots.txt with the site's AI-crawler policy: a
    /// `Content-Signal:` line in the `*` group (`search=yes`, and
    /// `ai-input`, `ai-train` as stated: `ai-input=no` when AI search or
    /// user-triggered fetches are refused) and, for each refused kind, one
    /// group of every operator's crawlers of that kind (`rules/crawlers.toml`)
    /// with `Disallow: /`. A crawler that has a group of its own obeys it
    /// and not `*`, so a kind that is allowed gets no group.
    #[must_use]
    pub fn with_ai(mut self, ai: &AiConfig, operators: &Operators) -> Self {
        let fixed = String::from_utf8_lossy(&self.body).into_owned();
        let (first, rest) = fixed.split_at(fixed.find('\n').map_or(fixed.len(), |i| i + 1));
        let yes_no = |allowed: bool| if allowed { "yes" } else { "no" };
        let mut signals = vec!["search=yes".to_owned()];
        let input = [ai.search, ai.user_fetch];
        if input.iter().any(Option::is_some) {
            let allowed = input.iter().all(|s| s.unwrap_or(true));
            signals.push(format!("ai-input={}", yes_no(allowed)));
        }
        if let Some(allowed) = ai.training {
            signals.push(format!("ai-train={}", yes_no(allowed)));
        }
        let mut body = format!("{first}Content-Signal: {}\n{rest}", signals.join(", "));
        for kind in AiKind::ALL {
            if ai.allows(kind) {
                continue;
            }
            let mut tokens: Vec<&str> = Vec::new();
            for token in operators.ai_tokens(kind) {
                if !tokens.iter().any(|t| t.eq_ignore_ascii_case(token)) {
                    tokens.push(token);
                }
            }
            if tokens.is_empty() {
                continue;
            }
            body.push_str(&format!(
                "\n# AI crawlers: {} = \"disallow\"\n",
                kind.as_str()
            ));
            for token in tokens {
                body.push_str(&format!("User-agent: {token}\n"));
            }
            body.push_str("Disallow: /\n");
        }
        self.body = Bytes::from(body);
        self.etag = etag_of(&self.body);
        self
    }

    /// The answer for a request to `scheme://authority/robots.txt`, with
    /// its validators.
    pub fn representation(&self, scheme: &str, authority: Option<&str>) -> Representation {
        let body = self.body(scheme, authority);
        let changed = self.sitemap.as_ref().map_or(0, SitemapProbe::changed);
        let last_modified = self.built.max(UNIX_EPOCH + Duration::from_secs(changed));
        let etag = if body.len() == self.body.len() {
            self.etag.clone()
        } else {
            etag_of(&body)
        };
        Representation {
            body,
            etag,
            last_modified,
        }
    }

    /// The fixed part alone.
    pub fn fixed_body(&self) -> &Bytes {
        &self.body
    }

    /// The body for a request to `scheme://authority/robots.txt`.
    pub fn body(&self, scheme: &str, authority: Option<&str>) -> Bytes {
        let advertise = self.sitemap.as_ref().is_some_and(SitemapProbe::exists);
        let authority = authority.filter(|a| split_authority(a).is_some());
        match authority {
            Some(authority) if advertise => {
                let mut body = Vec::with_capacity(self.body.len() + 64 + authority.len());
                body.extend_from_slice(&self.body);
                // A record of its own, apart from the last group (which
                // may be an AI group's `Disallow: /`): a blank line first.
                body.extend_from_slice(b"\nSitemap: ");
                body.extend_from_slice(scheme.as_bytes());
                body.extend_from_slice(b"://");
                body.extend_from_slice(authority.to_ascii_lowercase().as_bytes());
                body.extend_from_slice(SERVED_PATH.as_bytes());
                body.extend_from_slice(INDEX_NAME.as_bytes());
                body.push(b'\n');
                Bytes::from(body)
            }
            _ => self.body.clone(),
        }
    }
}

/// `time` without its fraction of a second (an HTTP date has none).
fn whole_seconds(time: SystemTime) -> SystemTime {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// A cached "does this file exist" check.
#[derive(Debug)]
struct SitemapProbe {
    path: PathBuf,
    epoch: Instant,
    /// Milliseconds after `epoch` of the last check, plus one (0 = never).
    checked_at: AtomicU64,
    exists: AtomicBool,
    /// Unix seconds of the last check that saw the file appear or
    /// disappear (0 = never).
    changed: AtomicU64,
}

impl SitemapProbe {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            epoch: Instant::now(),
            checked_at: AtomicU64::new(0),
            exists: AtomicBool::new(false),
            changed: AtomicU64::new(0),
        }
    }

    /// When the file last appeared or disappeared (Unix seconds; 0 =
    /// never seen to).
    fn changed(&self) -> u64 {
        self.changed.load(Ordering::Relaxed)
    }

    fn exists(&self) -> bool {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let last = self.checked_at.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < SITEMAP_RECHECK.as_millis() as u64 {
            return self.exists.load(Ordering::Relaxed);
        }
        let exists = self.path.is_file();
        if self.exists.swap(exists, Ordering::Relaxed) != exists {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            self.changed.store(now, Ordering::Relaxed);
        }
        self.checked_at.store(now, Ordering::Relaxed);
        exists
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESIGN_BODY: &str = "User-agent: *\nAllow: /\nDisallow: /*?do=\nDisallow: /*&do=\nDisallow: /*?_fid=\nDisallow: /*&_fid=\nDisallow: /admin/\nDisallow: /api/\nDisallow: /cron/\n";

    fn defaults() -> Vec<String> {
        ["/admin/", "/api/", "/cron/"].map(String::from).to_vec()
    }

    #[test]
    fn default_body_is_the_design_text() {
        let r = Robots::new(&["do", "_fid"], &defaults(), &[], None);
        assert_eq!(r.body("http", Some("example.com")), DESIGN_BODY);
    }

    #[test]
    fn action_lines_follow_the_blocked_list() {
        let r = Robots::new(&["act"], &[], &["Crawl-delay: 5".to_owned()], None);
        assert_eq!(
            r.body("http", None),
            "User-agent: *\nAllow: /\nDisallow: /*?act=\nDisallow: /*&act=\nCrawl-delay: 5\n"
        );
    }

    #[test]
    fn sitemap_line_only_when_the_index_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Robots::new(
            &["do", "_fid"],
            &defaults(),
            &[],
            Some(dir.path().to_owned()),
        );
        assert_eq!(r.body("https", Some("example.com")), DESIGN_BODY);

        let r = Robots::new(
            &["do", "_fid"],
            &defaults(),
            &[],
            Some(dir.path().to_owned()),
        );
        std::fs::write(dir.path().join("sitemap.xml"), "<sitemapindex/>").expect("write");
        assert_eq!(
            r.body("https", Some("Example.com:8443")),
            format!("{DESIGN_BODY}\nSitemap: https://example.com:8443/sitemaps/sitemap.xml\n")
        );
        // A host that is not a host is not reflected.
        assert_eq!(r.body("https", Some("evil.com/\r\nx")), DESIGN_BODY);
        assert_eq!(r.body("https", None), DESIGN_BODY);
    }

    #[test]
    fn the_validators_follow_the_body() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Robots::new(&["do"], &[], &[], Some(dir.path().to_owned()));
        let plain = r.representation("https", Some("example.com"));
        assert_eq!(plain.etag, etag_of(&plain.body));
        assert_eq!(
            plain.etag,
            r.representation("https", Some("example.com")).etag
        );
        std::fs::write(dir.path().join("sitemap.xml"), "<sitemapindex/>").expect("write");
        // A new state (the probe reuses a check for a second).
        let r = Robots::new(&["do"], &[], &[], Some(dir.path().to_owned()));
        let with_sitemap = r.representation("https", Some("example.com"));
        assert_ne!(with_sitemap.etag, plain.etag);
        assert_eq!(with_sitemap.etag, etag_of(&with_sitemap.body));
        assert!(with_sitemap.last_modified >= plain.last_modified);
        assert_ne!(
            with_sitemap.etag,
            r.representation("https", Some("other.example")).etag,
            "the Sitemap line names the host"
        );
    }

    /// Semantics, checked with an independent port of Google's matcher.
    #[test]
    fn google_matcher_agrees() {
        use robotstxt::DefaultMatcher;
        let r = Robots::new(&["do", "_fid"], &defaults(), &[], None);
        let body = String::from_utf8(r.fixed_body().to_vec()).expect("utf-8");
        let allowed = |path: &str| {
            let url = format!("http://example.com{path}");
            DefaultMatcher::default().one_agent_allowed_by_robots(&body, "Googlebot", &url)
        };
        for path in [
            "/?do=x",
            "/a?b=1&do=x",
            "/x?_fid=1",
            "/admin/",
            "/admin/users",
            "/api/v1",
            "/cron/x",
        ] {
            assert!(!allowed(path), "{path} must be disallowed");
        }
        for path in [
            "/",
            "/page",
            "/page?id=1",
            "/page?undo=1",
            "/administrator",
            "/a?x=do",
        ] {
            assert!(allowed(path), "{path} must be allowed");
        }
    }

    /// Issue 25: the Sitemap line is a record of its own, a blank line
    /// after the last group (an AI group ends with `Disallow: /`).
    #[test]
    fn the_sitemap_line_stands_apart_from_the_last_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("sitemap.xml"), "<sitemapindex/>").expect("write");
        let ai = AiConfig {
            training: Some(false),
            search: None,
            user_fetch: None,
            enforce: false,
        };
        let r = Robots::new(&["do"], &[], &[], Some(dir.path().to_owned()))
            .with_ai(&ai, &Operators::embedded());
        let body = String::from_utf8(r.body("https", Some("example.com")).to_vec()).expect("utf-8");
        assert!(
            body.ends_with("Disallow: /\n\nSitemap: https://example.com/sitemaps/sitemap.xml\n"),
            "{body}"
        );
    }

    /// The AI policy: the Content-Signal line in the `*` group, one group
    /// per refused kind; Google's matcher agrees that the refused crawlers
    /// may fetch nothing while search engines and allowed kinds keep the
    /// `*` rules.
    #[test]
    fn the_ai_policy_adds_signals_and_groups_of_refused_kinds() {
        use robotstxt::DefaultMatcher;
        let operators = Operators::embedded();
        let ai = AiConfig {
            training: Some(false),
            search: None,
            user_fetch: Some(true),
            enforce: false,
        };
        let r = Robots::new(&["do"], &[], &[], None).with_ai(&ai, &operators);
        let body = String::from_utf8(r.fixed_body().to_vec()).expect("utf-8");
        assert!(
            body.starts_with(
                "User-agent: *\nContent-Signal: search=yes, ai-input=yes, ai-train=no\nAllow: /\n"
            ),
            "{body}"
        );
        assert_eq!(
            body.matches("Disallow: /\n").count(),
            1,
            "one refused kind: {body}"
        );
        assert_ne!(r.etag, Robots::new(&["do"], &[], &[], None).etag);
        let allowed = |agent: &str, path: &str| {
            let url = format!("http://example.com{path}");
            DefaultMatcher::default().one_agent_allowed_by_robots(&body, agent, &url)
        };
        for agent in [
            "GPTBot",
            "Google-Extended",
            "CCBot",
            "ClaudeBot",
            "Applebot-Extended",
        ] {
            assert!(!allowed(agent, "/page"), "{agent} is refused");
        }
        for agent in [
            "Googlebot",
            "ChatGPT-User",
            "OAI-SearchBot",
            "PerplexityBot",
        ] {
            assert!(allowed(agent, "/page"), "{agent} keeps the * group");
            assert!(
                !allowed(agent, "/?do=1"),
                "{agent} keeps the * group's action rules"
            );
        }

        let refuse_all = AiConfig {
            training: Some(false),
            search: Some(false),
            user_fetch: Some(false),
            enforce: true,
        };
        let r = Robots::new(&["do"], &[], &[], None).with_ai(&refuse_all, &operators);
        let body = String::from_utf8(r.fixed_body().to_vec()).expect("utf-8");
        assert!(
            body.contains("Content-Signal: search=yes, ai-input=no, ai-train=no\n"),
            "{body}"
        );
        for agent in [
            "OAI-SearchBot",
            "ChatGPT-User",
            "Perplexity-User",
            "Claude-SearchBot",
        ] {
            let url = "http://example.com/page";
            assert!(
                !DefaultMatcher::default().one_agent_allowed_by_robots(&body, agent, url),
                "{agent}"
            );
        }
        assert!(DefaultMatcher::default().one_agent_allowed_by_robots(
            &body,
            "Googlebot",
            "http://example.com/page"
        ));
    }
}
