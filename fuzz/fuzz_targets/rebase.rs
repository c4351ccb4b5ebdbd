//! `workspace::rebase` with arbitrary hunks and user changes.
//!
//! Offsets are anything (past the end, inside a UTF-8 char, reversed). The
//! checks follow the module documentation of `workspace::rebase`:
//!
//! - no input panics;
//! - every input hunk ends up in exactly one of `hunks` / `conflicts`,
//!   conflicts carry the hunk as proposed, in sorted input order;
//! - `hunks` are sorted, non-overlapping, on char boundaries of the current
//!   text (the changes applied with the documented normalisation), so they
//!   apply to it;
//! - the classification is the documented rule (overlap with an earlier hunk
//!   of the proposal, or touched by a change), computed here independently;
//! - both orders agree: `apply_hunks(current, rebased.hunks)` equals taking
//!   the accepted hunks first and then the user's changes shifted by the
//!   growth of the accepted hunks before them;
//! - with no change, valid hunks come back unchanged.

#![no_main]

use agentfix::workspace::{Edit, apply_hunks, rebase};
use arbitrary::Arbitrary;
use common::Piece;
use libfuzzer_sys::fuzz_target;

mod common;

fn text_of(pieces: &[Piece]) -> String {
    common::text_of(pieces, 26)
}

/// An offset: mostly inside the text, sometimes anything.
#[derive(Debug, Arbitrary, Clone, Copy)]
enum Off {
    In(u16),
    Any(usize),
    Max,
}

