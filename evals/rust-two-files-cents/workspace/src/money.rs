//! Amounts of money in cents.

/// `"12.5"` -> 1250, `"3"` -> 300, `"0.07"` -> 7; `None` for anything else.
pub fn parse_cents(text: &str) -> Option<u64> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = fraction.parse().ok()?;
    if fraction >= 100 {
        return None;
    }
    Some(whole * 100 + fraction)
}
