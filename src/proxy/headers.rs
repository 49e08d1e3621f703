//! The upstream request's header fields: hop-by-hop fields removed, the
//! client's claims about itself replaced by crawlgate's forwarding headers
//! (or, from a trusted proxy, kept and extended), the classification and
//! robot headers set, split cookies joined; and the client's address as the
//! trusted proxies vouch for it.

use std::net::IpAddr;
use std::sync::LazyLock;

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, COOKIE, FORWARDED, HOST, TE,
    TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use http::Version;
use ipnet::IpNet;

use crate::classify::UaClass;
use crate::http1::NameFilter;
use crate::verify::Identity;

/// Headers that describe one connection, not the message (RFC 9110
/// §7.6.1), plus `Proxy`, which CGI turns into `HTTP_PROXY` ("httpoxy").
pub(super) static HOP_BY_HOP: [HeaderName; 8] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
    HeaderName::from_static("proxy"),
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Headers by which a client claims its own address, port, scheme, host or
/// the URL it asked for, which PHP applications read for rate limits,
/// "is this HTTPS" checks, audit logs and routing. From a peer outside
/// `proxy.trusted_proxies` every copy is removed (their spellings with `_`
/// too, since PHP reads `X_Real_IP` as `HTTP_X_REAL_IP` where the web server
/// passes it); crawlgate then sets its own `X-Forwarded-For/-Proto/-Host/
/// -Port` and `X-Real-IP`. The table in docs/how-it-works.md lists them.
pub static CLIENT_CLAIMS: [HeaderName; 23] = [
    X_FORWARDED_FOR,
    X_FORWARDED_PROTO,
    X_FORWARDED_HOST,
    X_FORWARDED_PORT,
    X_REAL_IP,
    FORWARDED,
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-forwarded-server"),
    HeaderName::from_static("x-forwarded-scheme"),
    HeaderName::from_static("x-forwarded-ssl"),
    HeaderName::from_static("x-forwarded"),
    HeaderName::from_static("forwarded-for"),
    HeaderName::from_static("x-original-forwarded-for"),
    HeaderName::from_static("x-client-ip"),
    HeaderName::from_static("client-ip"),
    HeaderName::from_static("true-client-ip"),
    HeaderName::from_static("cf-connecting-ip"),
    HeaderName::from_static("fastly-client-ip"),
    HeaderName::from_static("x-cluster-client-ip"),
    HeaderName::from_static("front-end-https"),
    HeaderName::from_static("x-url-scheme"),
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
];

/// [`CLIENT_CLAIMS`] at a glance: a browser's names are passed over
/// without comparing each with the 23 claims (that was 4 % of the
/// proxy's CPU on browser traffic).
static CLAIM_FILTER: LazyLock<NameFilter> =
    LazyLock::new(|| NameFilter::of(CLIENT_CLAIMS.iter().map(|c| c.as_str().as_bytes())));

/// Whether `name` (in any case, with `_` for some `-` or not) may be one
/// of [`CLIENT_CLAIMS`]; `false` means it is none of them.
pub(super) fn may_be_claim(name: &[u8]) -> bool {
    CLAIM_FILTER.may_hold(name)
}

/// The protocol an HTTP/1.1 request asks to switch to: its `Upgrade`
/// value, when `Connection` names `upgrade` and the value is not only
/// `h2c` (which is ignored, as RFC 9113 §3.1 allows: the request is
/// answered in HTTP/1.1). HTTP/1.0 and HTTP/2 requests never upgrade.
pub fn requested_upgrade(version: Version, headers: &HeaderMap) -> Option<&HeaderValue> {
    if version != Version::HTTP_11 {
        return None;
    }
    let upgrade = headers.get(UPGRADE)?;
    let only_h2c = upgrade
        .as_bytes()
        .split(|&b| b == b',')
        .all(|t| t.trim_ascii().eq_ignore_ascii_case(b"h2c"));
    let asked = headers.get_all(CONNECTION).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
    });
    (asked && !only_h2c).then_some(upgrade)
}

/// Who sent the request, as the proxy knows it.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    /// The TCP peer.
    pub peer: IpAddr,
    /// The port the client connected to (crawlgate's).
    pub port: u16,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The classification to announce upstream.
    pub class: UaClass,
    /// A robot's class and verification, to announce upstream.
    pub robot: Option<Robot>,
}

