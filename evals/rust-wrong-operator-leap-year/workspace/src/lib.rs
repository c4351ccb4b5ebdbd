//! Calendar arithmetic for a billing cycle.

/// Gregorian leap years: every fourth year, but not centuries, except every 400th.
pub fn is_leap_year(year: u32) -> bool {
    year % 4 == 0 && year % 100 != 0 && year % 400 == 0
}

/// Days in `month` (1-12) of `year`.
pub fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn february() {
        assert_eq!(days_in_month(2023, 2), 28);
        assert_eq!(days_in_month(2024, 2), 29);
    }
}
