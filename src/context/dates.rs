//! Time expressions in a message ("yesterday", "last March", "3 weeks ago", "2024-05-01"),
//! turned into a time window relative to the message's own time. Used to favour archive
//! matches from the period the message asks about.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// A window `[from, to)` in unix ms, or `None` when the text names no time.
pub fn window(text: &str, now_ms: i64) -> Option<(i64, i64)> {
    let now = Utc.timestamp_millis_opt(now_ms).single()?;
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    let day = |d: NaiveDate| {
        let start = Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?);
        Some((
            start.timestamp_millis(),
            (start + Duration::days(1)).timestamp_millis(),
        ))
    };
    for w in &words {
        if let Ok(d) = NaiveDate::parse_from_str(w, "%Y-%m-%d") {
            return day(d);
        }
    }
    if words.contains(&"yesterday") {
        return day(now.date_naive() - Duration::days(1));
    }
    for (i, w) in words.iter().enumerate() {
        let prev = if i > 0 { words[i - 1] } else { "" };
        if let Some(m) = MONTHS.iter().position(|name| name == w)
            && (m != 4 || matches!(prev, "in" | "last" | "of" | "since" | "during"))
        {
            // The most recent such month before now ("last March" in March = a year ago).
            let month = m as u32 + 1;
            let mut year = now.year();
            if month > now.month() || (month == now.month() && prev == "last") {
                year -= 1;
            }
            return month_window(year, month);
        }
        if *w == "ago" && i >= 2 {
            let n: i32 = match words[i - 2] {
                "a" | "an" | "one" => 1,
                "two" => 2,
                "three" => 3,
                "few" | "couple" => 2,
                // Numbers from the message: bounded, so no date arithmetic can overflow.
                other => match other.parse() {
                    Ok(n) if (1..=1000).contains(&n) => n,
                    _ => continue,
                },
            };
            let unit = match words[i - 1].trim_end_matches('s') {
                "day" => Duration::days(1),
                "week" => Duration::weeks(1),
                "month" => Duration::days(30),
                "year" => Duration::days(365),
                _ => continue,
            };
            let centre = now.checked_sub_signed(unit * n)?;
            return around(centre, unit);
        }
        if prev == "last" {
            match *w {
                "week" => return Some(span(now.checked_sub_signed(Duration::days(14))?, now)),
                "month" => {
                    let (y, m) = if now.month() == 1 {
                        (now.year() - 1, 12)
                    } else {
                        (now.year(), now.month() - 1)
                    };
                    return month_window(y, m);
                }
                "year" => {
                    let start = Utc
                        .with_ymd_and_hms(now.year() - 1, 1, 1, 0, 0, 0)
                        .single()?;
                    let end = Utc.with_ymd_and_hms(now.year(), 1, 1, 0, 0, 0).single()?;
                    return Some(span(start, end));
                }
                _ => {}
            }
        }
    }
    None
}

fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> (i64, i64) {
    (from.timestamp_millis(), to.timestamp_millis())
}

fn around(centre: DateTime<Utc>, unit: Duration) -> Option<(i64, i64)> {
    Some(span(
        centre.checked_sub_signed(unit)?,
        centre.checked_add_signed(unit)?,
    ))
}

fn month_window(year: i32, month: u32) -> Option<(i64, i64)> {
    let start = Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0).single()?;
    let (ny, nm) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let end = Utc.with_ymd_and_hms(ny, nm, 1, 0, 0, 0).single()?;
    Some(span(start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, m: u32, d: u32) -> i64 {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn months_days_and_relative_times() {
        let now = at(2026, 6, 15);
        assert_eq!(
            window("what did we decide in March?", now),
            Some((at(2026, 3, 1) - 43_200_000, at(2026, 4, 1) - 43_200_000))
        );
        // A month later in the year than now is last year's.
        assert_eq!(
            window("back in October", now).unwrap().0,
            at(2025, 10, 1) - 43_200_000
        );
        assert_eq!(
            window("last June", now).unwrap().0,
            at(2025, 6, 1) - 43_200_000
        );
        assert_eq!(
            window("what did I say yesterday", now).unwrap().0,
            at(2026, 6, 14) - 43_200_000
        );
        assert_eq!(
            window("on 2025-12-24 we met", now).unwrap().0,
            at(2025, 12, 24) - 43_200_000
        );
        let (from, to) = window("two weeks ago", now).unwrap();
        assert!(from < at(2026, 6, 1) && to > at(2026, 6, 1));
        assert_eq!(
            window("may I ask something", now),
            None,
            "'may' the verb is no month"
        );
        // Huge or vague numbers are no time at all, and never overflow.
        assert_eq!(window("what happened 300000 years ago", now), None);
        assert_eq!(
            window("a long time ago in March", now).unwrap().0,
            at(2026, 3, 1) - 43_200_000
        );
        assert_eq!(window("9223372036854775807 days ago", i64::MAX / 2), None);
        assert_eq!(window("nothing temporal here", now), None);
    }
}
