// The review of a proposal: the server's WorkspaceEdit with every hunk
// ticked (converted with vscode-languageclient's own protocol converter, as
// the extension does), which hunks the user kept, and the message after it.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import './vscodeShim';
import type { WorkspaceEdit } from './vscodeShim';
// After the shim: the converter imports `vscode`.
import { createConverter } from 'vscode-languageclient/lib/common/protocolConverter';

import {
  appliedHunks,
  appliedMessage,
  applyAnswer,
  fileHunks,
  hunkReviews,
  type LspWorkspaceEdit,
  MAX_REASON_CHARS,
  rejectionQuestion,
  sentinelTarget,
  ticked,
  withReason,
} from '../review';

const at = (l1: number, c1: number, l2: number, c2: number) => ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 } });

/** A fix-all proposal as the server sends it: two problems, one hunk each, each needing confirmation. */
const proposal = (): LspWorkspaceEdit => ({
  documentChanges: [
    {
      textDocument: { uri: 'file:///w/stats.py', version: 4 },
      edits: [
        { range: at(5, 0, 5, 16), newText: '    return a / b if b else 0.0', annotationId: 'p2' },
        { range: at(1, 0, 1, 36), newText: '    return sum(values) / len(values) if values else 0.0', annotationId: 'p1' },
      ],
    },
  ],
  changeAnnotations: {
    p1: { label: 'stats.py:2: ZeroDivisionError: mean of an empty list', needsConfirmation: true, description: 'guard the empty list' },
    p2: { label: 'stats.py:6: Possible division by zero when b == 0', needsConfirmation: true, description: 'guard b == 0' },
  },
});

test('every hunk is ticked: the annotations keep their label and reason but need no confirmation', async () => {
  const sent = proposal();
  const edit = ticked(sent);
  assert.equal(sent.changeAnnotations?.p1.needsConfirmation, true, 'the server\'s edit is left as it is');
  const converted = (await createConverter(undefined, false, false).asWorkspaceEdit(edit as never)) as unknown as WorkspaceEdit;
  assert.deepEqual(
    converted.entries.map((e) => [e.kind, e.uri.toString(), e.newText, e.metadata]),
    [
      ['replace', 'file:///w/stats.py', '    return a / b if b else 0.0', { label: 'stats.py:6: Possible division by zero when b == 0', needsConfirmation: false, description: 'guard b == 0' }],
      [
        'replace',
        'file:///w/stats.py',
        '    return sum(values) / len(values) if values else 0.0',
        { label: 'stats.py:2: ZeroDivisionError: mean of an empty list', needsConfirmation: false, description: 'guard the empty list' },
      ],
    ],
  );
  // An edit without annotations (a client without changeAnnotationSupport) is the same edit.
  const plain = { changes: { 'file:///w/a.py': [{ range: at(0, 0, 0, 1), newText: 'x' }] } };
  assert.equal(ticked(plain), plain);
});

test('each file\'s hunks in document order; a created file is marked; the sentinel goes on an existing file', () => {
  const files = fileHunks(proposal());
  assert.deepEqual(files, [
    {
      uri: 'file:///w/stats.py',
      version: 4,
      created: false,
      hunks: [
        { range: at(1, 0, 1, 36), newText: '    return sum(values) / len(values) if values else 0.0', annotationId: 'p1' },
        { range: at(5, 0, 5, 16), newText: '    return a / b if b else 0.0', annotationId: 'p2' },
      ],
    },
  ]);
  assert.equal(sentinelTarget(files, 'file:///w'), 'file:///w/stats.py');
  const created = fileHunks({
    documentChanges: [
      { kind: 'create', uri: 'file:///w/new.py' },
      { textDocument: { uri: 'file:///w/new.py', version: null }, edits: [{ range: at(0, 0, 0, 0), newText: 'x = 1\n' }] },
    ],
  });
  assert.deepEqual(created, [{ uri: 'file:///w/new.py', version: null, created: true, hunks: [{ range: at(0, 0, 0, 0), newText: 'x = 1\n' }] }]);
  assert.equal(sentinelTarget(created, 'file:///w'), 'file:///w', 'only new files: the workspace folder');
  assert.equal(sentinelTarget(created, undefined), undefined);
  assert.deepEqual(fileHunks({ changes: { 'file:///w/a.py': [{ range: at(0, 0, 0, 1), newText: 'x' }] } })[0].hunks.length, 1);
});

