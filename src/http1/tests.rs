use proptest::prelude::*;

use super::chunked::{ChunkError, Chunked, MAX_EXTENSION};
use super::*;

const MAX: usize = 16 * 1024;

fn request(raw: &[u8]) -> Result<Option<(RequestHead, Vec<Field>)>, HeadError> {
    let mut fields = Vec::new();
    let head = parse_request(raw, MAX, 100, &mut fields)?;
    Ok(head.map(|h| (h, fields)))
}

fn complete(raw: &str) -> (RequestHead, Vec<Field>) {
    match request(raw.as_bytes()) {
        Ok(Some(parsed)) => parsed,
        other => panic!("{raw:?}: {other:?}"),
    }
}

fn refused(raw: &str) -> HeadError {
    match request(raw.as_bytes()) {
        Err(err) => err,
        other => panic!("{raw:?} was not refused: {other:?}"),
    }
}

#[test]
fn a_browser_head_is_read_in_place() {
    let raw = "GET /wiki/Page?action=history&x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11)\r\nAccept: text/html\r\nCookie: a=b\r\n\r\nNEXT";
    let (head, fields) = complete(raw);
    let buf = raw.as_bytes();
    assert_eq!(head.len, raw.len() - 4);
    assert_eq!(head.method(buf), b"GET");
    assert_eq!(head.path(buf), b"/wiki/Page");
    assert_eq!(head.query(buf), Some(&b"action=history&x=1"[..]));
    assert_eq!(head.form, TargetForm::Origin);
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.body, BodyFraming::Empty);
    assert_eq!(head.authority(buf, &fields), Some(&b"example.com"[..]));
    assert_eq!(
        head.user_agent.map(|i| fields[i].value.of(buf)),
        Some(&b"Mozilla/5.0 (X11)"[..])
    );
    assert!(head.persists());
    // Each field's line is what was sent, CRLF included; together they
    // are the head between the request line and the blank line.
    let lines: Vec<&[u8]> = fields.iter().map(|f| f.line.of(buf)).collect();
    assert_eq!(lines[0], b"Host: example.com\r\n");
    assert_eq!(lines[3], b"Cookie: a=b\r\n");
    let first = fields[0].line.start as usize;
    assert_eq!(lines.concat(), &buf[first..head.len - 2]);
    assert_eq!(fields[2].known, Known::Other);
    assert_eq!(fields[0].known, Known::Host);
}

#[test]
fn white_space_around_values_is_not_part_of_them() {
    let raw = "GET / HTTP/1.1\r\nHost:example.com \t\r\nX-A:   b c  \r\n\r\n";
    let (head, fields) = complete(raw);
    let buf = raw.as_bytes();
    assert_eq!(head.authority(buf, &fields), Some(&b"example.com"[..]));
    assert_eq!(fields[1].value.of(buf), b"b c");
    assert_eq!(fields[1].line.of(buf), b"X-A:   b c  \r\n");
}

