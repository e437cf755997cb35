//! The date and time functions, with SQLite's rules (its `date.c`): `date`, `time`,
//! `datetime`, `julianday`, `unixepoch`, `strftime`. A moment is a Julian day number in
//! milliseconds (`jd`); a time value is parsed, changed by each modifier in turn, then
//! formatted. `localtime` and `utc` leave the moment as it is: cairn's local time is UTC
//! (docs/sql.md). Anything that does not parse, or a moment out of range, gives NULL.

use cairn_value::Value;

/// Milliseconds per day, and the Julian day of the Unix epoch in milliseconds.
const DAY: i64 = 86_400_000;
const UNIX_EPOCH_JD_MS: i64 = 210_866_760_000_000;
/// The last valid moment: 9999-12-31 23:59:59.999.
const MAX_JD: i64 = 464_269_060_799_999;

#[derive(Clone, Copy, Default)]
struct Moment {
    jd: i64,
    y: i32,
    mo: i32,
    d: i32,
    h: i32,
    mi: i32,
    /// Time zone offset in minutes, until the moment is computed.
    tz: i32,
    s: f64,
    valid_jd: bool,
    valid_ymd: bool,
    valid_hms: bool,
    /// Days past the end of the month a day number overflowed by (for `floor`).
    n_floor: i32,
    /// `s` holds a bare number not read as a moment yet (for `unixepoch`, `auto`).
    raw_s: bool,
    error: bool,
    subsec: bool,
}

/// Reads `n` digits at `at`, within `lo..=hi`, followed by `next` (or anything when `None`).
fn digits(b: &[u8], at: usize, n: usize, lo: i32, hi: i32, next: Option<u8>) -> Option<i32> {
    let mut v = 0i32;
    for i in 0..n {
        let c = *b.get(at + i)?;
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i32::from(c - b'0');
    }
    if v < lo || v > hi {
        return None;
    }
    if let Some(c) = next {
        if b.get(at + n) != Some(&c) {
            return None;
        }
    }
    Some(v)
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// SQLite's reading of a whole string as a number (spaces around it allowed).
fn atof(s: &[u8]) -> Option<f64> {
    let mut i = 0;
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    let mut j = s.len();
    while j > i && is_space(s[j - 1]) {
        j -= 1;
    }
    let t = &s[i..j];
    let mut k = 0;
    if k < t.len() && (t[k] == b'+' || t[k] == b'-') {
        k += 1;
    }
    let mut mantissa = 0;
    while k < t.len() && t[k].is_ascii_digit() {
        k += 1;
        mantissa += 1;
    }
    if k < t.len() && t[k] == b'.' {
        k += 1;
        while k < t.len() && t[k].is_ascii_digit() {
            k += 1;
            mantissa += 1;
        }
    }
    if mantissa == 0 {
        return None;
    }
    if k < t.len() && (t[k] == b'e' || t[k] == b'E') {
        k += 1;
        if k < t.len() && (t[k] == b'+' || t[k] == b'-') {
            k += 1;
        }
        let start = k;
        while k < t.len() && t[k].is_ascii_digit() {
            k += 1;
        }
        if k == start {
            return None;
        }
    }
    if k != t.len() {
        return None;
    }
    cairn_value::num::parse_f64(std::str::from_utf8(t).ok()?)
}

fn days_of_month(y: i32, m: i32) -> i32 {
    if (1 << m) & 0x15aa != 0 {
        31
    } else if m != 2 {
        30
    } else if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) {
        29
    } else {
        28
    }
}

impl Moment {
    fn fail(&mut self) {
        *self = Moment {
            error: true,
            ..Moment::default()
        };
    }