/// What the upstream is told about a robot (or a signed agent that sends
/// a browser's User-Agent).
#[derive(Clone, Debug)]
pub struct Robot {
    /// Its class (`search`, `ai`, …; `unknown` for a spoofed claim); none
    /// for a human's User-Agent.
    pub class: Option<HeaderValue>,
    /// What verification found, when it claims a crawler operator.
    pub identity: Option<Identity>,
}

/// HTTP/2 clients may split `Cookie` into one field per cookie (RFC 9113
/// §8.2.3), and a sloppy HTTP/1 client may too; an HTTP/1.1 upstream gets
/// them as one field joined by `; ` (RFC 6265 §5.4), or PHP would see only
/// the last.
pub(super) fn join_cookies(headers: &mut HeaderMap) {
    let mut cookies = headers.get_all(COOKIE).iter();
    let (Some(first), Some(_)) = (cookies.next(), cookies.next()) else {
        return;
    };
    let mut joined = Vec::with_capacity(first.len() * 4);
    for (i, value) in headers.get_all(COOKIE).iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(COOKIE, value);
    }
}

/// The values [`rewrite_request_headers`] sets.
#[derive(Debug)]
pub struct Rewrite<'a> {
    /// Host header to send upstream.
    pub host: HeaderValue,
    /// The host the client asked for, if any (for `X-Forwarded-Host`).
    pub original_host: Option<HeaderValue>,
    /// Who sent the request.
    pub client: ClientInfo,
    /// Whether the peer is a trusted proxy whose forwarding headers count.
    pub trusted: bool,
    /// `X-Forwarded-Port`: the port the client connected to.
    pub port: HeaderValue,
    /// The classification header's name.
    pub class_header: &'a HeaderName,
    /// The robot class header's name.
    pub robot_class_header: &'a HeaderName,
    /// The verification header's name.
    pub verified_header: &'a HeaderName,
}

/// Who the client is, as far as the trusted proxies vouch for: from an
/// untrusted `peer`, `peer` itself; from a trusted one, `X-Forwarded-For`
/// read from the right (the hop nearest to us), skipping the trusted
/// proxies, up to the first address that is not one. An entry that is not
/// an address stops the walk at the hop that wrote it. Allocates nothing.
pub fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut client = peer;
    // Header lines in reverse, and entries in each from the right.
    for value in headers.get_all(&X_FORWARDED_FOR).iter().rev() {
        let Ok(text) = value.to_str() else {
            return client;
        };
        for entry in text.rsplit(',') {
            let Ok(ip) = entry.trim().parse::<IpAddr>() else {
                return client;
            };
            client = ip;
            if !is_trusted(&ip) {
                return client;
            }
        }
    }
    client
}

/// Turns the client's request headers into the upstream's: hop-by-hop
/// headers removed, the classification header replaced, and the
/// forwarding headers crawlgate's own: from an untrusted peer every
/// [`CLIENT_CLAIMS`] copy is removed and `X-Forwarded-For/-Proto/-Host/
/// -Port` and `X-Real-IP` state what crawlgate saw; from a trusted proxy
/// they are kept (the `X-Forwarded-For` chain extended by the peer) and only
/// the missing ones set. Host set.
pub fn rewrite_request_headers(headers: &mut HeaderMap, rw: &Rewrite<'_>) {
    strip_hop_by_hop(headers);

    // The classification, a robot's class and its verification are
    // crawlgate's word alone: a client's copies never reach the upstream,
    // nor their spellings with `_`, which PHP would read as the same
    // variable. (One pass over the names present: a browser sends none.)
    remove_ours(
        headers,
        &[rw.class_header, rw.robot_class_header, rw.verified_header],
    );
    let class = match rw.client.class {
        UaClass::Bot => HeaderValue::from_static("1"),
        UaClass::Human => HeaderValue::from_static("0"),
    };
    headers.insert(rw.class_header.clone(), class);
    if let Some(robot) = &rw.client.robot {
        if let Some(class) = &robot.class {
            headers.insert(rw.robot_class_header.clone(), class.clone());
        }
        if let Some(identity) = robot.identity {
            headers.insert(
                rw.verified_header.clone(),
                HeaderValue::from_static(identity.as_str()),
            );
        }
    }

    // From an untrusted peer nothing the client claimed is left, so every
    // header below is crawlgate's; a trusted proxy's are kept.
    if !rw.trusted {
        remove_client_claims(headers);
    }
    let peer = HeaderValue::from(PeerValue(rw.client.peer));
    let xff = if headers.contains_key(&X_FORWARDED_FOR) {
        let mut chain = Vec::with_capacity(64);
        for value in headers.get_all(&X_FORWARDED_FOR) {
            chain.extend_from_slice(value.as_bytes());
            chain.extend_from_slice(b", ");
        }
        chain.extend_from_slice(peer.as_bytes());
        HeaderValue::from_bytes(&chain).unwrap_or_else(|_| peer.clone())
    } else {
        peer.clone()
    };
    headers.insert(X_FORWARDED_FOR.clone(), xff);
    headers.entry(X_REAL_IP.clone()).or_insert(peer);
    headers
        .entry(X_FORWARDED_PROTO.clone())
        .or_insert_with(|| HeaderValue::from_static(rw.client.scheme));
    headers
        .entry(X_FORWARDED_PORT.clone())
        .or_insert_with(|| rw.port.clone());
    if let Some(host) = &rw.original_host {
        headers
            .entry(X_FORWARDED_HOST.clone())
            .or_insert_with(|| host.clone());
    }
    headers.insert(HOST, rw.host.clone());
}

