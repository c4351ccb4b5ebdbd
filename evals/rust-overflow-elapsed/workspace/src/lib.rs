//! Timing of requests from the timestamps clients report.

/// Milliseconds from `start` to `end`; 0 when the client's clock went backwards.
pub fn elapsed_ms(start: u64, end: u64) -> u64 {
    end - start
}

/// The slowest of `spans` (start, end), in milliseconds.
pub fn slowest(spans: &[(u64, u64)]) -> u64 {
    spans.iter().map(|&(start, end)| elapsed_ms(start, end)).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward() {
        assert_eq!(elapsed_ms(100, 250), 150);
    }

    #[test]
    fn a_clock_that_went_backwards() {
        assert_eq!(elapsed_ms(300, 200), 0);
    }
}