    fn compute_jd(&mut self) {
        if self.valid_jd {
            return;
        }
        let (mut y, mut m, mut d) = if self.valid_ymd {
            (self.y, self.mo, self.d)
        } else {
            let mut d = 1;
            if self.valid_hms && self.h == 24 {
                self.h = 0;
                d = 2;
            }
            (2000, 1, d)
        };
        if !(-4713..=9999).contains(&y) || self.raw_s {
            self.fail();
            return;
        }
        if m <= 2 {
            y -= 1;
            m += 12;
        }
        let a = (y + 4800) / 100;
        let b = 38 - a + (a / 4);
        let x1 = 36525 * (y + 4716) / 100;
        let x2 = 306_001 * (m + 1) / 10000;
        d += x1 + x2 + b;
        self.jd = ((f64::from(d) - 1524.5) * DAY as f64) as i64;
        self.valid_jd = true;
        if self.valid_hms {
            self.jd += i64::from(self.h) * 3_600_000
                + i64::from(self.mi) * 60_000
                + (self.s * 1000.0 + 0.5) as i64;
            if self.tz != 0 {
                self.jd -= i64::from(self.tz) * 60_000;
                self.valid_ymd = false;
                self.valid_hms = false;
                self.tz = 0;
            }
        }
    }

    fn compute_ymd(&mut self) {
        if self.valid_ymd {
            return;
        }
        if !self.valid_jd {
            (self.y, self.mo, self.d) = (2000, 1, 1);
        } else if !(0..=MAX_JD).contains(&self.jd) {
            self.fail();
            return;
        } else {
            let z = ((self.jd + 43_200_000) / DAY) as i32;
            let alpha = ((f64::from(z) + 32044.75) / 36524.25) as i32 - 52;
            let a = z + 1 + alpha - ((alpha + 100) / 4) + 25;
            let b = a + 1524;
            let c = ((f64::from(b) - 122.1) / 365.25) as i32;
            let d = (36525 * (c & 32767)) / 100;
            let e = (f64::from(b - d) / 30.6001) as i32;
            let x1 = (30.6001 * f64::from(e)) as i32;
            self.d = b - d - x1;
            self.mo = if e < 14 { e - 1 } else { e - 13 };
            self.y = if self.mo > 2 { c - 4716 } else { c - 4715 };
        }
        self.valid_ymd = true;
    }

    fn compute_hms(&mut self) {
        if self.valid_hms {
            return;
        }
        self.compute_jd();
        let day_ms = ((self.jd + 43_200_000) % DAY) as i32;
        self.s = f64::from(day_ms % 60000) / 1000.0;
        let day_min = day_ms / 60000;
        self.mi = day_min % 60;
        self.h = day_min / 60;
        self.raw_s = false;
        self.valid_hms = true;
    }

    fn compute_ymd_hms(&mut self) {
        self.compute_ymd();
        self.compute_hms();
    }

    fn clear_ymd_hms_tz(&mut self) {
        self.valid_ymd = false;
        self.valid_hms = false;
        self.tz = 0;
    }

    /// The moment's date at `h:mi:s` (`start of`, `end of`); false when there is no moment yet.
    fn set_time_of_day(&mut self, h: i32, mi: i32, s: f64) -> bool {
        if !self.valid_jd && !self.valid_ymd && !self.valid_hms {
            return false;
        }
        self.compute_ymd();
        self.valid_hms = true;
        (self.h, self.mi, self.s) = (h, mi, s);
        self.raw_s = false;
        self.tz = 0;
        self.valid_jd = false;
        true
    }

    /// Brings the month into 1..=12, carrying whole years.
    fn carry_months(&mut self) {
        let x = if self.mo > 0 {
            (self.mo - 1) / 12
        } else {
            (self.mo - 12) / 12
        };
        self.y += x;
        self.mo -= x * 12;
    }

    fn compute_floor(&mut self) {
        let max = days_of_month(self.y, self.mo);
        self.n_floor = if self.d > max { self.d - max } else { 0 };
    }

    fn set_raw_number(&mut self, r: f64) {
        self.s = r;
        self.raw_s = true;
        if (0.0..5_373_484.5).contains(&r) {
            self.jd = (r * DAY as f64 + 0.5) as i64;
            self.valid_jd = true;
        }
    }

    fn set_now(&mut self, now_ms: i64) {
        self.jd = now_ms + UNIX_EPOCH_JD_MS;
        self.valid_jd = true;
        self.clear_ymd_hms_tz();
    }
}

