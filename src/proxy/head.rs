//! The upstream request head of crawlgate's own HTTP/1.1 layer, written
//! as bytes: the request line in origin form, the Host crawlgate sends,
//! the client's field lines that pass copied as they came, and
//! crawlgate's own fields appended, in one buffer for one write.
//!
//! [`write_request_head`] is how crawlgate's own connections write a
//! request that crawlgate's own server layer read ([`ClientHead`], handed
//! along with the request by the service): no `HeaderMap` is rewritten
//! or encoded for it. A request read by hyper's layer, or sent through
//! hyper's client, takes the `HeaderMap` rewrite instead.
//!
//! The rules are [`super::headers`]'s, read from the same tables
//! ([`super::headers::CLIENT_CLAIMS`], the hop-by-hop names), applied to
//! a head parsed in place ([`crate::http1`]) instead of a `HeaderMap`:
//! hop-by-hop fields and those `Connection` names are dropped, as are
//! the client's copies of the classification, robot and verification
//! fields (their `_` spellings too), and, from a peer that is not a
//! trusted proxy, every forwarding claim; split `Cookie` fields are
//! joined. What differs is only form: field names keep the client's
//! case, and the kept fields keep their order and white space.
//!
//! [`copy_response_fields`] does the same for the answer on its way back
//! (when crawlgate's own upstream connection left its fields in its
//! bytes): the upstream's fields but the hop-by-hop and framing ones, to
//! which the server layer adds those this hop owes the client.

use std::io::Write;
use std::sync::Mutex;

use http::header::HeaderName;

use crate::classify::UaClass;
use crate::http1::{Field, Known, RequestHead, ResponseHead, TargetForm};

use super::headers::{may_be_claim, names, ClientInfo, CLIENT_CLAIMS, HOP_BY_HOP};

#[cfg(test)]
mod tests;

/// What [`write_request_head`] sets, as bytes.
#[derive(Debug)]
pub struct HeadRewrite<'a> {
    /// The Host to send upstream.
    pub host: &'a [u8],
    /// Who sent the request.
    pub client: &'a ClientInfo,
    /// Whether the peer is a trusted proxy whose forwarding fields count.
    pub trusted: bool,
    /// `X-Forwarded-Port`: the port the client connected to.
    pub port: &'a [u8],
    /// The classification field's name.
    pub class_header: &'a HeaderName,
    /// The robot class field's name.
    pub robot_class_header: &'a HeaderName,
    /// The verification field's name.
    pub verified_header: &'a HeaderName,
    /// The protocol of an upgrade passed on, sent with `Connection:
    /// upgrade`.
    pub upgrade: Option<&'a [u8]>,
    /// Whether the body goes chunked (a chunked body of a GET, HEAD or
    /// CONNECT does not go at all).
    pub chunked: bool,
}

/// A client's request head as crawlgate's own layer parsed it in place:
/// what [`write_request_head`] copies its upstream head from, handed
/// along with the request the service serves from the same bytes.
#[derive(Clone, Copy, Debug)]
pub struct ClientHead<'a> {
    /// The bytes the head was parsed from.
    pub buf: &'a [u8],
    /// The parsed head.
    pub head: &'a RequestHead,
    /// Its fields.
    pub fields: &'a [Field],
    /// Where crawlgate's own upstream connection leaves the answer's
    /// parsed fields when it keeps them in the head's bytes instead of
    /// the response's `HeaderMap` (the layer that read this head then
    /// copies them: [`copy_response_fields`]); `None` where the service
    /// reads them.
    pub answer: Option<&'a Mutex<Vec<Field>>>,
}

