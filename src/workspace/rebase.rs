//! Carries an agent's proposal over the edits the user made while the agent
//! was working.
//!
//! An agent run reads a buffer (the *base*, at some version) and proposes
//! hunks ([`Edit`]s on the base) against it. Meanwhile the editor keeps
//! sending the user's changes, in order, each an [`Edit`] on the text as it
//! was just before that change. [`rebase`] moves every hunk the user did not touch onto the
//! user's current text and reports every hunk the user did touch as a
//! [`Conflict`], so that the user's typing is never overwritten and no edit is
//! ever sent against stale text.
//!
//! # Algorithm
//!
//! The hunks are transformed forward through the changes, one change at a
//! time. Each live hunk carries its range on the text as it is after the
//! changes seen so far (at first, its range on the base). For a change that
//! replaces `start..end` of that text with `text`:
//!
//! - a hunk *touched* by the change becomes a conflict and is dropped from the
//!   rest of the walk;
//! - a hunk entirely before it (`hunk.end <= start`) keeps its range;
//! - a hunk entirely after it (`hunk.start >= end`) shifts by
//!   `text.len() - (end - start)`.
//!
//! A change *touches* a hunk when their ranges overlap, or when either of them
//! is an insertion (an empty range) at the other's boundary or inside it:
//!
//! ```text
//! (start < hunk.end && hunk.start < end)
//!     || (start == end && hunk.start <= start && start <= hunk.end)
//!     || (hunk.start == hunk.end && start <= hunk.start && hunk.start <= end)
//! ```
//!
//! An insertion exactly at a hunk's start or end is ambiguous (does the typed
//! text go before or after the agent's?), so it is a conflict. Two non-empty
//! ranges that only meet at a point do not touch. Every other pair of ranges
//! is either before or after, so this is exactly "the change, mapped back
//! into base coordinates, overlaps or abuts the hunk": because a hunk that
//! survived the earlier changes still covers the same base bytes, comparing in
//! current coordinates is mapping each change back through all the earlier
//! ones, including a change made inside text that an earlier change inserted
//! (that text lies outside every surviving hunk).
//!
//! A shifted hunk's ends stay on char boundaries: the bytes at and after a
//! shifted boundary are the base's own bytes, unchanged.
//!
//! # Normalisation
//!
//! No input panics. A range with `start > end` is swapped; offsets past the
//! end of the text are clamped to its length; an offset inside a UTF-8
//! character moves back to that character's start. Hunks are normalised on the
//! base, each change on the text as it is just before it (tracked in a rope, so
//! a long typing session stays cheap). The hunks are then stably sorted by
//! `(start, end)`; a hunk that overlaps an earlier one of the same proposal is
//! a conflict too. Two insertions at the same point keep their order.
//!
//! # Line breaks
//!
//! LSP counts `\r\n` as one line break, so no position names the point
//! between its `\r` and its `\n`. A change next to a hunk can create one
//! there: the base `"\r漢"`, a hunk deleting the `\r`, and the user replacing
//! `漢` with `\n` leave the hunk ending inside `"\r\n"`, where an editor would
//! clamp the edit to the wrong place. A surviving hunk with a boundary that
//! splits a CRLF on the current text but did not on the base is a conflict
//! (the change meets the hunk there, so the user's typing is next to it).
//! Hunks that split a CRLF on the base already are the caller's business; the
//! line diff never makes them.
//!
//! # Output
//!
//! [`Rebased::hunks`] are on the current text, sorted and non-overlapping, in
//! the order of the (sorted) input, each with its original `text`.
//! [`Rebased::conflicts`] carry the hunks exactly as proposed, in the same
//! order, with a reason naming the 1-based base lines the user edited. Every
//! input hunk ends up in exactly one of the two. With no change at all, valid
//! hunks come back unchanged.
//!
//! # Both orders agree
//!
//! Let `accepted` be the input hunks not reported as conflicts (on the base),
//! `A = apply_hunks(base, accepted)`, `T0 = base`, `Ti` the text after the
//! user's change `ci`, and `current = Tn`. No `ci` touches an accepted hunk,
//! so on `T(i-1)` every accepted hunk lies entirely before or entirely after
//! `ci`. Let `ci'` be `ci` with both offsets increased by the net growth
//! (`text.len() - (end - start)`) of the accepted hunks that lie
//! before it. Then
//!
//! ```text
//! apply_hunks(current, &rebased.hunks) == cn'( ... c2'(c1'(A)) ... )
//! ```
//!
//! i.e. taking the agent's accepted hunks first and then the user's changes
//! gives the same text as taking the user's changes first and then the rebased
//! hunks. The tests check this against a character-level model that tags every
//! char with its origin and replays the user's changes onto `A` both by those
//! shifted offsets and by char identity, independently of this code.

use ropey::Rope;

use super::diff::Edit;

/// An agent hunk that could not be carried over the user's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The hunk as proposed, on the base text.
    pub hunk: Edit,
    /// Why, e.g. "the user edited lines 3-4 while the agent was working"
    /// (1-based lines of the base).
    pub reason: String,
}

/// The hunks that survived the user's changes, and those that did not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rebased {
    /// On the user's current text: sorted, non-overlapping.
    pub hunks: Vec<Edit>,
    pub conflicts: Vec<Conflict>,
}

