//! Time expressions in a message ("yesterday", "last March", "3 weeks ago", "last weekend",
//! "earlier this month", "2024-05-01"), turned into a time window relative to the message's
//! own time. Used to favour archive matches from the period the message asks about.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};

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

const WEEKDAYS: [(&str, Weekday); 7] = [
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

/// Words before "May" that make it the month, not the verb ("in May", "back in May").
const MAY_PREFIX: &[&str] = &[
    "in", "last", "of", "since", "during", "early", "mid", "late", "around", "before", "after",
    "until", "through",
];

/// A count written as a word or digits ("two", "a", "12"), bounded so that no date arithmetic
/// can overflow.
fn count(word: &str) -> Option<i32> {
    let n = match word {
        "a" | "an" | "one" => 1,
        "two" | "couple" => 2,
        "three" | "few" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        other => other.parse().ok().filter(|n| (1..=1000).contains(n))?,
    };
    Some(n)
}

/// A window `[from, to)` in unix ms, or `None` when the text names no time.
pub fn window(text: &str, now_ms: i64) -> Option<(i64, i64)> {
    let now = Utc.timestamp_millis_opt(now_ms).single()?;
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    let today = now.date_naive();
    for w in &words {
        if let Ok(d) = NaiveDate::parse_from_str(w, "%Y-%m-%d") {
            return days(d, 1);
        }
    }
    if words
        .windows(3)
        .any(|w| w == ["day", "before", "yesterday"])
    {
        return days(today - Duration::days(2), 1);
    }
    if words.contains(&"yesterday") {
        return days(today - Duration::days(1), 1);
    }
    for (i, w) in words.iter().enumerate() {
        let prev = if i > 0 { words[i - 1] } else { "" };
        if let Some(m) = MONTHS.iter().position(|name| name == w)
            && (m != 4 || MAY_PREFIX.contains(&prev))
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
            // "two weeks ago", "a couple of days ago", "a few months ago".
            let (unit_word, n_word) = match words[i - 2] {
                "of" if i >= 3 => (words[i - 1], words[i - 3]),
                n => (words[i - 1], n),
            };
            let Some(n) = count(n_word) else { continue };
            let unit = match unit_word.trim_end_matches('s') {
                "day" => Duration::days(1),
                "week" => Duration::weeks(1),
                "month" => Duration::days(30),
                "year" => Duration::days(365),
                _ => continue,
            };
            let centre = now.checked_sub_signed(unit * n)?;
            return around(centre, unit);
        }
        if prev == "last" || prev == "past" {
            if let Some((_, wd)) = WEEKDAYS.iter().find(|(name, _)| name == w) {
                // The most recent such day before today.
                let back = (today.weekday().num_days_from_monday() as i64
                    - wd.num_days_from_monday() as i64)
                    .rem_euclid(7);
                let back = if back == 0 { 7 } else { back };
                return days(today - Duration::days(back), 1);
            }
            match *w {
                "weekend" => {
                    // The Saturday and Sunday before today.
                    let back = today.weekday().num_days_from_monday() as i64 + 2;
                    return days(today - Duration::days(back), 2);
                }
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
                "summer" | "autumn" | "fall" | "winter" | "spring" => return season(w, now),
                _ => {}
            }
        }
        if prev == "this" {
            // "this week", "earlier this month": from the start of the period until now.
            let start = match *w {
                "week" => {
                    days(
                        today - Duration::days(today.weekday().num_days_from_monday() as i64),
                        0,
                    )?
                    .0
                }
                "month" => month_window(now.year(), now.month())?.0,
                "year" => month_window(now.year(), 1)?.0,
                _ => continue,
            };
            return Some((start, now_ms));
        }
    }
    None
}

/// `n` whole days from `d` (0: just the start of `d`).
fn days(d: NaiveDate, n: i64) -> Option<(i64, i64)> {
    let start = Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?);
    Some(span(start, start.checked_add_signed(Duration::days(n))?))
}

/// The most recent completed season of that name (northern hemisphere, meteorological).
fn season(name: &str, now: DateTime<Utc>) -> Option<(i64, i64)> {
    let first_month = match name {
        "spring" => 3,
        "summer" => 6,
        "autumn" | "fall" => 9,
        _ => 12,
    };
    // The season's start in the current year; step back a year until it has ended.
    let mut year = now.year();
    loop {
        let start = Utc
            .with_ymd_and_hms(year, first_month, 1, 0, 0, 0)
            .single()?;
        let end_month = first_month + 3;
        let end = if end_month > 12 {
            Utc.with_ymd_and_hms(year + 1, end_month - 12, 1, 0, 0, 0)
                .single()?
        } else {
            Utc.with_ymd_and_hms(year, end_month, 1, 0, 0, 0).single()?
        };
        if end <= now {
            return Some(span(start, end));
        }
        year -= 1;
        if year < now.year() - 2 {
            return None;
        }
    }
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

    #[test]
    fn weekdays_weekends_seasons_and_spelled_out_counts() {
        // Wednesday 2026-06-17, noon.
        let now = at(2026, 6, 17);
        let midnight = |y, m, d| at(y, m, d) - 43_200_000;
        assert_eq!(
            window("what did we do last weekend?", now),
            Some((midnight(2026, 6, 13), midnight(2026, 6, 15)))
        );
        assert_eq!(
            window("last Friday's call", now),
            Some((midnight(2026, 6, 12), midnight(2026, 6, 13)))
        );
        assert_eq!(
            window("since last Wednesday", now).unwrap().0,
            midnight(2026, 6, 10),
            "the same weekday is a week back"
        );
        assert_eq!(
            window("the day before yesterday", now).unwrap().0,
            midnight(2026, 6, 15)
        );
        let (from, to) = window("a couple of weeks ago", now).unwrap();
        assert!(from < at(2026, 6, 3) && to > at(2026, 6, 3));
        let (from, to) = window("about eight months ago", now).unwrap();
        assert!(from < at(2025, 10, 20) && to > at(2025, 10, 20));
        assert_eq!(
            window("earlier this month", now),
            Some((midnight(2026, 6, 1), now))
        );
        assert_eq!(window("this week", now), Some((midnight(2026, 6, 15), now)));
        // The last season that is over: summer 2026 has not ended yet in June.
        assert_eq!(
            window("last summer", now),
            Some((midnight(2025, 6, 1), midnight(2025, 9, 1)))
        );
        assert_eq!(
            window("last winter", now),
            Some((midnight(2025, 12, 1), midnight(2026, 3, 1)))
        );
        assert_eq!(window("back in May", now).unwrap().0, midnight(2026, 5, 1));
        assert_eq!(window("you may know", now), None);
        assert_eq!(window("lots of people ago", now), None);
    }
}