test('which hunks the user kept, read from the text before and after the review', () => {
  const before = 'a = 1\nb = 2\nc = 3\n';
  const hunks = [
    { start: 4, end: 5, newText: '10' }, // a = 10
    { start: 10, end: 11, newText: '20' }, // b = 20
    { start: 16, end: 17, newText: '30' }, // c = 30
  ];
  assert.deepEqual(appliedHunks(before, 'a = 10\nb = 20\nc = 30\n', hunks), [true, true, true]);
  assert.deepEqual(appliedHunks(before, 'a = 10\nb = 2\nc = 30\n', hunks), [true, false, true]);
  assert.deepEqual(appliedHunks(before, before, hunks), [false, false, false]);
  assert.equal(appliedHunks(before, 'a = 10\nb = 2\nc = 3\n# typed\n', hunks), undefined, 'changed otherwise');
  // An insertion and a deletion.
  assert.deepEqual(appliedHunks('xy', 'xNEWy', [{ start: 1, end: 1, newText: 'NEW' }]), [true]);
  assert.deepEqual(appliedHunks('x DEL y', 'x  y', [{ start: 2, end: 5, newText: '' }]), [true]);
  assert.deepEqual(appliedHunks('x DEL y', 'x DEL y', [{ start: 2, end: 5, newText: '' }]), [false]);
  // A new text that starts like the old one is told apart by what follows.
  assert.deepEqual(appliedHunks('return a\nend', 'return a\nend', [{ start: 0, end: 8, newText: 'return a if b' }]), [false]);
  assert.deepEqual(appliedHunks('return a\nend', 'return a if b\nend', [{ start: 0, end: 8, newText: 'return a if b' }]), [true]);
  assert.deepEqual(appliedHunks('', 'x = 1\n', [{ start: 0, end: 0, newText: 'x = 1\n' }]), [true], 'a new file');
});

test('the message after the review says what was applied', () => {
  assert.equal(appliedMessage([{ name: 'calc.py', total: 3, applied: 2 }]), 'Agent fix: applied 2 of 3 changes to calc.py.');
  assert.equal(appliedMessage([{ name: 'calc.py', total: 1, applied: 1 }]), 'Agent fix: applied 1 of 1 change to calc.py.');
  assert.equal(appliedMessage([{ name: 'calc.py', total: 2, applied: 0 }]), 'Agent fix: nothing applied.');
  assert.equal(
    appliedMessage([
      { name: 'calc.py', total: 2, applied: 2 },
      { name: 'stats.py', total: 2, applied: 1 },
    ]),
    'Agent fix: applied 3 of 4 changes: calc.py 2 of 2, stats.py 1 of 2.',
  );
  assert.equal(appliedMessage([{ name: 'calc.py', total: 2, applied: undefined }]), 'Agent fix: calc.py changed, but not only by the proposal\'s 2 changes: check it.');
  assert.match(
    appliedMessage([
      { name: 'calc.py', total: 1, applied: 1 },
      { name: 'stats.py', total: 2, applied: undefined },
    ]),
    /applied 1 of 3 changes: calc\.py 1 of 1 \(stats\.py changed otherwise as well: check it\)\.$/,
  );
});

test('the server hears applied when anything was; nothing applied is a refusal with its reason', () => {
  assert.deepEqual(applyAnswer([{ name: 'calc.py', total: 3, applied: 1 }]), { applied: true });
  assert.deepEqual(applyAnswer([{ name: 'calc.py', total: 3, applied: 0 }]), { applied: false, failureReason: 'nothing was ticked in the Refactor Preview' });
  assert.deepEqual(applyAnswer([{ name: 'calc.py', total: 3, applied: undefined }]), { applied: true });
});