/// One input hunk on its way through the changes.
struct Tracked<'a> {
    /// As proposed.
    hunk: &'a Edit,
    /// Normalised, on the base.
    base_start: usize,
    /// On the text after the changes seen so far.
    start: usize,
    end: usize,
    conflict: Option<String>,
}

/// Carries `hunks` (on `base`) over `changes` (applied to `base` in order).
///
/// See the module documentation for the rules and the guarantees.
pub fn rebase(base: &str, hunks: &[Edit], changes: &[Edit]) -> Rebased {
    let mut tracked: Vec<Tracked> = hunks
        .iter()
        .map(|hunk| {
            let (start, end) = normalise_in_str(base, hunk.start, hunk.end);
            Tracked { hunk, base_start: start, start, end, conflict: None }
        })
        .collect();
    tracked.sort_by_key(|t| (t.start, t.end));

    let mut kept_end = 0;
    for t in &mut tracked {
        if t.start < kept_end {
            let line = line_of(base, t.start);
            t.conflict = Some(format!("the hunk at line {line} overlaps another hunk of the same proposal"));
        } else {
            kept_end = t.end;
        }
    }

    if !changes.is_empty() {
        let mut current = Rope::from_str(base);
        for change in changes {
            let (start, end) = normalise_in_rope(&current, change.start, change.end);
            let removed = end - start;
            let added = change.text.len();
            for t in tracked.iter_mut().filter(|t| t.conflict.is_none()) {
                if touches(start, end, t.start, t.end) {
                    t.conflict = Some(reason(base, t, start, end));
                } else if t.start >= end {
                    t.start = t.start - removed + added;
                    t.end = t.end - removed + added;
                }
            }
            let start_char = current.byte_to_char(start);
            let end_char = current.byte_to_char(end);
            current.remove(start_char..end_char);
            current.insert(start_char, &change.text);
        }

        // A boundary the user's typing put between a `\r` and its `\n`.
        let current_bytes = |i: usize| current.byte(i);
        for t in tracked.iter_mut().filter(|t| t.conflict.is_none()) {
            let base_end = t.base_start + (t.end - t.start);
            let now_at_start = splits_crlf(current.len_bytes(), current_bytes, t.start);
            let now = now_at_start || splits_crlf(current.len_bytes(), current_bytes, t.end);
            let base_byte = |i: usize| base.as_bytes()[i];
            let before =
                splits_crlf(base.len(), base_byte, t.base_start) || splits_crlf(base.len(), base_byte, base_end);
            if now && !before {
                let line = line_of(base, if now_at_start { t.base_start } else { base_end });
                t.conflict = Some(format!(
                    "the user's edit next to line {line} made a line break across the hunk while the agent was working"
                ));
            }
        }
    }

    let mut out = Rebased::default();
    for t in tracked {
        match t.conflict {
            Some(reason) => out.conflicts.push(Conflict { hunk: t.hunk.clone(), reason }),
            None => out.hunks.push(Edit { start: t.start, end: t.end, text: t.hunk.text.clone() }),
        }
    }
    out
}

/// Whether byte `offset` of a text of `len` bytes read through `byte` lies
/// between the `\r` and the `\n` of a CRLF: no LSP position names that point
/// (the line break is one unit).
fn splits_crlf(len: usize, byte: impl Fn(usize) -> u8, offset: usize) -> bool {
    offset > 0 && offset < len && byte(offset - 1) == b'\r' && byte(offset) == b'\n'
}

/// Whether the change `start..end` touches the hunk `hunk_start..hunk_end`
/// (both on the same text): overlap, or an insertion at the other's boundary
/// or inside it.
fn touches(start: usize, end: usize, hunk_start: usize, hunk_end: usize) -> bool {
    (start < hunk_end && hunk_start < end)
        || (start == end && hunk_start <= start && start <= hunk_end)
        || (hunk_start == hunk_end && start <= hunk_start && hunk_start <= end)
}

/// The conflict's reason: the base lines where the change met the hunk.
fn reason(base: &str, t: &Tracked, start: usize, end: usize) -> String {
    // Where the change meets the hunk, on the current text; inside the hunk,
    // current and base differ by a constant offset.
    let lo = start.clamp(t.start, t.end);
    let hi = end.clamp(lo, t.end);
    let base_lo = t.base_start + (lo - t.start);
    let base_hi = t.base_start + (hi - t.start);
    let first = line_of(base, base_lo);
    let last = if base_hi > base_lo { line_of(base, base_hi - 1) } else { first };
    if first == last {
        format!("the user edited line {first} while the agent was working")
    } else {
        format!("the user edited lines {first}-{last} while the agent was working")
    }
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1
}

/// `a..b` ordered, clamped to `text` and moved back to char boundaries.
fn normalise_in_str(text: &str, a: usize, b: usize) -> (usize, usize) {
    let (a, b) = if a > b { (b, a) } else { (a, b) };
    (text.floor_char_boundary(a), text.floor_char_boundary(b))
}