impl Off {
    fn get(self, len: usize) -> usize {
        match self {
            Off::In(n) => n as usize % (len + 2),
            Off::Any(n) => n,
            Off::Max => usize::MAX,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct FuzzHunk {
    start: Off,
    end: Off,
    text: Vec<Piece>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    base: Vec<Piece>,
    hunks: Vec<FuzzHunk>,
    /// Each change's offsets are taken against the text before it.
    changes: Vec<FuzzHunk>,
}

fn norm(text: &str, a: usize, b: usize) -> (usize, usize) {
    let (a, b) = if a > b { (b, a) } else { (a, b) };
    (text.floor_char_boundary(a.min(text.len())), text.floor_char_boundary(b.min(text.len())))
}

/// The documented "touches" rule.
fn touches(start: usize, end: usize, hs: usize, he: usize) -> bool {
    (start < he && hs < end) || (start == end && hs <= start && start <= he) || (hs == he && start <= hs && hs <= end)
}

fuzz_target!(|input: Input| {
    let base = text_of(&input.base);
    let hunks: Vec<Edit> = input
        .hunks
        .iter()
        .take(32)
        .map(|h| Edit { start: h.start.get(base.len()), end: h.end.get(base.len()), text: text_of(&h.text) })
        .collect();
    // The changes, with offsets drawn against the text just before each.
    let mut changes = Vec::new();
    let mut current = base.clone();
    let mut normalised_changes = Vec::new();
    for c in input.changes.iter().take(32) {
        let ch = Edit { start: c.start.get(current.len()), end: c.end.get(current.len()), text: text_of(&c.text) };
        let (s, e) = norm(&current, ch.start, ch.end);
        current.replace_range(s..e, &ch.text);
        normalised_changes.push((s, e, ch.text.clone()));
        changes.push(ch);
    }

    let r = rebase(&base, &hunks, &changes);

    // Every hunk in exactly one list.
    assert_eq!(r.hunks.len() + r.conflicts.len(), hunks.len(), "hunks lost or duplicated");

    // The output hunks apply to the current text.
    let mut prev_end = 0;
    for h in &r.hunks {
        assert!(h.start <= h.end, "reversed output hunk {h:?}");
        assert!(h.end <= current.len(), "output hunk past the end of the current text: {h:?}, {} bytes", current.len());
        assert!(
            current.is_char_boundary(h.start) && current.is_char_boundary(h.end),
            "output hunk not on char boundaries: {h:?}"
        );
        assert!(h.start >= prev_end, "output hunks overlap or are unsorted: {:?}", r.hunks);
        prev_end = h.end;
    }
    let rebased_text = apply_hunks(&current, &r.hunks);

    // The documented algorithm, independently: (index, start, end) on base.
    let mut tracked: Vec<(usize, usize, usize)> = hunks
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let (s, e) = norm(&base, h.start, h.end);
            (i, s, e)
        })
        .collect();
    tracked.sort_by_key(|t| (t.1, t.2));
    let mut conflict = vec![false; hunks.len()];
    let mut kept_end = 0;
    for t in &tracked {
        if t.1 < kept_end {
            conflict[t.0] = true;
        } else {
            kept_end = t.2;
        }
    }
    // Pass 1, the classification: a change touching a live hunk makes it a
    // conflict; live hunks after the change shift.
    let mut pos: Vec<(usize, usize, usize)> = tracked.clone(); // on T(i-1)
    for (s, e, text) in &normalised_changes {
        let (s, e) = (*s, *e);
        let delta = text.len() as isize - (e - s) as isize;
        for p in pos.iter_mut() {
            if conflict[p.0] {
                continue;
            }
            if touches(s, e, p.1, p.2) {
                conflict[p.0] = true;
            } else if p.1 >= e {
                p.1 = (p.1 as isize + delta) as usize;
                p.2 = (p.2 as isize + delta) as usize;
            }
        }
    }
    // Pass 2, both orders: the accepted hunks first (text `m`), then each
    // user change shifted by the growth of the accepted hunks before it.
    {
        let mut pos2: Vec<(usize, usize, usize)> = tracked.iter().copied().filter(|t| !conflict[t.0]).collect();
        let mut m = apply_hunks(
            &base,
            &pos2.iter().map(|t| Edit { start: t.1, end: t.2, text: hunks[t.0].text.clone() }).collect::<Vec<_>>(),
        );
        for (s, e, text) in &normalised_changes {
            let (s, e) = (*s, *e);
            let mut growth: isize = 0;
            for p in &pos2 {
                assert!(!touches(s, e, p.1, p.2), "an accepted hunk is touched by a change");
                if p.2 <= s {
                    growth += hunks[p.0].text.len() as isize - (p.2 - p.1) as isize;
                }
            }
            let (ms, me) = ((s as isize + growth) as usize, (e as isize + growth) as usize);
            assert!(m.is_char_boundary(ms) && m.is_char_boundary(me), "shifted change off char boundaries");
            m.replace_range(ms..me, text);
            let delta = text.len() as isize - (e - s) as isize;
            for p in pos2.iter_mut() {
                if p.1 >= e {
                    p.1 = (p.1 as isize + delta) as usize;
                    p.2 = (p.2 as isize + delta) as usize;
                }
            }
        }
        assert_eq!(rebased_text, m, "the two orders of applying disagree");
        let expected: Vec<Edit> =
            pos2.iter().map(|t| Edit { start: t.1, end: t.2, text: hunks[t.0].text.clone() }).collect();
        assert_eq!(r.hunks, expected, "rebased hunks differ from the documented algorithm");
    }

    // Conflicts: as proposed, in sorted input order.
    let expected_conflicts: Vec<&Edit> = tracked.iter().filter(|t| conflict[t.0]).map(|t| &hunks[t.0]).collect();
    let got: Vec<&Edit> = r.conflicts.iter().map(|c| &c.hunk).collect();
    assert_eq!(got, expected_conflicts, "conflicts differ from the documented rule");
    for c in &r.conflicts {
        assert!(c.reason.contains("line"), "a conflict reason names lines: {}", c.reason);
    }

    // No change: valid hunks come back unchanged.
    if changes.is_empty() && r.conflicts.is_empty() {
        let valid = hunks.iter().all(|h| {
            h.start <= h.end && h.end <= base.len() && base.is_char_boundary(h.start) && base.is_char_boundary(h.end)
        });
        if valid {
            let mut sorted = hunks.clone();
            sorted.sort_by_key(|h| (h.start, h.end));
            assert_eq!(r.hunks, sorted);
        }
    }
});
