import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  alternativeArgument,
  bestOfSummary,
  candidateChoices,
  checkLine,
  fixAllArgument,
  followUpArgument,
  formatTokens,
  isFollowUp,
  modelList,
  pickFixArgument,
  resultStatus,
  runningStatus,
  spanOf,
  tokensOf,
  turnOf,
  withCandidates,
  withInstruction,
  withModel,
} from '../runs';

const arg = (n: number) => ({ uri: 'file:///w/calc.py', version: 3, range: { n }, diagnostics: [] });

test('"Agent fix" runs the first Agent fix action at the cursor', () => {
  const actions = [
    { title: 'Other: do something', kind: 'quickfix', command: { title: 'x', command: 'other.cmd', arguments: [1] } },
    { title: 'Agent fix: division by zero', kind: 'quickfix', command: { title: 't', command: 'agentfix.fix', arguments: [arg(1)] } },
    { title: 'Agent fix: other problem', kind: 'quickfix', command: { title: 't', command: 'agentfix.fix', arguments: [arg(2)] } },
  ];
  assert.deepEqual(pickFixArgument(actions, false), arg(1));
});

test('with a selection, the "Agent fix: selection" action wins', () => {
  const actions = [
    { title: 'Agent fix: division by zero', kind: 'quickfix', command: { title: 't', command: 'agentfix.fix', arguments: [arg(1)] } },
    { title: 'Agent fix: selection', kind: 'refactor.rewrite', command: { title: 't', command: 'agentfix.fix', arguments: [arg(2)] } },
  ];
  assert.deepEqual(pickFixArgument(actions, true), arg(2));
  assert.deepEqual(pickFixArgument(actions, false), arg(1));
});

test('plain Command answers work too; no action gives undefined', () => {
  assert.deepEqual(pickFixArgument([{ title: 'Agent fix: x', command: 'agentfix.fix', arguments: [arg(3)] }], false), arg(3));
  assert.equal(pickFixArgument([], false), undefined);
  assert.equal(pickFixArgument(null, true), undefined);
  assert.equal(pickFixArgument([{ title: 'Agent fix: x', command: { title: 't', command: 'agentfix.fix' } }], false), undefined);
});

test('"Agent fix" never picks a follow-up or a fix-all: it starts afresh on what is under the cursor', () => {
  const followUp = { ...arg(2), followUp: 'run-1' };
  const actions = [
    { title: 'Agent fix: all 2 problems in this file', kind: 'source.fixAll.agentfix', command: { title: 't', command: 'agentfix.fix', arguments: [arg(9)] } },
    { title: 'Agent fix: follow up…', kind: 'refactor.rewrite', command: { title: 't', command: 'agentfix.fix', arguments: [followUp] } },
    { title: 'Agent fix: line 2', kind: 'refactor.rewrite', command: { title: 't', command: 'agentfix.fix', arguments: [arg(1)] } },
  ];
  assert.deepEqual(pickFixArgument(actions, false), arg(1));
  assert.deepEqual(pickFixArgument(actions, true), arg(1));
  assert.equal(pickFixArgument(actions.slice(0, 2), false), undefined);
});

test('the model of one run goes in `model`; blank is no model', () => {
  assert.deepEqual(withModel(arg(1), 'claude-haiku-4-5'), { ...arg(1), model: 'claude-haiku-4-5' });
  assert.deepEqual(withModel(arg(1), '  gpt-4.1-mini '), { ...arg(1), model: 'gpt-4.1-mini' });
  assert.deepEqual(withModel(arg(1), '   '), arg(1));
  assert.deepEqual(withModel({ ...arg(1), instruction: 'x' }, 'm'), { ...arg(1), instruction: 'x', model: 'm' });
});

test('agentfix.models: strings only, trimmed, each once', () => {
  assert.deepEqual(modelList(['claude-haiku-4-5', ' claude-opus-4-5 ', '', 3, 'claude-haiku-4-5', null]), ['claude-haiku-4-5', 'claude-opus-4-5']);
  assert.deepEqual(modelList(undefined), []);
  assert.deepEqual(modelList('claude-haiku-4-5'), []);
});

test('a follow-up action gets the instruction typed; empty leaves it out', () => {
  const action = { ...arg(1), followUp: 'run-7' };
  assert.ok(isFollowUp(action));
  assert.ok(!isFollowUp(arg(1)));
  assert.ok(!isFollowUp({ ...arg(1), followUp: '' }));
  assert.ok(!isFollowUp(null));
  assert.deepEqual(withInstruction(action, '  also handle negative numbers \n'), { ...action, instruction: 'also handle negative numbers' });
  assert.deepEqual(withInstruction(action, ''), action);
  assert.deepEqual(withInstruction({ ...action, instruction: 'old' }, '  '), action);
  assert.equal('instruction' in withInstruction(action, ' '), false);
});

