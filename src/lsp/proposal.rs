//! From the run's changes to edits the editor can apply now, without ever
//! overwriting what the user typed during the run.
//!
//! Each changed file was read at some base (a buffer version, or the disk).
//! If the document is unchanged since, its hunks go out as they are, against
//! that version. If the user typed in it meanwhile, the hunks are carried
//! over the user's changes (every `didChange` since the base is kept, in
//! order): hunks the user's typing did not touch are shifted and sent
//! against the current version; hunks it touched are left out and reported
//! as conflicts. A file closed, deleted, or created by someone else during
//! the run is reported, not applied blindly.

use super::convert::FileEdit;
use crate::documents::Documents;
use crate::workspace::{Edit, FileChange, rebase, sequential_hunks};

/// A proposal's edits ready to send against the documents as they are now,
/// and what had to be left out.
#[derive(Debug, Default)]
pub struct Outgoing {
    pub files: Vec<FileEdit>,
    /// One sentence per file with left-out hunks.
    pub conflicts: Vec<String>,
}

/// Whether applying `edits` to `base` gives `now` (a recorded history is
/// trusted only when it leads to the text the editor holds).
fn replays(base: &str, edits: &[Edit], now: &str) -> bool {
    let mut text = base.to_string();
    for e in edits {
        if e.start > e.end || e.end > text.len() || !text.is_char_boundary(e.start) || !text.is_char_boundary(e.end) {
            return false;
        }
        text.replace_range(e.start..e.end, &e.text);
    }
    text == now
}

/// Carries `file`'s hunks over `changes` onto `current`.
fn rebased(
    proposal: &mut Outgoing,
    file: FileEdit,
    current: String,
    version: Option<i32>,
    changes: &[Edit],
    why: &str,
) {
    let r = rebase(&file.text, &file.hunks, changes);
    if !r.conflicts.is_empty() {
        let lines: Vec<String> = r.conflicts.iter().map(|c| c.reason.clone()).collect();
        proposal.conflicts.push(format!(
            "{}: {} of {} change(s) left out because {why}: {}",
            file.display,
            r.conflicts.len(),
            file.hunks.len(),
            lines.join("; ")
        ));
    }
    if !r.hunks.is_empty() {
        proposal.files.push(FileEdit { text: current, version, hunks: r.hunks, ..file });
    }
}

/// Carries `file`'s hunks from `original` to `now` by content: as they are
/// when the text is the same, else over the diff between the two.
fn by_content(proposal: &mut Outgoing, file: FileEdit, original: &str, now: String, version: Option<i32>, why: &str) {
    if now == original {
        proposal.files.push(FileEdit { version, ..file });
    } else {
        let changes = sequential_hunks(original, &now);
        rebased(proposal, file, now, version, &changes, why);
    }
}

fn all_conflict(proposal: &mut Outgoing, file: &FileEdit, why: &str) {
    proposal.conflicts.push(format!("{}: {} change(s) not applied because {why}", file.display, file.hunks.len()));
}

