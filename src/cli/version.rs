//! What `crawlgate -V` and `crawlgate --version` print: the version, the
//! commit and the build date that build.rs found, and what the build
//! compiled in.

/// The commit built: `git rev-parse --short=12 HEAD`, with `-dirty` when
/// the checkout had changes; else `$CRAWLGATE_COMMIT` at build time; else
/// `unknown`.
pub const COMMIT: &str = env!("CRAWLGATE_BUILD_COMMIT");

/// The build date, UTC, `YYYY-MM-DD`: from `$SOURCE_DATE_EPOCH` when the
/// build set it (reproducible builds), else the day of the build.
pub const BUILD_DATE: &str = env!("CRAWLGATE_BUILD_DATE");

/// `crawlgate -V`: one line, `0.1.0 (abc123def456 2026-12-03)` after the
/// name.
pub const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CRAWLGATE_BUILD_COMMIT"),
    " ",
    env!("CRAWLGATE_BUILD_DATE"),
    ")"
);

/// `crawlgate --version`: the version, then one fact of the build a line:
/// the commit, the date, the Cargo features enabled (`none` without any),
/// the target triple and Cargo's profile.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("CRAWLGATE_BUILD_COMMIT"),
    "\nbuilt: ",
    env!("CRAWLGATE_BUILD_DATE"),
    "\nfeatures: ",
    env!("CRAWLGATE_BUILD_FEATURES"),
    "\ntarget: ",
    env!("CRAWLGATE_BUILD_TARGET"),
    "\nprofile: ",
    env!("CRAWLGATE_BUILD_PROFILE"),
);

#[cfg(test)]
mod tests {
    include!("civil_date.rs");

    #[test]
    fn civil_dates_around_the_epoch_and_leap_days() {
        for (seconds, date) in [
            (0, "1970-01-01"),
            (86_399, "1970-01-01"),
            (86_400, "1970-01-02"),
            (-1, "1969-12-31"),
            (-86_400, "1969-12-31"),
            (-86_401, "1969-12-30"),
            (951_782_400, "2000-02-29"),
            (951_868_800, "2000-03-01"),
            (1_709_164_800, "2024-02-29"),
            (1_735_689_599, "2024-12-31"),
            (1_735_689_600, "2025-01-01"),
            (4_107_542_400, "2100-03-01"),
            (4_107_456_000, "2100-02-28"),
            (253_402_300_799, "9999-12-31"),
        ] {
            assert_eq!(civil_date(seconds), date, "{seconds}");
        }
    }

    /// Every day from 1900 to 2200 follows the one before it.
    #[test]
    fn civil_dates_follow_each_other() {
        let days_in = |year: i64, month: u32| match month {
            2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let (mut year, mut month, mut day) = (1900_i64, 1_u32, 1_u32);
        for days in -25_567_i64..84_006 {
            assert_eq!(
                civil_date(days * 86_400 + 43_200),
                format!("{year:04}-{month:02}-{day:02}")
            );
            day += 1;
            if day > days_in(year, month) {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
        assert_eq!((year, month, day), (2200, 1, 1));
    }
}
