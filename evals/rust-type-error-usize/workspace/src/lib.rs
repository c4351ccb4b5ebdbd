//! Word statistics of a document.

/// How many of `words` have at least `min` characters.
pub fn count_long(words: &[&str], min: u32) -> u32 {
    words.iter().filter(|w| w.chars().count() >= min).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_long_words() {
        assert_eq!(count_long(&["a", "abc", "abcd"], 3), 2);
    }
}
