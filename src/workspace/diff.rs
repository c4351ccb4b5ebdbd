//! Line-granular hunks between a file's original text and the run's proposal,
//! as byte ranges of the original, plus unified diffs for the CLI.

use similar::{DiffTag, TextDiff};

/// One replacement: bytes `old_start..old_end` of the original become
/// `new_text`. Hunks are sorted and never overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub old_start: usize,
    pub old_end: usize,
    pub new_text: String,
}

/// The hunks that turn `old` into `new`, each a run of whole changed lines
/// (adjacent changed lines are merged into one hunk).
pub fn hunks(old: &str, new: &str) -> Vec<Hunk> {
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
    let mut out: Vec<Hunk> = Vec::new();
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
                prev.old_end = end;
                prev.new_text.push_str(&text);
            }
            _ => out.push(Hunk { old_start: start, old_end: end, new_text: text }),
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
pub fn apply_hunks(old: &str, hunks: &[Hunk]) -> String {
    let mut out = String::with_capacity(old.len());
    let mut pos = 0;
    for h in hunks {
        out.push_str(&old[pos..h.old_start]);
        out.push_str(&h.new_text);
        pos = h.old_end;
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
                assert!(w[0].old_end <= w[1].old_start);
            }
        }
    }

    #[test]
    fn one_changed_line_is_one_hunk_of_whole_lines() {
        let hs = hunks("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(hs, vec![Hunk { old_start: 2, old_end: 4, new_text: "B\n".into() }]);
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