/// Prepares the run's `changes` against the editor's documents now.
pub fn prepare(changes: &[FileChange], docs: &Documents) -> Outgoing {
    let mut proposal = Outgoing::default();
    for change in changes {
        let file = FileEdit::from_change(change);
        let open = docs.get_by_path(&change.path);
        match (&change.original, change.version) {
            // A new file: it must still not exist.
            (None, _) => {
                // `symlink_metadata`: a link (dangling or not) counts as existing.
                if open.is_some() || std::fs::symlink_metadata(&change.path).is_ok() {
                    all_conflict(&mut proposal, &file, "the file was created outside the run meanwhile");
                } else {
                    proposal.files.push(file);
                }
            }
            // Read from an editor buffer: pinned by its state, not its
            // version number (numbering restarts when a buffer is reopened,
            // and some clients go v5, v4, v5).
            (Some(original), Some(_)) => match open {
                None => all_conflict(&mut proposal, &file, "the file was closed in the editor during the run"),
                Some(doc) => {
                    let now = doc.rope.to_string();
                    let history = change.pin.and_then(|pin| docs.changes_since(&doc.uri, pin).ok());
                    match history {
                        // The same open document, unchanged.
                        Some((edits, _)) if edits.is_empty() && &now == original => {
                            proposal.files.push(FileEdit { version: Some(doc.version), ..file })
                        }
                        // The same open document, typed in: carry the hunks over
                        // the recorded changes (checked to lead to the text now).
                        Some((edits, _)) if replays(original, &edits, &now) => {
                            rebased(
                                &mut proposal,
                                file,
                                now,
                                Some(doc.version),
                                &edits,
                                "you edited the same lines during the run",
                            );
                        }
                        // Reopened, or its history is gone: go by content.
                        _ => by_content(
                            &mut proposal,
                            file,
                            original,
                            now,
                            Some(doc.version),
                            "the file's text changed under the run (it was reopened or reloaded) on the same lines",
                        ),
                    }
                }
            },
            // Read from the disk.
            (Some(original), None) => match open {
                Some(doc) => by_content(
                    &mut proposal,
                    file,
                    original,
                    doc.rope.to_string(),
                    Some(doc.version),
                    "the file was opened and edited during the run",
                ),
                None => match std::fs::read_to_string(&change.path) {
                    Err(_) => all_conflict(&mut proposal, &file, "the file was deleted or renamed during the run"),
                    Ok(now) => {
                        by_content(&mut proposal, file, original, now, None, "the file changed on disk during the run")
                    }
                },
            },
        }
    }
    proposal
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::{Change, PositionEncoding};
    use crate::position::{LineCol, Span};

    /// The span from `(line, column)` to `(line, column)`.
    fn span((sl, sc): (u32, u32), (el, ec): (u32, u32)) -> Span {
        Span::new(LineCol::new(sl, sc), LineCol::new(el, ec))
    }

    fn change(path: &str, version: Option<i32>, original: Option<&str>, new_text: &str) -> FileChange {
        FileChange {
            path: path.into(),
            display: path.trim_start_matches('/').into(),
            version,
            pin: version.map(|_| crate::workspace::BufferPin { generation: 1, seq: 0 }),
            original: original.map(Into::into),
            new_text: new_text.into(),
            reasons: vec![],
        }
    }

    const BASE: &str = "one\ntwo\nthree\nfour\nfive\n";

    #[test]
    fn unchanged_buffers_keep_their_version() {
        let docs = Documents::new();
        docs.open("file:///w/a", Some("/w/a".into()), "t", 3, BASE);
        let p = prepare(&[change("/w/a", Some(3), Some(BASE), "one\nTWO\nthree\nfour\nfive\n")], &docs);
        assert!(p.conflicts.is_empty());
        assert_eq!(p.files[0].version, Some(3));
    }

    #[test]
    fn typing_elsewhere_is_rebased_and_typing_on_the_same_lines_is_a_conflict() {
        let docs = Documents::new();
        docs.open("file:///w/a", Some("/w/a".into()), "t", 3, BASE);
        // The user inserts a line at the top and edits "five" during the run.
        docs.change(
            "file:///w/a",
            4,
            &[Change { range: Some(span((0, 0), (0, 0))), text: "zero\n".into() }],
            PositionEncoding::Utf16,
        )
        .unwrap();
        docs.change(
            "file:///w/a",
            5,
            &[Change { range: Some(span((5, 0), (5, 4))), text: "FIVE".into() }],
            PositionEncoding::Utf16,
        )
        .unwrap();
        let agent = "one\nTWO\nthree\nfour\nfive!\n";
        let p = prepare(&[change("/w/a", Some(3), Some(BASE), agent)], &docs);
        assert_eq!(p.files.len(), 1);
        let f = &p.files[0];
        assert_eq!(f.version, Some(5));
        assert_eq!(crate::workspace::apply_hunks(&f.text, &f.hunks), "zero\none\nTWO\nthree\nfour\nFIVE\n");
        assert_eq!(p.conflicts.len(), 1);
        assert!(
            p.conflicts[0]
                .starts_with("w/a: 1 of 2 change(s) left out because you edited the same lines during the run"),
            "{:?}",
            p.conflicts
        );
    }

    #[test]
    fn closed_deleted_and_preempted_files_are_reported() {
        let docs = Documents::new();
        let p = prepare(&[change("/w/closed", Some(2), Some(BASE), "x\n")], &docs);
        assert!(p.files.is_empty());
        assert_eq!(
            p.conflicts,
            ["w/closed: 1 change(s) not applied because the file was closed in the editor during the run"]
        );
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone.py");
        let p = prepare(&[change(gone.to_str().unwrap(), None, Some(BASE), "x\n")], &docs);
        assert!(p.conflicts[0].ends_with("the file was deleted or renamed during the run"));
        let exists = dir.path().join("new.py");
        std::fs::write(&exists, "someone else\n").unwrap();
        let p = prepare(&[change(exists.to_str().unwrap(), None, None, "x\n")], &docs);
        assert!(p.conflicts[0].ends_with("the file was created outside the run meanwhile"));
    }

    #[test]
    fn a_disk_file_opened_and_edited_during_the_run_is_rebased() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.py");
        let docs = Documents::new();
        docs.open("file:///x", Some(path.clone()), "python", 9, "one\ntwo\nthree\nfour\nfive\nsix\n");
        let p = prepare(&[change(path.to_str().unwrap(), None, Some(BASE), "ONE\ntwo\nthree\nfour\nfive\n")], &docs);
        assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
        assert_eq!(p.files[0].version, Some(9));
        assert_eq!(
            crate::workspace::apply_hunks(&p.files[0].text, &p.files[0].hunks),
            "ONE\ntwo\nthree\nfour\nfive\nsix\n"
        );
    }

    /// What the agent proposes for `BASE`: line 2 in capitals.
    const AGENT: &str = "one\nTWO\nthree\nfour\nfive\n";

    #[test]
    fn a_buffer_reopened_at_the_same_version_with_other_text_is_rebased_by_content() {
        let docs = Documents::new();
        docs.open("file:///w/a", Some("/w/a".into()), "t", 1, BASE);
        // The user closes the buffer without saving; the client reopens it,
        // again as version 1, with the disk's text.
        docs.close("file:///w/a").unwrap();
        docs.open("file:///w/a", Some("/w/a".into()), "t", 1, "one\ntwo\nthree\n");
        let p = prepare(&[change("/w/a", Some(1), Some(BASE), AGENT)], &docs);
        assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
        let f = &p.files[0];
        assert_eq!(f.version, Some(1));
        assert_eq!(f.text, "one\ntwo\nthree\n", "the hunks are computed for the text the editor holds");
        assert_eq!(crate::workspace::apply_hunks(&f.text, &f.hunks), "one\nTWO\nthree\n");
        // Reopened with the agent's lines changed by the user: a conflict, not a blind apply.
        docs.close("file:///w/a").unwrap();
        docs.open("file:///w/a", Some("/w/a".into()), "t", 1, "one\n2\nthree\nfour\nfive\n");
        let p = prepare(&[change("/w/a", Some(1), Some(BASE), AGENT)], &docs);
        assert!(p.files.is_empty());
        assert!(p.conflicts[0].contains("reopened"), "{:?}", p.conflicts);
    }

    #[test]
    fn versions_that_go_back_and_forth_are_rebased_over_the_real_changes() {
        let docs = Documents::new();
        docs.open("file:///w/a", Some("/w/a".into()), "t", 5, BASE);
        let edit = |v, (start, end): ((u32, u32), (u32, u32)), text: &str| {
            let change = Change { range: Some(span(start, end)), text: text.into() };
            docs.change("file:///w/a", v, &[change], PositionEncoding::Utf16).unwrap()
        };
        edit(4, ((0, 0), (0, 0)), "zero\n");
        edit(5, ((5, 0), (5, 4)), "FIVE");
        // Version 5 again, but not the text the run read at version 5.
        let p = prepare(&[change("/w/a", Some(5), Some(BASE), AGENT)], &docs);
        assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
        let f = &p.files[0];
        assert_eq!(f.version, Some(5));
        assert_eq!(crate::workspace::apply_hunks(&f.text, &f.hunks), "zero\none\nTWO\nthree\nfour\nFIVE\n");
    }
}
