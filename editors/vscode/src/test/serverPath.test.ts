import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';

import { bundledPath, NOT_FOUND_MESSAGE, resolveServerPath, type ResolveInput } from '../serverPath';

const EXT = '/ext/agentfix-0.1.0';

function input(files: string[], over: Partial<ResolveInput> = {}): ResolveInput {
  const set = new Set(files);
  return {
    setting: '',
    extensionPath: EXT,
    platform: 'linux',
    arch: 'x64',
    env: { PATH: '/usr/local/bin:/usr/bin', HOME: '/home/u' },
    isExecutable: (f) => set.has(f),
    ...over,
  };
}

test('the setting wins over the bundled binary and PATH', () => {
  const r = resolveServerPath(input(['/opt/agentfix', `${EXT}/bin/linux-x64/agentfix`, '/usr/bin/agentfix'], { setting: '/opt/agentfix' }));
  assert.deepEqual(r, { ok: true, path: '/opt/agentfix', source: 'setting' });
});

test('a setting that points nowhere is an error naming it, not a fallback', () => {
  const r = resolveServerPath(input(['/usr/bin/agentfix'], { setting: '/nope/agentfix' }));
  assert.equal(r.ok, false);
  assert.match(!r.ok ? r.message : '', /agentfix\.serverPath.*\/nope\/agentfix.*not an executable/);
  assert.match(!r.ok ? r.message : '', /cargo install --path \./);
});

test('the setting expands ~ and resolves relative paths against the workspace folder', () => {
  assert.deepEqual(resolveServerPath(input(['/home/u/bin/agentfix'], { setting: '~/bin/agentfix' })), {
    ok: true,
    path: '/home/u/bin/agentfix',
    source: 'setting',
  });
  assert.deepEqual(
    resolveServerPath(input(['/ws/target/debug/agentfix'], { setting: 'target/debug/agentfix', workspaceFolder: '/ws' })),
    { ok: true, path: '/ws/target/debug/agentfix', source: 'setting' },
  );
});

test('the bundled binary is bin/<platform>-<arch>/agentfix inside the extension', () => {
  assert.equal(bundledPath(EXT, 'linux', 'x64'), path.join(EXT, 'bin', 'linux-x64', 'agentfix'));
  assert.equal(bundledPath(EXT, 'darwin', 'arm64'), path.join(EXT, 'bin', 'darwin-arm64', 'agentfix'));
  assert.equal(bundledPath(EXT, 'win32', 'x64'), path.join(EXT, 'bin', 'win32-x64', 'agentfix.exe'));
  const r = resolveServerPath(input([`${EXT}/bin/linux-x64/agentfix`, '/usr/bin/agentfix']));
  assert.deepEqual(r, { ok: true, path: `${EXT}/bin/linux-x64/agentfix`, source: 'bundled' });
});

test('a binary bundled for another platform is not used', () => {
  const r = resolveServerPath(input([`${EXT}/bin/linux-x64/agentfix`, '/usr/bin/agentfix'], { arch: 'arm64' }));
  assert.deepEqual(r, { ok: true, path: '/usr/bin/agentfix', source: 'PATH' });
});

test('PATH is searched in order; relative entries are skipped', () => {
  const r = resolveServerPath(
    input(['bin/agentfix', '/b/agentfix', '/c/agentfix'], { env: { PATH: 'bin:/a:/b:/c', HOME: '/home/u' } }),
  );
  assert.deepEqual(r, { ok: true, path: '/b/agentfix', source: 'PATH' });
});

test('~/.cargo/bin (or $CARGO_HOME/bin) comes last', () => {
  assert.deepEqual(resolveServerPath(input(['/home/u/.cargo/bin/agentfix'])), {
    ok: true,
    path: '/home/u/.cargo/bin/agentfix',
    source: 'cargo',
  });
  assert.deepEqual(
    resolveServerPath(input(['/cargo/bin/agentfix'], { env: { PATH: '/usr/bin', HOME: '/home/u', CARGO_HOME: '/cargo' } })),
    { ok: true, path: '/cargo/bin/agentfix', source: 'cargo' },
  );
});

test('nothing found: a message that says how to install or configure', () => {
  const r = resolveServerPath(input([]));
  assert.deepEqual(r, { ok: false, message: NOT_FOUND_MESSAGE });
  assert.match(NOT_FOUND_MESSAGE, /cargo install --path \./);
  assert.match(NOT_FOUND_MESSAGE, /agentfix\.serverPath/);
});
