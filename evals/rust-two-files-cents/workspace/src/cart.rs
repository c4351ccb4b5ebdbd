//! The total of a receipt's lines.

use crate::money::parse_cents;

/// The sum of the prices at the end of `lines` (`"coffee 3.5"`), in cents;
/// `None` when a price does not parse.
pub fn receipt_total(lines: &[&str]) -> Option<u64> {
    let mut total = 0;
    for line in lines {
        let price = line.rsplit(' ').next()?;
        total += parse_cents(price)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_prices() {
        assert_eq!(receipt_total(&["coffee 3.5", "bagel 2.25"]), Some(575));
    }
}
