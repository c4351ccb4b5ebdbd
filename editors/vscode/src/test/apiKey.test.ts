import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ALL_KEY_VARIABLES, effectiveProvider, keyVariable, secretName, serverEnv } from '../apiKey';

test('each provider has its key variable', () => {
  assert.equal(keyVariable('anthropic'), 'ANTHROPIC_API_KEY');
  assert.equal(keyVariable('openai'), 'OPENAI_API_KEY');
  assert.equal(keyVariable('openai-compatible'), 'AGENTFIX_API_KEY');
  assert.deepEqual([...ALL_KEY_VARIABLES].sort(), ['AGENTFIX_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY']);
});

test('the provider: the setting, else AGENTFIX_PROVIDER, else anthropic', () => {
  assert.equal(effectiveProvider('openai', { AGENTFIX_PROVIDER: 'openai-compatible' }), 'openai');
  assert.equal(effectiveProvider(undefined, { AGENTFIX_PROVIDER: 'openai-compatible' }), 'openai-compatible');
  assert.equal(effectiveProvider(undefined, {}), 'anthropic');
  assert.equal(effectiveProvider('bogus', { AGENTFIX_PROVIDER: 'also-bogus' }), 'anthropic');
});

test('stored keys go into the server environment over inherited ones; nothing else changes', () => {
  const base = { PATH: '/usr/bin', ANTHROPIC_API_KEY: 'from-env', OPENAI_API_KEY: 'env-openai', UNSET: undefined };
  const env = serverEnv(base, { ANTHROPIC_API_KEY: 'test-key-0123', AGENTFIX_API_KEY: '', OPENAI_API_KEY: undefined });
  assert.deepEqual(env, { PATH: '/usr/bin', ANTHROPIC_API_KEY: 'test-key-0123', OPENAI_API_KEY: 'env-openai' });
  assert.equal(base.ANTHROPIC_API_KEY, 'from-env', 'the base environment is not modified');
});

test('secrets are stored under the variable name', () => {
  assert.equal(secretName('ANTHROPIC_API_KEY'), 'agentfix.apiKey.ANTHROPIC_API_KEY');
});