/// `+HH:MM`, `-HH:MM` or `Z` after a time, then only spaces.
fn parse_timezone(b: &[u8], mut at: usize, p: &mut Moment) -> bool {
    while at < b.len() && is_space(b[at]) {
        at += 1;
    }
    p.tz = 0;
    let sign = match b.get(at) {
        None => return true,
        Some(b'-') => -1,
        Some(b'+') => 1,
        Some(b'Z' | b'z') => {
            at += 1;
            0
        }
        Some(_) => return false,
    };
    if sign != 0 {
        at += 1;
        let Some(hr) = digits(b, at, 2, 0, 14, Some(b':')) else {
            return false;
        };
        let Some(mn) = digits(b, at + 3, 2, 0, 59, None) else {
            return false;
        };
        at += 5;
        p.tz = sign * (mn + hr * 60);
    }
    while at < b.len() && is_space(b[at]) {
        at += 1;
    }
    at == b.len()
}

/// `HH:MM`, `HH:MM:SS`, `HH:MM:SS.FFF` (any number of digits), then a time zone.
fn parse_hms(b: &[u8], at: usize, p: &mut Moment) -> bool {
    let Some(h) = digits(b, at, 2, 0, 24, Some(b':')) else {
        return false;
    };
    let Some(m) = digits(b, at + 3, 2, 0, 59, None) else {
        return false;
    };
    let mut at = at + 5;
    let mut s = 0;
    let mut ms = 0.0;
    if b.get(at) == Some(&b':') {
        at += 1;
        let Some(v) = digits(b, at, 2, 0, 59, None) else {
            return false;
        };
        s = v;
        at += 2;
        if b.get(at) == Some(&b'.') && b.get(at + 1).is_some_and(u8::is_ascii_digit) {
            let mut scale = 1.0;
            at += 1;
            while at < b.len() && b[at].is_ascii_digit() {
                ms = ms * 10.0 + f64::from(b[at] - b'0');
                scale *= 10.0;
                at += 1;
            }
            ms /= scale;
            if ms > 0.999 {
                ms = 0.999;
            }
        }
    }
    if h == 24 && (m != 0 || s != 0 || ms != 0.0) {
        return false;
    }
    p.valid_jd = false;
    p.raw_s = false;
    p.valid_hms = true;
    p.h = h;
    p.mi = m;
    p.s = f64::from(s) + ms;
    parse_timezone(b, at, p)
}

