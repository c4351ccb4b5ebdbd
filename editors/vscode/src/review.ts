// Pure helpers of the review of a proposal (the server's one
// `workspace/applyEdit`): the edit with every hunk ticked, what each file's
// hunks are, which of them the user kept, how that reads, and what the
// review tells the server of each hunk (`agentfix.reviewed`).
//
// Why a hidden "sentinel" change: VS Code opens its Refactor Preview only
// when some change needs confirmation, and it leaves exactly those changes
// unticked (`isRefactoring: true` only makes the apply respect auto save).
// So every hunk of the proposal is marked `needsConfirmation: false`
// (ticked), and one extra change that needs confirmation opens the preview:
// creating a file that already exists, with `ignoreIfExists`, which the
// preview leaves out of its list and which would do nothing if applied.

/** An LSP position and range (0-based, UTF-16). */
export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}

/** What the review needs of an LSP `WorkspaceEdit`. */
export interface LspTextEdit {
  range: Range;
  newText: string;
  annotationId?: string;
}
export interface LspDocumentChange {
  kind?: string;
  uri?: string;
  options?: { overwrite?: boolean; ignoreIfExists?: boolean };
  textDocument?: { uri: string; version?: number | null };
  edits?: LspTextEdit[];
  annotationId?: string;
}
export interface LspChangeAnnotation {
  label: string;
  needsConfirmation?: boolean;
  description?: string;
}
export interface LspWorkspaceEdit {
  changes?: { [uri: string]: LspTextEdit[] };
  documentChanges?: LspDocumentChange[];
  changeAnnotations?: { [id: string]: LspChangeAnnotation };
}

/**
 * The edit with every change annotation kept (its label and description are
 * the preview's group labels: the problem, the model's reason) but needing
 * no confirmation, so that each hunk starts ticked. The input is left as is.
 */
export function ticked<E extends LspWorkspaceEdit>(edit: E): E {
  if (!edit.changeAnnotations) {
    return edit;
  }
  const changeAnnotations: { [id: string]: LspChangeAnnotation } = {};
  for (const [id, annotation] of Object.entries(edit.changeAnnotations)) {
    changeAnnotations[id] = { ...annotation, needsConfirmation: false };
  }
  return { ...edit, changeAnnotations };
}

/** The hunks of one file of a proposal, in document order. */
export interface FileHunks {
  uri: string;
  /** The version the server sent the edit against (null or absent: from disk). */
  version?: number | null;
  /** The proposal creates the file (it did not exist). */
  created: boolean;
  /** With the change annotation of each hunk's edit, when it has one. */
  hunks: { range: Range; newText: string; annotationId?: string }[];
}

function compare(a: Position, b: Position): number {
  return a.line - b.line || a.character - b.character;
}

function hunkOf(e: LspTextEdit): FileHunks['hunks'][number] {
  const hunk = { range: e.range, newText: e.newText };
  return typeof e.annotationId === 'string' ? { ...hunk, annotationId: e.annotationId } : hunk;
}

/** Each file's hunks (text edits), in the order the files come. */
export function fileHunks(edit: LspWorkspaceEdit): FileHunks[] {
  const files = new Map<string, FileHunks>();
  const file = (uri: string): FileHunks => {
    let f = files.get(uri);
    if (!f) {
      f = { uri, created: false, hunks: [] };
      files.set(uri, f);
    }
    return f;
  };
  for (const change of edit.documentChanges ?? []) {
    if (change.kind === 'create' && change.uri) {
      file(change.uri).created = true;
    } else if (change.textDocument && change.edits) {
      const f = file(change.textDocument.uri);
      f.version = change.textDocument.version;
      f.hunks.push(...change.edits.map(hunkOf));
    }
  }
  for (const [uri, edits] of Object.entries(edit.changes ?? {})) {
    file(uri).hunks.push(...edits.map(hunkOf));
  }
  const result = [...files.values()].filter((f) => f.hunks.length > 0);
  for (const f of result) {
    f.hunks.sort((a, b) => compare(a.range.start, b.range.start));
  }
  return result;
}

/**
 * The resource the sentinel "creates": a file the proposal edits and does
 * not create (it exists), else the workspace folder given; undefined when
 * there is neither (the proposal then asks for confirmation of every hunk,
 * as the server sent it).
 */
export function sentinelTarget(files: readonly FileHunks[], folder: string | undefined): string | undefined {
  return files.find((f) => !f.created)?.uri ?? folder;
}

/** A hunk as offsets into the text before the edit. */
export interface OffsetHunk {
  start: number;
  end: number;
  newText: string;
}

/**
 * Which hunks the text after the review holds, given the text before it
 * (hunks sorted and apart, as the server sends them): true for a hunk
 * applied, false for one left as it was. Undefined when `after` is not the
 * `before` text with some of the hunks applied (someone else changed it).
 * Where both readings fit (a hunk that changes nothing), it counts as applied.
 */
export function appliedHunks(before: string, after: string, hunks: readonly OffsetHunk[]): boolean[] | undefined {
  const picks: boolean[] = [];
  const walk = (i: number, b: number, a: number): boolean => {
    if (i === hunks.length) {
      return after.length - a === before.length - b && after.startsWith(before.slice(b), a);
    }
    const h = hunks[i];
    const gap = before.slice(b, h.start);
    if (!after.startsWith(gap, a)) {
      return false;
    }
    a += gap.length;
    for (const applied of [true, false]) {
      const text = applied ? h.newText : before.slice(h.start, h.end);
      if (after.startsWith(text, a)) {
        picks[i] = applied;
        if (walk(i + 1, h.end, a + text.length)) {
          return true;
        }
      }
    }
    return false;
  };
  return walk(0, 0, 0) ? picks.slice(0, hunks.length) : undefined;
}

