//! Next fire times of a cron expression in a time zone, with a documented DST rule:
//! a local time that does not exist (spring forward) fires once, shifted by the jump (02:30 →
//! 03:30); a local time that occurs twice (fall back) fires once, at its first occurrence.

use std::str::FromStr;

use chrono::{Duration, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

#[derive(Debug, Clone)]
pub struct CronSpec {
    schedule: cron::Schedule,
    tz: Tz,
}

impl CronSpec {
    /// Parses a 5-field expression (`min hour day month weekday`) or 6–7 fields with seconds
    /// first, and an IANA time zone name.
    pub fn parse(expr: &str, timezone: &str) -> Result<CronSpec, String> {
        let expr = match expr.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields = expr.split_whitespace().count();
        let full = match fields {
            5 => {
                // Crontab numbers weekdays 0-7 with 0 and 7 = Sunday; the cron crate 1-7 from
                // Sunday. Numbers in the weekday field become names, which mean the same in both.
                let mut f: Vec<String> = expr.split_whitespace().map(str::to_owned).collect();
                f[4] = crontab_weekdays(&f[4])?;
                format!("0 {}", f.join(" "))
            }
            6 | 7 => expr.to_owned(),
            _ => {
                return Err(format!(
                    "{expr:?} has {fields} fields; use 5 (min hour day month weekday) or 6-7 (with seconds)"
                ));
            }
        };
        let schedule = cron::Schedule::from_str(&full)
            .map_err(|e| format!("{expr:?} is not a cron expression: {e}"))?;
        let tz: Tz = timezone
            .parse()
            .map_err(|_| format!("{timezone:?} is not an IANA time zone (e.g. Europe/Berlin)"))?;
        Ok(CronSpec { schedule, tz })
    }

    /// The first fire time strictly after `after_ms` (unix ms), or `None` if there is none.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let after = Utc.timestamp_millis_opt(after_ms).single()?;
        let local_after = after.with_timezone(&self.tz).naive_local();
        // Walk the expression in wall-clock time (naive local times, carried as UTC values so
        // no zone rule interferes), then place each wall-clock time in the zone.
        for wall in self
            .schedule
            .after(&Utc.from_utc_datetime(&local_after))
            .take(1000)
        {
            let instant = self.place(wall.naive_utc())?;
            if instant > after_ms {
                return Some(instant);
            }
        }
        None
    }

    fn place(&self, wall: NaiveDateTime) -> Option<i64> {
        match self.tz.from_local_datetime(&wall) {
            LocalResult::Single(t) => Some(t.timestamp_millis()),
            LocalResult::Ambiguous(first, _) => Some(first.timestamp_millis()),
            // In a gap: read the wall time with the offset in force before the jump, which
            // lands it the same distance after the jump (02:30 → 03:30).
            LocalResult::None => {
                use chrono::Offset;
                let before = self
                    .tz
                    .from_local_datetime(&(wall - Duration::hours(6)))
                    .earliest()?;
                let offset = before.offset().fix().local_minus_utc() as i64;
                Some((wall.and_utc().timestamp() - offset) * 1000)
            }
        }
    }
}

