//! One access-log line, read: the fields a crawl report counts, borrowed
//! from the line where they can be.
//!
//! Four shapes are read, told apart line by line (a file may mix them
//! after a change of format): the common log format and the combined
//! format that Apache and nginx write (`%h %l %u [%t] "%r" %>s %b` and
//! `"%{Referer}i" "%{User-agent}i"` after it), Apache's
//! `vhost_combined` (the same behind `%v:%p`), crawlgate's combined
//! lines (the combined format with crawlgate's fields after it) and
//! crawlgate's JSON lines. Quoted fields stay as the log wrote them
//! (nginx's `\xHH`, Apache's `\"`): classification reads them as they
//! are, and the report escapes them again for its own output.

use std::borrow::Cow;
use std::net::IpAddr;

use serde::Deserialize;

/// One request as a log line recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// When, in seconds since 1970-01-01 UTC.
    pub time: i64,
    /// The client address (`None`: the log holds a host name or junk).
    pub client: Option<IpAddr>,
    /// The method (`-` when the request line was not one).
    pub method: Cow<'a, [u8]>,
    /// The host, when the line says (vhost, absolute target, JSON).
    pub host: Option<Cow<'a, [u8]>>,
    /// The path, without the query.
    pub path: Cow<'a, [u8]>,
    /// The query, without the `?`.
    pub query: Option<Cow<'a, [u8]>>,
    /// The status sent.
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// The Referer (`None` for `-` or absent).
    pub referer: Option<Cow<'a, [u8]>>,
    /// The User-Agent (`None` for `-`, empty or absent).
    pub user_agent: Option<Cow<'a, [u8]>>,
    /// What crawlgate's verification found at the time, when the line is
    /// crawlgate's and the robot claimed an operator (`ip`, `dns`,
    /// `signature`, `spoofed`, `unverified`).
    pub verified: Option<Cow<'a, [u8]>>,
}

/// Why a line was not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not any of the shapes read.
    Unreadable,
    /// Longer than the longest line read; not looked at.
    TooLong,
    /// Blank.
    Empty,
}

impl Skip {
    /// `unreadable`, `too-long`, `empty`: the report's names.
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::Unreadable => "unreadable",
            Skip::TooLong => "too-long",
            Skip::Empty => "empty",
        }
    }
}

/// Reads one line (without its line end).
pub fn parse(line: &[u8]) -> Result<Entry<'_>, Skip> {
    let line = trim(line);
    match line.first() {
        None => Err(Skip::Empty),
        Some(b'{') => json(line).ok_or(Skip::Unreadable),
        Some(_) => clf(line).ok_or(Skip::Unreadable),
    }
}

fn trim(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\r' | b' ' | b'\t'] = line {
        line = rest;
    }
    line
}

/// The common, combined and vhost_combined shapes, and crawlgate's
/// combined lines.
fn clf(line: &[u8]) -> Option<Entry<'_>> {
    let open = find(line, b" [")?;
    let mut head = line[..open].split(|&b| b == b' ');
    let first = head.next()?;
    let fields: [&[u8]; 3] = [head.next()?, head.next()?, head.next().unwrap_or(b"")];
    let (vhost, client) = match (fields[2].is_empty(), head.next()) {
        // `%h %l %u`
        (true, None) => (None, first),
        // `%v:%p %h %l %u`
        (false, None) => (Some(first), fields[0]),
        _ => return None,
    };
    let rest = &line[open + 2..];
    let close = rest.iter().position(|&b| b == b']')?;
    let time = clf_time(&rest[..close])?;
    let rest = rest.get(close + 1..)?.strip_prefix(b" ")?;
    let (request, rest) = quoted(rest)?;
    let rest = rest.strip_prefix(b" ")?;
    let (status, rest) = word(rest);
    let status = three_digits(status)?;
    let (bytes, rest) = word(rest.strip_prefix(b" ").unwrap_or(rest));
    let bytes = match bytes {
        b"-" => 0,
        digits => number(digits)?,
    };
    let (referer, user_agent, rest) = match rest.strip_prefix(b" ") {
        Some(more) if more.first() == Some(&b'"') => {
            let (referer, more) = quoted(more)?;
            let more = more.strip_prefix(b" ")?;
            let (ua, more) = quoted(more)?;
            (dash(referer), dash(ua), more)
        }
        _ => (None, None, rest),
    };
    let (method, target) = request_line(request);
    let (host, path, query) = split_target(target);
    let host = host.or(vhost.map(strip_port));
    Some(Entry {
        time,
        client: std::str::from_utf8(client).ok()?.parse().ok(),
        method: Cow::Borrowed(method),
        host: host.map(Cow::Borrowed),
        path: Cow::Borrowed(path),
        query: query.map(Cow::Borrowed),
        status,
        bytes,
        referer: referer.map(Cow::Borrowed),
        user_agent: user_agent.map(Cow::Borrowed),
        verified: field(rest, b" verified=").map(Cow::Borrowed),
    })
}

