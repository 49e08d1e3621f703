use http::header::{HeaderMap, HeaderValue};
use proptest::prelude::*;

use super::*;
use crate::http1::{parse_request, BodyFraming};
use crate::proxy::headers::{join_cookies, rewrite_request_headers, Rewrite};
use crate::proxy::Robot;
use crate::verify::{Identity, Method};

const CLASS: HeaderName = HeaderName::from_static("x-crawler");
const ROBOT_CLASS: HeaderName = HeaderName::from_static("x-crawler-class");
const VERIFIED: HeaderName = HeaderName::from_static("x-crawler-verified");

fn client(robot: bool) -> ClientInfo {
    ClientInfo {
        peer: "192.0.2.7".parse().expect("ip"),
        port: 8080,
        scheme: "https",
        class: if robot { UaClass::Bot } else { UaClass::Human },
        robot: robot.then(|| Robot {
            class: Some(HeaderValue::from_static("search")),
            identity: Some(Identity::Verified(Method::Ip)),
        }),
    }
}

/// The head the native writer sends for `raw`, as (lower-case name,
/// value) pairs, sorted, with its request line.
fn native(
    raw: &[u8],
    trusted: bool,
    robot: bool,
    upgrade: Option<&[u8]>,
) -> Option<(String, Vec<(String, String)>)> {
    let mut fields = Vec::new();
    let head = parse_request(raw, 64 * 1024, 100, &mut fields).ok()??;
    let client = client(robot);
    let mut out = Vec::new();
    write_request_head(
        &mut out,
        raw,
        &head,
        &fields,
        &HeadRewrite {
            host: b"upstream.test:8081",
            client: &client,
            trusted,
            port: b"8080",
            class_header: &CLASS,
            robot_class_header: &ROBOT_CLASS,
            verified_header: &VERIFIED,
            upgrade,
            chunked: head.body == BodyFraming::Chunked,
        },
    );
    // What the upstream reads of it.
    let mut sent = Vec::new();
    let Ok(Some(parsed)) = parse_request(&out, 64 * 1024, 200, &mut sent) else {
        panic!(
            "the written head does not parse: {:?}",
            String::from_utf8_lossy(&out)
        );
    };
    assert_eq!(parsed.len, out.len(), "one head, nothing after it");
    let line = String::from_utf8_lossy(&out[..parsed.target.end as usize]).into_owned();
    let mut pairs: Vec<(String, String)> = sent
        .iter()
        .map(|f| {
            (
                String::from_utf8_lossy(f.name.of(&out)).to_ascii_lowercase(),
                String::from_utf8_lossy(f.value.of(&out)).into_owned(),
            )
        })
        .collect();
    pairs.sort();
    Some((line, pairs))
}