/// Removes every [`CLIENT_CLAIMS`] header, and their spellings with `_`
/// for `-` (`X_Forwarded_For`), which some web servers pass to PHP as the
/// same `HTTP_X_FORWARDED_FOR`.
///
/// One pass over the names present finds them (a browser sends none, and
/// comparing its ~15 names is cheaper than 23 map lookups); only what was
/// found is removed.
fn remove_client_claims(headers: &mut HeaderMap) {
    remove_where(headers, |name| {
        let name = name.as_str().as_bytes();
        may_be_claim(name)
            && CLIENT_CLAIMS
                .iter()
                .any(|c| names(name, c.as_str().as_bytes(), true))
    });
}

/// Removes headers that are one of `ours`, also with some `-` written as
/// `_` (`X_Crawler_Verified`).
fn remove_ours(headers: &mut HeaderMap, ours: &[&HeaderName]) {
    remove_where(headers, |name| {
        ours.iter()
            .any(|c| names(name.as_str().as_bytes(), c.as_str().as_bytes(), true))
    });
}

/// `name` is `canonical` (lower case) in any case, or with some `-`
/// written as `_` when `underscores`. The one comparison of field names
/// for both the `HeaderMap` rewrite and the byte-level head writer
/// ([`super::head`]).
pub(super) fn names(name: &[u8], canonical: &[u8], underscores: bool) -> bool {
    name.len() == canonical.len()
        && name
            .iter()
            .zip(canonical)
            .all(|(&n, &c)| n.eq_ignore_ascii_case(&c) || (underscores && c == b'-' && n == b'_'))
}

/// Removes every header whose name `matches`: one pass over the names
/// present (a browser's ~15), and an allocation only when one matched.
fn remove_where(headers: &mut HeaderMap, matches: impl Fn(&HeaderName) -> bool) {
    if !headers.keys().any(&matches) {
        return;
    }
    let found: Vec<HeaderName> = headers.keys().filter(|k| matches(k)).cloned().collect();
    for name in found {
        headers.remove(name);
    }
}

/// Removes hop-by-hop headers, including those the `Connection` header
/// names (except `Host` and `Content-Length`, which frame and route the
/// message and are not the sender's to drop).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if let Some(first) = headers.get(CONNECTION) {
        // Fast path: a lone `keep-alive` or `close` names no field but
        // its own (RFC 9110 §7.6.1; `Keep-Alive` is hop-by-hop anyway).
        let plain = headers.get_all(CONNECTION).iter().count() == 1
            && (first == "keep-alive" || first == "close");
        if plain && first == "close" {
            headers.remove("close");
        }
        if !plain {
            let listed: Vec<HeaderName> = headers
                .get_all(CONNECTION)
                .iter()
                .flat_map(|v| v.as_bytes().split(|&b| b == b','))
                .filter_map(|t| HeaderName::from_bytes(t.trim_ascii()).ok())
                .filter(|n| n != HOST && n != CONTENT_LENGTH)
                .collect();
            for name in listed {
                headers.remove(name);
            }
        }
    }
    // `Connection` is the one a request usually has; the others are
    // found in one pass over the names present.
    headers.remove(CONNECTION);
    remove_where(headers, |name| {
        HOP_FILTER.may_hold(name.as_str().as_bytes()) && HOP_BY_HOP.contains(name)
    });
}