/// `[-]YYYY-MM-DD`, then optionally (after spaces or `T`) a time.
fn parse_ymd(b: &[u8], p: &mut Moment) -> bool {
    let neg = b.first() == Some(&b'-');
    let at = usize::from(neg);
    let Some(mut y) = digits(b, at, 4, 0, 9999, Some(b'-')) else {
        return false;
    };
    let Some(mut m) = digits(b, at + 5, 2, 1, 12, Some(b'-')) else {
        return false;
    };
    let Some(mut d) = digits(b, at + 8, 2, 1, 31, None) else {
        return false;
    };
    let mut i = at + 10;
    while i < b.len() && (is_space(b[i]) || b[i] == b'T') {
        i += 1;
    }
    if parse_hms(b, i, p) {
        if p.h == 24 {
            let max = days_of_month(y, m);
            p.h = 0;
            d += 1;
            if d > max {
                d -= max;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    } else if i == b.len() {
        p.valid_hms = false;
    } else {
        return false;
    }
    p.valid_jd = false;
    p.valid_ymd = true;
    p.y = if neg { -y } else { y };
    p.mo = m;
    p.d = d;
    p.compute_floor();
    if p.tz != 0 {
        p.compute_jd();
    }
    true
}

fn parse_time_value(b: &[u8], p: &mut Moment, now: &mut dyn FnMut() -> i64) -> bool {
    if parse_ymd(b, p) {
        return true;
    }
    *p = Moment::default();
    if parse_hms(b, 0, p) {
        return true;
    }
    *p = Moment::default();
    if b.eq_ignore_ascii_case(b"now") {
        p.set_now(now());
        return true;
    }
    if let Some(r) = atof(b) {
        p.set_raw_number(r);
        return true;
    }
    if b.eq_ignore_ascii_case(b"subsec") || b.eq_ignore_ascii_case(b"subsecond") {
        p.subsec = true;
        p.set_now(now());
        return true;
    }
    false
}

fn auto_adjust(p: &mut Moment) {
    if !p.raw_s || p.valid_jd {
        p.raw_s = false;
    } else if p.s >= -210_866_760_000.0 && p.s <= 253_402_300_799.0 {
        let r = p.s * 1000.0 + UNIX_EPOCH_JD_MS as f64;
        p.clear_ymd_hms_tz();
        p.jd = (r + 0.5) as i64;
        p.valid_jd = true;
        p.raw_s = false;
    }
}

/// `+NNN unit`: its name, the largest magnitude it takes, and its length in seconds (the
/// limits are the single-precision numbers SQLite compares with).
const UNITS: [(&str, f32, f32); 6] = [
    ("second", 4.6427e14, 1.0),
    ("minute", 7.7379e12, 60.0),
    ("hour", 1.2897e11, 3600.0),
    ("day", 5_373_485.0, 86400.0),
    ("month", 176_546.0, 2_592_000.0),
    ("year", 14713.0, 31_536_000.0),
];

/// Applies modifier `z` (the `idx`th argument, from 1); false when it is not one.
fn modify(z: &[u8], p: &mut Moment, idx: usize) -> bool {
    let lower = z.to_ascii_lowercase();
    let is = |s: &str| lower == s.as_bytes();
    match lower.first() {
        Some(b'a') if is("auto") => {
            if idx > 1 {
                return false;
            }
            auto_adjust(p);
            true
        }
        Some(b'c') if is("ceiling") => {
            p.compute_jd();
            p.clear_ymd_hms_tz();
            p.n_floor = 0;
            true
        }
        Some(b'e') if lower.starts_with(b"end of ") => {
            if !p.set_time_of_day(23, 59, 59.999) {
                return false;
            }
            match &lower[7..] {
                b"month" => {
                    p.d = 1;
                    p.mo += 1;
                    if p.mo > 12 {
                        p.y += 1;
                        p.mo = 1;
                    }
                    p.compute_floor();
                    p.compute_jd();
                    p.jd -= i64::from(p.n_floor + 1) * DAY;
                    p.clear_ymd_hms_tz();
                    true
                }
                b"year" => {
                    (p.mo, p.d) = (12, 31);
                    true
                }
                b"day" => true,
                _ => false,
            }
        }
        Some(b'f') if is("floor") => {
            p.compute_jd();
            p.jd -= i64::from(p.n_floor) * DAY;
            p.clear_ymd_hms_tz();
            true
        }
        Some(b'j') if is("julianday") => {
            if idx > 1 {
                return false;
            }
            if p.valid_jd && p.raw_s {
                p.raw_s = false;
                return true;
            }
            false
        }
        // Local time is UTC here: the moment stays as it is.
        Some(b'l') if is("localtime") => {
            p.compute_jd();
            p.clear_ymd_hms_tz();
            true
        }
        Some(b'u') if is("unixepoch") => {
            if !p.raw_s {
                return false;
            }
            if idx > 1 {
                return false;
            }
            let r = p.s * 1000.0 + UNIX_EPOCH_JD_MS as f64;
            if (0.0..464_269_060_800_000.0).contains(&r) {
                p.clear_ymd_hms_tz();
                p.jd = (r + 0.5) as i64;
                p.valid_jd = true;
                p.raw_s = false;
                return true;
            }
            false
        }
        Some(b'u') if is("utc") => {
            p.compute_jd();
            p.clear_ymd_hms_tz();
            true
        }
        Some(b'w') if lower.starts_with(b"weekday ") => {
            let Some(r) = atof(&z[8..]) else {
                return false;
            };
            if !(-6.0..=6.0).contains(&r) || r.fract() != 0.0 {
                return false;
            }
            let n = (r as i64).abs();
            p.compute_ymd_hms();
            p.tz = 0;
            p.valid_jd = false;
            p.compute_jd();
            let mut day = ((p.jd + 129_600_000) / DAY) % 7;
            if day != n {
                if day > n {
                    day -= 7;
                }
                p.jd += (n - day) * DAY;
                if z[8..].contains(&b'-') {
                    p.jd -= 7 * DAY;
                }
            }
            p.clear_ymd_hms_tz();
            true
        }
        Some(b's') if is("subsec") || is("subsecond") => {
            p.subsec = true;
            true
        }
        Some(b's') if lower.starts_with(b"start of ") => {
            if !p.set_time_of_day(0, 0, 0.0) {
                return false;
            }
            match &lower[9..] {
                b"month" => {
                    p.d = 1;
                    true
                }
                b"year" => {
                    (p.mo, p.d) = (1, 1);
                    true
                }
                b"day" => true,
                _ => false,
            }
        }
        Some(c) if *c == b'+' || *c == b'-' || c.is_ascii_digit() => shift(z, p),
        _ => false,
    }
}

/// The modifiers that start with a number: `+NNN unit`, `±HH:MM[:SS[.FFF]]`,
/// `±YYYY-MM-DD[ HH:MM[:SS[.FFF]]]`.
fn shift(z: &[u8], p: &mut Moment) -> bool {
    let z0 = z[0];
    let mut n = 1;
    while n < z.len() {
        let c = z[n];
        if c == b':' || is_space(c) {
            break;
        }
        if c == b'-'
            && ((n == 5 && digits(z, 1, 4, 0, 9999, None).is_some())
                || (n == 6 && digits(z, 1, 5, 0, 9999, None).is_some()))
        {
            break;
        }
        n += 1;
    }
    let Some(mut r) = atof(&z[..n]) else {
        return false;
    };
    let mut hms_from = 0;
    if z.get(n) == Some(&b'-') {
        // ±YYYY-MM-DD: years, months (0-11) and days (0-30).
        if z0 != b'+' && z0 != b'-' {
            return false;
        }
        let w = n - 1;
        let (Some(y), Some(m), Some(mut d)) = (
            digits(z, 1, w, 0, 9999, Some(b'-')),
            digits(z, w + 2, 2, 0, 12, Some(b'-')),
            digits(z, w + 5, 2, 0, 31, None),
        ) else {
            return false;
        };
        if m >= 12 || d >= 31 {
            return false;
        }
        let end = w + 7;
        p.compute_ymd_hms();
        p.valid_jd = false;
        if z0 == b'-' {
            p.y -= y;
            p.mo -= m;
            d = -d;
        } else {
            p.y += y;
            p.mo += m;
        }
        p.carry_months();
        p.compute_floor();
        p.compute_jd();
        p.valid_hms = false;
        p.valid_ymd = false;
        p.jd += i64::from(d) * DAY;
        if end == z.len() {
            return true;
        }
        if is_space(z[end])
            && digits(z, end + 1, 2, 0, 24, Some(b':')).is_some()
            && digits(z, end + 4, 2, 0, 59, None).is_some()
        {
            hms_from = end + 1;
            n = 2;
        } else {
            return false;
        }
    }
    if z.get(hms_from + n) == Some(&b':') {
        // ±HH:MM[:SS[.FFF]] added to the time of day.
        let mut at = hms_from;
        if !z[at].is_ascii_digit() {
            at += 1;
        }
        let mut t = Moment::default();
        if !parse_hms(z, at, &mut t) {
            return false;
        }
        t.compute_jd();
        t.jd -= 43_200_000;
        let day = t.jd / DAY;
        t.jd -= day * DAY;
        if z0 == b'-' {
            t.jd = -t.jd;
        }
        p.compute_jd();
        p.clear_ymd_hms_tz();
        p.jd += t.jd;
        return true;
    }
    // +NNN unit(s)
    let mut rest = &z[n..];
    while let Some((&c, tail)) = rest.split_first() {
        if !is_space(c) {
            break;
        }
        rest = tail;
    }
    let mut len = rest.len();
    if !(3..=10).contains(&len) {
        return false;
    }
    if rest[len - 1].eq_ignore_ascii_case(&b's') {
        len -= 1;
    }
    let unit = rest[..len].to_ascii_lowercase();
    p.compute_jd();
    let rounder = if r < 0.0 { -0.5 } else { 0.5 };
    p.n_floor = 0;
    let mut ok = false;
    for (i, (name, limit, seconds)) in UNITS.iter().enumerate() {
        let limit = f64::from(*limit);
        if unit != name.as_bytes() || r <= -limit || r >= limit {
            continue;
        }
        if i == 4 || i == 5 {
            p.compute_ymd_hms();
            if i == 4 {
                p.mo += r as i32;
                p.carry_months();
            } else {
                p.y += r as i32;
            }
            p.compute_floor();
            p.valid_jd = false;
            r -= f64::from(r as i32);
        }
        p.compute_jd();
        p.jd += (r * 1000.0 * f64::from(*seconds) + rounder) as i64;
        ok = true;
        break;
    }
    p.clear_ymd_hms_tz();
    ok
}

/// The moment given by `args` (a time value, then modifiers), as SQLite's `isDate`: None
/// when something does not parse or the moment is out of range.
fn moment(args: &[Value], now: &mut dyn FnMut() -> i64) -> Option<Moment> {
    let mut p = Moment::default();
    match args.first() {
        None => p.set_now(now()),
        Some(Value::Null) => return None,
        Some(Value::Integer(i)) => p.set_raw_number(*i as f64),
        Some(Value::Real(r)) => p.set_raw_number(*r),
        Some(v) => {
            let text = crate::types::to_text(v)?;
            if !parse_time_value(text.as_bytes(), &mut p, now) {
                return None;
            }
        }
    }
    for (i, m) in args.iter().enumerate().skip(1) {
        let text = crate::types::to_text(m)?;
        if !modify(text.as_bytes(), &mut p, i) {
            return None;
        }
    }
    p.compute_jd();
    if p.error || !(0..=MAX_JD).contains(&p.jd) {
        return None;
    }
    if args.len() == 1 && p.valid_ymd && p.d > 28 {
        // A YYYY-MM-DD past the month's end is read as the days after it: 02-31 is 03-03.
        p.valid_ymd = false;
    }
    Some(p)
}

fn ymd(p: &Moment) -> String {
    let sign = if p.y < 0 { "-" } else { "" };
    format!("{sign}{:04}-{:02}-{:02}", p.y.abs() % 10000, p.mo, p.d)
}

fn hms(p: &Moment) -> String {
    if p.subsec {
        let s = (1000.0 * p.s + 0.5) as i32;
        format!("{:02}:{:02}:{:02}.{:03}", p.h, p.mi, s / 1000, s % 1000)
    } else {
        format!("{:02}:{:02}:{:02}", p.h, p.mi, p.s as i32)
    }
}

/// Which function: see [`call`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateFn {
    Date,
    Time,
    DateTime,
    JulianDay,
    UnixEpoch,
    Strftime,
}

/// Runs `f` over its arguments; `now` gives the statement's current time in Unix ms.
pub fn call(f: DateFn, args: &[Value], now: &mut dyn FnMut() -> i64) -> Value {
    let (fmt, args) = match f {
        DateFn::Strftime => match args.split_first() {
            None | Some((Value::Null, _)) => return Value::Null,
            Some((fmt, rest)) => match crate::types::to_text(fmt) {
                Some(fmt) => (fmt, rest),
                None => return Value::Null,
            },
        },
        _ => (String::new(), args),
    };
    let Some(mut p) = moment(args, now) else {
        return Value::Null;
    };
    match f {
        DateFn::Date => {
            p.compute_ymd();
            Value::Text(ymd(&p))
        }
        DateFn::Time => {
            p.compute_hms();
            Value::Text(hms(&p))
        }
        DateFn::DateTime => {
            p.compute_ymd_hms();
            Value::Text(format!("{} {}", ymd(&p), hms(&p)))
        }
        DateFn::JulianDay => Value::Real(p.jd as f64 / DAY as f64),
        DateFn::UnixEpoch => {
            if p.subsec {
                Value::Real((p.jd - UNIX_EPOCH_JD_MS) as f64 / 1000.0)
            } else {
                Value::Integer(p.jd / 1000 - UNIX_EPOCH_JD_MS / 1000)
            }
        }
        DateFn::Strftime => strftime(&fmt, p).map_or(Value::Null, Value::Text),
    }
}

fn days_after_jan01(p: &Moment) -> i64 {
    let mut jan01 = *p;
    jan01.valid_jd = false;
    jan01.mo = 1;
    jan01.d = 1;
    jan01.compute_jd();
    (p.jd - jan01.jd + 43_200_000) / DAY
}

fn days_after_monday(p: &Moment) -> i64 {
    ((p.jd + 43_200_000) / DAY) % 7
}

fn days_after_sunday(p: &Moment) -> i64 {
    ((p.jd + 129_600_000) / DAY) % 7
}

/// The ISO 8601 week-based year's moment: the Thursday of `p`'s week.
fn thursday(p: &Moment) -> Moment {
    let mut y = *p;
    y.jd += (3 - days_after_monday(p)) * DAY;
    y.valid_ymd = false;
    y.compute_ymd();
    y
}

/// C's `%.16g`: 16 significant digits, trailing zeros dropped (the digits from
/// `num::exp_digits`: no float formatting of Rust's in the module).
fn g16(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    let (digits, exp) = cairn_value::num::exp_digits(x, 16);
    let trim = |int: &str, frac: &str| {
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            format!("{sign}{int}")
        } else {
            format!("{sign}{int}.{frac}")
        }
    };
    if !(-4..16).contains(&exp) {
        let m = trim(&digits[..1], &digits[1..]);
        return format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    if exp >= 0 {
        let at = exp as usize + 1;
        trim(&digits[..at], &digits[at..])
    } else {
        let zeros = "0".repeat((-exp - 1) as usize);
        trim("0", &format!("{zeros}{digits}"))
    }
}

/// `ms` milliseconds as seconds with three decimals (`-1.500`).
fn millis(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    format!("{sign}{}.{:03}", ms.abs() / 1000, ms.abs() % 1000)
}

fn strftime(fmt: &str, mut p: Moment) -> Option<String> {
    use std::fmt::Write;
    p.compute_jd();
    p.compute_ymd_hms();
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let _ = match chars.next()? {
            'd' => write!(out, "{:02}", p.d),
            'e' => write!(out, "{:2}", p.d),
            'f' => {
                let ms = (p.s.min(59.999) * 1000.0).round() as i64;
                write!(out, "{:02}.{:03}", ms / 1000, ms % 1000)
            }
            'F' => write!(out, "{:04}-{:02}-{:02}", p.y, p.mo, p.d),
            'G' => write!(out, "{:04}", thursday(&p).y),
            'g' => write!(out, "{:02}", thursday(&p).y % 100),
            'H' => write!(out, "{:02}", p.h),
            'k' => write!(out, "{:2}", p.h),
            c @ ('I' | 'l') => {
                let h = match p.h {
                    0 => 12,
                    h if h > 12 => h - 12,
                    h => h,
                };
                if c == 'I' {
                    write!(out, "{h:02}")
                } else {
                    write!(out, "{h:2}")
                }
            }
            'j' => write!(out, "{:03}", days_after_jan01(&p) + 1),
            'J' => write!(out, "{}", g16(p.jd as f64 / DAY as f64)),
            'm' => write!(out, "{:02}", p.mo),
            'M' => write!(out, "{:02}", p.mi),
            'p' => write!(out, "{}", if p.h >= 12 { "PM" } else { "AM" }),
            'P' => write!(out, "{}", if p.h >= 12 { "pm" } else { "am" }),
            'R' => write!(out, "{:02}:{:02}", p.h, p.mi),
            's' => {
                if p.subsec {
                    write!(out, "{}", millis(p.jd - UNIX_EPOCH_JD_MS))
                } else {
                    write!(out, "{}", p.jd / 1000 - UNIX_EPOCH_JD_MS / 1000)
                }
            }
            'S' => write!(out, "{:02}", p.s as i32),
            'T' => write!(out, "{:02}:{:02}:{:02}", p.h, p.mi, p.s as i32),
            'u' => {
                let d = days_after_sunday(&p);
                write!(out, "{}", if d == 0 { 7 } else { d })
            }
            'w' => write!(out, "{}", days_after_sunday(&p)),
            'U' => write!(
                out,
                "{:02}",
                (days_after_jan01(&p) - days_after_sunday(&p) + 7) / 7
            ),
            'V' => write!(out, "{:02}", days_after_jan01(&thursday(&p)) / 7 + 1),
            'W' => write!(
                out,
                "{:02}",
                (days_after_jan01(&p) - days_after_monday(&p) + 7) / 7
            ),
            'Y' => write!(out, "{:04}", p.y),
            '%' => write!(out, "%"),
            _ => return None,
        };
    }
    Some(out)
}
