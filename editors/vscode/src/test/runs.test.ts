import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatTokens, pickFixArgument, resultStatus, runningStatus, tokensOf, turnOf } from '../runs';

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