test('what the review tells the server: each hunk mapped back to its change annotation, accepted or rejected', () => {
  // The fix-all proposal: its hunks sorted as the review offsets them, each with its annotation.
  const [file] = fileHunks(proposal());
  const before = 'def mean(values):\n    return sum(values) / len(values)\n\n\ndef ratio(a, b):\n    return a / b\n';
  const offset = (p: { line: number; character: number }) =>
    before.split('\n').slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
  const hunks = file.hunks.map((h) => ({ start: offset(h.range.start), end: offset(h.range.end), newText: h.newText }));
  // The first problem ticked, the second unticked in the preview.
  const after = before.replace('    return sum(values) / len(values)', file.hunks[0].newText);
  const picks = appliedHunks(before, after, hunks);
  const fates = file.hunks.map((h, i) => ({ annotationId: h.annotationId, applied: picks?.[i] }));
  assert.deepEqual(hunkReviews(fates), [
    { annotationId: 'p1', outcome: 'accepted' },
    { annotationId: 'p2', outcome: 'rejected' },
  ]);
  // Hunks of one annotation go together; one that went both ways, one that
  // cannot be told (the file changed otherwise) and one without an
  // annotation are left for the server to work out.
  assert.deepEqual(
    hunkReviews([
      { annotationId: 'a', applied: true },
      { annotationId: 'b', applied: true },
      { annotationId: 'a', applied: true },
      { annotationId: 'b', applied: false },
      { annotationId: 'c', applied: undefined },
      { applied: false },
      { annotationId: 'd', applied: false },
      { annotationId: 'd', applied: false },
    ]),
    [
      { annotationId: 'a', outcome: 'accepted' },
      { annotationId: 'd', outcome: 'rejected' },
    ],
  );
  assert.deepEqual(hunkReviews([]), []);
});

test('the reason goes on the rejected hunks only, one line, as long as the server keeps it', () => {
  const reviews = [
    { annotationId: 'p1', outcome: 'accepted' as const },
    { annotationId: 'p2', outcome: 'rejected' as const },
  ];
  assert.deepEqual(withReason(reviews, '  mean() of nothing\n must raise '), [
    { annotationId: 'p1', outcome: 'accepted' },
    { annotationId: 'p2', outcome: 'rejected', reason: 'mean() of nothing must raise' },
  ]);
  // Escape (undefined) or a blank answer: no reason.
  assert.deepEqual(withReason(reviews, undefined), reviews);
  assert.deepEqual(withReason(reviews, ' \n '), reviews);
  assert.equal(withReason(reviews, 'x'.repeat(400))[1].reason?.length, MAX_REASON_CHARS);
  assert.equal(reviews[1].outcome, 'rejected', 'the input is left as it is');
  assert.equal((reviews[1] as { reason?: string }).reason, undefined);
});

test('the question after a review names the change rejected, or how many', () => {
  const labels = proposal().changeAnnotations ?? {};
  const a = (annotationId: string, outcome: 'accepted' | 'rejected') => ({ annotationId, outcome });
  assert.equal(rejectionQuestion([a('p1', 'accepted'), a('p2', 'accepted')], labels), undefined, 'nothing rejected: no question');
  assert.equal(
    rejectionQuestion([a('p1', 'accepted'), a('p2', 'rejected')], labels),
    'Why did you reject \u201cstats.py:6: Possible division by zero when b == 0\u201d?',
  );
  assert.equal(rejectionQuestion([a('x', 'rejected')], {}), 'Why did you reject the change?');
  assert.equal(rejectionQuestion([a('p1', 'rejected'), a('p2', 'rejected')], labels), 'Why did you reject all 2 changes?');
  assert.equal(rejectionQuestion([a('p1', 'rejected'), a('p2', 'rejected'), a('p3', 'accepted')], labels), 'Why did you reject 2 of 3 changes?');
});
