//! Pagination of a listing.

/// Pages needed to show `total` items, `per_page` to a page.
pub fn page_count(total: usize, per_page: usize) -> usize {
    assert!(per_page > 0, "per_page must be positive");
    total / per_page + 1
}

/// The indices of the items on page `page` (0-based).
pub fn page_range(page: usize, total: usize, per_page: usize) -> std::ops::Range<usize> {
    let start = (page * per_page).min(total);
    start..(start + per_page).min(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_last_page_counts() {
        assert_eq!(page_count(25, 10), 3);
    }

    #[test]
    fn full_pages_only() {
        assert_eq!(page_count(20, 10), 2);
    }

    #[test]
    fn the_last_page_is_short() {
        assert_eq!(page_range(2, 25, 10), 20..25);
    }
}
