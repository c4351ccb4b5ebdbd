import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
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
