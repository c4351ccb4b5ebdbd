// `npm run package`: the .vsix with the server bundled as
// bin/<platform>-<arch>/agentfix.
//
// The binary: $AGENTFIX_BINARY when set (absolute, or relative to the
// repository root, e.g. AGENTFIX_BINARY=target/debug/agentfix for a quick CI
// build), else a release build (`cargo build --release --locked` in the
// repository root; cargo does nothing when it is up to date).
// The .vsix goes to $AGENTFIX_VSIX when set, else agentfix-<version>.vsix here.

import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const repo = path.resolve(here, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8'));

function fail(message) {
  console.error(`package: ${message}`);
  process.exit(1);
}

function run(command, args, cwd) {
  console.log(`package: ${command} ${args.join(' ')}  (in ${cwd})`);
  execFileSync(command, args, { cwd, stdio: 'inherit' });
}

const exe = process.platform === 'win32' ? 'agentfix.exe' : 'agentfix';
let binary = process.env.AGENTFIX_BINARY;
if (binary) {
  binary = path.resolve(repo, binary);
} else {
  try {
    run('cargo', ['build', '--release', '--locked', '--bin', 'agentfix'], repo);
  } catch (e) {
    fail(`the release build failed (${e.message}); or give a binary with AGENTFIX_BINARY=path/to/agentfix`);
  }
  binary = path.join(repo, 'target', 'release', exe);
}
if (!fs.existsSync(binary)) {
  fail(`no server binary at ${binary}`);
}

const target = `${process.platform}-${process.arch}`;
const binDir = path.join(here, 'bin');
fs.rmSync(binDir, { recursive: true, force: true });
fs.mkdirSync(path.join(binDir, target), { recursive: true });
const bundled = path.join(binDir, target, exe);
fs.copyFileSync(binary, bundled);
fs.chmodSync(bundled, 0o755);
console.log(`package: bundled ${binary} as bin/${target}/${exe}`);

const out = process.env.AGENTFIX_VSIX ? path.resolve(process.env.AGENTFIX_VSIX) : path.join(here, `${manifest.name}-${manifest.version}.vsix`);
const vsce = path.join(here, 'node_modules', '@vscode', 'vsce', 'vsce');
if (!fs.existsSync(vsce)) {
  fail('@vscode/vsce is not installed; run `npm ci` first');
}
// vscode:prepublish bundles dist/extension.js (esbuild). The extension has
// no runtime node_modules: esbuild inlines vscode-languageclient.
// README.md's screenshot stays a relative link (images/ is packaged): the
// extension has no repository URL for vsce to rewrite it to.
run(
  process.execPath,
  [vsce, 'package', '--no-dependencies', '--skip-license', '--allow-missing-repository', '--no-rewrite-relative-links', '--out', out],
  here,
);
console.log(`package: wrote ${out}`);
