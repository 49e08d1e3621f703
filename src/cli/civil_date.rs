// The build date's arithmetic, in one copy: build.rs includes this file
// to stamp the date, and src/cli/version.rs includes it for its tests.
// (An included file cannot carry a `//!` doc.)

/// The UTC calendar date of `unix_seconds` (seconds since 1970-01-01
/// 00:00 UTC, negative before it), as `YYYY-MM-DD`: days since the epoch
/// shifted to an era of 400 years that starts on 1 March, so that the
/// leap day is the last day of its year.
pub fn civil_date(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    // 719_468 days from 0000-03-01 to 1970-01-01.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March: 0 is March, 11 is February.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
