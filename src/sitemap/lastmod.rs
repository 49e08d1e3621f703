//! `lastmod` values: what databases print, read; W3C datetime, written.
//!
//! Accepted: `YYYY-MM-DD`; `YYYY-MM-DD` then `T` or a space, `hh:mm`
//! with optional `:ss` and fraction (the fraction is dropped), then
//! optionally `Z`, `±hh`, `±hhmm` or `±hh:mm` (PostgreSQL prints
//! `2024-05-01 10:00:00+02`, MySQL `2024-05-01 10:00:00`). A time
//! without an offset is taken at the offset given to the build (UTC by
//! default). MySQL's zero dates (`0000-00-00…`) mean "unknown", as an
//! empty field does. Written: the date alone, or
//! `YYYY-MM-DDThh:mm:ss` and `Z` or `±hh:mm`.

use std::fmt;

use time::{Date, Month, Time, UtcOffset};

/// A valid `lastmod`, kept as the W3C datetime text (no allocation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Lastmod {
    text: [u8; 25],
    len: u8,
}

impl Lastmod {
    /// The W3C datetime text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and punctuation are ever written.
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Debug for Lastmod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lastmod({})", self.as_str())
    }
}

/// A lastmod that is not a date this module reads.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("lastmod {0:?} is not a date (YYYY-MM-DD) or date and time (YYYY-MM-DD hh:mm:ss, with an optional offset)")]
pub struct BadLastmod(pub String);

/// A fixed offset for times written without one, `±hh:mm` or `Z`.
pub fn parse_offset(text: &str) -> Option<UtcOffset> {
    let mut cursor = Cursor(text.as_bytes());
    let offset = cursor.offset()?;
    cursor.0.is_empty().then_some(offset)
}

/// Reads `text` (trimmed by the caller); `Ok(None)` for "unknown"
/// (empty, `NULL`, `\N`, a MySQL zero date).
pub fn parse(text: &str, naive: UtcOffset) -> Result<Option<Lastmod>, BadLastmod> {
    if text.is_empty() || text == "NULL" || text == "\\N" || text.starts_with("0000-00-00") {
        return Ok(None);
    }
    read(text, naive)
        .map(Some)
        .ok_or_else(|| BadLastmod(text.chars().take(64).collect()))
}

fn read(text: &str, naive: UtcOffset) -> Option<Lastmod> {
    let mut c = Cursor(text.as_bytes());
    let year = c.digits(4)?;
    c.byte(b'-')?;
    let month = c.digits(2)?;
    c.byte(b'-')?;
    let day = c.digits(2)?;
    let date = Date::from_calendar_date(
        i32::try_from(year).ok()?,
        Month::try_from(u8::try_from(month).ok()?).ok()?,
        u8::try_from(day).ok()?,
    )
    .ok()?;
    let mut out = Writer::default();
    out.date(date);
    if c.0.is_empty() {
        return Some(out.finish());
    }
    if !(c.byte(b'T').is_some() || c.byte(b't').is_some() || c.byte(b' ').is_some()) {
        return None;
    }
    let hour = c.digits(2)?;
    c.byte(b':')?;
    let minute = c.digits(2)?;
    let mut second = 0;
    if c.byte(b':').is_some() {
        second = c.digits(2)?;
        if c.byte(b'.').is_some() || c.byte(b',').is_some() {
            let fraction = c.0.iter().take_while(|b| b.is_ascii_digit()).count();
            if fraction == 0 {
                return None;
            }
            c.0 = &c.0[fraction..];
        }
    }
    let time = Time::from_hms(
        u8::try_from(hour).ok()?,
        u8::try_from(minute).ok()?,
        u8::try_from(second).ok()?,
    )
    .ok()?;
    // PostgreSQL may put a space before the offset.
    if c.0.first() == Some(&b' ') && c.0.len() > 1 {
        c.0 = &c.0[1..];
    }
    let offset = if c.0.is_empty() { naive } else { c.offset()? };
    if !c.0.is_empty() {
        return None;
    }
    out.time(time);
    out.offset(offset);
    Some(out.finish())
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn byte(&mut self, b: u8) -> Option<()> {
        let (&first, rest) = self.0.split_first()?;
        (first == b).then(|| self.0 = rest)
    }

    fn digits(&mut self, n: usize) -> Option<u32> {
        let digits = self.0.get(..n)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.0 = &self.0[n..];
        Some(digits.iter().fold(0, |v, d| v * 10 + u32::from(d - b'0')))
    }

    /// `Z`, `±hh`, `±hhmm` or `±hh:mm`.
    fn offset(&mut self) -> Option<UtcOffset> {
        if self.byte(b'Z').is_some() || self.byte(b'z').is_some() {
            return Some(UtcOffset::UTC);
        }
        let sign: i8 = if self.byte(b'+').is_some() {
            1
        } else {
            self.byte(b'-')?;
            -1
        };
        let hours = self.digits(2)?;
        let _ = self.byte(b':');
        let minutes = if self.0.is_empty() {
            0
        } else {
            self.digits(2)?
        };
        if hours > 23 || minutes > 59 {
            return None;
        }
        let hours = i8::try_from(hours).ok()? * sign;
        let minutes = i8::try_from(minutes).ok()? * sign;
        UtcOffset::from_hms(hours, minutes, 0).ok()
    }
}

