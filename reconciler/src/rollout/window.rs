//! Maintenance windows: recurring spans of time (days of the week, a start time, a
//! duration, an IANA time zone) inside which a pool's rollout may start nodes
//! ([`Maintenance`]), and where `now` stands with respect to them ([`window_state`]).
//!
//! Pure: `now` is an argument. Local times are resolved in the window's time zone with
//! jiff (the IANA database: the system's copy, else the one bundled in the binary):
//!
//! - a window opens on each listed day at `start`, local time, and stays open for
//!   `duration` of elapsed time, so a window may span midnight (`Sat 22:00` for `6h`
//!   closes on Sunday at 04:00) and a window across a DST change is as long as it says;
//! - a start time that a DST change skips (02:30 on the day clocks jump from 02:00 to
//!   03:00) opens at the same distance after the jump (03:30); one that occurs twice
//!   (clocks going back) opens at the first. This is jiff's (and RFC 5545's)
//!   "compatible" disambiguation.

use std::fmt;
use std::time::Duration;

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};

/// The longest window: a week (a longer one would be open all the time).
pub const MAX_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// Which changes wait for a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppliesTo {
    /// Only `drain`-class changes (the default); other changes roll at any time.
    Drain,
    /// Every change.
    All,
}

impl AppliesTo {
    pub fn as_str(self) -> &'static str {
        match self {
            AppliesTo::Drain => "drain",
            AppliesTo::All => "all",
        }
    }
}

/// A pool's maintenance windows (`spec.rollout.maintenance`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maintenance {
    pub applies_to: AppliesTo,
    /// At least one (rendering rejects an empty list).
    pub windows: Vec<Window>,
}

/// One recurring window.
#[derive(Debug, Clone)]
pub struct Window {
    /// The days it opens on, Monday first.
    pub days: [bool; 7],
    /// Local time it opens at.
    pub start: Time,
    /// How long it stays open (elapsed time), more than zero, at most [`MAX_WINDOW`].
    pub duration: Duration,
    /// The IANA name as written (`Europe/Berlin`, `UTC`).
    pub zone_name: String,
    pub zone: TimeZone,
}

impl PartialEq for Window {
    fn eq(&self, other: &Self) -> bool {
        self.days == other.days
            && self.start == other.start
            && self.duration == other.duration
            && self.zone_name == other.zone_name
    }
}

impl Eq for Window {}

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const DAY_FULL: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

impl fmt::Display for Window {
    /// `Sat,Sun 22:00 Europe/Berlin for 6h`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days: Vec<&str> = (0..7)
            .filter(|&i| self.days[i])
            .map(|i| DAY_NAMES[i])
            .collect();
        write!(
            f,
            "{} {} {} for {}",
            days.join(","),
            self.start.strftime("%H:%M"),
            self.zone_name,
            humantime::format_duration(self.duration)
        )
    }
}

/// The next opening of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    pub at: Timestamp,
    /// `Tue 02:00 UTC`: the local day and time in the window's zone, and the zone.
    pub label: String,
}

/// Where `now` stands with respect to a set of windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    /// Inside a window, which closes at `closes` (the latest close of the windows open).
    Open { closes: Timestamp },
    /// Outside every window; `next` is the earliest opening after `now` (`None`: no
    /// window ever opens, as with no window at all).
    Closed { next: Option<Opening> },
}

fn day_index(w: Weekday) -> usize {
    w.to_monday_zero_offset() as usize
}

/// The instant the window opens on local date `date` (whatever its weekday).
fn opening_on(window: &Window, date: Date) -> Option<Timestamp> {
    date.to_datetime(window.start)
        .to_zoned(window.zone.clone())
        .ok()
        .map(|z| z.timestamp())
}