/// Crontab weekday numbers (0-7, 0 and 7 = Sunday) as names, in lists, ranges and steps.
fn crontab_weekdays(field: &str) -> Result<String, String> {
    const NAMES: [&str; 8] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let name = |s: &str| -> Result<String, String> {
        match s.parse::<usize>() {
            Ok(n) if n <= 7 => Ok(NAMES[n].to_owned()),
            Ok(n) => Err(format!("weekday {n} is out of range 0-7")),
            Err(_) => Ok(s.to_owned()),
        }
    };
    let mut parts = Vec::new();
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        let converted = match range.split_once('-') {
            // A range ending on Sunday-as-7 would run backwards in names: split it.
            Some((a, "7")) if step.is_none() && a != "0" && a != "7" => {
                format!("{}-SAT,SUN", name(a)?)
            }
            Some((a, b)) => format!("{}-{}", name(a)?, name(b)?),
            None => name(range)?,
        };
        parts.push(match step {
            Some(s) => format!("{converted}/{s}"),
            None => converted,
        });
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .timestamp_millis()
    }

    fn fires(spec: &CronSpec, from: &str, n: usize) -> Vec<String> {
        let mut t = utc(from);
        (0..n)
            .map(|_| {
                t = spec.next_after(t).unwrap();
                Utc.timestamp_millis_opt(t).unwrap().to_rfc3339()
            })
            .collect()
    }

    #[test]
    fn five_fields_in_a_time_zone() {
        let s = CronSpec::parse("0 7 * * Mon-Fri", "Europe/Berlin").unwrap();
        // Friday 2026-01-02 07:00 CET = 06:00 UTC; then Monday.
        assert_eq!(
            fires(&s, "2026-01-01T12:00:00Z", 2),
            vec!["2026-01-02T06:00:00+00:00", "2026-01-05T06:00:00+00:00"]
        );
        let ny = CronSpec::parse("30 9 * * *", "America/New_York").unwrap();
        assert_eq!(
            fires(&ny, "2026-07-01T00:00:00Z", 1),
            vec!["2026-07-01T13:30:00+00:00"]
        );
    }

    #[test]
    fn spring_forward_runs_once_after_the_jump() {
        // Berlin jumps 02:00 → 03:00 on 2026-03-29: 02:30 does not exist that day.
        let s = CronSpec::parse("30 2 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            fires(&s, "2026-03-28T00:00:00Z", 3),
            vec![
                "2026-03-28T01:30:00+00:00", // 02:30 CET
                "2026-03-29T01:30:00+00:00", // 03:30 CEST, once
                "2026-03-30T00:30:00+00:00", // 02:30 CEST
            ]
        );
    }

    #[test]
    fn fall_back_runs_once_at_the_first_occurrence() {
        // Berlin goes 03:00 → 02:00 on 2026-10-25: 02:30 happens twice.
        let s = CronSpec::parse("30 2 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            fires(&s, "2026-10-24T12:00:00Z", 2),
            vec!["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]
        );
    }

    #[test]
    fn weekday_numbers_mean_what_crontab_says() {
        // 2026-01-03 is a Saturday: "1-5" (Mon-Fri) next runs on Monday the 5th.
        let s = CronSpec::parse("0 7 * * 1-5", "UTC").unwrap();
        assert_eq!(
            fires(&s, "2026-01-03T00:00:00Z", 1),
            vec!["2026-01-05T07:00:00+00:00"]
        );
        let sunday = CronSpec::parse("0 7 * * 0", "UTC").unwrap();
        assert_eq!(
            fires(&sunday, "2026-01-03T00:00:00Z", 1),
            vec!["2026-01-04T07:00:00+00:00"]
        );
        let weekend = CronSpec::parse("0 7 * * 6-7", "UTC").unwrap();
        assert_eq!(
            fires(&weekend, "2026-01-02T12:00:00Z", 2),
            vec!["2026-01-03T07:00:00+00:00", "2026-01-04T07:00:00+00:00"]
        );
        let daily = CronSpec::parse("@daily", "UTC").unwrap();
        assert_eq!(
            fires(&daily, "2026-01-02T12:00:00Z", 1),
            vec!["2026-01-03T00:00:00+00:00"]
        );
        assert!(CronSpec::parse("0 7 * * 9", "UTC").is_err());
    }

    #[test]
    fn bad_expressions_and_zones_are_explained() {
        assert!(
            CronSpec::parse("* * *", "UTC")
                .unwrap_err()
                .contains("3 fields")
        );
        assert!(
            CronSpec::parse("61 * * * *", "UTC")
                .unwrap_err()
                .contains("not a cron")
        );
        assert!(
            CronSpec::parse("0 7 * * *", "Mars/Olympus")
                .unwrap_err()
                .contains("IANA")
        );
    }
}
