//! The request head the native layer parsed, as the service takes it: an
//! `http::Request` whose header values are slices of the one read buffer,
//! with the names browsers send taken from a static table.

use std::sync::LazyLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};

use crate::http1::{Field, NameFilter, RequestHead, Version};
use crate::proxy::body::FedBody;
use crate::tunnel::OwnConnection;

/// The request `head` (parsed from `bytes` with `fields`) as the service
/// takes it: the header values are slices of `bytes`, not copies. `None`
/// when a part is not what `http` accepts (httparse has already refused
/// most of what that could be).
pub(super) fn request(
    head: &RequestHead,
    fields: &[Field],
    bytes: &Bytes,
    body: FedBody,
) -> Option<Request<FedBody>> {
    let method = Method::from_bytes(head.method(bytes)).ok()?;
    let target = head.target;
    let uri =
        Uri::from_maybe_shared(bytes.slice(target.start as usize..target.end as usize)).ok()?;
    // Room for the fields crawlgate adds on the way upstream.
    let mut headers = HeaderMap::with_capacity(fields.len() + 8);
    for field in fields {
        let name = field_name(field.name.of(bytes))?;
        let value = field.value;
        let value =
            HeaderValue::from_maybe_shared(bytes.slice(value.start as usize..value.end as usize))
                .ok()?;
        headers.append(name, value);
    }
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = match head.version {
        Version::Http10 => http::Version::HTTP_10,
        Version::Http11 => http::Version::HTTP_11,
    };
    *req.headers_mut() = headers;
    if head.upgrade {
        req.extensions_mut().insert(OwnConnection);
    }
    Some(req)
}

/// Field names browsers send that `http` has no constant for. Taken from
/// here they cost no allocation, and neither do their copies (the retry's
/// copy of the head); `HeaderName::from_bytes` copies every name it does
/// not know into a buffer of its own.
static BROWSER_NAMES: [HeaderName; 19] = [
    HeaderName::from_static("sec-ch-ua"),
    HeaderName::from_static("sec-ch-ua-mobile"),
    HeaderName::from_static("sec-ch-ua-platform"),
    HeaderName::from_static("sec-ch-ua-platform-version"),
    HeaderName::from_static("sec-ch-ua-full-version-list"),
    HeaderName::from_static("sec-ch-ua-model"),
    HeaderName::from_static("sec-ch-ua-arch"),
    HeaderName::from_static("sec-ch-ua-bitness"),
    HeaderName::from_static("sec-fetch-site"),
    HeaderName::from_static("sec-fetch-mode"),
    HeaderName::from_static("sec-fetch-user"),
    HeaderName::from_static("sec-fetch-dest"),
    HeaderName::from_static("sec-fetch-storage-access"),
    HeaderName::from_static("sec-gpc"),
    HeaderName::from_static("sec-purpose"),
    HeaderName::from_static("priority"),
    HeaderName::from_static("purpose"),
    HeaderName::from_static("x-requested-with"),
    HeaderName::from_static("save-data"),
];

static BROWSER_FILTER: LazyLock<NameFilter> =
    LazyLock::new(|| NameFilter::of(BROWSER_NAMES.iter().map(|n| n.as_str().as_bytes())));

/// The field name `name` (any case) as `http` holds it.
fn field_name(name: &[u8]) -> Option<HeaderName> {
    if BROWSER_FILTER.may_hold(name) {
        if let Some(known) = BROWSER_NAMES
            .iter()
            .find(|n| n.as_str().as_bytes().eq_ignore_ascii_case(name))
        {
            return Some(known.clone());
        }
    }
    HeaderName::from_bytes(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A browser's names come from the table in any case, the same name
    /// `http` would make of them; other names as `http` makes them.
    #[test]
    fn field_names_come_from_the_table_or_from_http() {
        for known in &BROWSER_NAMES {
            let name = known.as_str();
            for spelling in [name.to_owned(), name.to_ascii_uppercase()] {
                let got = field_name(spelling.as_bytes()).expect("a name");
                assert_eq!(
                    got,
                    HeaderName::from_bytes(spelling.as_bytes()).expect("valid")
                );
            }
        }
        for name in [
            "Accept",
            "user-agent",
            "X-Custom",
            "sec-ch-ua-x",
            "Priority2",
        ] {
            assert_eq!(
                field_name(name.as_bytes()),
                HeaderName::from_bytes(name.as_bytes()).ok(),
                "{name}"
            );
        }
        assert_eq!(field_name(b"bad name"), None);
    }
}
