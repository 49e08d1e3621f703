//! Parameter names as a PHP application reads them from a query string.
//!
//! A robot "clicks" an action link when the application finds a parameter
//! named, say, `do` in its query. What counts is the name *the application*
//! sees, not the text on the wire: PHP percent-decodes names, maps some bytes
//! to `_` and cuts `name[...]` to `name`, so `?%64o=1`, `?do[]=1` and
//! `?do[x]=1` are all `$_GET['do']`. Frameworks may parse the query
//! themselves: Nette 3 (`Nette\Http\Url::parseQuery`) wraps every name in an
//! array index before calling `parse_str`, which keeps dots and spaces and
//! ends a name at `]` instead.
//!
//! This module answers "which name does each parser produce" without
//! allocating: names are decoded into a small caller-provided buffer, and a
//! name longer than that buffer cannot equal a blocked name anyway.
//! [`action_param`] is the check the request path uses: a parameter is an
//! action if PHP's `$_GET` *or* Nette's parser yields a blocked name.
//!
//! The truth table behind these rules was taken from PHP 8.2
//! (`parse_str`, `$_GET` under `php -S`) and is kept in the tests below.

/// The longest parameter name that can be blocked, in bytes.
///
/// Names are decoded into a stack buffer of this size; config validation
/// rejects longer blocked names, so a decoded name that does not fit can
/// never be one of them.
pub const MAX_NAME_LEN: usize = 64;

/// Returns the index (into `blocked`) of the first blocked name that a
/// parameter of `query` resolves to under PHP's `$_GET` or Nette's parser.
///
/// `query` is the raw query component, without the `?`. Pairs are separated
/// by `&` (PHP's default `arg_separator.input`); a name runs to the first `=`.
///
/// ```
/// use crawlgate::query::action_param;
///
/// let blocked = ["do", "_fid"];
/// assert_eq!(action_param(b"id=1&do=vote", &blocked), Some(0));
/// assert_eq!(action_param(b"%64o[]=vote", &blocked), Some(0)); // $_GET['do']
/// assert_eq!(action_param(b".fid=abc", &blocked), Some(1)); // $_GET['_fid']
/// assert_eq!(action_param(b"undo=1&x=do", &blocked), None);
/// ```
pub fn action_param<N: AsRef<str>>(query: &[u8], blocked: &[N]) -> Option<usize> {
    let mut buf = [0u8; MAX_NAME_LEN];
    for pair in query.split(|&b| b == b'&') {
        let raw = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => &pair[..eq],
            None => pair,
        };
        if raw.is_empty() {
            continue;
        }
        if let Some(name) = php_name(raw, &mut buf) {
            if let Some(i) = position(blocked, name) {
                return Some(i);
            }
        }
        if let Some(name) = nette_name(raw, &mut buf) {
            if let Some(i) = position(blocked, name) {
                return Some(i);
            }
        }
    }
    None
}

fn position<N: AsRef<str>>(blocked: &[N], name: &[u8]) -> Option<usize> {
    blocked.iter().position(|b| b.as_ref().as_bytes() == name)
}

/// The top-level name under which PHP registers the raw (still encoded)
/// parameter name `raw` in `$_GET`, written into `buf`.
///
/// Returns `None` when PHP ignores the parameter (its name is empty after
/// the rules below) or when the name does not fit in `buf`.
///
/// PHP's rules (`main/php_variables.c`, checked against PHP 8.2):
/// 1. url-decode: `+` is a space, `%XX` is a byte, a bad escape stays literal;
/// 2. the name ends at the first NUL byte;
/// 3. leading spaces are dropped;
/// 4. space and `.` become `_`;
/// 5. the first `[` ends the name if a `]` follows anywhere after it
///    (`do[]`, `do[x]`, `do[]x` are all `do`); otherwise it becomes `_`
///    and so does every later space, `.` or `[` (`do[x.y` is `do_x_y`);
/// 6. an empty name is ignored.
pub fn php_name<'b>(raw: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut input = UrlDecoded::new(raw).take_while(|&b| b != 0).peekable();
    while input.next_if_eq(&b' ').is_some() {}

    let mut len = 0;
    let mut push = |b: u8, len: &mut usize| -> Option<()> {
        *buf.get_mut(*len)? = b;
        *len += 1;
        Some(())
    };
    while let Some(b) = input.next() {
        match b {
            b' ' | b'.' => push(b'_', &mut len)?,
            b'[' => {
                if len == 0 {
                    return None;
                }
                if input.clone().any(|b| b == b']') {
                    break;
                }
                push(b'_', &mut len)?;
                for b in input.by_ref() {
                    let b = if matches!(b, b' ' | b'.' | b'[') {
                        b'_'
                    } else {
                        b
                    };
                    push(b, &mut len)?;
                }
            }
            _ => push(b, &mut len)?,
        }
    }
    if len == 0 {
        return None;
    }
    Some(&buf[..len])
}

/// The name under which Nette 3's `Url::parseQuery` stores the raw (still
/// encoded) parameter name `raw`, written into `buf`.
///
/// Nette rewrites `name rest` to `0[name]rest` (after turning `%5B` into
/// `[`), where `name` is the raw text up to the first `[`, and lets
/// `parse_str` do the rest. So the name is the raw text up to the first `[`
/// or `%5B`, url-decoded, cut at the first `]`; dots and spaces are kept.
/// A NUL byte before that cut leaves the index unterminated and the
/// parameter out of Nette's result; an empty or single-space index is an
/// array append, not a name. Both give `None`, as does a name longer than
/// `buf`.
pub fn nette_name<'b>(raw: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let end = raw
        .windows(3)
        .position(|w| w[0] == b'%' && w[1] == b'5' && (w[2] | 0x20) == b'b')
        .unwrap_or(raw.len());
    let raw = &raw[..end];
    let raw = match raw.iter().position(|&b| b == b'[') {
        Some(bracket) => &raw[..bracket],
        None => raw,
    };
    if raw.is_empty() {
        return None;
    }
    let mut len = 0;
    for b in UrlDecoded::new(raw) {
        match b {
            0 => return None,
            b']' => break,
            _ => {
                *buf.get_mut(len)? = b;
                len += 1;
            }
        }
    }
    let name = &buf[..len];
    if name.is_empty() || name == b" " {
        return None;
    }
    Some(name)
}

/// The bytes of `raw` decoded as PHP's `urldecode` does.
#[derive(Clone)]
struct UrlDecoded<'a> {
    rest: &'a [u8],
}

impl<'a> UrlDecoded<'a> {
    fn new(raw: &'a [u8]) -> Self {
        Self { rest: raw }
    }
}

impl Iterator for UrlDecoded<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        let (&first, rest) = self.rest.split_first()?;
        match first {
            b'+' => {
                self.rest = rest;
                Some(b' ')
            }
            b'%' => match rest {
                [hi, lo, tail @ ..] if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
                    self.rest = tail;
                    Some(hex(*hi) << 4 | hex(*lo))
                }
                _ => {
                    self.rest = rest;
                    Some(b'%')
                }
            },
            _ => {
                self.rest = rest;
                Some(first)
            }
        }
    }
}

fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

#[cfg(test)]
mod tests;