/// Appends the field line `name: value`, CRLF included.
pub fn field_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Whether a `Connection` field of the head names the field `name` (a
/// field the sender wants dropped at this hop). Host and Content-Length
/// are never the sender's to drop.
fn named_by_connection(buf: &[u8], fields: &[Field], name: &[u8]) -> bool {
    if names(name, b"host", false) || names(name, b"content-length", false) {
        return false;
    }
    fields
        .iter()
        .filter(|f| f.known == Known::Connection)
        .flat_map(|f| f.value.of(buf).split(|&b| b == b','))
        .any(|token| token.trim_ascii().eq_ignore_ascii_case(name))
}

/// Appends to `out` the head to send upstream for the request `head`
/// parsed from `buf` with `fields`.
pub fn write_request_head(
    out: &mut Vec<u8>,
    buf: &[u8],
    head: &RequestHead,
    fields: &[Field],
    rw: &HeadRewrite<'_>,
) {
    out.extend_from_slice(head.method.of(buf));
    out.push(b' ');
    let pq = head.path_and_query.of(buf);
    match head.form {
        TargetForm::Absolute if !pq.starts_with(b"/") => {
            out.push(b'/');
            out.extend_from_slice(pq);
        }
        _ => out.extend_from_slice(pq),
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(rw.host);
    out.extend_from_slice(b"\r\n");

    let ours = [rw.class_header, rw.robot_class_header, rw.verified_header];
    let cookies = fields
        .iter()
        .filter(|f| names(f.name.of(buf), b"cookie", false))
        .count();
    let mut cookies_written = false;
    let mut forwarded_for = 0usize;
    // The forwarding fields a trusted proxy sent, which crawlgate keeps.
    let (mut real_ip, mut proto, mut port, mut forwarded_host) = (false, false, false, false);
    // Fields `Connection` names go (RFC 9110 §7.6.1), a `Close` field
    // with the `close` option too; those of the other two options,
    // `Keep-Alive` and `Upgrade`, are hop-by-hop already.
    let connection_names = head.connection.other || head.connection.close;
    for field in fields {
        let name = field.name.of(buf);
        match field.known {
            Known::Host | Known::Connection | Known::Upgrade | Known::TransferEncoding => continue,
            _ => {}
        }
        if HOP_BY_HOP
            .iter()
            .any(|h| names(name, h.as_str().as_bytes(), false))
        {
            continue;
        }
        if connection_names && named_by_connection(buf, fields, name) {
            continue;
        }
        if ours
            .iter()
            .any(|h| names(name, h.as_str().as_bytes(), true))
        {
            continue;
        }
        let claim = may_be_claim(name)
            .then(|| {
                CLIENT_CLAIMS
                    .iter()
                    .find(|c| names(name, c.as_str().as_bytes(), true))
            })
            .flatten();
        if let Some(claim) = claim {
            if !rw.trusted {
                continue;
            }
            match claim.as_str() {
                "x-forwarded-for" if names(name, b"x-forwarded-for", false) => {
                    forwarded_for += 1;
                    continue;
                }
                "x-real-ip" => real_ip |= names(name, b"x-real-ip", false),
                "x-forwarded-proto" => proto |= names(name, b"x-forwarded-proto", false),
                "x-forwarded-port" => port |= names(name, b"x-forwarded-port", false),
                "x-forwarded-host" => forwarded_host |= names(name, b"x-forwarded-host", false),
                _ => {}
            }
        }
        if cookies > 1 && names(name, b"cookie", false) {
            if !cookies_written {
                cookies_written = true;
                out.extend_from_slice(b"Cookie: ");
                let values = fields
                    .iter()
                    .filter(|f| names(f.name.of(buf), b"cookie", false));
                for (i, cookie) in values.enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b"; ");
                    }
                    out.extend_from_slice(cookie.value.of(buf));
                }
                out.extend_from_slice(b"\r\n");
            }
            continue;
        }
        out.extend_from_slice(field.line.of(buf));
    }
    let class = match rw.client.class {
        UaClass::Bot => b"1",
        UaClass::Human => b"0",
    };
    field_line(out, rw.class_header.as_str().as_bytes(), class);
    if let Some(robot) = &rw.client.robot {
        if let Some(class) = &robot.class {
            field_line(
                out,
                rw.robot_class_header.as_str().as_bytes(),
                class.as_bytes(),
            );
        }
        if let Some(identity) = robot.identity {
            field_line(
                out,
                rw.verified_header.as_str().as_bytes(),
                identity.as_str().as_bytes(),
            );
        }
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    if forwarded_for > 0 {
        let chain = fields
            .iter()
            .filter(|f| names(f.name.of(buf), b"x-forwarded-for", false));
        for value in chain {
            out.extend_from_slice(value.value.of(buf));
            out.extend_from_slice(b", ");
        }
    }
    let _ = write!(out, "{}", rw.client.peer);
    out.extend_from_slice(b"\r\n");
    if !real_ip {
        out.extend_from_slice(b"x-real-ip: ");
        let _ = write!(out, "{}", rw.client.peer);
        out.extend_from_slice(b"\r\n");
    }
    if !proto {
        field_line(out, b"x-forwarded-proto", rw.client.scheme.as_bytes());
    }
    if !port {
        field_line(out, b"x-forwarded-port", rw.port);
    }
    if !forwarded_host {
        if let Some(host) = head.authority(buf, fields) {
            field_line(out, b"x-forwarded-host", host);
        }
    }
    if rw.chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    if let Some(protocol) = rw.upgrade {
        field_line(out, b"upgrade", protocol);
        out.extend_from_slice(b"connection: upgrade\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends to `out` the field lines of the upstream's answer `head`,
/// parsed from `buf` with `fields`, that go on to the client: all but the
/// hop-by-hop ones, those `Connection` names and `Transfer-Encoding`;
/// `Content-Length` only with `keep_length` (an answer relayed without a
/// body, such as a HEAD's, says the upstream's length; a relayed body's
/// is this hop's). Says whether a `Date` was among them. The status line
/// and this hop's own fields (framing, `Date` when missing, `Connection`)
/// are the writer's.
pub fn copy_response_fields(
    out: &mut Vec<u8>,
    buf: &[u8],
    head: &ResponseHead,
    fields: &[Field],
    keep_length: bool,
) -> bool {
    // Fields `Connection` names go (RFC 9110 §7.6.1), a `Close` field
    // with the `close` option too; those of the other two options,
    // `Keep-Alive` and `Upgrade`, are hop-by-hop already.
    let connection_names = head.connection.other || head.connection.close;
    let mut date = false;
    for field in fields {
        let name = field.name.of(buf);
        match field.known {
            Known::Connection | Known::Upgrade | Known::TransferEncoding => continue,
            Known::ContentLength if !keep_length => continue,
            _ => {}
        }
        if HOP_BY_HOP
            .iter()
            .any(|h| names(name, h.as_str().as_bytes(), false))
        {
            continue;
        }
        if connection_names && named_by_connection(buf, fields, name) {
            continue;
        }
        date |= names(name, b"date", false);
        out.extend_from_slice(field.line.of(buf));
    }
    date
}