/// The same request through the `HeaderMap` rewrite of the hyper layer.
fn hyper_layer(
    raw: &[u8],
    trusted: bool,
    robot: bool,
    upgrade: Option<&[u8]>,
) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    let head = parse_request(raw, 64 * 1024, 100, &mut fields)
        .ok()
        .flatten()
        .expect("parsed");
    let mut map = HeaderMap::new();
    for f in &fields {
        let name = HeaderName::from_bytes(f.name.of(raw)).expect("name");
        let value = HeaderValue::from_bytes(f.value.of(raw)).expect("value");
        map.append(name, value);
    }
    join_cookies(&mut map);
    let original_host = head
        .authority(raw, &fields)
        .map(|h| HeaderValue::from_bytes(h).expect("host"));
    rewrite_request_headers(
        &mut map,
        &Rewrite {
            host: HeaderValue::from_static("upstream.test:8081"),
            original_host,
            client: client(robot),
            trusted,
            port: HeaderValue::from_static("8080"),
            class_header: &CLASS,
            robot_class_header: &ROBOT_CLASS,
            verified_header: &VERIFIED,
        },
    );
    if let Some(protocol) = upgrade {
        map.insert(
            http::header::UPGRADE,
            HeaderValue::from_bytes(protocol).expect("protocol"),
        );
        map.insert(
            http::header::CONNECTION,
            HeaderValue::from_static("upgrade"),
        );
    }
    if head.body == BodyFraming::Chunked {
        // hyper's client frames a streamed body of no length so.
        map.insert(
            http::header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
    }
    // As the upstream reads them: white space around a value is not
    // part of it (a joined empty cookie leaves `a; `).
    let mut pairs: Vec<(String, String)> = map
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes().trim_ascii()).into_owned(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn a_browser_head_is_copied_with_ours_appended() {
    let raw = b"GET /wiki/Page?x=1 HTTP/1.1\r\nHost: Example.com\r\nUser-Agent: Mozilla/5.0\r\nAccept:  text/html \r\nConnection: keep-alive\r\nX-Forwarded-For: 6.6.6.6\r\nX_Real_IP: 6.6.6.6\r\nx-crawler: 0\r\n\r\n";
    let (line, pairs) = native(raw, false, false, None).expect("parsed");
    assert_eq!(line, "GET /wiki/Page?x=1");
    let expected: &[(&str, &str)] = &[
        ("accept", "text/html"),
        ("host", "upstream.test:8081"),
        ("user-agent", "Mozilla/5.0"),
        ("x-crawler", "0"),
        ("x-forwarded-for", "192.0.2.7"),
        ("x-forwarded-host", "Example.com"),
        ("x-forwarded-port", "8080"),
        ("x-forwarded-proto", "https"),
        ("x-real-ip", "192.0.2.7"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(pairs, expected);
    assert_eq!(pairs, hyper_layer(raw, false, false, None));
}

/// The request line sent upstream carries the path and query the
/// service decided on (what `http::Uri` keeps of the target): origin
/// form, a fragment cut off, an absolute form's authority taken out.
#[test]
fn the_request_line_is_the_targets_path_and_query() {
    for target in [
        "/",
        "/a/b?c=d",
        "/doku.php?id=x#&do=edit",
        "/a#",
        "http://example.com",
        "http://example.com?q=1",
        "http://example.com/p?q#f",
        "HTTP://Example.com:8080/a",
    ] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: example.com\r\n\r\n");
        let (line, _) = native(raw.as_bytes(), false, false, None).expect("written");
        let uri: http::Uri = target.parse().expect("uri");
        let pq = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let pq = if pq.starts_with('/') {
            pq.to_owned()
        } else {
            format!("/{pq}")
        };
        assert_eq!(line, format!("GET {pq}"), "{target}");
    }
}

/// Split cookies become one field, an empty one included (found by the
/// property below: the joined value ends in `; `, read as `;`).
#[test]
fn split_cookies_are_joined_as_the_hyper_layer_joins_them() {
    let raw = b"GET / HTTP/1.1\r\nHost: x\r\nCookie: a=b\r\nAccept: */*\r\ncookie: c=d\r\nCookie:\r\n\r\n";
    let (_, pairs) = native(raw, false, false, None).expect("parsed");
    let cookies: Vec<&str> = pairs
        .iter()
        .filter(|(n, _)| n == "cookie")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["a=b; c=d;"]);
    assert_eq!(pairs, hyper_layer(raw, false, false, None));
}

#[test]
fn absolute_form_becomes_origin_form() {
    let raw = b"GET http://example.com?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let (line, _) = native(raw, false, false, None).expect("parsed");
    assert_eq!(line, "GET /?q=1");
    let raw = b"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let (line, _) = native(raw, false, false, None).expect("parsed");
    assert_eq!(line, "GET /");
}

/// Names a client may send, in the spellings that matter: forwarding
/// claims, hop-by-hop fields, crawlgate's own, their `_` spellings, in
/// any case.
const NAMES: &[&str] = &[
    "Accept",
    "Cookie",
    "cookie",
    "X-Forwarded-For",
    "x-forwarded-for",
    "X_Forwarded_For",
    "X-Real-IP",
    "x_real_ip",
    "X-Forwarded-Proto",
    "X-Forwarded-Port",
    "X-Forwarded-Host",
    "Forwarded",
    "True-Client-IP",
    "CF-Connecting-IP",
    "X-Original-URL",
    "Keep-Alive",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Proxy",
    "X-Crawler",
    "x_crawler",
    "X-Crawler-Class",
    "X_Crawler_Verified",
    "X-Custom",
    "Foo",
    "Referer",
    "Content-Length",
    "Close",
];

fn field() -> impl Strategy<Value = (String, String)> {
    (
        prop::sample::select(NAMES),
        prop_oneof![
            Just("10.0.0.1".to_owned()),
            Just("a=b".to_owned()),
            Just("https".to_owned()),
            "[a-z0-9 .,=;]{0,12}",
        ],
    )
        .prop_map(|(n, v)| (n.to_owned(), v))
}

proptest! {
    // Failures are turned into unit tests above, not kept in a file.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The native writer sends the upstream the same fields as the hyper
    /// layer's `HeaderMap` rewrite, for any mix of forwarding claims,
    /// hop-by-hop fields, crawlgate's own, cookies and Connection lists,
    /// from a trusted proxy or not, human or robot, upgrade or not, for
    /// any method and target form; and the request line `http::Uri`
    /// reads of the target.
    #[test]
    fn the_same_fields_reach_the_upstream_as_through_hyper(
        method in prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]),
        target in prop::sample::select(vec!["/p?q", "/", "/a/b?x=1&y=%20", "/a#frag", "http://example.com/p?q", "http://other.test:8080", "http://example.com?q=1"]),
        fields in prop::collection::vec(field(), 0..10),
        connection in prop::option::of(prop::sample::subsequence(vec!["keep-alive", "close", "Close", "upgrade", "Foo", "x-custom", "Host", "content-length", "Referer"], 0..4)),
        trusted: bool,
        robot: bool,
        upgrade: bool,
        chunked: bool,
    ) {
        let mut raw = format!("{method} {target} HTTP/1.1\r\nHost: example.com\r\n");
        let mut has_length = false;
        for (name, value) in &fields {
            if name == "Content-Length" {
                if has_length || chunked {
                    continue;
                }
                has_length = true;
                raw.push_str("Content-Length: 3\r\n");
                continue;
            }
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(tokens) = &connection {
            raw.push_str(&format!("Connection: {}\r\n", tokens.join(", ")));
        }
        if chunked {
            raw.push_str("Transfer-Encoding: chunked\r\n");
        }
        raw.push_str("\r\n");
        let upgrade = upgrade.then_some(&b"websocket"[..]);
        let Some((line, sent)) = native(raw.as_bytes(), trusted, robot, upgrade) else {
            return Err(TestCaseError::fail(format!("refused: {raw:?}")));
        };
        prop_assert_eq!(sent, hyper_layer(raw.as_bytes(), trusted, robot, upgrade), "{}", raw);
        let uri: http::Uri = target.parse().expect("uri");
        let pq = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let pq = if pq.starts_with('/') { pq.to_owned() } else { format!("/{pq}") };
        prop_assert_eq!(line, format!("{method} {pq}"), "{}", raw);
    }
}