/// `name=value` among crawlgate's unquoted fields after the combined
/// part.
fn field<'a>(rest: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let at = find(rest, name)? + name.len();
    let (value, _) = word(&rest[at..]);
    (!value.is_empty()).then_some(value)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The bytes up to the next space (or the end), and what follows.
fn word(text: &[u8]) -> (&[u8], &[u8]) {
    match text.iter().position(|&b| b == b' ') {
        Some(end) => (&text[..end], &text[end..]),
        None => (text, b""),
    }
}

/// A `"…"` field (a backslash escapes the next byte), its inside and
/// what follows the closing quote.
fn quoted(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let inner = text.strip_prefix(b"\"")?;
    let mut i = 0;
    while let Some(&b) = inner.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some((&inner[..i], &inner[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

/// `-` and empty are no value.
fn dash(value: &[u8]) -> Option<&[u8]> {
    (!value.is_empty() && value != b"-").then_some(value)
}

fn three_digits(text: &[u8]) -> Option<u16> {
    match text {
        [a, b, c] if text.iter().all(u8::is_ascii_digit) => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

fn number(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 19 {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

/// `GET /x HTTP/1.1` → (`GET`, `/x`). A request line that is not one
/// (`-`, junk a scanner sent) is all target, with method `-`.
fn request_line(request: &[u8]) -> (&[u8], &[u8]) {
    let Some(space) = request.iter().position(|&b| b == b' ') else {
        return (b"-", request);
    };
    let method = &request[..space];
    let rest = &request[space + 1..];
    let target = match rest.iter().rposition(|&b| b == b' ') {
        Some(end) if rest[end + 1..].starts_with(b"HTTP/") => &rest[..end],
        _ => rest,
    };
    (method, target)
}

/// A request target → (host of an absolute form, path, query).
fn split_target(target: &[u8]) -> (Option<&[u8]>, &[u8], Option<&[u8]>) {
    let (host, rest) = match target.iter().position(|&b| b == b':') {
        Some(colon)
            if target[colon..].starts_with(b"://")
                && target[..colon].iter().all(u8::is_ascii_alphabetic) =>
        {
            let after = &target[colon + 3..];
            let end = after
                .iter()
                .position(|&b| b == b'/' || b == b'?')
                .unwrap_or(after.len());
            (Some(strip_port(&after[..end])), &after[end..])
        }
        _ => (None, target),
    };
    let (path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    let path: &[u8] = if path.is_empty() { b"/" } else { path };
    (host, path, query)
}

/// `example.com:443` → `example.com` (an IPv6 literal keeps its brackets).
fn strip_port(authority: &[u8]) -> &[u8] {
    match authority.iter().rposition(|&b| b == b':') {
        Some(colon)
            if authority[colon + 1..].iter().all(u8::is_ascii_digit)
                && !authority[colon..].contains(&b']') =>
        {
            &authority[..colon]
        }
        _ => authority,
    }
}

/// `10/Oct/2000:13:55:36 -0700` → seconds since the epoch, UTC.
fn clf_time(text: &[u8]) -> Option<i64> {
    let [d1, d2, b'/', m1, m2, m3, b'/', y1, y2, y3, y4, b':', h1, h2, b':', n1, n2, b':', s1, s2, b' ', sign, z1, z2, z3, z4] =
        *text
    else {
        return None;
    };
    let digits = |ds: &[u8]| -> Option<i64> {
        ds.iter().try_fold(0i64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(&[m1, m2, m3]))? as i64
        + 1;
    let day = digits(&[d1, d2])?;
    let year = digits(&[y1, y2, y3, y4])?;
    let (hour, minute, second) = (digits(&[h1, h2])?, digits(&[n1, n2])?, digits(&[s1, s2])?);
    if !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let offset = digits(&[z1, z2])? * 3600 + digits(&[z3, z4])? * 60;
    let offset = match sign {
        b'+' => offset,
        b'-' => -offset,
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

const MONTHS: [[u8; 3]; 12] = [
    *b"Jan", *b"Feb", *b"Mar", *b"Apr", *b"May", *b"Jun", *b"Jul", *b"Aug", *b"Sep", *b"Oct",
    *b"Nov", *b"Dec",
];

/// Days from 1970-01-01 to the date (proleptic Gregorian): the year
/// shifted to start on 1 March, so that the leap day is its last.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The fields of crawlgate's JSON lines that a report reads.
#[derive(Deserialize)]
struct Json<'a> {
    #[serde(borrow)]
    time: Cow<'a, str>,
    #[serde(borrow, default)]
    client: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    host: Option<Cow<'a, str>>,
    #[serde(borrow)]
    path: Cow<'a, str>,
    #[serde(borrow, default)]
    query: Option<Cow<'a, str>>,
    status: u16,
    #[serde(default)]
    bytes_out: u64,
    #[serde(borrow, default)]
    referer: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    user_agent: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    verified: Option<Cow<'a, str>>,
}

fn bytes(text: Cow<'_, str>) -> Cow<'_, [u8]> {
    match text {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

/// A text field, `None` when absent or empty.
fn nonempty(v: Option<Cow<'_, str>>) -> Option<Cow<'_, [u8]>> {
    v.filter(|s| !s.is_empty()).map(bytes)
}

fn json(line: &[u8]) -> Option<Entry<'_>> {
    let j: Json<'_> = serde_json::from_slice(line).ok()?;
    let time = time::OffsetDateTime::parse(&j.time, &time::format_description::well_known::Rfc3339)
        .ok()?
        .unix_timestamp();
    Some(Entry {
        time,
        client: j.client.as_deref().and_then(|c| c.parse().ok()),
        method: j.method.map_or(Cow::Borrowed(&b"-"[..]), bytes),
        host: nonempty(j.host),
        path: bytes(j.path),
        query: j.query.map(bytes),
        status: j.status,
        bytes: j.bytes_out,
        referer: nonempty(j.referer),
        user_agent: nonempty(j.user_agent),
        verified: nonempty(j.verified),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: &Option<Cow<'_, [u8]>>) -> Option<String> {
        v.as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    #[test]
    fn combined_line() {
        let line = br#"203.0.113.9 - - [10/Oct/2000:13:55:36 -0700] "GET /wiki/Main?do=edit HTTP/1.1" 200 2326 "http://example.com/" "Mozilla/5.0 (compatible; Googlebot/2.1)""#;
        let e = parse(line).expect("combined");
        assert_eq!(e.time, 971_211_336);
        assert_eq!(e.client, Some("203.0.113.9".parse().expect("ip")));
        assert_eq!(&*e.method, b"GET");
        assert_eq!(&*e.path, b"/wiki/Main");
        assert_eq!(text(&e.query).as_deref(), Some("do=edit"));
        assert_eq!((e.status, e.bytes), (200, 2326));
        assert_eq!(text(&e.referer).as_deref(), Some("http://example.com/"));
        assert_eq!(
            text(&e.user_agent).as_deref(),
            Some("Mozilla/5.0 (compatible; Googlebot/2.1)")
        );
        assert_eq!(e.host, None);
    }

    #[test]
    fn common_vhost_and_crawlgate_lines() {
        let common =
            parse(b"::1 - frank [01/Jan/2026:00:00:00 +0000] \"POST /login HTTP/1.0\" 302 -")
                .expect("common");
        assert_eq!(
            (common.status, common.bytes, common.time),
            (302, 0, 1_767_225_600)
        );
        assert_eq!(common.user_agent, None);
        let vhost = parse(b"www.example.com:443 192.0.2.1 - - [01/Jan/2026:00:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl/8\"").expect("vhost");
        assert_eq!(text(&vhost.host).as_deref(), Some("www.example.com"));
        assert_eq!(vhost.referer, None);
        let ours = parse(b"192.0.2.1 - - [01/Jan/2026:00:00:00 +0000] \"GET http://example.com:8080/a?b HTTP/1.1\" 403 9 \"-\" \"Googlebot\" class=unknown rule=\"search:Googlebot\" decision=block upstream=- total=0.000 verified=spoofed enforced=0").expect("crawlgate");
        assert_eq!(text(&ours.host).as_deref(), Some("example.com"));
        assert_eq!(&*ours.path, b"/a");
        assert_eq!(text(&ours.verified).as_deref(), Some("spoofed"));
    }

    #[test]
    fn json_line() {
        let line = br#"{"time":"2026-01-01T00:00:01Z","client":"192.0.2.7","method":"GET","host":"example.com","path":"/x","query":"do=1","protocol":"HTTP/1.1","tls":false,"status":403,"bytes_in":0,"bytes_out":12,"referer":null,"user_agent":"a\"b","class":"seo","rule":null,"decision":"block","enforced":true,"upstream_seconds":null,"total_seconds":0.0,"error":null,"error_side":null,"verified":null}"#;
        let e = parse(line).expect("json");
        assert_eq!(e.time, 1_767_225_601);
        assert_eq!(text(&e.user_agent).as_deref(), Some("a\"b"));
        assert_eq!((e.status, e.bytes), (403, 12));
        assert_eq!(text(&e.host).as_deref(), Some("example.com"));
    }

    #[test]
    fn junk_is_unreadable_never_a_panic() {
        for junk in [
            &b"\x00\xff\xfe garbage"[..],
            b"1.2.3.4 - - [",
            b"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1",
            b"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET\" 2000 1",
            b"1.2.3.4 - - [99/Oct/2000:13:55:36 -0700] \"GET /\" 200 1",
            b"{\"time\": 1}",
            b"{",
            b"a b c d e f [x",
        ] {
            assert_eq!(parse(junk).err(), Some(Skip::Unreadable), "{junk:?}");
        }
        assert_eq!(parse(b"  \r").err(), Some(Skip::Empty));
        // A scanner's request line is still a request.
        let odd = parse(
            b"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"\\x16\\x03\\x01\" 400 0 \"-\" \"-\"",
        )
        .expect("odd");
        assert_eq!(&*odd.method, b"-");
        assert_eq!(odd.status, 400);
    }

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }
}