/// [`HOP_BY_HOP`] at a glance.
static HOP_FILTER: LazyLock<NameFilter> =
    LazyLock::new(|| NameFilter::of(HOP_BY_HOP.iter().map(|h| h.as_str().as_bytes())));

/// An IP address rendered as a header value without a heap string.
struct PeerValue(IpAddr);

impl From<PeerValue> for HeaderValue {
    fn from(peer: PeerValue) -> HeaderValue {
        use std::io::Write;
        let mut buf = [0u8; 48];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        // 48 bytes hold the longest IPv6 text form (45).
        let _ = write!(cursor, "{}", peer.0);
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        HeaderValue::from_bytes(&buf[..len]).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::header_map as headers;

    /// The quick filter passes every claim in every spelling the removal
    /// covers, and stops a browser's usual names.
    #[test]
    fn the_claim_filter_passes_every_claim() {
        for claim in &CLIENT_CLAIMS {
            let name = claim.as_str();
            assert!(may_be_claim(name.as_bytes()), "{name}");
            assert!(may_be_claim(name.to_ascii_uppercase().as_bytes()), "{name}");
            assert!(may_be_claim(name.replace('-', "_").as_bytes()), "{name}");
        }
        for name in [
            "accept",
            "user-agent",
            "sec-fetch-mode",
            "referer",
            "priority",
            "",
        ] {
            assert!(!may_be_claim(name.as_bytes()), "{name}");
        }
        assert!(!may_be_claim(&[b'x'; 200]));
        assert!(!may_be_claim("é-forwarded-for".as_bytes()));
    }

    fn rewrite(map: &mut HeaderMap, trusted: bool, class: UaClass) {
        rewrite_robot(map, trusted, class, None);
    }

    fn rewrite_robot(map: &mut HeaderMap, trusted: bool, class: UaClass, robot: Option<Robot>) {
        let class_header = HeaderName::from_static("x-crawler");
        rewrite_request_headers(
            map,
            &Rewrite {
                host: HeaderValue::from_static("example.com"),
                original_host: Some(HeaderValue::from_static("example.com")),
                client: ClientInfo {
                    peer: "192.0.2.7".parse().expect("ip"),
                    port: 8080,
                    scheme: "http",
                    class,
                    robot,
                },
                trusted,
                port: HeaderValue::from_static("8080"),
                class_header: &class_header,
                robot_class_header: &HeaderName::from_static("x-crawler-class"),
                verified_header: &HeaderName::from_static("x-crawler-verified"),
            },
        );
    }

    #[test]
    fn robot_class_and_verification_headers_are_ours_alone() {
        let client_copies = || {
            headers(&[
                ("x-crawler-class", "search"),
                ("x-crawler-verified", "ip"),
                ("X-Crawler-Verified", "dns"),
                ("x_crawler_verified", "ip"),
                ("X_Crawler_Class", "search"),
                ("x_crawler", "0"),
                ("x_custom", "kept"),
            ])
        };
        // Even from a trusted proxy: these are not forwarding headers.
        let mut human = client_copies();
        rewrite_robot(&mut human, true, UaClass::Human, None);
        assert!(all(&human, "x-crawler-class").is_empty());
        assert!(all(&human, "x-crawler-verified").is_empty());
        for spelled in ["x_crawler_verified", "x_crawler_class", "x_crawler"] {
            assert!(all(&human, spelled).is_empty(), "{spelled}");
        }
        assert_eq!(all(&human, "x_custom"), ["kept"]);
        let mut unclaimed = client_copies();
        let robot = |identity| Robot {
            class: Some(HeaderValue::from_static("library")),
            identity,
        };
        rewrite_robot(&mut unclaimed, false, UaClass::Bot, Some(robot(None)));
        assert_eq!(all(&unclaimed, "x-crawler-class"), ["library"]);
        assert!(all(&unclaimed, "x-crawler-verified").is_empty());
        let mut spoofed = client_copies();
        rewrite_robot(
            &mut spoofed,
            false,
            UaClass::Bot,
            Some(robot(Some(Identity::Spoofed))),
        );
        assert_eq!(all(&spoofed, "x-crawler-verified"), ["spoofed"]);
    }

    fn all(map: &HeaderMap, name: &str) -> Vec<String> {
        map.get_all(name)
            .iter()
            .map(|v| v.to_str().expect("ascii").to_owned())
            .collect()
    }

    #[test]
    fn hop_by_hop_and_listed_headers_are_removed() {
        let mut map = headers(&[
            ("connection", "keep-alive, X-Secret, content-length"),
            ("connection", "upgrade"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-connection", "keep-alive"),
            ("proxy", "http://evil:3128"),
            ("content-length", "5"),
            ("accept", "*/*"),
        ]);
        strip_hop_by_hop(&mut map);
        let mut names: Vec<&str> = map.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, ["accept", "content-length"]);
    }

    #[test]
    fn class_header_and_forwarding_headers_are_ours() {
        let mut map = headers(&[
            ("x-crawler", "0"),
            ("X-Crawler", "0"),
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.com"),
            ("forwarded", "for=1.2.3.4"),
            ("host", "example.com"),
            ("x-real-ip", "1.2.3.4"),
            ("x-forwarded-port", "443"),
            ("x_forwarded_proto", "https"),
            ("X_Real_IP", "1.2.3.4"),
            ("x_custom_thing", "kept"),
        ]);
        for name in &CLIENT_CLAIMS {
            map.append(name.clone(), HeaderValue::from_static("spoofed"));
        }
        rewrite(&mut map, false, UaClass::Bot);
        assert_eq!(all(&map, "x-crawler"), ["1"]);
        assert_eq!(all(&map, "x-forwarded-for"), ["192.0.2.7"]);
        assert_eq!(all(&map, "x-real-ip"), ["192.0.2.7"]);
        assert_eq!(all(&map, "x-forwarded-proto"), ["http"]);
        assert_eq!(all(&map, "x-forwarded-port"), ["8080"]);
        assert_eq!(all(&map, "x-forwarded-host"), ["example.com"]);
        assert_eq!(all(&map, "x_custom_thing"), ["kept"]);
        for (name, value) in &map {
            assert_ne!(value, "spoofed", "{name} kept");
            assert!(
                !name.as_str().starts_with("x_forwarded") && name != "x_real_ip",
                "{name} kept"
            );
        }
        assert!(map.get("forwarded").is_none());
        assert_eq!(all(&map, "host"), ["example.com"]);
    }

    #[test]
    fn the_client_is_the_first_untrusted_hop_from_the_right() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut h = HeaderMap::new();
        h.append(
            &X_FORWARDED_FOR,
            HeaderValue::from_static("6.6.6.6, 1.2.3.4"),
        );
        h.append(&X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.7"));
        // An untrusted peer's header is not believed.
        assert_eq!(client_addr(ip("9.9.9.9"), &h, &trusted), ip("9.9.9.9"));
        // From a trusted peer: skip 10.0.0.7 (trusted), take 1.2.3.4, never
        // the 6.6.6.6 a client could have written.
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &trusted), ip("1.2.3.4"));
        // Garbage stops the walk at the hop that wrote it.
        let mut junk = HeaderMap::new();
        junk.append(
            &X_FORWARDED_FOR,
            HeaderValue::from_static("1.2.3.4, nonsense, 10.0.0.9"),
        );
        assert_eq!(client_addr(ip("10.0.0.1"), &junk, &trusted), ip("10.0.0.9"));
        // A trusted peer without the header is the client.
        assert_eq!(
            client_addr(ip("10.0.0.1"), &HeaderMap::new(), &trusted),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn a_trusted_peer_extends_the_chain() {
        let mut map = headers(&[
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-for", "5.6.7.8"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=1.2.3.4"),
            ("x-real-ip", "1.2.3.4"),
            ("cf-connecting-ip", "1.2.3.4"),
        ]);
        rewrite(&mut map, true, UaClass::Human);
        assert_eq!(all(&map, "x-real-ip"), ["1.2.3.4"]);
        assert_eq!(all(&map, "cf-connecting-ip"), ["1.2.3.4"]);
        assert_eq!(all(&map, "x-forwarded-port"), ["8080"]);
        assert_eq!(
            all(&map, "x-forwarded-for"),
            ["1.2.3.4, 5.6.7.8, 192.0.2.7"]
        );
        assert_eq!(all(&map, "x-forwarded-proto"), ["https"]);
        assert_eq!(all(&map, "x-crawler"), ["0"]);
        assert_eq!(all(&map, "forwarded"), ["for=1.2.3.4"]);
    }

    #[test]
    fn peer_values_render_v4_and_v6() {
        for ip in [
            "10.0.0.1",
            "::1",
            "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
        ] {
            let v = HeaderValue::from(PeerValue(ip.parse().expect("ip")));
            assert_eq!(v, ip.parse::<IpAddr>().expect("ip").to_string().as_str());
        }
    }
}