test('"follow up on the last run": the argument at the cursor, the run id, the instruction', () => {
  const here = { uri: 'file:///w/calc.py', version: 9, range: { start: { line: 1, character: 4 }, end: { line: 1, character: 4 } }, diagnostics: [] };
  assert.deepEqual(followUpArgument(here, 'run-3', 'use math.isclose'), { ...here, followUp: 'run-3', instruction: 'use math.isclose' });
  assert.deepEqual(followUpArgument(here, 'run-3', ''), { ...here, followUp: 'run-3' });
  // The cursor's own action may have been a follow-up on another run: the last run wins.
  assert.equal(followUpArgument({ ...here, followUp: 'run-1' }, 'run-3', 'x').followUp, 'run-3');
});

const at = (l1: number, c1: number, l2: number, c2: number) => ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 } });

test('fix-all: every diagnostic, in document order, over the range spanning them', () => {
  const a = { range: at(5, 11, 5, 16), message: 'second', source: 'fake-types' };
  const b = { range: at(1, 4, 1, 16), message: 'first', source: 'fake-lint' };
  const c = { range: at(5, 2, 7, 0), message: 'third', source: 'fake-lint' };
  const argument = fixAllArgument('file:///w/stats.py', 4, [a, b, c]);
  assert.deepEqual(argument, { uri: 'file:///w/stats.py', version: 4, range: at(1, 4, 7, 0), diagnostics: [b, c, a] });
  assert.deepEqual(fixAllArgument('file:///w/stats.py', 4, [b])?.range, b.range);
  assert.equal(fixAllArgument('file:///w/stats.py', 4, []), undefined);
  assert.deepEqual(spanOf([at(3, 9, 3, 10), at(3, 2, 3, 5)]), at(3, 2, 3, 10));
  // The span is a copy: the diagnostics' ranges are left as they are.
  const span = spanOf([b.range]);
  assert.notEqual(span.start, b.range.start);
});

test('progress messages give the turn', () => {
  assert.equal(turnOf('turn 2: read_file calc.py'), 2);
  assert.equal(turnOf('turn 13: preparing edit_file'), 13);
  assert.equal(turnOf('retry 1 in 0.4 s: overloaded'), undefined);
  assert.equal(turnOf(undefined), undefined);
  assert.equal(tokensOf('turn 3 · 12,345 tokens: grep'), 12345);
  assert.equal(tokensOf('turn 3: grep tokens'), undefined);
});

test('token counts read short', () => {
  assert.equal(formatTokens(950), '950');
  assert.equal(formatTokens(12345), '12.3k');
  assert.equal(formatTokens(2_000_000), '2.0M');
});

test('the status bar: running, then the stop reason and tokens', () => {
  assert.equal(runningStatus(1, 2, undefined, 'turn 2: read_file calc.py').text, '$(sync~spin) Agent fix: running · turn 2');
  assert.equal(runningStatus(2, undefined, 1500, undefined).text, '$(sync~spin) Agent fix: 2 runs · 1.5k tokens');
  const done = resultStatus({ applied: true, stopReason: 'end_turn', turns: 2, inputTokens: 1200, outputTokens: 80, message: 'Agent fix: Guarded the division. (1 file)', transcript: null });
  assert.equal(done.text, '$(check) Agent fix: end_turn · 1.3k tokens');
  assert.match(done.tooltip, /Guarded the division/);
  assert.match(done.tooltip, /turns: 2; tokens: 1200 in, 80 out/);
  assert.equal(resultStatus({ stopReason: 'max_turns', applied: true }).text, '$(warning) Agent fix: max_turns · 0 tokens');
  assert.equal(resultStatus({ stopReason: 'cancelled' }).text, '$(circle-slash) Agent fix: cancelled · 0 tokens');
});

test('the status bar leads with the check of the proposal when one ran', () => {
  const ran = (verified: boolean) => ({
    verified,
    rounds: 2,
    diagnostics: null,
    commands: [{ name: 'test', passed: verified, exitCode: verified ? 0 : 1, secs: 4.1 }],
  });
  const verified = resultStatus({ applied: true, stopReason: 'end_turn', verification: ran(true) });
  assert.equal(verified.text, '$(check) Agent fix: verified · end_turn · 0 tokens');
  const not = resultStatus({ applied: true, stopReason: 'end_turn', verification: ran(false), message: 'Agent fix: not verified: test failed; …' });
  assert.equal(not.text, '$(warning) Agent fix: not verified · end_turn · 0 tokens');
  assert.match(not.tooltip, /not verified: test failed/);
  // Nothing was set up to check it: no word.
  const nothing = { verified: false, rounds: 1, diagnostics: null, commands: [] };
  assert.equal(resultStatus({ applied: true, stopReason: 'end_turn', verification: nothing }).text, '$(check) Agent fix: end_turn · 0 tokens');
});

