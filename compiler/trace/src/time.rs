//! Event times (RFC 3339 UTC, as the control plane writes them) as
//! milliseconds since the Unix epoch.

/// `2026-01-01T00:00:00.000Z` → milliseconds since 1970. `None` for
/// another form (an offset other than `Z`, a date out of range).
pub fn millis(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || !text.ends_with('Z') {
        return None;
    }
    let num = |from: usize, to: usize| text.get(from..to)?.parse::<u64>().ok();
    let (year, month, day) = (num(0, 4)? as i64, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let fraction = &text[19..text.len() - 1];
    let ms = match fraction.strip_prefix('.') {
        None if fraction.is_empty() => 0,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|d| d.is_ascii_digit()) => {
            let first3: String = digits.chars().chain("000".chars()).take(3).collect();
            first3.parse::<u64>().ok()?
        }
        _ => return None,
    };
    let days = days_from_civil(year, month as i64, day as i64);
    let secs = u64::try_from(days).ok()? * 86_400 + hour * 3600 + minute * 60 + second;
    Some(secs * 1000 + ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_back_to_the_millisecond() {
        assert_eq!(millis("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(millis("2026-01-01T00:00:00.000Z"), Some(1_767_225_600_000));
        assert_eq!(millis("2024-02-29T23:59:59.5Z"), Some(1_709_251_199_500));
        assert_eq!(millis("2024-02-29T23:59:59Z"), Some(1_709_251_199_000));
        assert_eq!(millis("2024-02-29T23:59:59.123456Z"), Some(1_709_251_199_123));
        assert_eq!(millis("2024-02-29T23:59:59+01:00"), None);
        assert_eq!(millis("yesterday"), None);
    }
}
