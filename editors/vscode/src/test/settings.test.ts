import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

import { configurationFor, explicitValue, isOurSection, serverSettingNames, serverSettings, type Inspected } from '../settings';

// out/test/settings.test.js -> the extension's package.json
const root = path.join(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const schema = JSON.parse(fs.readFileSync(process.env.AGENTFIX_SCHEMA ?? path.join(root, '..', '..', 'agentfix.schema.json'), 'utf8'));

test('package.json contributes every server setting of agentfix.schema.json', () => {
  const names = [...serverSettingNames(manifest).keys()];
  const missing = Object.keys(schema.properties).filter((k) => !names.includes(k));
  assert.deepEqual(missing, [], `add these settings to editors/vscode/package.json (contributes.configuration.properties) as agentfix.<name>: ${missing.join(', ')}`);
  const unknown = names.filter((k) => !(k in schema.properties));
  assert.deepEqual(unknown, [], `package.json declares server settings that agentfix.schema.json does not have: ${unknown.join(', ')}`);
  for (const [name, prop] of Object.entries(manifest.contributes.configuration.properties as Record<string, Record<string, unknown>>)) {
    assert.ok(prop.markdownDescription || prop.description, `${name} has a description`);
  }
});

test('types, enums and minimums match the schema', () => {
  const props = manifest.contributes.configuration.properties;
  const consts = (def: string) => schema.$defs[def].oneOf.map((o: { const: string }) => o.const);
  assert.deepEqual(props['agentfix.provider'].enum, consts('ProviderKind'));
  assert.deepEqual(props['agentfix.partialEdits'].enum, consts('PartialEdits'));
  // Empty is "not set" (never sent), so effort stays unset unless chosen.
  assert.deepEqual(props['agentfix.effort'].enum, ['', ...consts('Effort')]);
  for (const name of serverSettingNames(manifest).keys()) {
    const theirs = schema.properties[name];
    const ours = props[`agentfix.${name}`];
    if (!theirs) {
      continue; // reported by the test above
    }
    // A setting of a type of its own (`verify`) is `anyOf: [{$ref}, null]`;
    // an enum's definition has no `type` (its values are strings).
    const refType = (s: { $ref?: string; type?: string }) =>
      s.$ref ? (schema.$defs[s.$ref.replace('#/$defs/', '')].type ?? 'string') : s.type;
    const types: string[] = [theirs.type ?? theirs.anyOf?.map(refType) ?? 'string'].flat();
    // Ours may be a union too (`["number", "null"]` for maxCostUsd): every member must be theirs.
    for (const type of [ours.type].flat()) {
      assert.ok(types.includes(type), `agentfix.${name}: type ${type} is not one of ${types}`);
    }
    assert.equal(ours.minimum, theirs.minimum, `agentfix.${name}: minimum`);
  }
});

test('where the key goes, and which programs run, can only be set in user settings', () => {
  const props = manifest.contributes.configuration.properties;
  for (const name of ['provider', 'baseUrl', 'serverPath', 'languageServers', 'commands', 'envAllow', 'mcpServers']) {
    assert.equal(props[`agentfix.${name}`].scope, 'machine', name);
  }
});

test('only what the user set is sent, so agentfix.toml and the environment still count', () => {
  const names = serverSettingNames(manifest);
  const inspected: Record<string, Inspected> = {
    maxTurns: { globalValue: 5, workspaceValue: 7 },
    model: { globalValue: '' },
    baseUrl: { globalValue: 'http://127.0.0.1:9/', workspaceValue: 'http://evil.example/' },
    provider: { workspaceValue: 'openai' },
    transcripts: { globalValue: false },
    timeoutSecs: { globalValue: null },
    partialEdits: { workspaceFolderValue: 'discard', globalValue: 'offer' },
  };
  const settings = serverSettings(names, (n) => inspected[n] ?? {});
  assert.deepEqual(settings, {
    maxTurns: 7,
    baseUrl: 'http://127.0.0.1:9/',
    transcripts: false,
    partialEdits: 'discard',
  });
  assert.deepEqual(serverSettings(names, () => undefined), {});
});

test('a machine-scoped setting ignores workspace values', () => {
  assert.equal(explicitValue({ scope: 'machine' }, { workspaceValue: 'x' }), undefined);
  assert.equal(explicitValue({ scope: 'application' }, { globalValue: 'y', workspaceFolderValue: 'x' }), 'y');
  assert.equal(explicitValue({}, { globalValue: 'y', workspaceFolderValue: 'x' }), 'x');
  assert.equal(explicitValue({ scope: 'window' }, { globalValue: 0 }), 0);
});

test('a new server setting is a package.json change: it is sent by its name, nested when dotted', () => {
  const m = structuredClone(manifest);
  m.contributes.configuration.properties['agentfix.languageServers'] = { type: 'object', default: {} };
  m.contributes.configuration.properties['agentfix.commands'] = { type: 'array', default: [] };
  m.contributes.configuration.properties['agentfix.tools.grep'] = { type: 'boolean', default: true };
  const values: Record<string, Inspected> = {
    languageServers: { globalValue: { python: { command: ['pyright-langserver', '--stdio'] } } },
    commands: { workspaceValue: [{ name: 'test', command: 'pytest' }] },
    'tools.grep': { globalValue: false },
    serverPath: { globalValue: '/x/agentfix' },
    'trace.server': { globalValue: 'verbose' },
    models: { globalValue: ['claude-haiku-4-5'] },
    review: { globalValue: 'unticked' },
  };
  const settings = serverSettings(serverSettingNames(m), (n) => values[n]);
  assert.deepEqual(settings, {
    languageServers: { python: { command: ['pyright-langserver', '--stdio'] } },
    commands: [{ name: 'test', command: 'pytest' }],
    tools: { grep: false },
  });
});

test('workspace/configuration answers the section or a part of it', () => {
  const s = { maxTurns: 3, tools: { grep: false } };
  assert.deepEqual(configurationFor('agentfix', s), s);
  assert.equal(configurationFor('agentfix.maxTurns', s), 3);
  assert.equal(configurationFor('agentfix.tools.grep', s), false);
  assert.equal(configurationFor('agentfix.model', s), null);
  assert.equal(configurationFor('agentfix.maxTurns.x', s), null);
  assert.ok(isOurSection('agentfix'));
  assert.ok(isOurSection('agentfix.model'));
  assert.ok(!isOurSection('agentfixer'));
  assert.ok(!isOurSection('python'));
  assert.ok(!isOurSection(null));
});