test('"Agent fix" never picks an alternative of a best-of run (agentfix.applyAlternative)', () => {
  const actions = [
    { title: 'Agent fix: alternative 1 (not verified: test failed)', kind: 'refactor.rewrite', command: { title: 't', command: 'agentfix.applyAlternative', arguments: [{ runId: 'run-1', index: 1 }] } },
    { title: 'Agent fix: line 2', kind: 'refactor.rewrite', command: { title: 't', command: 'agentfix.fix', arguments: [arg(1)] } },
  ];
  assert.deepEqual(pickFixArgument(actions, false), arg(1));
  assert.equal(pickFixArgument(actions.slice(0, 1), true), undefined);
  assert.deepEqual(alternativeArgument({ runId: 'run-1', index: 2 }), { runId: 'run-1', index: 2 });
  assert.equal(alternativeArgument({ runId: 'run-1' }), undefined);
  assert.equal(alternativeArgument(arg(1)), undefined);
});

test('"Agent fix: best of N…": 2 to 8 candidates, 3 unless agentfix.candidates says more than one', () => {
  assert.deepEqual(withCandidates(arg(1), 3), { ...arg(1), candidates: 3 });
  for (const bad of [1, 9, 2.5, Number.NaN]) {
    assert.throws(() => withCandidates(arg(1), bad), /the candidates must be 2 to 8/);
  }
  assert.deepEqual(candidateChoices(undefined), { counts: [2, 3, 4, 5, 6, 7, 8], preselected: 3 });
  assert.equal(candidateChoices(1).preselected, 3, 'the default setting, one candidate');
  assert.equal(candidateChoices(5).preselected, 5);
  assert.equal(candidateChoices('5').preselected, 3);
});

const passed = (name: string, secs: number) => ({ name, passed: true, exitCode: 0, secs });
const failed = (name: string) => ({ name, passed: false, exitCode: 1, secs: 0.2 });

test('the check reads as the server words it in the label', () => {
  assert.equal(checkLine({ verified: true, rounds: 1, diagnostics: null, commands: [passed('test', 0.04)] }), 'verified: test passed (0.0 s)');
  assert.equal(
    checkLine({ verified: true, rounds: 1, diagnostics: { fixed: 1, introduced: 0, remaining: 0 }, commands: [passed('test', 4.12)] }),
    'verified: 1 fixed, 0 new; test passed (4.1 s)',
  );
  assert.equal(checkLine({ verified: false, rounds: 1, diagnostics: { fixed: 0, introduced: 0, remaining: 0 }, commands: [failed('test')] }), 'not verified: test failed');
  assert.equal(checkLine({ verified: false, rounds: 2, diagnostics: { fixed: 0, introduced: 2, remaining: 2 }, commands: [] }), 'not verified: 2 new errors');
  assert.equal(checkLine({ verified: false, rounds: 1, diagnostics: { fixed: 0, introduced: 0, remaining: 1 }, commands: [] }), 'not verified: the problem is still reported');
  assert.equal(checkLine({ verified: false, rounds: 1, diagnostics: null, commands: [] }), undefined);
  assert.equal(checkLine(null), undefined);
});

test('a best-of-N result names the candidate chosen, its check and the alternatives', () => {
  const candidate = (index: number, chosen: boolean, linesChanged: number) => ({ index, verified: chosen, chosen, costUsd: null, linesChanged, stopReason: 'end_turn' });
  const verification = { verified: true, rounds: 1, diagnostics: null, commands: [passed('test', 0.1)] };
  const result = { applied: true, stopReason: 'end_turn', verification, candidates: [candidate(1, false, 2), candidate(2, false, 2), candidate(3, true, 2)] };
  assert.equal(bestOfSummary(result), 'candidate 3 of 3 chosen; 2 alternatives: Ctrl+. on the changed lines to apply one; the chosen one is verified: test passed (0.1 s)');
  // A candidate that proposed nothing is no alternative.
  const one = { ...result, candidates: [candidate(1, false, 0), candidate(2, true, 4), candidate(3, false, 1)] };
  assert.equal(bestOfSummary(one), 'candidate 2 of 3 chosen; 1 alternative: Ctrl+. on the changed lines to apply it; the chosen one is verified: test passed (0.1 s)');
  assert.equal(bestOfSummary({ ...one, verification: null, candidates: [candidate(1, true, 3), candidate(2, false, 0)] }), 'candidate 1 of 2 chosen; no alternatives');
  assert.equal(bestOfSummary({ candidates: [candidate(1, true, 0), candidate(2, false, 0)] }), 'none of the 2 candidates proposed an edit');
  // One candidate: no best-of line.
  assert.equal(bestOfSummary({ candidates: [] }), undefined);
  assert.equal(bestOfSummary({}), undefined);
  assert.match(resultStatus(result).tooltip, /candidate 3 of 3 chosen/);
});
