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
use crate::workspace::{FileChange, TextChange, hunks, rebase};

/// Edits ready to send, and what had to be left out.
#[derive(Debug, Default)]
pub struct Proposal {
    pub files: Vec<FileEdit>,
    /// One sentence per file with left-out hunks.
    pub conflicts: Vec<String>,
}

/// The edits that turn `from` into `to`, as sequential byte changes (last
/// first, so each applies to the text the previous one left).
fn diff_changes(from: &str, to: &str) -> Vec<TextChange> {
    let mut changes: Vec<TextChange> = hunks(from, to)
        .into_iter()
        .map(|h| TextChange { start: h.old_start, end: h.old_end, text: h.new_text })
        .collect();
    changes.reverse();
    changes
}

/// Carries `file`'s hunks over `changes` onto `current`.
fn rebased(
    proposal: &mut Proposal,
    file: FileEdit,
    current: String,
    version: Option<i32>,
    changes: &[TextChange],
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

fn all_conflict(proposal: &mut Proposal, file: &FileEdit, why: &str) {
    proposal.conflicts.push(format!("{}: {} change(s) not applied because {why}", file.display, file.hunks.len()));
}

/// Prepares the run's `changes` against the editor's documents now.
pub fn prepare(changes: &[FileChange], docs: &Documents) -> Proposal {
    let mut proposal = Proposal::default();
    for change in changes {
        let file = FileEdit::from_change(change);
        let open = docs.get_by_path(&change.path);
        match (&change.original, change.version) {
            // A new file: it must still not exist.
            (None, _) => {
                if open.is_some() || change.path.exists() {
                    all_conflict(&mut proposal, &file, "the file was created outside the run meanwhile");
                } else {
                    proposal.files.push(file);
                }
            }
            // Read from an editor buffer at version `v`.
            (Some(_), Some(v)) => match open {
                None => all_conflict(&mut proposal, &file, "the file was closed in the editor during the run"),
                Some(doc) if doc.version == v => proposal.files.push(file),
                Some(doc) => match docs.changes_since(&doc.uri, v) {
                    Ok((edits, now)) => {
                        let changes: Vec<TextChange> = edits
                            .into_iter()
                            .map(|e| TextChange { start: e.start, end: e.end, text: e.text })
                            .collect();
                        rebased(
                            &mut proposal,
                            file,
                            now.rope.to_string(),
                            Some(now.version),
                            &changes,
                            "you edited the same lines during the run",
                        );
                    }
                    Err(_) => all_conflict(
                        &mut proposal,
                        &file,
                        "the file changed too much during the run to carry the changes over",
                    ),
                },
            },
            // Read from the disk.
            (Some(original), None) => match open {
                Some(doc) => {
                    let now = doc.rope.to_string();
                    if &now == original {
                        proposal.files.push(FileEdit { version: Some(doc.version), ..file });
                    } else {
                        let changes = diff_changes(original, &now);
                        rebased(
                            &mut proposal,
                            file,
                            now,
                            Some(doc.version),
                            &changes,
                            "the file was opened and edited during the run",
                        );
                    }
                }
                None => match std::fs::read_to_string(&change.path) {
                    Err(_) => all_conflict(&mut proposal, &file, "the file was deleted or renamed during the run"),
                    Ok(now) if &now == original => proposal.files.push(file),
                    Ok(now) => {
                        let changes = diff_changes(original, &now);
                        rebased(&mut proposal, file, now, None, &changes, "the file changed on disk during the run");
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

    fn change(path: &str, version: Option<i32>, original: Option<&str>, new_text: &str) -> FileChange {
        FileChange {
            path: path.into(),
            display: path.trim_start_matches('/').into(),
            version,
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
            &[Change { range: Some(((0, 0), (0, 0))), text: "zero\n".into() }],
            PositionEncoding::Utf16,
        )
        .unwrap();
        docs.change(
            "file:///w/a",
            5,
            &[Change { range: Some(((5, 0), (5, 4))), text: "FIVE".into() }],
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
}