/** What became of one file's hunks in the review. */
export interface FileOutcome {
  /** The file's name as the user reads it (workspace-relative). */
  name: string;
  total: number;
  /** Hunks applied; undefined when it cannot be told (the file changed otherwise). */
  applied: number | undefined;
}

const changes = (n: number) => `${n} change${n === 1 ? '' : 's'}`;

/**
 * The message after the review: "Agent fix: applied 2 of 3 changes to
 * calc.py.", "Agent fix: nothing applied.", over several files "applied 3
 * of 4 changes: calc.py 2 of 2, stats.py 1 of 2".
 */
export function appliedMessage(files: readonly FileOutcome[]): string {
  const total = files.reduce((n, f) => n + f.total, 0);
  const known = files.filter((f) => f.applied !== undefined);
  const applied = known.reduce((n, f) => n + (f.applied ?? 0), 0);
  const unknown = files.filter((f) => f.applied === undefined).map((f) => f.name);
  const unknownNote = unknown.length ? ` (${unknown.join(', ')} changed otherwise as well: check ${unknown.length === 1 ? 'it' : 'them'})` : '';
  if (applied === 0 && unknown.length === 0) {
    return 'Agent fix: nothing applied.';
  }
  if (files.length === 1) {
    const f = files[0];
    return f.applied === undefined
      ? `Agent fix: ${f.name} changed, but not only by the proposal's ${changes(f.total)}: check it.`
      : `Agent fix: applied ${f.applied} of ${changes(f.total)} to ${f.name}.`;
  }
  const parts = known.map((f) => `${f.name} ${f.applied} of ${f.total}`);
  return `Agent fix: applied ${applied} of ${changes(total)}: ${parts.join(', ')}${unknownNote}.`;
}

/** The answer to `workspace/applyEdit` after the review. */
export function applyAnswer(files: readonly FileOutcome[]): { applied: boolean; failureReason?: string } {
  const applied = files.some((f) => f.applied === undefined || f.applied > 0);
  return applied ? { applied: true } : { applied: false, failureReason: 'nothing was ticked in the Refactor Preview' };
}

/** What the user did with a hunk, as `agentfix.reviewed` says it. */
export type HunkOutcome = 'accepted' | 'rejected' | 'changed';

/** One entry of `agentfix.reviewed`'s `hunks`: a change annotation and what became of its hunks. */
export interface HunkReview {
  annotationId: string;
  outcome: HunkOutcome;
  reason?: string;
}

/** A hunk after the review: its change annotation, and whether it was applied (undefined: cannot be told). */
export interface HunkFate {
  annotationId?: string;
  applied: boolean | undefined;
}

/**
 * What the review tells the server (`agentfix.reviewed`), per change
 * annotation, in the order the annotations first come: `accepted` when
 * every hunk of it was applied, `rejected` when none was. Left out (the
 * server then works each hunk out from the file when a follow-up starts):
 * hunks without an annotation, an annotation whose hunks went different
 * ways (unticked one by one in the preview), and hunks whose file changed
 * otherwise as well (`applied` undefined). The Refactor Preview has no
 * editable text and refuses to apply when a file changed while it was open,
 * so this review never reports `changed`.
 */
export function hunkReviews(hunks: readonly HunkFate[]): HunkReview[] {
  const groups = new Map<string, (boolean | undefined)[]>();
  for (const h of hunks) {
    if (h.annotationId !== undefined) {
      groups.set(h.annotationId, [...(groups.get(h.annotationId) ?? []), h.applied]);
    }
  }
  const reviews: HunkReview[] = [];
  for (const [annotationId, applied] of groups) {
    if (applied.every((a) => a === true)) {
      reviews.push({ annotationId, outcome: 'accepted' });
    } else if (applied.every((a) => a === false)) {
      reviews.push({ annotationId, outcome: 'rejected' });
    }
  }
  return reviews;
}

/** The most characters of a reason the server keeps (one line). */
export const MAX_REASON_CHARS = 300;

/**
 * The reviews with the user's reason on every rejected one: made one line,
 * at most 300 characters (as the server keeps it); a blank or absent
 * reason changes nothing.
 */
export function withReason(reviews: readonly HunkReview[], reason: string | undefined): HunkReview[] {
  const line = (reason ?? '').split(/\s+/).filter(Boolean).join(' ');
  const text = [...line].slice(0, MAX_REASON_CHARS).join('');
  return reviews.map((r) => (text && r.outcome === 'rejected' ? { ...r, reason: text } : { ...r }));
}

/**
 * The question after a review that rejected something: the change by its
 * label when one was rejected ("Why did you reject “stats.py:6: Possible
 * division by zero when b == 0”?"), else how many ("Why did you reject 2
 * of 3 changes?"). Undefined when nothing was rejected.
 */
export function rejectionQuestion(reviews: readonly HunkReview[], labels: { [id: string]: { label?: string } | undefined }): string | undefined {
  const rejected = reviews.filter((r) => r.outcome === 'rejected');
  if (rejected.length === 0) {
    return undefined;
  }
  const label = labels[rejected[0].annotationId]?.label;
  if (rejected.length === 1 && label) {
    return `Why did you reject \u201c${label}\u201d?`;
  }
  if (reviews.length === 1) {
    return 'Why did you reject the change?';
  }
  return rejected.length === reviews.length
    ? `Why did you reject all ${reviews.length} changes?`
    : `Why did you reject ${rejected.length} of ${changes(reviews.length)}?`;
}