/// `a..b` ordered, clamped to `text` and moved back to char boundaries.
fn normalise_in_rope(text: &Rope, a: usize, b: usize) -> (usize, usize) {
    let (a, b) = if a > b { (b, a) } else { (a, b) };
    let len = text.len_bytes();
    let floor = |i: usize| text.char_to_byte(text.byte_to_char(i.min(len)));
    (floor(a), floor(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::apply_hunks;

    fn hunk(start: usize, end: usize, text: &str) -> Edit {
        Edit { start, end, text: text.to_string() }
    }

    fn change(start: usize, end: usize, text: &str) -> Edit {
        Edit { start, end, text: text.to_string() }
    }

    /// The changes applied in order (test inputs are on char boundaries).
    fn apply_changes(base: &str, changes: &[Edit]) -> String {
        let mut text = base.to_string();
        for c in changes {
            text.replace_range(c.start..c.end, &c.text);
        }
        text
    }

    #[test]
    fn no_change_returns_the_hunks_as_they_are() {
        let base = "a\nb\nc\nd\n";
        let hs = vec![hunk(0, 2, "A\n"), hunk(4, 4, "new\n"), hunk(6, 8, "")];
        let r = rebase(base, &hs, &[]);
        assert_eq!(r, Rebased { hunks: hs, conflicts: vec![] });
    }

    #[test]
    fn hunk_before_the_user_edit_stays() {
        let base = "one\ntwo\nthree\n";
        let hs = [hunk(0, 4, "ONE\n")];
        let changes = [change(8, 13, "3")];
        let r = rebase(base, &hs, &changes);
        assert!(r.conflicts.is_empty());
        assert_eq!(r.hunks, vec![hunk(0, 4, "ONE\n")]);
        assert_eq!(apply_hunks(&apply_changes(base, &changes), &r.hunks), "ONE\ntwo\n3\n");
    }

    #[test]
    fn hunk_after_the_user_edit_shifts() {
        let base = "one\ntwo\nthree\n";
        let hs = [hunk(8, 14, "THREE\n")];
        let changes = [change(0, 3, "uno, one")];
        let r = rebase(base, &hs, &changes);
        assert!(r.conflicts.is_empty());
        assert_eq!(r.hunks, vec![hunk(13, 19, "THREE\n")]);
        assert_eq!(apply_hunks(&apply_changes(base, &changes), &r.hunks), "uno, one\ntwo\nTHREE\n");
    }

    #[test]
    fn hunk_around_the_user_edit_conflicts_and_names_the_lines() {
        let base = "a\nb\nc\nd\ne\n";
        let hs = [hunk(2, 8, "B\nC\nD\n"), hunk(8, 10, "E\n")];
        // The user retypes "c" on line 3, inside the first hunk.
        let r = rebase(base, &hs, &[change(4, 5, "see")]);
        assert_eq!(r.conflicts.len(), 1);
        assert_eq!(r.conflicts[0].hunk, hs[0]);
        assert_eq!(r.conflicts[0].reason, "the user edited line 3 while the agent was working");
        assert_eq!(r.hunks, vec![hunk(10, 12, "E\n")]);
        // A user edit over lines 3-4 of the base.
        let r = rebase(base, &hs, &[change(4, 8, "x\n")]);
        assert_eq!(r.conflicts[0].reason, "the user edited lines 3-4 while the agent was working");
    }

    #[test]
    fn user_edit_inside_the_hunk_maps_through_earlier_changes() {
        let base = "a\nb\nc\nd\n";
        let hs = [hunk(4, 6, "C\n")];
        // Two lines typed at the top, then line 3 of the base (now line 5) edited.
        let r = rebase(base, &hs, &[change(0, 0, "x\ny\n"), change(8, 9, "!")]);
        assert!(r.hunks.is_empty());
        assert_eq!(r.conflicts[0].reason, "the user edited line 3 while the agent was working");
    }

    #[test]
    fn user_edit_across_the_hunk_conflicts() {
        let base = "0123456789";
        let hs = [hunk(3, 6, "xyz")];
        for (s, e) in [(0, 4), (5, 9), (2, 7), (4, 5), (3, 6)] {
            let r = rebase(base, &hs, &[change(s, e, "")]);
            assert_eq!(r.conflicts.len(), 1, "{s}..{e}");
            assert!(r.hunks.is_empty());
        }
    }

    #[test]
    fn insertion_at_a_hunk_boundary_conflicts() {
        let base = "0123456789";
        let hs = [hunk(3, 6, "xyz")];
        for at in [3, 4, 6] {
            let r = rebase(base, &hs, &[change(at, at, "!")]);
            assert_eq!(r.conflicts.len(), 1, "insertion at {at}");
        }
        for at in [2, 7] {
            let r = rebase(base, &hs, &[change(at, at, "!")]);
            assert!(r.conflicts.is_empty(), "insertion at {at}");
        }
    }

    #[test]
    fn adjacent_replacements_do_not_conflict() {
        let base = "0123456789";
        let hs = [hunk(3, 6, "xyz")];
        let changes = [change(0, 3, "AB"), change(5, 7, "CDE")];
        let r = rebase(base, &hs, &changes);
        assert!(r.conflicts.is_empty());
        assert_eq!(r.hunks, vec![hunk(2, 5, "xyz")]);
        assert_eq!(apply_hunks(&apply_changes(base, &changes), &r.hunks), "ABxyzCDE89");
    }

    #[test]
    fn user_inserts_then_deletes_their_own_text() {
        let base = "fn a() {}\nfn b() {}\nfn c() {}\n";
        let hs = [hunk(0, 10, "fn a() { 1 }\n"), hunk(20, 30, "fn c() { 3 }\n")];
        // Typed " hi there" inside line 2, then deleted " there", then " hi".
        let changes = [change(12, 12, " hi there"), change(15, 21, ""), change(12, 15, "")];
        let r = rebase(base, &hs, &changes);
        assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
        assert_eq!(r.hunks, hs.to_vec());
        assert_eq!(apply_hunks(&apply_changes(base, &changes), &r.hunks), "fn a() { 1 }\nfn b() {}\nfn c() { 3 }\n");
    }

    #[test]
    fn user_insertion_then_deletion_after_the_hunk_shifts_back() {
        let base = "abc\ndef\n";
        let hs = [hunk(4, 8, "DEF\n")];
        let changes = [change(1, 1, "XYZ"), change(2, 3, ""), change(1, 3, "")];
        let r = rebase(base, &hs, &changes);
        assert_eq!(r.hunks, vec![hunk(4, 8, "DEF\n")]);
    }

    #[test]
    fn cjk_emoji_and_crlf() {
        let base = "漢字\r\n😀 smile\r\nかな\r\n";
        let line2 = "漢字\r\n".len();
        let line3 = line2 + "😀 smile\r\n".len();
        let hs = [hunk(0, line2, "中文\r\n"), hunk(line3, base.len(), "カナ\r\n")];
        // The user replaces the emoji on line 2 with another.
        let changes = [change(line2, line2 + 4, "🦀🦀")];
        let r = rebase(base, &hs, &changes);
        assert!(r.conflicts.is_empty());
        let current = apply_changes(base, &changes);
        assert_eq!(apply_hunks(&current, &r.hunks), "中文\r\n🦀🦀 smile\r\nカナ\r\n");
        // The user edits inside "かな" (line 3).
        let r = rebase(base, &hs, &[change(line3 + 3, line3 + 6, "ナ")]);
        assert_eq!(r.hunks, vec![hunk(0, line2, "中文\r\n")]);
        assert_eq!(r.conflicts[0].reason, "the user edited line 3 while the agent was working");
    }

    #[test]
    fn typing_that_makes_a_crlf_across_a_hunk_boundary_conflicts() {
        // The fuzz finding: the hunk deletes a lone `\r`, the user turns the
        // next char into `\n`; the hunk would end inside the CRLF.
        let base = "\r漢";
        let r = rebase(base, &[hunk(0, 1, "")], &[change(1, 4, "\n")]);
        assert!(r.hunks.is_empty(), "{r:?}");
        assert_eq!(r.conflicts.len(), 1);
        assert!(r.conflicts[0].reason.contains("line break across the hunk"), "{}", r.conflicts[0].reason);

        // The start side: the hunk starts with `\n`, the user ends the text
        // before it with `\r`.
        let base = "ab\ncd\n";
        let r = rebase(base, &[hunk(2, 3, "")], &[change(1, 2, "\r")]);
        assert!(r.hunks.is_empty() && r.conflicts.len() == 1, "{r:?}");

        // A CRLF next to the hunk that the boundary does not split is fine.
        let base = "ab\ncd\n";
        let r = rebase(base, &[hunk(3, 6, "CD")], &[change(1, 2, "\r")]);
        assert_eq!(r.hunks, vec![hunk(3, 6, "CD")]);
    }

    #[test]
    fn offsets_inside_a_char_or_past_the_end_are_normalised() {
        let base = "é😀z";
        // A hunk from inside "é" to inside "😀": becomes 0..2.
        let r = rebase(base, &[hunk(1, 4, "e")], &[]);
        assert_eq!(r.hunks, vec![hunk(0, 2, "e")]);
        // A swapped range past the end: becomes 6..7 (the "z").
        let r = rebase(base, &[hunk(100, 6, "Z")], &[]);
        assert_eq!(r.hunks, vec![hunk(6, 7, "Z")]);
        // A user change inside the emoji and past the end: deletes "😀z".
        let changes = [change(99, 3, "")];
        let r = rebase(base, &[hunk(0, 2, "e")], &changes);
        assert_eq!(r.hunks, vec![hunk(0, 2, "e")]);
        // Swapped, inside a char: an insertion at 2, the hunk's end.
        let r = rebase(base, &[hunk(0, 2, "e")], &[change(3, 3, "!")]);
        assert_eq!(r.conflicts.len(), 1);
        // Nonsense everywhere must not panic.
        let r = rebase("", &[hunk(usize::MAX, 7, "x"), hunk(3, 0, "")], &[change(usize::MAX, usize::MAX, "é")]);
        assert_eq!(r.hunks.len() + r.conflicts.len(), 2);
    }

    #[test]
    fn unsorted_and_overlapping_hunks() {
        let base = "0123456789";
        let hs = [hunk(6, 8, "b"), hunk(0, 2, "a"), hunk(7, 9, "c")];
        let r = rebase(base, &hs, &[]);
        assert_eq!(r.hunks, vec![hunk(0, 2, "a"), hunk(6, 8, "b")]);
        assert_eq!(r.conflicts.len(), 1);
        assert_eq!(r.conflicts[0].hunk, hs[2]);
        assert!(r.conflicts[0].reason.contains("overlaps another hunk"), "{}", r.conflicts[0].reason);
    }

    #[test]
    fn many_changes() {
        let base: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let line_start = |i: usize| base.match_indices('\n').nth(i.wrapping_sub(1)).map_or(0, |(p, _)| p + 1);
        let hs: Vec<Edit> =
            (0..50).step_by(5).map(|i| hunk(line_start(i), line_start(i + 1), &format!("LINE {i}\n"))).collect();
        // The user types on line 3 (index 2) a character at a time, then
        // deletes some of it, and then types at the end of the file.
        let mut changes = Vec::new();
        let mut at = line_start(2);
        for ch in "hello 漢字 😀 ".chars() {
            changes.push(Edit { start: at, end: at, text: ch.to_string() });
            at += ch.len_utf8();
        }
        changes.push(change(at - 5, at, ""));
        let end = apply_changes(&base, &changes).len();
        changes.extend((end..end + 100).map(|p| change(p, p, "x")));
        let r = rebase(&base, &hs, &changes);
        assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
        let current = apply_changes(&base, &changes);
        let expected_base = apply_hunks(&base, &hs);
        let typed = "hello 漢字 ";
        let expected =
            format!("{}{typed}{}{}", &expected_base[..line_start(2)], &expected_base[line_start(2)..], "x".repeat(100));
        assert_eq!(apply_hunks(&current, &r.hunks), expected);
    }

    #[test]
    fn agent_and_user_insert_at_the_same_point() {
        let base = "a\nb\n";
        let hs = [hunk(2, 2, "new\n")];
        let r = rebase(base, &hs, &[change(2, 2, "mine\n")]);
        assert!(r.hunks.is_empty());
        assert_eq!(r.conflicts, vec![Conflict { hunk: hs[0].clone(), reason: r.conflicts[0].reason.clone() }]);
        // A deletion ending or starting there conflicts too; one a char away does not.
        assert_eq!(rebase(base, &hs, &[change(1, 2, "")]).conflicts.len(), 1);
        assert_eq!(rebase(base, &hs, &[change(2, 3, "")]).conflicts.len(), 1);
        assert_eq!(rebase(base, &hs, &[change(0, 1, "")]).hunks, vec![hunk(1, 1, "new\n")]);
    }

    #[test]
    fn two_agent_insertions_at_one_point_keep_their_order() {
        let base = "abc";
        // Unsorted: sorting puts the insertions first, in their given order.
        let hs = [hunk(1, 2, "B"), hunk(1, 1, "1"), hunk(1, 1, "2")];
        let changes = [change(2, 3, "CC"), change(4, 4, "!")];
        let r = rebase(base, &hs, &changes);
        assert!(r.conflicts.is_empty());
        assert_eq!(r.hunks, vec![hunk(1, 1, "1"), hunk(1, 1, "2"), hunk(1, 2, "B")]);
        assert_eq!(apply_hunks(&apply_changes(base, &changes), &r.hunks), "a12BCC!");
        // Typing right after "a" meets all three.
        assert_eq!(rebase(base, &hs, &[change(1, 1, "?")]).conflicts.len(), 3);
    }

    mod properties {
        //! Property tests against a character-level model: every char of the
        //! user's text carries its identity (the index of a base char, or the
        //! user change and position that typed it), so the references below
        //! never use `rebase`'s offset arithmetic.

        use proptest::collection::vec;
        use proptest::prelude::*;

        use super::super::*;
        use crate::workspace::apply_hunks;

        const PIECES: &[&str] = &["a", "b", "z", " ", "\n", "\r\n", "\r", "é", "漢", "字", "😀", "🦀", "x\n", "\t"];

        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Id {
            Base(usize),
            User(usize, usize),
        }

        type Atom = (Id, char);

        /// One user change as the model saw it.
        #[derive(Debug)]
        struct UserEdit {
            /// The replaced range, in chars of the text just before the change.
            at: usize,
            deleted: Vec<Id>,
            /// The chars just before and just after the replaced range.
            left: Option<Id>,
            right: Option<Id>,
            inserted: Vec<Atom>,
            /// The replaced range in bytes.
            start: usize,
            end: usize,
        }

        #[derive(Debug)]
        struct Scenario {
            base: String,
            base_chars: usize,
            /// The agent's hunks, and the same as char ranges of the base.
            hunks: Vec<Edit>,
            hunk_chars: Vec<(usize, usize)>,
            edits: Vec<UserEdit>,
            changes: Vec<Edit>,
            /// The user's current text.
            current: Vec<Atom>,
        }

        type HunkSpec = (u8, u8, Vec<u8>);
        type EditSpec = (u16, u8, Vec<u8>, bool);

        /// An edit made over one hunk: which hunk, before which edit, what kind.
        type Forced = (usize, usize, u8, u8, Vec<u8>);

        fn text_of(pieces: &[u8]) -> String {
            pieces.iter().map(|&i| PIECES[usize::from(i) % PIECES.len()]).collect()
        }

        fn bytes_before(atoms: &[Atom], index: usize) -> usize {
            atoms[..index].iter().map(|(_, c)| c.len_utf8()).sum()
        }

        fn base_atoms(base: &str) -> Vec<Atom> {
            base.chars().enumerate().map(|(i, c)| (Id::Base(i), c)).collect()
        }

        fn find(atoms: &[Atom], id: Id) -> Option<usize> {
            atoms.iter().position(|(x, _)| *x == id)
        }

        /// Sorted, non-overlapping hunks on char boundaries (adjacent ones and
        /// several insertions at one point included).
        fn hunks_of(base: &[Atom], specs: &[HunkSpec]) -> (Vec<Edit>, Vec<(usize, usize)>) {
            let mut cursor = 0;
            let (mut hunks, mut chars) = (Vec::new(), Vec::new());
            for (gap, len, text) in specs {
                let start = cursor + usize::from(*gap);
                if start > base.len() {
                    break;
                }
                let end = (start + usize::from(*len)).min(base.len());
                hunks.push(Edit {
                    start: bytes_before(base, start),
                    end: bytes_before(base, end),
                    text: text_of(text),
                });
                chars.push((start, end));
                cursor = end;
            }
            (hunks, chars)
        }

        /// The user change `index`: chars `a..b` of `atoms` become `text`.
        fn edit(
            atoms: &mut Vec<Atom>,
            index: usize,
            (a, b): (usize, usize),
            text: &str,
            swap: bool,
        ) -> (UserEdit, Edit) {
            let inserted: Vec<Atom> = text.chars().enumerate().map(|(j, c)| (Id::User(index, j), c)).collect();
            let e = UserEdit {
                at: a,
                deleted: atoms[a..b].iter().map(|(id, _)| *id).collect(),
                left: a.checked_sub(1).map(|k| atoms[k].0),
                right: atoms.get(b).map(|(id, _)| *id),
                inserted: inserted.clone(),
                start: bytes_before(atoms, a),
                end: bytes_before(atoms, b),
            };
            // `rebase` must swap a reversed range back.
            let (start, end) = if swap { (e.end, e.start) } else { (e.start, e.end) };
            atoms.splice(a..b, inserted);
            (e, Edit { start, end, text: text.to_string() })
        }

        /// Chars to replace so that the change certainly meets the hunk `s..e`
        /// (base chars), wherever its chars are now; `None` when they are gone
        /// (an earlier change already deleted them).
        fn over(atoms: &[Atom], (s, e): (usize, usize), kind: u8, extra: u8) -> Option<(usize, usize)> {
            let n = atoms.len();
            if s < e {
                // A char of the hunk: replace from it, or insert before or after it.
                let p = (s..e).find_map(|i| find(atoms, Id::Base(i)))?;
                Some(match kind {
                    0 | 1 => (p, (p + 1 + usize::from(extra)).min(n)),
                    2 => (p, p),
                    _ => (p + 1, p + 1),
                })
            } else {
                // The agent's insertion point: replace the char before or after, or insert there.
                let q = match find(atoms, Id::Base(s)) {
                    Some(q) => q,
                    None if s == 0 => 0,
                    None => find(atoms, Id::Base(s - 1))? + 1,
                };
                Some(match kind {
                    0 => (q.saturating_sub(1), q),
                    1 => (q, (q + 1).min(n)),
                    _ => (q, q),
                })
            }
        }

        fn scenario(doc: &[u8], hunk_specs: &[HunkSpec], edit_specs: &[EditSpec], forced: Option<Forced>) -> Scenario {
            let base = text_of(doc);
            let (hunks, hunk_chars) = hunks_of(&base_atoms(&base), hunk_specs);
            let mut current = base_atoms(&base);
            let (mut edits, mut changes) = (Vec::new(), Vec::new());
            for i in 0..=edit_specs.len() {
                if let Some((target, when, kind, extra, text)) = &forced
                    && *when == i
                    && let Some(range) = over(&current, hunk_chars[*target], *kind, *extra)
                {
                    let (e, c) = edit(&mut current, 1000, range, &text_of(text), false);
                    edits.push(e);
                    changes.push(c);
                }
                let Some((pos, len, text, swap)) = edit_specs.get(i) else { break };
                let n = current.len();
                let a = usize::from(*pos) % (n + 1);
                let b = a + usize::from(*len).min(n - a);
                let (e, c) = edit(&mut current, i, (a, b), &text_of(text), *swap);
                edits.push(e);
                changes.push(c);
            }
            Scenario { base_chars: base.chars().count(), base, hunks, hunk_chars, edits, changes, current }
        }

        fn is_base_in(id: Option<Id>, lo: usize, hi: usize) -> bool {
            matches!(id, Some(Id::Base(i)) if lo <= i && i < hi)
        }

        /// The change certainly touches the hunk `s..e` (base chars): it
        /// deletes one of its chars or inserts next to one; for an agent
        /// insertion, it deletes or inserts next to the chars around it.
        fn must_touch(e: &UserEdit, (s, end): (usize, usize), base_chars: usize) -> bool {
            let insertion = e.deleted.is_empty();
            if s < end {
                e.deleted.iter().any(|&id| is_base_in(Some(id), s, end))
                    || (insertion && (is_base_in(e.left, s, end) || is_base_in(e.right, s, end)))
            } else {
                let lo = s.saturating_sub(1);
                e.deleted.iter().any(|&id| is_base_in(Some(id), lo, s + 1))
                    || (insertion
                        && ((s > 0 && e.left == Some(Id::Base(s - 1)))
                            || e.right == Some(Id::Base(s))
                            || (e.left.is_none() && s == 0)
                            || (e.right.is_none() && s == base_chars)))
            }
        }

        /// The change could touch the hunk `s..e`: it deletes or inserts next
        /// to a char of the hunk or one of the two chars around it.
        fn may_touch(e: &UserEdit, (s, end): (usize, usize), base_chars: usize) -> bool {
            let lo = s.saturating_sub(1);
            e.deleted.iter().any(|&id| is_base_in(Some(id), lo, end + 1))
                || (e.deleted.is_empty()
                    && (is_base_in(e.left, lo, end + 1)
                        || is_base_in(e.right, lo, end + 1)
                        || (e.left.is_none() && s == 0)
                        || (e.right.is_none() && end == base_chars)))
        }

        /// Property (b), and which input hunks `rebase` accepted.
        fn accepted(sc: &Scenario, r: &Rebased) -> Result<Vec<bool>, TestCaseError> {
            prop_assert_eq!(r.hunks.len() + r.conflicts.len(), sc.hunks.len());
            let (mut ri, mut ci) = (0, 0);
            let mut out = Vec::new();
            for h in &sc.hunks {
                if let Some(c) = r.conflicts.get(ci)
                    && &c.hunk == h
                {
                    prop_assert!(c.reason.contains("while the agent was working"), "{}", c.reason);
                    ci += 1;
                    out.push(false);
                } else {
                    let Some(got) = r.hunks.get(ri) else {
                        return Err(TestCaseError::fail(format!("{h:?} is neither rebased nor a conflict: {r:?}")));
                    };
                    prop_assert_eq!(&got.text, &h.text);
                    prop_assert_eq!(got.end - got.start, h.end - h.start);
                    ri += 1;
                    out.push(true);
                }
            }
            prop_assert_eq!((ri, ci), (r.hunks.len(), r.conflicts.len()));
            Ok(out)
        }

        /// The accepted hunks applied to the base, then the user's changes
        /// replayed by char identity: each deletes the very chars it deleted
        /// and inserts its text just before its right neighbour (at the end
        /// if it had none). A base char an accepted hunk replaced stands for
        /// that hunk; a change may only border such a hunk, never reach in.
        fn agent_first_by_identity(sc: &Scenario, accepted: &[bool]) -> Result<String, TestCaseError> {
            enum Item {
                Char(Id, char),
                Hunk(usize, usize, String),
            }
            let covers = |item: &Item, id: Id| match (item, id) {
                (Item::Char(x, _), _) => *x == id,
                (Item::Hunk(s, e, _), Id::Base(j)) => *s <= j && j < *e,
                (Item::Hunk(..), Id::User(..)) => false,
            };
            let kept: Vec<_> = sc.hunk_chars.iter().zip(&sc.hunks).zip(accepted).filter(|(_, a)| **a).collect();
            let chars: Vec<char> = sc.base.chars().collect();
            let mut items = Vec::new();
            let (mut i, mut k) = (0, 0);
            loop {
                while let Some((((s, e), h), _)) = kept.get(k)
                    && *s == i
                {
                    items.push(Item::Hunk(*s, *e, h.text.clone()));
                    i = *e;
                    k += 1;
                }
                let Some(c) = chars.get(i) else { break };
                items.push(Item::Char(Id::Base(i), *c));
                i += 1;
            }
            for e in &sc.edits {
                for id in &e.deleted {
                    let at = items.iter().position(|it| covers(it, *id));
                    prop_assert!(
                        matches!(at.map(|k| &items[k]), Some(Item::Char(..))),
                        "{:?} deleted {:?} of an accepted hunk",
                        e,
                        id
                    );
                    items.remove(at.unwrap_or_default());
                }
                let at = match e.right {
                    Some(r) => items.iter().position(|it| covers(it, r)),
                    None => Some(items.len()),
                };
                let Some(at) = at else { return Err(TestCaseError::fail(format!("lost the anchor of {e:?}"))) };
                if let Some(Item::Hunk(s, _, _)) = items.get(at) {
                    prop_assert_eq!(e.right, Some(Id::Base(*s)), "{:?} reached into an accepted hunk", e);
                }
                match e.left {
                    Some(l) => prop_assert!(at > 0 && covers(&items[at - 1], l), "{:?} split an accepted hunk", e),
                    None => prop_assert_eq!(at, 0, "{:?} went after an accepted hunk at the start", e),
                }
                items.splice(at..at, e.inserted.iter().map(|(id, c)| Item::Char(*id, *c)));
            }
            Ok(items
                .iter()
                .map(|it| match it {
                    Item::Char(_, c) => c.to_string(),
                    Item::Hunk(_, _, t) => t.clone(),
                })
                .collect())
        }

        /// The accepted hunks applied to the base, then each user change with
        /// both offsets increased by the net growth of the accepted hunks that
        /// end at or before its start (found in the model by their chars).
        fn agent_first_by_offsets(sc: &Scenario, accepted: &[bool]) -> Result<String, TestCaseError> {
            let kept: Vec<(&(usize, usize), &Edit)> =
                sc.hunk_chars.iter().zip(&sc.hunks).zip(accepted).filter(|(_, a)| **a).map(|(x, _)| x).collect();
            let kept_hunks: Vec<Edit> = kept.iter().map(|(_, h)| (*h).clone()).collect();
            let mut text = apply_hunks(&sc.base, &kept_hunks);
            let mut atoms = base_atoms(&sc.base);
            for e in &sc.edits {
                let mut growth = 0isize;
                for ((s, end), h) in &kept {
                    // Where the hunk ends on the text just before this change.
                    let hunk_end = if s < end {
                        find(&atoms, Id::Base(end - 1)).map(|k| k + 1)
                    } else if *s < sc.base_chars {
                        find(&atoms, Id::Base(*s))
                    } else {
                        Some(atoms.len())
                    };
                    let Some(hunk_end) = hunk_end else {
                        return Err(TestCaseError::fail("an accepted hunk lost its chars"));
                    };
                    if bytes_before(&atoms, hunk_end) <= e.start {
                        growth += h.text.len() as isize - (h.end - h.start) as isize;
                    }
                }
                let (start, end) = ((e.start as isize + growth) as usize, (e.end as isize + growth) as usize);
                prop_assert!(end <= text.len() && text.is_char_boundary(start) && text.is_char_boundary(end));
                text.replace_range(start..end, &e.inserted.iter().map(|(_, c)| c).collect::<String>());
                atoms.splice(e.at..e.at + e.deleted.len(), e.inserted.iter().copied());
            }
            Ok(text)
        }

        /// Runs `rebase` on the scenario and checks properties (a) to (e).
        fn check(sc: &Scenario) -> Result<Rebased, TestCaseError> {
            let r = rebase(&sc.base, &sc.hunks, &sc.changes);
            let current: String = sc.current.iter().map(|(_, c)| c).collect();

            // (a) sorted, non-overlapping, within the current text, on char boundaries.
            for h in &r.hunks {
                prop_assert!(h.start <= h.end && h.end <= current.len(), "{:?} out of {}", h, current.len());
                prop_assert!(current.is_char_boundary(h.start) && current.is_char_boundary(h.end));
            }
            for w in r.hunks.windows(2) {
                prop_assert!(w[0].end <= w[1].start, "{:?}", w);
            }

            // (b) every hunk is accounted for, exactly once.
            let accepted = accepted(sc, &r)?;

            // (d) a hunk a change touched is a conflict; (e) one no change
            // came near is not.
            for (k, chars) in sc.hunk_chars.iter().enumerate() {
                let must = sc.edits.iter().any(|e| must_touch(e, *chars, sc.base_chars));
                let may = sc.edits.iter().any(|e| may_touch(e, *chars, sc.base_chars));
                prop_assert!(!(must && accepted[k]), "{:?} was touched but not reported", sc.hunks[k]);
                prop_assert!(may || accepted[k], "{:?} was never touched but conflicts", sc.hunks[k]);
            }

            // (c) both orders agree.
            let user_first = apply_hunks(&current, &r.hunks);
            prop_assert_eq!(&user_first, &agent_first_by_identity(sc, &accepted)?);
            prop_assert_eq!(&user_first, &agent_first_by_offsets(sc, &accepted)?);
            if sc.changes.is_empty() {
                prop_assert_eq!(&r.hunks, &sc.hunks);
            }

            // (f) no boundary the user's typing put inside a CRLF.
            let splits = |text: &str, i: usize| {
                i > 0 && i < text.len() && text.as_bytes()[i - 1] == b'\r' && text.as_bytes()[i] == b'\n'
            };
            let base_split = sc.hunks.iter().any(|h| splits(&sc.base, h.start) || splits(&sc.base, h.end));
            if !base_split {
                for h in &r.hunks {
                    prop_assert!(
                        !splits(&current, h.start) && !splits(&current, h.end),
                        "{:?} splits a CRLF of {:?}",
                        h,
                        current
                    );
                }
            }
            Ok(r)
        }

        fn docs() -> impl Strategy<Value = Vec<u8>> {
            vec(any::<u8>(), 0..24)
        }

        fn hunk_specs() -> impl Strategy<Value = Vec<HunkSpec>> {
            vec((0u8..4, 0u8..4, vec(any::<u8>(), 0..3)), 0..6)
        }

        fn edit_specs() -> impl Strategy<Value = Vec<EditSpec>> {
            vec((any::<u16>(), 0u8..5, vec(any::<u8>(), 0..3), any::<bool>()), 0..8)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn rebase_agrees_with_the_model(doc in docs(), hunks in hunk_specs(), edits in edit_specs()) {
                check(&scenario(&doc, &hunks, &edits, None))?;
            }

            #[test]
            fn a_change_over_a_hunk_is_always_a_conflict(
                doc in docs(),
                hunks in hunk_specs(),
                edits in edit_specs(),
                target in any::<usize>(),
                when in any::<usize>(),
                kind in 0u8..4,
                extra in 0u8..3,
                text in vec(any::<u8>(), 0..3),
            ) {
                let probe = scenario(&doc, &hunks, &[], None);
                prop_assume!(!probe.hunks.is_empty());
                let target = target % probe.hunks.len();
                let when = when % (edits.len() + 1);
                let sc = scenario(&doc, &hunks, &edits, Some((target, when, kind, extra, text)));
                let r = check(&sc)?;
                prop_assert!(
                    r.conflicts.iter().any(|c| c.hunk == sc.hunks[target]),
                    "{:?} was edited over but not reported: {:?}", sc.hunks[target], r
                );
            }
        }
    }
}