/// The fields `copy_response_fields` passes on from the answer `raw`,
/// lower-cased and sorted, and whether it said a `Date` was among them.
fn copied(raw: &[u8], head_request: bool, keep_length: bool) -> (Vec<(String, String)>, bool) {
    let mut fields = Vec::new();
    let head = crate::http1::parse_response(raw, head_request, 64 * 1024, 100, &mut fields)
        .expect("valid")
        .expect("complete");
    let mut out = b"HTTP/1.1 200 OK\r\n".to_vec();
    let date = copy_response_fields(&mut out, raw, &head, &fields, keep_length);
    out.extend_from_slice(b"\r\n");
    let mut sent = Vec::new();
    let again = crate::http1::parse_response(&out, true, 64 * 1024, 200, &mut sent)
        .expect("the copied lines parse")
        .expect("complete");
    assert_eq!(again.len, out.len());
    let mut pairs: Vec<(String, String)> = sent
        .iter()
        .map(|f| {
            (
                String::from_utf8_lossy(f.name.of(&out)).to_ascii_lowercase(),
                String::from_utf8_lossy(f.value.of(&out)).into_owned(),
            )
        })
        .collect();
    pairs.sort();
    (pairs, date)
}

#[test]
fn response_fields_lose_hop_by_hop_and_framing_fields() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: keep-alive, X-Internal\r\nX-Internal: secret\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\nSet-Cookie: a=b\r\nSet-Cookie: c=d\r\nProxy-Connection: x\r\n\r\n";
    let (pairs, date) = copied(raw, false, false);
    let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["content-type", "set-cookie", "set-cookie"]);
    assert!(!date);
}

#[test]
fn a_head_answer_keeps_the_upstreams_length_and_date() {
    let raw =
        b"HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 1234\r\n\r\n";
    let (pairs, date) = copied(raw, true, true);
    assert_eq!(
        pairs,
        [
            ("content-length".to_owned(), "1234".to_owned()),
            (
                "date".to_owned(),
                "Mon, 01 Jan 2024 00:00:00 GMT".to_owned()
            ),
        ]
    );
    assert!(date);
    // A relayed body's length is this hop's, not copied.
    let (pairs, _) = copied(raw, false, false);
    assert!(
        !pairs.iter().any(|(n, _)| n == "content-length"),
        "{pairs:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The upstream's fields reach the client as the hyper layer's
    /// `strip_hop_by_hop` leaves them, but the framing ones, which are
    /// this hop's.
    #[test]
    fn response_fields_are_those_hyper_would_keep(
        fields in prop::collection::vec(field(), 0..10),
        connection in prop::option::of(prop::sample::subsequence(vec!["keep-alive", "close", "Close", "Foo", "x-custom", "Referer"], 0..3)),
    ) {
        let mut raw = String::from("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nDate: x\r\n");
        for (name, value) in &fields {
            if name != "Content-Length" {
                raw.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        if let Some(tokens) = &connection {
            raw.push_str(&format!("Connection: {}\r\n", tokens.join(", ")));
        }
        raw.push_str("\r\n");
        let (sent, date) = copied(raw.as_bytes(), false, false);
        prop_assert!(date);
        let mut fields = Vec::new();
        let head = crate::http1::parse_response(raw.as_bytes(), false, 64 * 1024, 100, &mut fields)
            .expect("valid")
            .expect("complete");
        prop_assert_eq!(head.body, BodyFraming::Length(5));
        let mut map = HeaderMap::new();
        for f in &fields {
            map.append(
                HeaderName::from_bytes(f.name.of(raw.as_bytes())).expect("name"),
                HeaderValue::from_bytes(f.value.of(raw.as_bytes())).expect("value"),
            );
        }
        crate::proxy::headers::strip_hop_by_hop(&mut map);
        let mut want: Vec<(String, String)> = map
            .iter()
            .filter(|(n, _)| *n != http::header::CONTENT_LENGTH && *n != http::header::TRANSFER_ENCODING)
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes().trim_ascii()).into_owned()))
            .collect();
        want.sort();
        prop_assert_eq!(sent, want, "{}", raw);
    }
}