/// Every opening of `window` whose span could contain `now` or that comes within a
/// week after it, as `(open, close)`.
fn spans_around(window: &Window, now: Timestamp) -> Vec<(Timestamp, Timestamp)> {
    let today = now.to_zoned(window.zone.clone()).date();
    let length = SignedDuration::try_from(window.duration).unwrap_or(SignedDuration::MAX);
    let mut out = Vec::new();
    // A window lasts at most a week: one that opened more than 8 local days ago is
    // closed, and every weekday comes again within 8 days.
    for offset in -8i64..=8 {
        let Ok(date) = today.checked_add(offset.days()) else {
            continue;
        };
        if !window.days[day_index(date.weekday())] {
            continue;
        }
        if let Some(open) = opening_on(window, date) {
            let close = open.checked_add(length).unwrap_or(Timestamp::MAX);
            out.push((open, close));
        }
    }
    out
}

/// The label of an opening: `Tue 02:00 Europe/Berlin`.
pub fn opening_label(window: &Window, at: Timestamp) -> String {
    format!(
        "{} {}",
        at.to_zoned(window.zone.clone()).strftime("%a %H:%M"),
        window.zone_name
    )
}

/// Where `now` stands with respect to `windows` (see the module docs).
pub fn window_state(windows: &[Window], now: Timestamp) -> WindowState {
    let mut closes: Option<Timestamp> = None;
    let mut next: Option<Opening> = None;
    for window in windows {
        for (open, close) in spans_around(window, now) {
            if open <= now && now < close {
                closes = Some(closes.map_or(close, |c| c.max(close)));
            } else if open > now && next.as_ref().is_none_or(|n| open < n.at) {
                next = Some(Opening {
                    at: open,
                    label: opening_label(window, open),
                });
            }
        }
    }
    match closes {
        Some(closes) => WindowState::Open { closes },
        None => WindowState::Closed { next },
    }
}

/// Parses `days`: `Mon` ... `Sun` (or the full names, any case), and ranges `Mon-Fri`
/// (a range may wrap: `Fri-Mon`). At least one day.
pub fn parse_days(days: &[String]) -> Result<[bool; 7], String> {
    fn one(s: &str) -> Result<usize, String> {
        let lower = s.trim().to_ascii_lowercase();
        DAY_FULL
            .iter()
            .position(|d| *d == lower || d[..3] == lower)
            .ok_or_else(|| {
                format!(
                    "unknown day {s:?}: expected Mon, Tue, Wed, Thu, Fri, Sat or Sun (or a \
                     range such as Mon-Fri)"
                )
            })
    }
    if days.is_empty() {
        return Err("no day: list at least one (Mon ... Sun, or a range such as Mon-Fri)".into());
    }
    let mut out = [false; 7];
    for d in days {
        match d.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (one(a)?, one(b)?);
                let mut i = a;
                loop {
                    out[i] = true;
                    if i == b {
                        break;
                    }
                    i = (i + 1) % 7;
                }
            }
            None => out[one(d)?] = true,
        }
    }
    Ok(out)
}

/// Parses `start`: `HH:MM`, 24-hour, local time in the window's zone.
pub fn parse_start(s: &str) -> Result<Time, String> {
    let err =
        || format!("invalid start time {s:?}: expected HH:MM, 24-hour (\"02:00\", \"22:30\")");
    let (h, m) = s.trim().split_once(':').ok_or_else(err)?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err(err());
    }
    let h: i8 = h.parse().map_err(|_| err())?;
    let m: i8 = m.parse().map_err(|_| err())?;
    Time::new(h, m, 0, 0).map_err(|_| err())
}

/// Parses a window's `duration`: humantime, more than zero, at most a week.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?}: {e} (write e.g. 4h or 1h30m)"))?;
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be more than zero"));
    }
    if d > MAX_WINDOW {
        return Err(format!(
            "invalid duration {s:?}: a window lasts at most 7 days (168h)"
        ));
    }
    Ok(d)
}

