//! [`Edit`], the one byte-range replacement type of the crate (an agent's
//! hunk, a user's change, a document's history step), line-granular hunks
//! between a file's original text and the run's proposal, and unified diffs
//! for the CLI.

use similar::{DiffTag, TextDiff};

/// One replacement, in UTF-8 bytes: `start..end` of a text becomes `text`.
/// Which text depends on the role: a hunk of a proposal is on its base (a
/// set of hunks is sorted and never overlaps); a user's change, or a step of
/// a document's history, is on the text just before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// The hunks that turn `old` into `new` as sequential changes: last first,
/// so that each applies to the text the previous one left.
pub fn sequential_hunks(old: &str, new: &str) -> Vec<Edit> {
    let mut edits = hunks(old, new);
    edits.reverse();
    edits
}

/// The hunks that turn `old` into `new`, each a run of whole changed lines
/// (adjacent changed lines are merged into one hunk).
pub fn hunks(old: &str, new: &str) -> Vec<Edit> {
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = diff.iter_old_slices().collect();
    let new_lines: Vec<&str> = diff.iter_new_slices().collect();
    let mut old_offsets = Vec::with_capacity(old_lines.len() + 1);
    let mut acc = 0;
    old_offsets.push(0);
    for l in &old_lines {
        acc += l.len();
        old_offsets.push(acc);
    }
    let mut out: Vec<Edit> = Vec::new();
    let mut last_old_end_line = usize::MAX;
    for op in diff.ops() {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            continue;
        }
        let start = old_offsets[old_range.start];
        let end = old_offsets[old_range.end];
        let text: String = new_lines[new_range].concat();
        match out.last_mut() {
            Some(prev) if last_old_end_line == old_range.start => {
                prev.end = end;
                prev.text.push_str(&text);
            }
            _ => out.push(Edit { start, end, text }),
        }
        last_old_end_line = old_range.end;
    }
    out
}

/// A unified diff with `a/` and `b/` headers, as `git diff` prints it; `old`
/// is `None` for a new file (`--- /dev/null`).
pub fn unified_diff(path: &str, old: Option<&str>, new: &str) -> String {
    let diff = TextDiff::from_lines(old.unwrap_or(""), new);
    let old_label = if old.is_some() { format!("a/{path}") } else { "/dev/null".to_string() };
    diff.unified_diff().context_radius(3).header(&old_label, &format!("b/{path}")).to_string()
}

/// Applies sorted, non-overlapping hunks to `old`.
pub fn apply_hunks(old: &str, hunks: &[Edit]) -> String {
    let mut out = String::with_capacity(old.len());
    let mut pos = 0;
    for h in hunks {
        out.push_str(&old[pos..h.start]);
        out.push_str(&h.text);
        pos = h.end;
    }
    out.push_str(&old[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_reproduce_the_new_text() {
        let cases = [
            ("a\nb\nc\n", "a\nB\nc\n"),
            ("a\nb\nc\n", "a\nb\nc\nd\n"),
            ("a\nb\nc", "x\nb\ny"),
            ("", "new file\n"),
            ("gone\n", ""),
            ("漢\r\n😀\r\nz\r\n", "漢\r\n🙂\r\nz\r\n"),
            ("a\nb\nc\nd\ne\n", "a\nX\nY\nd\ne\nf\n"),
        ];
        for (old, new) in cases {
            let hs = hunks(old, new);
            assert_eq!(apply_hunks(old, &hs), new, "{old:?} -> {new:?}: {hs:?}");
            for w in hs.windows(2) {
                assert!(w[0].end <= w[1].start);
            }
        }
    }

    #[test]
    fn one_changed_line_is_one_hunk_of_whole_lines() {
        let hs = hunks("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(hs, vec![Edit { start: 2, end: 4, text: "B\n".into() }]);
    }

    #[test]
    fn unified_diff_has_git_headers() {
        let d = unified_diff("src/x.py", Some("a\nb\n"), "a\nc\n");
        assert!(d.starts_with("--- a/src/x.py\n+++ b/src/x.py\n@@ -1,2 +1,2 @@\n"), "{d}");
        assert!(d.contains("-b\n+c\n"));
        let d = unified_diff("new.py", None, "x\n");
        assert!(d.starts_with("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n"), "{d}");
    }
}
