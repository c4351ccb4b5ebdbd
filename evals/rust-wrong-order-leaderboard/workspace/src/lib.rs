//! The leaderboard of a quiz.

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub score: u32,
}

/// The entries from the highest score down; equal scores keep their order.
pub fn ranked(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_by(|a, b| a.score.cmp(&b.score));
    entries
}

/// The names of the `n` best.
pub fn podium(entries: Vec<Entry>, n: usize) -> Vec<String> {
    ranked(entries).into_iter().take(n).map(|e| e.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, score: u32) -> Entry {
        Entry { name: name.to_string(), score }
    }

    #[test]
    fn the_best_come_first() {
        let entries = vec![entry("ann", 3), entry("bob", 9), entry("cy", 5)];
        assert_eq!(podium(entries, 2), ["bob", "cy"]);
    }
}