#[derive(Default)]
struct Writer {
    text: [u8; 25],
    len: usize,
}

impl Writer {
    fn push(&mut self, b: u8) {
        self.text[self.len] = b;
        self.len += 1;
    }

    fn number(&mut self, value: u32, width: u32) {
        for place in (0..width).rev() {
            let digit = (value / 10u32.pow(place)) % 10;
            self.push(b'0' + digit as u8);
        }
    }

    fn date(&mut self, date: Date) {
        self.number(date.year().unsigned_abs(), 4);
        self.push(b'-');
        self.number(u32::from(u8::from(date.month())), 2);
        self.push(b'-');
        self.number(u32::from(date.day()), 2);
    }

    fn time(&mut self, time: Time) {
        self.push(b'T');
        self.number(u32::from(time.hour()), 2);
        self.push(b':');
        self.number(u32::from(time.minute()), 2);
        self.push(b':');
        self.number(u32::from(time.second()), 2);
    }

    fn offset(&mut self, offset: UtcOffset) {
        if offset.is_utc() {
            self.push(b'Z');
            return;
        }
        self.push(if offset.is_negative() { b'-' } else { b'+' });
        self.number(u32::from(offset.whole_hours().unsigned_abs()), 2);
        self.push(b':');
        self.number(u32::from(offset.minutes_past_hour().unsigned_abs()), 2);
    }

    fn finish(self) -> Lastmod {
        Lastmod {
            text: self.text,
            len: self.len as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w3c(text: &str) -> Result<Option<String>, BadLastmod> {
        parse(text, UtcOffset::UTC).map(|l| l.map(|l| l.as_str().to_owned()))
    }

    #[test]
    fn database_spellings_become_w3c_datetimes() {
        for (input, expected) in [
            ("2024-05-01", "2024-05-01"),
            ("2024-05-01 10:00:00", "2024-05-01T10:00:00Z"),
            ("2024-05-01T10:00", "2024-05-01T10:00:00Z"),
            ("2024-05-01T10:00:07Z", "2024-05-01T10:00:07Z"),
            ("2024-05-01 10:00:00.123456+02", "2024-05-01T10:00:00+02:00"),
            ("2024-05-01 10:00:00 -0530", "2024-05-01T10:00:00-05:30"),
            ("2024-02-29T23:59:59+14:00", "2024-02-29T23:59:59+14:00"),
            ("2024-05-01 10:00:00+00", "2024-05-01T10:00:00Z"),
        ] {
            assert_eq!(w3c(input), Ok(Some(expected.to_owned())), "{input}");
        }
    }

    #[test]
    fn unknown_is_none() {
        for input in ["", "NULL", "\\N", "0000-00-00", "0000-00-00 00:00:00"] {
            assert_eq!(w3c(input), Ok(None), "{input}");
        }
    }

    #[test]
    fn naive_times_take_the_given_offset() {
        let cet = parse_offset("+01:00").expect("offset");
        let l = parse("2024-05-01 10:00:00", cet)
            .expect("ok")
            .expect("some");
        assert_eq!(l.as_str(), "2024-05-01T10:00:00+01:00");
        // A date alone has no time to shift.
        let l = parse("2024-05-01", cet).expect("ok").expect("some");
        assert_eq!(l.as_str(), "2024-05-01");
        assert_eq!(parse_offset("Z"), Some(UtcOffset::UTC));
        assert_eq!(parse_offset("+1"), None);
        assert_eq!(parse_offset("+01:00x"), None);
    }

    #[test]
    fn nonsense_is_refused() {
        for input in [
            "2024-13-01",
            "2024-02-30",
            "2023-02-29",
            "24-05-01",
            "2024/05/01",
            "2024-05-01T25:00:00",
            "2024-05-01T10:60:00",
            "2024-05-01T10:00:00+24:00",
            "2024-05-01T10:00:00.",
            "2024-05-01T10:00:00Zjunk",
            "2024-05-01x",
            "yesterday",
            "1714557600",
        ] {
            assert!(w3c(input).is_err(), "{input}");
        }
    }
}