#[test]
fn bodies_are_framed_as_rfc_9112_says() {
    let (head, _) = complete("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 42\r\n\r\n");
    assert_eq!(head.body, BodyFraming::Length(42));
    let (head, _) = complete("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(head.body, BodyFraming::Empty);
    let (head, _) = complete("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ChunKed\r\n\r\n");
    assert_eq!(head.body, BodyFraming::Chunked);
    let (head, _) = complete("POST / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(head.body, BodyFraming::Empty);
    let (head, _) = complete("GET / HTTP/1.0\r\n\r\n");
    assert_eq!(head.version, Version::Http10);
    assert!(!head.persists());
    let (head, _) = complete("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert!(head.persists());
    let (head, _) = complete("GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, close\r\n\r\n");
    assert!(!head.persists());
    assert!(head.connection.other);
    let (head, _) = complete(
        "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nExpect: 100-continue\r\n\r\n",
    );
    assert!(head.connection.upgrade && head.upgrade && head.expect_continue);
}

#[test]
fn targets_of_every_form() {
    let raw = "GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\nHost: other\r\n\r\n";
    let (head, fields) = complete(raw);
    let buf = raw.as_bytes();
    assert_eq!(head.form, TargetForm::Absolute);
    assert_eq!(head.authority(buf, &fields), Some(&b"Example.com:8080"[..]));
    assert_eq!(head.path(buf), b"/a/b");
    assert_eq!(head.query(buf), Some(&b"c=d"[..]));
    let raw = "GET https://example.com?q HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let (head, _) = complete(raw);
    assert_eq!(head.path(raw.as_bytes()), b"");
    assert_eq!(head.query(raw.as_bytes()), Some(&b"q"[..]));
    let (head, _) = complete("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(head.form, TargetForm::Asterisk);
    let (head, _) = complete("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert_eq!(head.form, TargetForm::Authority);
    // A fragment is cut off, as `http::Uri` cuts it off.
    for (target, path, query) in [
        (
            "/doku.php?id=x#&do=edit",
            &b"/doku.php"[..],
            Some(&b"id=x"[..]),
        ),
        ("/a#b?c", b"/a", None),
        ("http://example.com#top", b"", None),
        ("http://example.com/p#q?r", b"/p", None),
    ] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        let (head, _) = complete(&raw);
        assert_eq!(head.path(raw.as_bytes()), path, "{target}");
        assert_eq!(head.query(raw.as_bytes()), query, "{target}");
    }
    for target in ["*", "example.com", "ftp://x/", "http:///a", "/a\u{e9}"] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(request(raw.as_bytes()).is_err(), "{target:?} was taken");
    }
}

/// Every shape of head that two implementations could frame or route
/// differently is refused, with the status a client is told.
#[test]
fn smuggling_shapes_are_refused() {
    use HeadError::*;
    let rows: &[(&str, HeadError)] = &[
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", LengthAndChunked),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", LengthAndChunked),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", ContentLength),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", ContentLength),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", ContentLength),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\n", ContentLength),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", ContentLength),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n", ContentLength),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", TransferCoding),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", TransferCoding),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n", TransferCoding),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n", TransferCoding),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", TransferCoding),
        ("GET / HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", BareLf),
        ("GET / HTTP/1.1\nHost: x\r\n\r\n", BareLf),
        ("GET / HTTP/1.1\r\nHost: x\r\n\n", BareLf),
        ("GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", SeveralHosts),
        ("GET / HTTP/1.1\r\n\r\n", MissingHost),
        ("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: a\r\nuser-agent: Googlebot\r\n\r\n", SeveralUserAgents),
        ("GET / HTTP/1.1\r\nHost: example.com/evil\r\n\r\n", InvalidHost),
        ("GET / HTTP/1.1\r\nHost: a.com, b.com\r\n\r\n", InvalidHost),
        ("GET http://evil@x/ HTTP/1.1\r\nHost: x\r\n\r\n", InvalidHost),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n", Malformed("invalid header name")),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", Malformed("invalid header name")),
        ("GET / HTTP/1.1\r\n Host: x\r\n\r\n", Malformed("invalid header name")),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-A: b\x01c\r\n\r\n", Malformed("invalid header value")),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n", Malformed("invalid header value")),
        ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", Version),
        ("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", Malformed("invalid request line")),
    ];
    for (raw, want) in rows {
        let got = refused(raw);
        assert_eq!(got, *want, "{raw:?}");
        let status = got.status();
        assert!(status == 400 || status == 505, "{raw:?}: {status}");
    }
}

/// Empty lines before a request line are skipped (RFC 9112 §2.2), LF
/// alone as well as CRLF, as httparse does; a bare LF after them is not.
#[test]
fn empty_lines_before_a_request_are_skipped() {
    let mut fields = Vec::new();
    for raw in [
        "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "\n\r\n\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let head = parse_request(raw.as_bytes(), MAX, 100, &mut fields)
            .expect("valid")
            .expect("whole");
        assert_eq!(head.len, raw.len());
        assert_eq!(head.path(raw.as_bytes()), b"/");
    }
    let raw = "\nGET / HTTP/1.1\nHost: x\r\n\r\n";
    assert_eq!(
        parse_request(raw.as_bytes(), MAX, 100, &mut fields),
        Err(HeadError::BareLf)
    );
}

#[test]
fn limits_of_size_and_count() {
    let mut raw = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..101 {
        raw.push_str(&format!("X-{i}: v\r\n"));
    }
    raw.push_str("\r\n");
    assert_eq!(refused(&raw), HeadError::TooManyFields);
    assert_eq!(HeadError::TooManyFields.status(), 431);
    // Complete but over the limit, and incomplete at the limit.
    let mut fields = Vec::new();
    let head = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(
        parse_request(head.as_bytes(), head.len() - 1, 100, &mut fields),
        Err(HeadError::TooLarge)
    );
    assert_eq!(
        parse_request(&head.as_bytes()[..20], 20, 100, &mut fields),
        Err(HeadError::TooLarge)
    );
    assert_eq!(
        parse_request(&head.as_bytes()[..20], 21, 100, &mut fields),
        Ok(None)
    );
}

