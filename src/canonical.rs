//! The one canonical address of a page, and the redirect to it.
//!
//! Two duplicates are fixed, both in one hop: the host form (`www.` prefix
//! added or removed, by [`WwwMode`]) and a leaked `/www` path segment
//! prefix (`/www`, `/www/…`, repeated; not `/wwwx`). Path and query are
//! copied byte for byte from the original request-target. The Location is
//! absolute and is built only from a host that passed [`split_authority`]
//! and from path/query bytes that the caller must still turn into a
//! `HeaderValue` (which rejects CR, LF and other control bytes).

use crate::config::{is_hostname, RedirectConfig, WwwMode};

const ACME_CHALLENGE: &str = "/.well-known/acme-challenge/";

/// The absolute URL the request should be redirected to, or `None` when
/// the address is already canonical, the host is not a valid host, or an
/// allow-list is configured and does not hold the target host.
///
/// `authority` is the Host header (or the request-target's authority) as
/// received; `scheme` is `http` or `https`.
pub fn location(
    config: &RedirectConfig,
    scheme: &str,
    authority: &str,
    path: &str,
    query: Option<&str>,
) -> Option<String> {
    let (host, port) = split_authority(authority)?;
    let new_host = match config.www {
        WwwMode::Apex => strip_www(host),
        WwwMode::Www => add_www(host),
        WwwMode::Off => None,
    };
    let new_path = if config.strip_www_path {
        strip_www_path(path)
    } else {
        None
    };
    let upgrade = config
        .https
        .filter(|_| scheme == "http" && !path.starts_with(ACME_CHALLENGE));
    if new_host.is_none() && new_path.is_none() && upgrade.is_none() {
        return None;
    }
    let scheme = if upgrade.is_some() { "https" } else { scheme };
    let (host, www_prefix) = match new_host {
        Some(HostFix::Strip(rest)) => (rest, ""),
        Some(HostFix::AddWww) => (host, "www."),
        None => (host, ""),
    };
    if !config.hosts.is_empty() && !allowed(&config.hosts, www_prefix, host) {
        return None;
    }

    let path = new_path.unwrap_or(path);
    let mut url = String::with_capacity(
        scheme.len()
            + 3
            + www_prefix.len()
            + authority.len()
            + 6
            + path.len()
            + 1
            + query.map_or(0, str::len),
    );
    url.push_str(scheme);
    url.push_str("://");
    url.push_str(www_prefix);
    url.extend(host.chars().map(|c| c.to_ascii_lowercase()));
    match (upgrade, port) {
        // The HTTPS listener's port replaces whatever port was asked for.
        (Some(https), _) => {
            if let Some(port) = https.port {
                use std::fmt::Write;
                let _ = write!(url, ":{port}");
            }
        }
        (None, Some(port)) => {
            url.push(':');
            url.push_str(port);
        }
        (None, None) => {}
    }
    url.push_str(path);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    Some(url)
}

enum HostFix<'a> {
    Strip(&'a str),
    AddWww,
}

fn strip_www(host: &str) -> Option<HostFix<'_>> {
    // Every leading `www.` label, so that the result is a fixed point:
    // `www.www.example.com` goes to `example.com` in one hop.
    let mut rest = host;
    while let Some(prefix) = rest.get(..4) {
        let tail = &rest[4..];
        if !prefix.eq_ignore_ascii_case("www.") || tail.is_empty() || tail.starts_with('.') {
            break;
        }
        rest = tail;
    }
    (rest.len() != host.len()).then_some(HostFix::Strip(rest))
}

fn add_www(host: &str) -> Option<HostFix<'static>> {
    let has_www = host
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("www."));
    let is_ip = host.starts_with('[') || host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let has_dot = host.trim_end_matches('.').contains('.');
    // Adding `www.` must not push a name past the 253 bytes it may have.
    let too_long = host.trim_end_matches('.').len() + 4 > 253;
    if has_www || is_ip || !has_dot || too_long {
        None
    } else {
        Some(HostFix::AddWww)
    }
}

fn allowed(hosts: &[Box<str>], www_prefix: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.');
    hosts.iter().any(|h| {
        h.len() == www_prefix.len() + host.len()
            && h.starts_with(www_prefix)
            && h[www_prefix.len()..].eq_ignore_ascii_case(host)
    })
}