/// Parses an IANA time zone name (`UTC`, `Europe/Berlin`).
pub fn parse_zone(s: &str) -> Result<TimeZone, String> {
    if s.trim().is_empty() {
        return Err("empty time zone: write an IANA name such as UTC or Europe/Berlin".into());
    }
    TimeZone::get(s).map_err(|_| {
        format!(
            "unknown time zone {s:?}: expected an IANA time zone name such as UTC, \
             Europe/Berlin or America/New_York"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(days: &[&str], start: &str, duration: &str, zone: &str) -> Window {
        let days: Vec<String> = days.iter().map(|d| d.to_string()).collect();
        Window {
            days: parse_days(&days).unwrap(),
            start: parse_start(start).unwrap(),
            duration: parse_duration(duration).unwrap(),
            zone_name: zone.to_string(),
            zone: parse_zone(zone).unwrap(),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(windows: &[Window], now: &str) -> Option<Opening> {
        match window_state(windows, at(now)) {
            WindowState::Closed { next } => next,
            WindowState::Open { closes } => panic!("open until {closes} at {now}"),
        }
    }

    fn closes(windows: &[Window], now: &str) -> Timestamp {
        match window_state(windows, at(now)) {
            WindowState::Open { closes } => closes,
            WindowState::Closed { next } => panic!("closed at {now}, next {next:?}"),
        }
    }

    #[test]
    fn inside_and_outside_a_utc_window() {
        // 2026-12-01 is a Tuesday.
        let w = [window(&["Tue"], "02:00", "2h", "UTC")];
        assert_eq!(
            closes(&w, "2026-12-01T02:00:00Z"),
            at("2026-12-01T04:00:00Z")
        );
        assert_eq!(
            closes(&w, "2026-12-01T03:59:59Z"),
            at("2026-12-01T04:00:00Z")
        );
        let n = next(&w, "2026-12-01T04:00:00Z").unwrap();
        assert_eq!(
            n.at,
            at("2026-12-08T02:00:00Z"),
            "closed at its end: next week"
        );
        assert_eq!(n.label, "Tue 02:00 UTC");
        let n = next(&w, "2026-12-01T01:59:59Z").unwrap();
        assert_eq!(n.at, at("2026-12-01T02:00:00Z"));
    }

    #[test]
    fn the_week_wraps_from_sunday_to_monday() {
        // 2026-12-06 is a Sunday.
        let w = [window(&["Mon"], "01:00", "1h", "UTC")];
        let n = next(&w, "2026-12-06T23:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-12-07T01:00:00Z"));
        assert_eq!(n.label, "Mon 01:00 UTC");
        // Saturday after Monday's window: the coming Monday, not the past one.
        let n = next(&w, "2026-12-05T12:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-12-07T01:00:00Z"));
        // A range wrapping the week end.
        let w = [window(&["Fri-Mon"], "12:00", "1h", "UTC")];
        assert_eq!(w[0].days, [true, false, false, false, true, true, true]);
        let n = next(&w, "2026-12-01T13:00:00Z").unwrap(); // Tuesday
        assert_eq!(n.at, at("2026-12-04T12:00:00Z"), "the Friday after");
    }

    #[test]
    fn a_window_spanning_midnight_is_open_on_the_next_day() {
        // Saturday 22:00 for 6h: open Sunday 03:00, closed Sunday 04:00.
        let w = [window(&["Sat"], "22:00", "6h", "UTC")];
        assert_eq!(
            closes(&w, "2026-12-06T03:00:00Z"),
            at("2026-12-06T04:00:00Z")
        );
        assert!(next(&w, "2026-12-06T04:00:00Z").is_some());
        // A whole-week window on one day: open at any time.
        let w = [window(&["Mon"], "00:00", "168h", "UTC")];
        assert_eq!(
            closes(&w, "2026-12-06T23:59:00Z"),
            at("2026-12-07T00:00:00Z")
        );
    }

    #[test]
    fn no_window_ever_opens_without_windows() {
        assert_eq!(
            window_state(&[], at("2026-12-01T00:00:00Z")),
            WindowState::Closed { next: None }
        );
    }

    #[test]
    fn dst_spring_forward_and_fall_back_in_berlin() {
        // Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (a Sunday); 2026-10-25
        // 03:00 CEST -> 02:00 CET (a Sunday).
        let w = [window(&["Sun"], "02:30", "1h", "Europe/Berlin")];
        // 02:30 does not exist on 2026-03-29: it opens at 03:30 CEST = 01:30Z.
        let n = next(&w, "2026-03-28T12:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-03-29T01:30:00Z"));
        assert_eq!(n.label, "Sun 03:30 Europe/Berlin");
        // The Sunday before, still CET: 02:30 CET = 01:30Z as well.
        let n = next(&w, "2026-03-21T12:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-03-22T01:30:00Z"));
        // The Sunday after, CEST: 02:30 CEST = 00:30Z.
        let n = next(&w, "2026-03-29T12:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-04-05T00:30:00Z"));
        // 02:30 happens twice on 2026-10-25: the first (CEST, 00:30Z).
        let n = next(&w, "2026-10-24T12:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-10-25T00:30:00Z"));
        assert_eq!(
            closes(&w, "2026-10-25T01:29:00Z"),
            at("2026-10-25T01:30:00Z")
        );
        // A Saturday 22:00 window of 8h across the spring change is 8 hours of
        // elapsed time: 21:00Z to 05:00Z (07:00 CEST).
        let w = [window(&["Sat"], "22:00", "8h", "Europe/Berlin")];
        assert_eq!(
            closes(&w, "2026-03-29T04:00:00Z"),
            at("2026-03-29T05:00:00Z")
        );
    }

    #[test]
    fn dst_in_new_york_and_the_earliest_of_several_windows() {
        // America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT.
        let w = [
            window(&["Sun"], "02:15", "30m", "America/New_York"),
            window(&["Tue"], "02:00", "1h", "UTC"),
        ];
        let n = next(&w, "2026-03-07T00:00:00Z").unwrap();
        // 02:15 is skipped: 03:15 EDT = 07:15Z.
        assert_eq!(n.at, at("2026-03-08T07:15:00Z"));
        assert_eq!(n.label, "Sun 03:15 America/New_York");
        let n = next(&w, "2026-03-08T08:00:00Z").unwrap();
        assert_eq!(n.at, at("2026-03-10T02:00:00Z"));
        assert_eq!(n.label, "Tue 02:00 UTC");
    }

    #[test]
    fn parsing_days_times_durations_and_zones() {
        let days = |d: &[&str]| parse_days(&d.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            days(&["mon", "Sunday"]).unwrap(),
            [true, false, false, false, false, false, true]
        );
        assert_eq!(
            days(&["Mon-Fri"]).unwrap(),
            [true, true, true, true, true, false, false]
        );
        assert!(
            days(&["Tues"])
                .unwrap_err()
                .contains("unknown day \"Tues\"")
        );
        assert!(days(&[]).unwrap_err().contains("no day"));
        assert!(days(&["Mon-Xyz"]).is_err());
        assert_eq!(parse_start("2:05").unwrap(), Time::new(2, 5, 0, 0).unwrap());
        assert_eq!(
            parse_start("23:59").unwrap(),
            Time::new(23, 59, 0, 0).unwrap()
        );
        for bad in ["24:00", "12:60", "1200", "12:5", "x:00", "-1:00", ""] {
            assert!(parse_start(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration("4h").unwrap(), Duration::from_secs(4 * 3600));
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(
            parse_duration("8days")
                .unwrap_err()
                .contains("at most 7 days")
        );
        assert!(parse_duration("4").is_err());
        assert!(parse_zone("Europe/Berlin").is_ok());
        assert!(parse_zone("UTC").is_ok());
        assert!(
            parse_zone("Europe/Berln")
                .unwrap_err()
                .contains("unknown time zone")
        );
        assert!(parse_zone("").is_err());
    }

    #[test]
    fn display() {
        let w = window(&["Sat", "Sun"], "22:00", "6h", "Europe/Berlin");
        assert_eq!(w.to_string(), "Sat,Sun 22:00 Europe/Berlin for 6h");
    }
}