fn response(raw: &str, head_request: bool) -> Result<ResponseHead, ResponseError> {
    let mut fields = Vec::new();
    match parse_response(raw.as_bytes(), head_request, MAX, 100, &mut fields) {
        Ok(Some(head)) => Ok(head),
        Ok(None) => panic!("{raw:?} is incomplete"),
        Err(err) => Err(err),
    }
}

#[test]
fn response_bodies_are_framed_as_rfc_9112_says() {
    let framing = |raw: &str, head: bool| response(raw, head).map(|h| h.body);
    use BodyFraming::*;
    assert_eq!(
        framing("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false),
        Ok(Length(12))
    );
    assert_eq!(
        framing("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true),
        Ok(Empty)
    );
    assert_eq!(
        framing(
            "HTTP/1.1 200 OK\r\nContent-Length: 12, 12\r\nContent-Length: 12\r\n\r\n",
            false
        ),
        Ok(Length(12))
    );
    assert_eq!(
        framing(
            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nContent-Length: 13\r\n\r\n",
            false
        ),
        Err(ResponseError::ContentLength)
    );
    assert_eq!(
        framing("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false),
        Err(ResponseError::ContentLength)
    );
    assert_eq!(
        framing(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
            false
        ),
        Ok(Chunked)
    );
    assert_eq!(
        framing(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            false
        ),
        Ok(UntilClose)
    );
    assert_eq!(framing("HTTP/1.1 200 OK\r\n\r\n", false), Ok(UntilClose));
    // Both: the coding wins, and the connection is not used again.
    let both = response(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        false,
    );
    assert_eq!(both.map(|h| (h.body, h.persists())), Ok((Chunked, false)));
    assert!(response(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false
    )
    .is_ok_and(|h| h.persists()));
    // Any coding in HTTP/1.0 is faulty framing.
    assert!(matches!(
        framing(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
            false
        ),
        Err(ResponseError::Malformed(_))
    ));
    assert_eq!(
        framing(
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            false
        ),
        Ok(Empty)
    );
    assert_eq!(
        framing(
            "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
            false
        ),
        Ok(Empty)
    );
    assert_eq!(
        framing("HTTP/1.1 101 Switching Protocols\r\n\r\n", false),
        Ok(Empty)
    );
    // Those end at their head, whatever their framing fields say: faulty
    // ones are not refused, but the connection is not used again, nor
    // after a 204 that announces a body.
    let kept = |raw: &str| response(raw, false).map(|h| (h.body, h.persists()));
    for faulty in [
        "HTTP/1.1 204 No Content\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    ] {
        assert_eq!(kept(faulty), Ok((Empty, false)), "{faulty:?}");
    }
    for sound in [
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 300\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
    ] {
        assert_eq!(kept(sound), Ok((Empty, true)), "{sound:?}");
    }
    // A HEAD's answer is held to its framing fields as a GET's would be.
    assert_eq!(
        framing("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", true),
        Err(ResponseError::ContentLength)
    );
    assert_eq!(
        framing("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false),
        Ok(Empty)
    );
    let head = response("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", false).expect("ok");
    assert!(head.persists());
    let head = response("HTTP/1.1 200 OK\r\n\r\n", false).expect("ok");
    assert!(!head.persists(), "a body to the close ends the connection");
    let head = response("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false).expect("ok");
    assert!(!head.persists());
    let head = response(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
        false,
    )
    .expect("ok");
    assert!(!head.persists());
    for broken in [
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 OK\r\n\r\n",
        "HTTP/3 200 OK\r\n\r\n",
        "<html>\r\n\r\n",
        "HTTP/1.1 200 OK\nX: y\r\n\r\n",
    ] {
        assert!(response(broken, false).is_err(), "{broken:?}");
    }
}

/// Feeds `body` whole and returns how much was consumed, or the error.
fn chunked_whole(body: &[u8]) -> Result<(usize, bool), ChunkError> {
    let mut reader = Chunked::new();
    let progress = reader.feed(body)?;
    Ok((progress.consumed, progress.done))
}

/// Where the pieces `cuts` makes of `len` bytes end, in order, the last
/// at `len`.
fn piece_ends(len: usize, cuts: &[usize]) -> Vec<usize> {
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (len + 1)).collect();
    ends.push(len);
    ends.sort_unstable();
    ends
}

/// Feeds `body` in the given pieces.
fn chunked_split(body: &[u8], cuts: &[usize]) -> Result<(usize, bool), ChunkError> {
    let mut reader = Chunked::new();
    let mut at = 0;
    for end in piece_ends(body.len(), cuts) {
        if end < at {
            continue;
        }
        let progress = reader.feed(&body[at..end])?;
        at += progress.consumed;
        if progress.done {
            return Ok((at, true));
        }
    }
    Ok((at, false))
}

#[test]
fn chunked_bodies() {
    let ok: &[&[u8]] = &[
        b"0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        b"5;name=value\r\nhello\r\nA ; x\r\n0123456789\r\n000\r\nTrailer: yes\r\nOther:\r\n\r\n",
        b"0000000000000005\r\nhello\r\n0\r\n\r\n",
    ];
    for body in ok {
        let mut framed = body.to_vec();
        framed.extend_from_slice(b"GET /next");
        assert_eq!(
            chunked_whole(&framed),
            Ok((body.len(), true)),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
    let refused: &[(&[u8], ChunkError)] = &[
        (b"\r\n", ChunkError::Size),
        (b"x\r\n", ChunkError::Size),
        (b"-5\r\n", ChunkError::Size),
        (b"5 5\r\nhello\r\n", ChunkError::Size),
        (b"10000000000000000\r\n", ChunkError::Size),
        (b"5\nhello\r\n", ChunkError::LineEnd),
        (b"5\r\nhelloX\r\n", ChunkError::LineEnd),
        (b"5\r\nhello\n0\r\n\r\n", ChunkError::LineEnd),
        (b"5;a\nb\r\nhello\r\n", ChunkError::LineEnd),
        (b"5;a\x00\r\nhello\r\n", ChunkError::Extension),
        (b"0\r\n\n", ChunkError::LineEnd),
        (b"0\r\nX: y\n\r\n", ChunkError::LineEnd),
        (b"0\r\n folded\r\n\r\n", ChunkError::Trailer),
        (b"0\r\nNo colon\r\n\r\n", ChunkError::Trailer),
        (b"0\r\n\rX", ChunkError::LineEnd),
    ];
    for (body, want) in refused {
        assert_eq!(
            chunked_whole(body).map(|_| ()),
            Err(*want),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
    let long_extension = format!("1;{}\r\n", "a".repeat(MAX_EXTENSION + 1));
    assert_eq!(
        chunked_whole(long_extension.as_bytes()),
        Err(ChunkError::Extension)
    );
    let long_trailer = format!(
        "0\r\nX: {}\r\n\r\n",
        "a".repeat(super::chunked::MAX_TRAILERS)
    );
    assert_eq!(
        chunked_whole(long_trailer.as_bytes()),
        Err(ChunkError::Trailer)
    );
    // A reader that is done takes nothing more.
    let mut reader = Chunked::new();
    assert!(reader.feed(b"0\r\n\r\n").expect("ok").done);
    assert_eq!(reader.feed(b"more").expect("ok").consumed, 0);
}

/// Decodes `body` in the pieces `cuts` makes: the data, how much was
/// read, and whether it ended; or the error.
fn chunked_decode(body: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, usize, bool), ChunkError> {
    let mut reader = Chunked::new();
    let mut data = Vec::new();
    let mut at = 0;
    for end in piece_ends(body.len(), cuts) {
        while at < end {
            let piece = &body[at..end];
            let decoded = reader.decode(piece)?;
            data.extend_from_slice(&piece[decoded.data.clone()]);
            at += decoded.consumed;
            if decoded.done {
                return Ok((data, at, true));
            }
            if decoded.consumed == 0 {
                break;
            }
        }
    }
    Ok((data, at, false))
}

#[test]
fn chunked_bodies_decode_to_their_data() {
    let body = b"5;name=value\r\nhello\r\nA ; x\r\n0123456789\r\n000\r\nTrailer: yes\r\n\r\nGET /";
    let (data, consumed, done) = chunked_decode(body, &[]).expect("valid");
    assert_eq!(data, b"hello0123456789");
    assert_eq!((consumed, done), (body.len() - 5, true));
    assert_eq!(
        chunked_decode(b"5\r\nhelloX", &[]),
        Err(ChunkError::LineEnd)
    );
}

/// A chunked body as a client would write it.
fn encode(chunks: &[Vec<u8>], extension: bool, trailers: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in chunks.iter().filter(|c| !c.is_empty()) {
        out.extend_from_slice(format!("{:x}", chunk.len()).as_bytes());
        if extension {
            out.extend_from_slice(b" ;ext=\"v\"");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    if trailers {
        out.extend_from_slice(b"Checksum: abc\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A valid body is read to its exact end however it is split.
    #[test]
    fn a_valid_body_ends_where_it_ends_in_any_pieces(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..6),
        extension: bool,
        trailers: bool,
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let body = encode(&chunks, extension, trailers);
        let mut framed = body.clone();
        framed.extend_from_slice(b"POST / HTTP/1.1\r\n");
        prop_assert_eq!(chunked_whole(&framed), Ok((body.len(), true)));
        prop_assert_eq!(chunked_split(&framed, &cuts), Ok((body.len(), true)));
        let data: Vec<u8> = chunks.concat();
        prop_assert_eq!(chunked_decode(&framed, &cuts), Ok((data, body.len(), true)));
    }

    /// Arbitrary bytes: never a panic, and the same verdict whole or in
    /// pieces.
    #[test]
    fn any_bytes_give_one_verdict_in_any_pieces(
        body in prop::collection::vec(prop_oneof![
            Just(b'\r'), Just(b'\n'), Just(b'0'), Just(b'5'), Just(b';'), Just(b':'), Just(b' '), any::<u8>()
        ], 0..200),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole = chunked_whole(&body);
        let split = chunked_split(&body, &cuts);
        prop_assert_eq!(&whole, &split);
        let decoded = chunked_decode(&body, &cuts).map(|(_, consumed, done)| (consumed, done));
        prop_assert_eq!(whole, decoded);
    }

    /// A complete head is the same head with anything after it, and no
    /// prefix of it is an error or a different head: reading it in pieces
    /// never refuses it early.
    #[test]
    fn a_head_is_the_same_read_in_pieces(
        path in "/[a-z0-9/?=&%.]{0,40}",
        fields in prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,12}", "[ -~]{0,30}"), 0..8),
        tail in prop::collection::vec(any::<u8>(), 0..20),
    ) {
        let mut raw = format!("GET {path} HTTP/1.1\r\nHost: example.com\r\n");
        for (name, value) in &fields {
            let name = name.to_ascii_lowercase();
            if matches!(name.as_str(), "host" | "user-agent" | "content-length" | "transfer-encoding") {
                continue;
            }
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        raw.push_str("\r\n");
        let mut buf = raw.clone().into_bytes();
        let (head, parsed) = complete(&raw);
        buf.extend_from_slice(&tail);
        let mut again = Vec::new();
        prop_assert_eq!(parse_request(&buf, MAX, 100, &mut again), Ok(Some(head)));
        prop_assert_eq!(&again, &parsed);
        for end in 0..raw.len() {
            prop_assert_eq!(parse_request(&buf[..end], MAX, 100, &mut again), Ok(None), "prefix {}", end);
        }
    }

    /// Arbitrary bytes never panic the head parsers.
    #[test]
    fn any_bytes_parse_or_are_refused(
        raw in prop::collection::vec(prop_oneof![
            Just(b'\r'), Just(b'\n'), Just(b':'), Just(b' '), Just(b'/'), any::<u8>()
        ], 0..300),
        prefix: bool,
    ) {
        let mut buf = Vec::new();
        if prefix {
            buf.extend_from_slice(b"GET / HTTP/1.1\r\n");
        }
        buf.extend_from_slice(&raw);
        let mut fields = Vec::new();
        if let Ok(Some(head)) = parse_request(&buf, MAX, 100, &mut fields) {
            prop_assert!(head.len <= buf.len());
            for field in &fields {
                prop_assert!(field.line.end as usize <= head.len);
                prop_assert!(field.name.start >= field.line.start && field.value.end <= field.line.end);
            }
        }
        let _ = parse_response(&buf, false, MAX, 100, &mut fields);
    }
}

#[test]
fn numbers_are_written_as_http_wants_them() {
    assert_eq!(decimal(0, &mut [0; 20]), b"0");
    assert_eq!(decimal(u64::MAX, &mut [0; 20]), b"18446744073709551615");
    assert_eq!(hexadecimal(0, &mut [0; 16]), b"0");
    assert_eq!(hexadecimal(0x1a2f, &mut [0; 16]), b"1a2f");
}

/// RFC 9112 §6.3: interim answers, 204 and 304 end at their head.
#[test]
fn which_statuses_end_at_their_head() {
    for status in [100, 101, 103, 199, 204, 304] {
        assert!(bodiless_status(status), "{status}");
    }
    for status in [200, 203, 205, 206, 300, 301, 305, 404, 500] {
        assert!(!bodiless_status(status), "{status}");
    }
}
