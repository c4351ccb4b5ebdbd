//! Settings passed as `key=value` pairs on one line (`"mode=fast; level=3"`).

use std::collections::BTreeMap;

/// The pairs of `line`, separated by `;`; a piece without `=` is skipped.
pub fn parse_pairs(line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pair in line.split(',') {
        if let Some((key, value)) = pair.split_once('=') {
            out.insert(key.trim().to_string(), value.trim().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_pairs() {
        let pairs = parse_pairs("mode=fast; level=3");
        assert_eq!(pairs.get("level").map(String::as_str), Some("3"));
    }
}