/// The path without its leading `/www` segments, or `None` if it has none.
/// `/www` → `/`, `/www/a` → `/a`, `/www/www/a` → `/a`; `/wwwx` is kept.
pub fn strip_www_path(path: &str) -> Option<&str> {
    let mut rest = path;
    loop {
        if rest == "/www" {
            return Some("/");
        }
        if !rest.starts_with("/www/") {
            break;
        }
        rest = &rest[4..];
    }
    (rest.len() != path.len()).then_some(rest)
}

/// Splits `host[:port]` and checks it: the host must be a DNS-style name
/// ([`is_hostname`], IPv4 addresses included) or a bracketed IPv6 literal
/// (no zone, no `IPvFuture`), the port 1 to 5 decimal digits, 1 to 65535.
/// Anything else (user info, a path, spaces, commas, `%`, control bytes,
/// an empty host or port) is `None`: such a host is never reflected into a
/// Location or robots.txt, and a request that asks for it is refused
/// ([`crate::framing::check`]). One rule for the three, written here.
///
/// RFC 3986's reg-name also allows `%`-escapes, `~` and the sub-delims
/// `!$&'()*+,;=`; no DNS name has them, and in a Host header in front of
/// PHP they only serve to confuse whatever builds URLs from `HTTP_HOST`
/// (`a.com, b.com` is what a proxy that joins Host fields makes). `_` is
/// kept: real host names have it.
pub fn split_authority(authority: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let host = &authority[..=close];
        // Parsing allocates nothing.
        host[1..close].parse::<std::net::Ipv6Addr>().ok()?;
        match &authority[close + 1..] {
            "" => (host, None),
            rest => (host, Some(rest.strip_prefix(':')?)),
        }
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if !is_hostname(host.as_bytes()) {
            return None;
        }
        (host, port)
    };
    if let Some(port) = port {
        let digits = (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit());
        if !digits || port.parse::<u16>().map_or(true, |p| p == 0) {
            return None;
        }
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HttpsRedirect;

    fn config(www: WwwMode, hosts: &[&str]) -> RedirectConfig {
        RedirectConfig {
            https: None,
            www,
            strip_www_path: true,
            hosts: hosts.iter().map(|&h| h.into()).collect(),
        }
    }

    #[test]
    fn apex_table() {
        let c = config(WwwMode::Apex, &[]);
        let rows: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            ("www.example.com", "/", None, Some("http://example.com/")),
            ("WWW.Example.COM", "/a", None, Some("http://example.com/a")),
            (
                "www.www.example.com",
                "/",
                None,
                Some("http://example.com/"),
            ),
            ("www.www", "/", None, Some("http://www/")),
            (
                "www.example.com:8080",
                "/a",
                Some("b=1"),
                Some("http://example.com:8080/a?b=1"),
            ),
            ("www.example.com.", "/", None, Some("http://example.com./")),
            ("example.com", "/", None, None),
            ("example.com", "/www", None, Some("http://example.com/")),
            ("example.com", "/www/", None, Some("http://example.com/")),
            (
                "example.com",
                "/www/a/b",
                Some("x=%20&y"),
                Some("http://example.com/a/b?x=%20&y"),
            ),
            (
                "example.com",
                "/www/www/a",
                None,
                Some("http://example.com/a"),
            ),
            ("example.com", "/wwwx", None, None),
            ("example.com", "/WWW/a", None, None),
            ("example.com", "/a/www/b", None, None),
            (
                "www.example.com",
                "/www/a",
                Some(""),
                Some("http://example.com/a?"),
            ),
            (
                "example.com",
                "/www//evil.com",
                None,
                Some("http://example.com//evil.com"),
            ),
            ("www.", "/", None, None),
            ("www..com", "/", None, None),
            ("wwwexample.com", "/", None, None),
            ("www.example.com:", "/", None, None),
            ("www.example.com:123456", "/", None, None),
            ("www.example.com:65536", "/", None, None),
            ("www.example.com:+80", "/", None, None),
            ("user@www.example.com", "/", None, None),
            ("www.exa mple.com", "/", None, None),
            ("www.example.com\r\nX: y", "/", None, None),
            ("", "/www/a", None, None),
            ("[::1]:8080", "/www/a", None, Some("http://[::1]:8080/a")),
            ("[::1", "/www/a", None, None),
            ("127.0.0.1", "/www", None, Some("http://127.0.0.1/")),
        ];
        for &(host, path, query, want) in rows {
            assert_eq!(
                location(&c, "http", host, path, query).as_deref(),
                want,
                "{host} {path} {query:?}"
            );
        }
    }

    #[test]
    fn www_mode_table() {
        let c = config(WwwMode::Www, &[]);
        let rows: &[(&str, &str, Option<&str>)] = &[
            ("example.com", "/a", Some("https://www.example.com/a")),
            (
                "Example.com:443",
                "/www/a",
                Some("https://www.example.com:443/a"),
            ),
            ("www.example.com", "/a", None),
            ("localhost:8080", "/a", None),
            ("10.0.0.1", "/a", None),
            ("[::1]", "/a", None),
        ];
        for &(host, path, want) in rows {
            assert_eq!(
                location(&c, "https", host, path, None).as_deref(),
                want,
                "{host}"
            );
        }
    }

    #[test]
    fn www_mode_never_makes_a_host_too_long() {
        // Found by the `canonical` fuzz target: 250 bytes + "www." > 253.
        let c = config(WwwMode::Www, &[]);
        let label = "a".repeat(60);
        let host = format!("{label}.{label}.{label}.{label}.abcdef");
        assert_eq!(host.len(), 250);
        assert!(is_hostname(host.as_bytes()));
        assert_eq!(location(&c, "http", &host, "/", None), None);
        let fixed_path = location(&c, "http", &host, "/www/a", None);
        assert_eq!(fixed_path, Some(format!("http://{host}/a")));
    }

    #[test]
    fn off_mode_still_strips_the_path() {
        let c = config(WwwMode::Off, &[]);
        assert_eq!(location(&c, "http", "www.example.com", "/a", None), None);
        assert_eq!(
            location(&c, "http", "www.example.com", "/www/a", None).as_deref(),
            Some("http://www.example.com/a")
        );
    }

    #[test]
    fn allow_list_limits_targets() {
        let c = config(WwwMode::Apex, &["example.com"]);
        assert_eq!(
            location(&c, "http", "WWW.EXAMPLE.COM.", "/", None).as_deref(),
            Some("http://example.com./")
        );
        assert_eq!(location(&c, "http", "www.other.org", "/", None), None);
        assert_eq!(location(&c, "http", "other.org", "/www/a", None), None);
        let c = config(WwwMode::Www, &["www.example.com"]);
        assert_eq!(
            location(&c, "http", "example.com", "/", None).as_deref(),
            Some("http://www.example.com/")
        );
        assert_eq!(location(&c, "http", "example.org", "/", None), None);
    }

    #[test]
    fn canonical_addresses_are_fixed_points() {
        let c = config(WwwMode::Apex, &[]);
        for (host, path) in [
            ("www.example.com", "/www/www/a"),
            ("www.a.b:81", "/www"),
            ("x.y", "/www/"),
        ] {
            let first = location(&c, "http", host, path, Some("q")).expect("redirects");
            let uri: http::Uri = first.parse().expect("valid URI");
            let authority = uri.authority().expect("absolute").as_str();
            assert_eq!(
                location(&c, "http", authority, uri.path(), uri.query()),
                None,
                "{first}"
            );
        }
    }

    #[test]
    fn https_upgrade_in_the_same_hop() {
        let mut c = config(WwwMode::Apex, &[]);
        c.https = Some(HttpsRedirect { port: None });
        // (scheme, host, path, query, Location)
        type Row<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, Option<&'a str>);
        let rows: &[Row] = &[
            (
                "http",
                "www.example.com",
                "/www/a",
                Some("b"),
                Some("https://example.com/a?b"),
            ),
            (
                "http",
                "example.com",
                "/",
                None,
                Some("https://example.com/"),
            ),
            (
                "http",
                "example.com:8080",
                "/a",
                None,
                Some("https://example.com/a"),
            ),
            ("https", "example.com", "/a", None, None),
            (
                "https",
                "www.example.com",
                "/a",
                None,
                Some("https://example.com/a"),
            ),
            // ACME HTTP-01 stays on plain HTTP, host fixes still apply.
            (
                "http",
                "example.com",
                "/.well-known/acme-challenge/tok",
                None,
                None,
            ),
            ("http", "bad host", "/", None, None),
        ];
        for &(scheme, host, path, query, want) in rows {
            assert_eq!(
                location(&c, scheme, host, path, query).as_deref(),
                want,
                "{scheme}://{host}{path}"
            );
        }
        c.https = Some(HttpsRedirect { port: Some(8443) });
        assert_eq!(
            location(&c, "http", "www.example.com:8080", "/a", None).as_deref(),
            Some("https://example.com:8443/a")
        );
        let again = location(&c, "https", "example.com:8443", "/a", None);
        assert_eq!(again, None, "the target is a fixed point");
    }
}
