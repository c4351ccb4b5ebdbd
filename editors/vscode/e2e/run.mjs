// End to end in a real VS Code: code-server in headless Chromium, the
// packaged extension with its bundled server, a loopback mock model, and a
// fixture extension (e2e/fixture-diagnostics) that puts a diagnostic on
// calc.py (code-server has no Python language server) and can write user
// settings through the configuration API.
//
// The story: set the API key with the command; Ctrl+. on the error, pick
// "Agent fix: …"; the proposal opens in the Refactor Preview with its hunk
// ticked (the extension takes the server's applyEdit), the run's summary and
// cost in a notification and the progress gone; Apply applies it and the
// extension says what was applied; the edit is in the buffer unsaved; Ctrl+S writes it; a
// setting changed while the server runs is in force for the next run; a run
// with an instruction is cancelled from the progress notification, another
// with "Agent fix: Cancel"; "Agent fix with model…" runs with the model
// picked from agentfix.models; "Agent fix: follow up…" (Ctrl+.) asks for an
// instruction (Escape sends nothing) and continues the earlier run, as does
// "Agent fix: follow up on the last run"; saving with
// `editor.codeActionsOnSave: source.fixAll` starts no run, while "Agent
// fix: all problems in this file" sends every diagnostic of the file in one
// run, whose Refactor Preview labels each hunk with its problem, ticks them
// all, and applies the rest when one problem is unticked, then asks why the
// other was rejected and tells the server (`agentfix.reviewed`), so that a
// follow-up's request says per hunk "accepted in the review" and "rejected
// in the review; the user's reason: …"; with
// agentfix.review "unticked" the changes start unticked, and Apply with none
// ticked says "nothing applied" (Escape skips the question why, and the
// rejection is reported without a reason); "Agent fix: best of N…" (3, the QuickPick's
// default) with a verify command that only candidate 3 passes (the mock
// answers each candidate by its note) opens the chosen proposal, its check
// and "Best of 3" shown, then says which candidate was chosen and that 2
// alternatives are there, and Ctrl+. offers "Agent fix: alternative K (not
// verified: test failed)", whose edit opens in the Refactor Preview too and,
// applied, replaces the chosen one, no model asked; the key is in no log.
// Screenshots of each key step go to $E2E_DIR/screenshots.
//
// Environment (ci.sh sets all of them):
//   CODE_SERVER     code-server's launcher (installed under Node 24)
//   NODE24_BIN      the directory of Node 24's `node`, put first on code-server's PATH
//   AGENTFIX_VSIX   the packaged extension
//   FIXTURE_VSIX    the packaged fixture extension (e2e/fixture-diagnostics)
//   MOCK_MODEL      target/debug/examples/mock_model
//   CHROMIUM        Chromium (default /usr/bin/chromium)
//   E2E_DIR         an empty directory for everything this run writes
//                   (code-server's config, user data, extensions, the
//                   workspace, screenshots, logs)
//
// Each step is one test of node's test runner; after a failed step the
// others fail at once ("an earlier step failed") so the summary stays honest.

import { spawn, execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { promisify } from 'node:util';

import { chromium } from 'playwright-core';

const execFileP = promisify(execFile);

function need(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`e2e: ${name} is not set (run editors/vscode/ci.sh)`);
  }
  return value;
}

const CODE_SERVER = need('CODE_SERVER');
const NODE24_BIN = need('NODE24_BIN');
const AGENTFIX_VSIX = need('AGENTFIX_VSIX');
const FIXTURE_VSIX = need('FIXTURE_VSIX');
const MOCK_MODEL = need('MOCK_MODEL');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const DIR = need('E2E_DIR');
const KEY = 'test-key-0123';
const WAIT = 30_000;

const dirs = {
  home: path.join(DIR, 'home'),
  userData: path.join(DIR, 'user-data'),
  extensions: path.join(DIR, 'extensions'),
  profile: path.join(DIR, 'chromium-profile'),
  workspace: path.join(DIR, 'workspace'),
  screens: path.join(DIR, 'screenshots'),
  logs: path.join(DIR, 'logs'),
};
const configFile = path.join(DIR, 'code-server.yaml');
const calc = path.join(dirs.workspace, 'calc.py');
const stats = path.join(dirs.workspace, 'stats.py');

const ORIGINAL = `def divide(a, b):
    return a / b


if __name__ == "__main__":
    print(divide(1, 0))
`;
const FIXED = ORIGINAL.replace('    return a / b\n', '    return a / b if b != 0 else 0.0\n');
const DIAGNOSTIC = 'ZeroDivisionError: division by zero when b == 0';
const INSTRUCTION = 'Guard against b == 0 without raising';
const MODEL = 'claude-haiku-4-5'; // one of agentfix.models' defaults, not the provider's default model
const FOLLOW_UP = 'Also handle b == 0.0 explicitly';
const FOLLOW_UP_2 = 'Now explain the guard in one comment';
// stats.py: two problems from two sources, for "all problems in this file".
const STATS = `def mean(values):
    return sum(values) / len(values)


def ratio(a, b):
    return a / b
`;
const MEAN_PROBLEM = 'ZeroDivisionError: mean of an empty list';
const RATIO_PROBLEM = 'Possible division by zero when b == 0';
const MEAN_FIXED = '    return sum(values) / len(values) if values else 0.0';
const RATIO_FIXED = '    return a / b if b else 0.0';
// Why the ratio's guard was rejected (typed after the review), and the follow-up that reads it.
const REASON = 'ratio() must raise on b == 0';
const FOLLOW_UP_3 = 'Keep the ratio as it is';
// best.py: best of 3, where the test passes for candidate 3 only.
const best = path.join(dirs.workspace, 'best.py');
const BEST = `def safe_div(a, b):
    return a / b
`;
const BEST_PROBLEM = 'ZeroDivisionError: safe_div must return 0 when b == 0';
const CANDIDATES = [
  { line: '    return a / b if b else None', summary: 'Returned None for zero.' },
  { line: '    return None if b == 0 else a / b', summary: 'Guarded with None.' },
  { line: '    return a / b if b else 0', summary: 'Returned 0 for zero.' },
];

// ---- processes -----------------------------------------------------------

const children = [];
let mock;
let codeServer;
let browser;
let page;
let baseUrl;
let port;

/** code-server's environment: nothing in the real home, no API key inherited. */
function codeServerEnv() {
  const env = { ...process.env };
  for (const name of ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'AGENTFIX_API_KEY', 'ANTHROPIC_BASE_URL', 'OPENAI_BASE_URL', 'AGENTFIX_PROVIDER']) {
    delete env[name];
  }
  for (const name of Object.keys(env)) {
    if (name.startsWith('VSCODE_') || name.startsWith('npm_')) {
      delete env[name];
    }
  }
  return {
    ...env,
    PATH: `${NODE24_BIN}:${env.PATH}`,
    HOME: dirs.home,
    XDG_CONFIG_HOME: path.join(dirs.home, '.config'),
    XDG_DATA_HOME: path.join(dirs.home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(dirs.home, '.cache'),
    AGENTFIX_LOG: 'agentfix=debug',
    // No extension gallery: code-server would query one on the internet.
    EXTENSIONS_GALLERY: '{}',
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function codeServerArgs() {
  return ['--config', configFile, '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions];
}

async function sleep(ms) {
  await new Promise((r) => setTimeout(r, ms));
}

async function waitFor(what, f, timeout = WAIT) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      const value = await f();
      if (value) {
        return value;
      }
    } catch (e) {
      last = e;
    }
    await sleep(200);
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

function requests() {
  const log = path.join(dirs.logs, 'requests.jsonl');
  if (!fs.existsSync(log)) {
    return [];
  }
  return fs
    .readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** The request's messages without `cache_control` (its breakpoints move from request to request). */
function plainMessages(body) {
  return JSON.parse(JSON.stringify(body.messages, (key, value) => (key === 'cache_control' ? undefined : value)));
}

/** The text of a message (a string, or its text blocks). */
function messageText(message) {
  if (typeof message.content === 'string') {
    return message.content;
  }
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
}

async function screenshot(name) {
  const file = path.join(dirs.screens, `${name}.png`);
  await page.screenshot({ path: file });
  console.log(`# screenshot: ${file}`);
  return file;
}

// ---- the UI --------------------------------------------------------------

/** The status bar item of the extension. */
function statusItem() {
  return page.locator('.statusbar-item').filter({ hasText: /agentfix|Agent fix/ }).first();
}

async function statusText() {
  return ((await statusItem().textContent({ timeout: 2000 })) ?? '').trim();
}

/** The editor's text as Monaco renders it (every line is visible: the file is short). */
async function editorText() {
  const lines = await page.locator('.monaco-editor .view-lines').first().evaluate((el) =>
    [...el.querySelectorAll('.view-line')]
      .map((line) => ({ top: parseFloat(line.style.top), text: line.textContent.replace(/\u00a0/g, ' ') }))
      .sort((a, b) => a.top - b.top)
      .map((l) => l.text),
  );
  return lines.join('\n');
}

/** Runs a command from the palette by its exact title. */
async function runCommand(title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input[type="text"], .quick-input-widget input:not([type])').first();
  await input.waitFor({ state: 'visible', timeout: WAIT });
  await input.fill(`>${title}`);
  const row = page
    .locator('.quick-input-list .monaco-list-row')
    .filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) }) })
    .first();
  await row.waitFor({ state: 'visible', timeout: WAIT });
  await row.click();
}

/** Types into the quick input box that a command opened (input box, password box). */
async function answerInputBox(text) {
  const input = page.locator('.quick-input-widget input').first();
  await input.waitFor({ state: 'visible', timeout: WAIT });
  await input.fill(text);
  await input.press('Enter');
}

async function goToLine(spec) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input').first();
  await input.waitFor({ state: 'visible', timeout: WAIT });
  await input.fill(`:${spec}`);
  await input.press('Enter');
  await sleep(300);
}

// ---- steps ---------------------------------------------------------------

let failed = false;

function step(name, f, timeout = 120_000) {
  test(name, { timeout }, async () => {
    if (failed) {
      throw new Error('not run: an earlier step failed');
    }
    try {
      await f();
    } catch (e) {
      failed = true;
      if (page) {
        await screenshot(`failure-${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`).catch(() => undefined);
      }
      await dumpLogs().catch(() => undefined);
      throw e;
    }
  });
}

/** The text of the extension's output channel (server log and LSP trace) as VS Code logs it. */
function extensionLog() {
  const logs = path.join(dirs.userData, 'logs');
  const file = fs.readdirSync(logs, { recursive: true }).find((f) => /agentfix\.log$/.test(f));
  return file ? fs.readFileSync(path.join(logs, file), 'utf8') : '';
}

/** Runs the extension saw end (its output logs one line per run). */
function runsEnded() {
  return (extensionLog().match(/\] run(: | failed: )/g) ?? []).length;
}

/** Opens a workspace file with Ctrl+P. */
async function openFile(name) {
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input').first();
  await input.waitFor({ state: 'visible', timeout: WAIT });
  await input.fill(name);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
  await row.waitFor({ state: 'visible', timeout: WAIT });
  await row.click();
  await page.locator('.tab.active', { hasText: name }).waitFor({ timeout: WAIT });
}

/** Ctrl+. at the cursor, then the quick fix menu's item with `title`. */
async function pickCodeAction(title) {
  await page.keyboard.press('Control+.');
  const item = page.locator('.action-widget .monaco-list-row', { hasText: title }).first();
  await item.waitFor({ state: 'visible', timeout: WAIT });
  return item;
}

/** On failure: the extension's output and the extension host's log, for the CI log. */
async function dumpLogs() {
  const logs = path.join(dirs.userData, 'logs');
  if (!fs.existsSync(logs)) {
    return;
  }
  const files = fs.readdirSync(logs, { recursive: true }).map((f) => path.join(logs, f));
  for (const file of files.filter((f) => /agentfix\.log$|exthost\.log$|remoteexthost\.log$/.test(f))) {
    const text = fs.readFileSync(file, 'utf8');
    console.log(`# ---- ${file} (last 60 lines)`);
    for (const line of text.split('\n').slice(-60)) {
      console.log(`# ${line}`);
    }
  }
}

after(async () => {
  await browser?.close().catch(() => undefined);
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin?.end();
      child.kill('SIGTERM');
    }
  }
  await sleep(500);
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
    }
  }
  // Keep the screenshots, the logs (VS Code's too) and the workspace; the rest is big.
  const vscodeLogs = path.join(dirs.userData, 'logs');
  if (fs.existsSync(vscodeLogs)) {
    fs.cpSync(vscodeLogs, path.join(dirs.logs, 'vscode'), { recursive: true });
  }
  if (!process.env.KEEP_E2E_DIR) {
    for (const d of [dirs.userData, dirs.extensions, dirs.profile, dirs.home]) {
      // A child may still be writing its last state: retry as rm -rf would not.
      fs.rmSync(d, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    }
  }
});

step('set up the workspace, the settings and the mock model', async () => {
  for (const d of Object.values(dirs)) {
    fs.mkdirSync(d, { recursive: true });
  }
  fs.writeFileSync(calc, ORIGINAL);
  fs.writeFileSync(stats, STATS);
  fs.writeFileSync(best, BEST);
  fs.writeFileSync(
    path.join(dirs.workspace, '.fake-diagnostics.json'),
    JSON.stringify([
      { file: 'calc.py', match: 'return a / b', message: DIAGNOSTIC, source: 'fake-lint' },
      { file: 'stats.py', match: 'return sum(values) / len(values)', message: MEAN_PROBLEM, source: 'fake-lint' },
      { file: 'stats.py', match: 'return a / b', message: RATIO_PROBLEM, source: 'fake-types' },
      { file: 'best.py', match: 'return a / b', message: BEST_PROBLEM, source: 'fake-lint' },
    ]),
  );
  const replies = [
    { tools: [['toolu_1', 'edit_file', { path: 'calc.py', old_text: '    return a / b', new_text: '    return a / b if b != 0 else 0.0' }]] },
    { text: 'Guarded the division.' },
    { hang: true },
    { hang: true },
    // "Agent fix with model…"
    { text: 'Line 2 is fine as it is.' },
    // The follow-up from Ctrl+., then "follow up on the last run".
    { text: 'Checked: the guard covers b == 0.0 too.' },
    { text: 'The guard returns 0.0 instead of raising.' },
    // "Agent fix: all problems in this file": one edit per problem, then the summary.
    {
      tools: [
        ['toolu_mean', 'edit_file', { path: 'stats.py', old_text: '    return sum(values) / len(values)', new_text: MEAN_FIXED }],
        ['toolu_ratio', 'edit_file', { path: 'stats.py', old_text: '    return a / b', new_text: RATIO_FIXED }],
      ],
    },
    { text: 'Guarded both divisions.' },
    // The follow-up on it, after the review said what became of each hunk.
    { text: 'Understood: ratio() keeps raising.' },
    // With agentfix.review "unticked": a proposal nothing of which is applied.
    { tools: [['toolu_r', 'edit_file', { path: 'stats.py', old_text: '    return a / b', new_text: RATIO_FIXED }]] },
    { text: 'Guarded the ratio.' },
    // "Agent fix: best of N…": each candidate's requests carry its note
    // ("candidate 2 of 3"), and the mock answers them from their own list.
    ...CANDIDATES.flatMap((c, i) => [
      { for: `candidate ${i + 1} of 3`, tools: [[`toolu_best${i + 1}`, 'edit_file', { path: 'best.py', old_text: '    return a / b', new_text: c.line }]] },
      { for: `candidate ${i + 1} of 3`, text: c.summary },
    ]),
  ];
  const repliesFile = path.join(dirs.logs, 'replies.json');
  fs.writeFileSync(repliesFile, JSON.stringify(replies));
  mock = spawn(MOCK_MODEL, ['--replies', repliesFile, '--log', path.join(dirs.logs, 'requests.jsonl')], {
    stdio: ['pipe', 'pipe', fs.openSync(path.join(dirs.logs, 'mock-model.log'), 'w')],
  });
  children.push(mock);
  baseUrl = await new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: mock.stdout });
    lines.once('line', (line) => resolve(line.trim()));
    mock.once('exit', (code) => reject(new Error(`mock_model exited (${code}) before printing its URL`)));
  });
  assert.match(baseUrl, /^http:\/\/127\.0\.0\.1:\d+$/);

  port = await freePort();
  fs.writeFileSync(configFile, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\ndisable-telemetry: true\ndisable-update-check: true\ndisable-workspace-trust: true\n`);
  const settings = {
    'workbench.startupEditor': 'none',
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'security.workspace.trust.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'extensions.autoUpdate': false,
    'extensions.autoCheckUpdates': false,
    'update.mode': 'none',
    'chat.disableAIFeatures': true,
    'window.restoreWindows': 'none',
    'files.autoSave': 'off',
    'agentfix.transcripts': false,
    'agentfix.trace.server': 'messages',
    // Fix-all on save: agentfix must never start a run for it.
    'editor.codeActionsOnSave': { 'source.fixAll': 'explicit' },
  };
  fs.mkdirSync(path.join(dirs.userData, 'User'), { recursive: true });
  fs.writeFileSync(path.join(dirs.userData, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
  // agentfix.baseUrl is machine-scoped (a workspace cannot redirect the key):
  // in code-server, as in any remote window, those settings live in the
  // remote machine's settings, not in the browser-side user settings.
  fs.mkdirSync(path.join(dirs.userData, 'Machine'), { recursive: true });
  // The verify command of the best-of-3 run (agentfix.verify names it there):
  // commands are machine settings too. Auto-approved, unsandboxed (this
  // test is about the editor's surface; tests/sandbox.rs is about the sandbox).
  const commands = { test: ['sh', '-c', `grep -qx '${CANDIDATES[2].line}' best.py`], autoApprove: true, sandbox: 'off' };
  fs.writeFileSync(
    path.join(dirs.userData, 'Machine', 'settings.json'),
    JSON.stringify({ 'agentfix.baseUrl': baseUrl, 'agentfix.commands': commands }, null, 2),
  );
});

step('install the packaged extension and the fixture offline', async () => {
  for (const vsix of [AGENTFIX_VSIX, FIXTURE_VSIX]) {
    const { stdout, stderr } = await execFileP(CODE_SERVER, [...codeServerArgs(), '--install-extension', vsix, '--force'], {
      env: codeServerEnv(),
      timeout: 120_000,
    });
    fs.appendFileSync(path.join(dirs.logs, 'install.log'), stdout + stderr);
  }
  const { stdout } = await execFileP(CODE_SERVER, [...codeServerArgs(), '--list-extensions', '--show-versions'], {
    env: codeServerEnv(),
  });
  assert.match(stdout, /agentfix\.agentfix@0\.1\.0/);
  assert.match(stdout, /agentfix-test\.agentfix-e2e-diagnostics@/);
  const bundled = fs
    .readdirSync(dirs.extensions)
    .filter((d) => d.startsWith('agentfix.agentfix-'))
    .map((d) => path.join(dirs.extensions, d, 'bin', 'linux-x64', 'agentfix'));
  assert.equal(bundled.length, 1, 'one agentfix extension installed');
  fs.accessSync(bundled[0], fs.constants.X_OK); // the bundled server kept its executable bit
});

step('code-server starts and the workbench opens in Chromium', async () => {
  codeServer = spawn(CODE_SERVER, [...codeServerArgs(), dirs.workspace], {
    env: codeServerEnv(),
    stdio: ['pipe', fs.openSync(path.join(dirs.logs, 'code-server.log'), 'w'), 'pipe'],
  });
  children.push(codeServer);
  const stderr = fs.createWriteStream(path.join(dirs.logs, 'code-server.err.log'));
  codeServer.stderr.pipe(stderr);
  await waitFor('code-server to listen', async () => {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    return r.ok;
  }, 60_000);

  browser = await chromium.launchPersistentContext(dirs.profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
    viewport: { width: 1280, height: 800 },
    // Chromium keeps crash reports and dconf state under $HOME whatever its
    // profile directory: keep them in the run's directory too.
    env: { ...process.env, HOME: dirs.home, XDG_CONFIG_HOME: path.join(dirs.home, '.config'), XDG_CACHE_HOME: path.join(dirs.home, '.cache') },
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  const consoleLog = fs.createWriteStream(path.join(dirs.logs, 'browser-console.log'));
  page.on('console', (m) => consoleLog.write(`${m.type()}: ${m.text()}\n`));
  page.on('pageerror', (e) => consoleLog.write(`pageerror: ${e.message}\n`));
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
  await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ timeout: 60_000 });
});

step('the extension starts its bundled server (status bar: idle)', async () => {
  await statusItem().locator('.codicon-sparkle').waitFor({ timeout: 60_000 });
});

step('"Agent fix: Set API key" stores the key and restarts the server', async () => {
  await runCommand('Agent fix: Set API key');
  const input = page.locator('.quick-input-widget input[type="password"]');
  await input.waitFor({ state: 'visible', timeout: WAIT });
  await answerInputBox(KEY);
  await page.getByText('ANTHROPIC_API_KEY stored', { exact: false }).first().waitFor({ timeout: WAIT });
  await sleep(1500); // the restart is debounced
  await statusItem().locator('.codicon-sparkle').waitFor({ timeout: WAIT });
  // The key never lands in the settings.
  for (const d of ['User', 'Machine']) {
    assert.ok(!fs.readFileSync(path.join(dirs.userData, d, 'settings.json'), 'utf8').includes(KEY));
  }
});

step('calc.py opens and the fixture linter marks the division', async () => {
  await openFile('calc.py');
  await page.locator('.monaco-editor .squiggly-error').first().waitFor({ timeout: WAIT });
  assert.match(await editorText(), /return a \/ b/);
});

step('Ctrl+. on the error offers "Agent fix: …"', async () => {
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2:12');
  await page.keyboard.press('Control+.');
  const item = page.locator('.action-widget .monaco-list-row', { hasText: `Agent fix: ${DIAGNOSTIC}` }).first();
  await item.waitFor({ state: 'visible', timeout: WAIT });
  await screenshot('1-quick-fix-menu');
  await item.click();
});

/** Progress notifications of runs (they have a Cancel button). */
function progressToasts() {
  return page.locator('.notification-toast', { hasText: 'Agent fix' }).filter({ has: page.locator('.monaco-button', { hasText: 'Cancel' }) });
}

step('the proposal opens in the Refactor Preview with its hunk ticked, its summary and cost shown, the progress gone; Apply applies it', async () => {
  // The extension takes the server's applyEdit: every hunk ticked, the
  // preview opened all the same.
  const preview = page.locator('.bulk-edit-panel');
  await preview.waitFor({ state: 'visible', timeout: WAIT });
  const fixed = async () => (await editorText()).includes('return a / b if b != 0 else 0.0');
  const fileRow = preview.locator('.monaco-list-row', { hasText: 'calc.py' }).first();
  await fileRow.waitFor({ timeout: WAIT });
  const hunks = preview.locator('.monaco-list-row', { hasText: 'if b != 0 else 0.0' });
  assert.equal(await hunks.count(), 1, 'one hunk row, and nothing else listed');
  assert.equal(fs.readFileSync(calc, 'utf8'), ORIGINAL, 'nothing applied while the preview is open');
  assert.ok(!(await fixed()), 'nothing in the buffer while the preview is open');
  await waitFor('the hunk to be ticked', async () => hunks.first().locator('.monaco-checkbox.checked').isVisible());
  assert.ok(await fileRow.locator('.monaco-checkbox.checked').first().isVisible(), 'the file is ticked');
  // The run's summary and what it took (the applyEdit label), for as long as the review lasts.
  // It leads with agentfix's own check of the proposal when one ran: under
  // CI pyright is on PATH (.ci/run installs it) and sees no new error.
  const verified = process.env.CI === 'true' ? 'verified: 0 fixed, 0 new; ' : '(?:verified: \\d+ fixed, \\d+ new; )?';
  const label = new RegExp(`Agent fix: ${verified}Guarded the division\\. \\(1 file, 1 hunk; 2 turns, [\\d.,k]+ tokens(, \\$[\\d.]+)?\\)`);
  const summary = () => page.locator('.notification-toast', { hasText: label });
  await summary().first().waitFor({ state: 'visible', timeout: WAIT });
  // The run's progress closed when the proposal came.
  await waitFor('the progress notification to close', async () => (await progressToasts().filter({ hasText: /turn \d+:/ }).count()) === 0);
  assert.match(await statusText(), /review the proposal/);
  await sleep(500); // let the toast finish sliding in
  await screenshot('2-refactor-preview');
  await preview.locator('.monaco-button', { hasText: /^Apply$/ }).click();
  await preview.waitFor({ state: 'hidden', timeout: WAIT });
  await waitFor('the edit in the editor', fixed);
  await summary().first().waitFor({ state: 'hidden', timeout: WAIT });
  await page.locator('.notification-toast', { hasText: 'Agent fix: applied 1 of 1 change to calc.py.' }).first().waitFor({ timeout: WAIT });
});

step('the fix is in the editor buffer, unsaved', async () => {
  assert.equal(fs.readFileSync(calc, 'utf8'), ORIGINAL, 'nothing written to disk yet');
  await page.locator('.tab.active.dirty', { hasText: 'calc.py' }).waitFor({ timeout: WAIT });
  await waitFor('the status bar to show the result', async () => /end_turn/.test(await statusText()));
  await screenshot('3-edit-applied-unsaved');
  const r = requests();
  assert.equal(r.length, 2, 'two model requests: the edit, then the summary');
  assert.ok(r.every((q) => q.method === 'POST' && q.path === '/v1/messages'));
  assert.match(JSON.stringify(r[0].body), /ZeroDivisionError: division by zero when b == 0/);
  assert.match(JSON.stringify(r[1].body), /tool_result/);
});

step('Ctrl+S writes the fix to disk', async () => {
  await page.locator('.monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+S');
  await waitFor('calc.py on disk to have the fix', async () => fs.readFileSync(calc, 'utf8') === FIXED);
  await page.locator('.tab.active:not(.dirty)', { hasText: 'calc.py' }).waitFor({ timeout: WAIT });
  // The fixture linter no longer sees the unguarded division.
  await waitFor('the squiggle to go', async () => (await page.locator('.monaco-editor .squiggly-error').count()) === 0);
  await screenshot('4-saved');
});

step('a settings change reaches the running server (agentfix.maxOutputTokens → max_tokens)', async () => {
  assert.equal(requests()[0].body.max_tokens, 8192, 'the default before');
  const pulls = () => (extensionLog().match(/Received request 'workspace\/configuration/g) ?? []).length;
  const before = pulls();
  // As the Settings editor would: the fixture's command writes the user
  // setting through the configuration API. The extension pushes
  // didChangeConfiguration and the server pulls the section again (the LSP
  // trace shows the pull); the next run's requests show the value (below).
  fs.writeFileSync(path.join(dirs.workspace, '.e2e-settings.json'), JSON.stringify({ 'agentfix.maxOutputTokens': 1234 }));
  await runCommand('agentfix e2e: Apply settings');
  await page.getByText('agentfix e2e: applied agentfix.maxOutputTokens').first().waitFor({ timeout: WAIT });
  assert.match(fs.readFileSync(path.join(dirs.userData, 'User', 'settings.json'), 'utf8'), /"agentfix\.maxOutputTokens": 1234/);
  await waitFor('the server to pull the configuration again', async () => pulls() > before);
});

step('"Agent fix with instruction…" sends the instruction; the progress notification cancels it', async () => {
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2');
  await runCommand('Agent fix with instruction…');
  await answerInputBox(INSTRUCTION);
  const toast = page.locator('.notification-toast', { hasText: 'Agent fix' }).filter({ has: page.locator('.monaco-button', { hasText: 'Cancel' }) }).first();
  await toast.waitFor({ state: 'visible', timeout: WAIT });
  await waitFor('the third model request', async () => requests().length === 3);
  assert.match(JSON.stringify(requests()[2].body), new RegExp(INSTRUCTION));
  assert.equal(requests()[2].body.max_tokens, 1234, 'the changed setting is in force');
  await waitFor('the status bar to show the run', async () => /Agent fix: running/.test(await statusText()));
  await sleep(500); // let the toast finish sliding in
  await screenshot('5-progress-with-cancel');
  await toast.locator('.monaco-button', { hasText: 'Cancel' }).click();
  await waitFor('the status bar to show the cancelled run', async () => /cancelled/.test(await statusText()));
  await toast.waitFor({ state: 'hidden', timeout: WAIT });
  await page.getByText('Agent fix cancelled; nothing was changed.').first().waitFor({ timeout: WAIT });
  assert.equal(fs.readFileSync(calc, 'utf8'), FIXED);
  assert.equal(await page.locator('.tab.active.dirty').count(), 0, 'the buffer is untouched');
});

step('"Agent fix" then "Agent fix: Cancel" cancels the run', async () => {
  await page.locator('.monaco-editor .view-lines').first().click();
  await runCommand('Agent fix');
  await waitFor('the fourth model request', async () => requests().length === 4);
  await waitFor('the status bar to show the run', async () => /Agent fix: running/.test(await statusText()));
  const toast = page.locator('.notification-toast', { hasText: 'Agent fix' }).filter({ has: page.locator('.monaco-button', { hasText: 'Cancel' }) }).first();
  await toast.waitFor({ state: 'visible', timeout: WAIT });
  await runCommand('Agent fix: Cancel');
  await waitFor('the status bar to show the cancelled run', async () => /cancelled/.test(await statusText()));
  await toast.waitFor({ state: 'hidden', timeout: WAIT });
  await screenshot('6-cancelled');
  assert.equal(fs.readFileSync(calc, 'utf8'), FIXED);
  assert.equal(await page.locator('.tab.active.dirty').count(), 0, 'the buffer is untouched');
});

step('"Agent fix with model…" offers agentfix.models; the run uses the model picked', async () => {
  const before = runsEnded();
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2');
  await runCommand('Agent fix with model…');
  const rows = page.locator('.quick-input-list .monaco-list-row');
  // The QuickPick replaces the command palette's list: wait for it.
  await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Agent fix with model' }).waitFor({ state: 'visible', timeout: WAIT });
  const labels = await waitFor('the models in the QuickPick', async () => {
    const texts = (await rows.locator('.label-name').allTextContents()).map((t) => t.trim());
    return texts.includes(MODEL) && texts;
  });
  assert.deepEqual(labels, ['claude-haiku-4-5', 'claude-sonnet-4-5', 'claude-opus-4-5'], 'the default agentfix.models');
  await screenshot('7-pick-a-model');
  await rows.filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${MODEL}$`) }) }).first().click();
  await waitFor('the fifth model request', async () => requests().length === 5);
  assert.equal(requests()[4].body.model, MODEL, 'the run uses the model picked');
  assert.notEqual(requests()[0].body.model, MODEL, 'other runs use the settings\' model');
  await waitFor('the run to end', async () => runsEnded() > before);
  await waitFor('the status bar to show the result', async () => /end_turn/.test(await statusText()));
});

step('Ctrl+. on the fixed line offers "Agent fix: follow up…": Escape sends nothing, the instruction continues the run', async () => {
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2');
  // Escape at the instruction: nothing is sent.
  await (await pickCodeAction('Agent fix: follow up…')).click();
  const input = page.locator('.quick-input-widget input').first();
  await input.waitFor({ state: 'visible', timeout: WAIT });
  await screenshot('8-follow-up-instruction');
  await input.press('Escape');
  await input.waitFor({ state: 'hidden', timeout: WAIT });
  await sleep(1500);
  assert.equal(requests().length, 5, 'no request after Escape');
  assert.equal(await page.locator('.notification-toast', { hasText: 'Agent fix' }).filter({ has: page.locator('.monaco-button', { hasText: 'Cancel' }) }).count(), 0, 'no run');
  // Now with an instruction.
  const before = runsEnded();
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2');
  await (await pickCodeAction('Agent fix: follow up…')).click();
  await answerInputBox(FOLLOW_UP);
  await waitFor('the sixth model request', async () => requests().length === 6);
  // The first run's conversation (its last request, then its closing text),
  // then one user message ending with the instruction.
  const first = plainMessages(requests()[1].body);
  const followUp = plainMessages(requests()[5].body);
  assert.deepEqual(followUp.slice(0, first.length), first, 'the earlier messages, unchanged');
  assert.equal(followUp[first.length].role, 'assistant');
  assert.match(messageText(followUp[first.length]), /Guarded the division\./);
  const last = followUp[followUp.length - 1];
  assert.equal(last.role, 'user');
  assert.ok(messageText(last).endsWith(`The user's request: ${FOLLOW_UP}`), messageText(last));
  await waitFor('the follow-up to end', async () => runsEnded() > before);
});

step('"Agent fix: follow up on the last run" continues the last run on the file', async () => {
  const before = runsEnded();
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2');
  await runCommand('Agent fix: follow up on the last run');
  await answerInputBox(FOLLOW_UP_2);
  await waitFor('the seventh model request', async () => requests().length === 7);
  // The last run on calc.py was the follow-up above: its conversation comes first.
  const previous = plainMessages(requests()[5].body);
  const next = plainMessages(requests()[6].body);
  assert.deepEqual(next.slice(0, previous.length), previous, 'the last run\'s messages, unchanged');
  assert.match(messageText(next[previous.length]), /Checked: the guard covers b == 0\.0 too\./);
  assert.ok(messageText(next[next.length - 1]).endsWith(`The user's request: ${FOLLOW_UP_2}`));
  await waitFor('the follow-up to end', async () => runsEnded() > before);
  assert.equal(fs.readFileSync(calc, 'utf8'), FIXED, 'the follow-ups proposed nothing');
});

step('saving with editor.codeActionsOnSave source.fixAll starts no run', async () => {
  await openFile('stats.py');
  await waitFor('both problems to be marked', async () => (await page.locator('.monaco-editor .squiggly-error').count()) >= 2);
  const before = requests().length;
  // Make the buffer dirty without touching the problems, then save it.
  await page.locator('.monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+End');
  await page.keyboard.press('Enter');
  await page.locator('.tab.active.dirty', { hasText: 'stats.py' }).waitFor({ timeout: WAIT });
  await page.keyboard.press('Control+S');
  await page.locator('.tab.active:not(.dirty)', { hasText: 'stats.py' }).waitFor({ timeout: WAIT });
  await waitFor('stats.py to be saved', async () => fs.readFileSync(stats, 'utf8') === STATS + '\n');
  await sleep(2000);
  assert.equal(requests().length, before, 'no model request on save');
  assert.doesNotMatch(await statusText(), /running/);
  assert.equal(await page.locator('.monaco-editor .squiggly-error').count(), 2, 'both problems still there');
});

step('"Agent fix: all problems in this file" sends every diagnostic; the preview ticks all, unticking one problem applies the rest', async () => {
  const before = runsEnded();
  await runCommand('Agent fix: all problems in this file');
  await waitFor('the eighth model request', async () => requests().length === 8);
  const prompt = JSON.stringify(requests()[7].body.messages[0]);
  assert.match(prompt, new RegExp(MEAN_PROBLEM), 'the fake-lint problem');
  assert.match(prompt, new RegExp(RATIO_PROBLEM), 'the fake-types problem');
  const preview = page.locator('.bulk-edit-panel');
  await preview.waitFor({ state: 'visible', timeout: WAIT });
  assert.equal(requests().length, 9, 'one run: the edits, then the summary');
  const fileRow = preview.locator('.monaco-list-row', { hasText: 'stats.py' }).first();
  await fileRow.waitFor({ timeout: WAIT });
  // One change annotation per problem: `stats.py:<line>: <message>` (the
  // hunk row's tooltip, or the row of its group when grouped by type).
  const meanLabel = `stats.py:2: ${MEAN_PROBLEM}`;
  const ratioLabel = `stats.py:6: ${RATIO_PROBLEM}`;
  const hunkRow = (label) => preview.locator('.monaco-list-row').filter({ has: page.locator(`[title^="${label}"]`) }).first();
  await hunkRow(meanLabel).waitFor({ timeout: WAIT });
  await hunkRow(ratioLabel).waitFor({ timeout: WAIT });
  const hunkChecked = (text) => preview.locator('.monaco-list-row', { hasText: text }).locator('.monaco-checkbox.checked').isVisible();
  await waitFor('both hunks to be ticked', async () => (await hunkChecked('if values else 0.0')) && (await hunkChecked('if b else 0.0')));
  // Grouped by type, each problem is a row of its own with a checkbox.
  await page.locator('.action-label[aria-label="Group Changes By Type"]').first().click();
  const problemRow = (label) => preview.locator('.monaco-list-row', { hasText: label }).first();
  await problemRow(meanLabel).waitFor({ timeout: WAIT });
  await problemRow(ratioLabel).waitFor({ timeout: WAIT });
  await screenshot('9-fix-all-preview-per-problem');
  // Reject the second problem: untick its file row (the row under the problem's).
  const index = Number(await problemRow(ratioLabel).getAttribute('data-index'));
  const ratioFile = preview.locator(`.monaco-list-row[data-index="${index + 1}"]`);
  assert.match((await ratioFile.textContent()) ?? '', /stats\.py/);
  await ratioFile.locator('.monaco-checkbox').first().click();
  await waitFor('the second problem\'s hunk to be unticked', async () => !(await hunkChecked('if b else 0.0')));
  assert.ok(await hunkChecked('if values else 0.0'), 'the first problem\'s hunk stays ticked');
  await preview.locator('.monaco-button', { hasText: /^Apply$/ }).click();
  await preview.waitFor({ state: 'hidden', timeout: WAIT });
  // Something was rejected: why? (optional), naming the problem rejected.
  const why = page.locator('.quick-input-widget .quick-input-title', { hasText: `Agent fix: Why did you reject \u201c${ratioLabel}\u201d? (optional)` });
  await why.waitFor({ state: 'visible', timeout: WAIT });
  await screenshot('10a-why-rejected');
  await answerInputBox(REASON);
  await waitFor('the review reported to the server', async () =>
    new RegExp(`reviewed run-\\d+: agentfix-0-problem-0 accepted, agentfix-0-problem-1 rejected \\("${REASON.replace(/[()]/g, '\\$&')}"\\); recorded 2\\n`).test(extensionLog()),
  );
  await waitFor('the first fix in the editor', async () => (await editorText()).includes(MEAN_FIXED));
  const text = await editorText();
  assert.ok(text.includes('    return a / b\n'), 'the second problem is left as it was');
  assert.ok(!text.includes(RATIO_FIXED));
  await page.locator('.notification-toast', { hasText: 'Agent fix: applied 1 of 2 changes to stats.py.' }).first().waitFor({ timeout: WAIT });
  await waitFor('the run to end', async () => runsEnded() > before);
  await waitFor('one problem left', async () => (await page.locator('.monaco-editor .squiggly-error').count()) === 1);
  await screenshot('10-fix-all-one-problem-accepted');
});

step('a follow-up on the fix-all says per hunk what the review reported: accepted, rejected with the reason', async () => {
  const before = runsEnded();
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('6');
  await runCommand('Agent fix: follow up on the last run');
  await answerInputBox(FOLLOW_UP_3);
  await waitFor('the tenth model request', async () => requests().length === 10);
  const report = messageText(plainMessages(requests()[9].body).at(-1));
  assert.ok(report.includes(`(\`${MEAN_FIXED.trim()}\`): accepted in the review.`), report);
  assert.ok(report.includes(`(\`${RATIO_FIXED.trim()}\`): rejected in the review; the user's reason: ${REASON}.`), report);
  assert.ok(report.endsWith(`The user's request: ${FOLLOW_UP_3}`), report);
  await waitFor('the follow-up to end', async () => runsEnded() > before);
});

step('agentfix.review "unticked": the changes start unticked; Apply with none ticked applies nothing and says so', async () => {
  fs.writeFileSync(path.join(dirs.workspace, '.e2e-settings.json'), JSON.stringify({ 'agentfix.review': 'unticked' }));
  await runCommand('agentfix e2e: Apply settings');
  await page.getByText('agentfix e2e: applied agentfix.review').first().waitFor({ timeout: WAIT });
  const before = runsEnded();
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('6:12');
  await runCommand('Agent fix');
  const preview = page.locator('.bulk-edit-panel');
  await preview.waitFor({ state: 'visible', timeout: WAIT });
  const hunk = preview.locator('.monaco-list-row', { hasText: 'if b else 0.0' }).first();
  await hunk.waitFor({ timeout: WAIT });
  assert.equal(requests().length, 12, 'one more run: the edit, then the summary');
  assert.ok(!(await hunk.locator('.monaco-checkbox.checked').isVisible()), 'the change starts unticked');
  await preview.locator('.monaco-button', { hasText: /^Apply$/ }).click();
  await preview.waitFor({ state: 'hidden', timeout: WAIT });
  // Escape skips the question: the rejection is reported without a reason.
  const reported = (extensionLog().match(/\] reviewed run-/g) ?? []).length;
  const why = page.locator('.quick-input-widget .quick-input-title', { hasText: 'Agent fix: Why did you reject' });
  await why.waitFor({ state: 'visible', timeout: WAIT });
  await page.locator('.quick-input-widget input').first().press('Escape');
  await why.waitFor({ state: 'hidden', timeout: WAIT });
  await waitFor('the rejection reported', async () => (extensionLog().match(/\] reviewed run-/g) ?? []).length > reported);
  assert.match(extensionLog(), /reviewed run-\d+: agentfix-0-problem-0 rejected; recorded 1\n/);
  await page.locator('.notification-toast', { hasText: 'Agent fix: nothing applied.' }).first().waitFor({ timeout: WAIT });
  await waitFor('the run to end', async () => runsEnded() > before);
  await screenshot('11-nothing-applied');
  assert.ok(!(await editorText()).includes(RATIO_FIXED), 'nothing applied');
  assert.equal(
    await page.locator('.notification-toast', { hasText: "did not apply the agent's proposal" }).count(),
    0,
    'the server\'s "did not apply" message is not repeated',
  );
});

step('"Agent fix: best of N…" (3) proposes the verified candidate, says which it was and that 2 alternatives are there', async () => {
  // Back to ticked reviews; every proposal is now checked by the test.
  const pulls = () => (extensionLog().match(/Received request 'workspace\/configuration/g) ?? []).length;
  const pulled = pulls();
  fs.writeFileSync(
    path.join(dirs.workspace, '.e2e-settings.json'),
    JSON.stringify({ 'agentfix.review': 'ticked', 'agentfix.verify': { commands: ['test'], rounds: 1 } }),
  );
  await runCommand('agentfix e2e: Apply settings');
  await page.getByText('agentfix e2e: applied agentfix.review, agentfix.verify').first().waitFor({ timeout: WAIT });
  await waitFor('the server to pull the configuration again', async () => pulls() > pulled);
  await openFile('best.py');
  await page.locator('.monaco-editor .squiggly-error').first().waitFor({ timeout: WAIT });
  const before = runsEnded();
  const asked = requests().length;
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2:12');
  await runCommand('Agent fix: best of N…');
  await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Agent fix: best of N' }).waitFor({ state: 'visible', timeout: WAIT });
  const rows = page.locator('.quick-input-list .monaco-list-row');
  await waitFor('the counts in the QuickPick', async () => (await rows.count()) === 7);
  assert.equal(((await rows.locator('.label-name').allTextContents()).map((t) => t.trim())).join(', '), 'best of 2, best of 3, best of 4, best of 5, best of 6, best of 7, best of 8');
  assert.match((await page.locator('.quick-input-list .monaco-list-row.focused').textContent()) ?? '', /best of 3/, 'best of 3 is the default');
  await screenshot('12-best-of-n');
  await page.keyboard.press('Enter');
  const preview = page.locator('.bulk-edit-panel');
  await preview.waitFor({ state: 'visible', timeout: 60_000 });
  await preview.locator('.monaco-list-row', { hasText: CANDIDATES[2].line.trim() }).first().waitFor({ timeout: WAIT });
  // Every candidate asked the model twice (its edit, then its summary).
  const mine = requests().slice(asked);
  assert.equal(mine.length, 6, 'three candidates, two requests each');
  for (let i = 1; i <= 3; i++) {
    assert.equal(mine.filter((r) => JSON.stringify(r.body.messages[0]).includes(`candidate ${i} of 3`)).length, 2, `candidate ${i}`);
  }
  // The summary leads with the check, and says it is the best of 3.
  const check = '(?:0 fixed, 0 new; )?test passed \\(\\d+\\.\\d s\\)';
  const label = new RegExp(`Agent fix: verified: ${check}; ${CANDIDATES[2].summary.replace('.', '\\.')} \\(1 file, 1 hunk; 6 turns`);
  const summary = page.locator('.notification-toast', { hasText: label });
  await summary.first().waitFor({ state: 'visible', timeout: WAIT });
  assert.match((await summary.first().textContent()) ?? '', /Best of 3: the candidate agentfix ranked first/);
  assert.equal(fs.readFileSync(best, 'utf8'), BEST);
  await sleep(500);
  await screenshot('13-best-of-3-preview');
  await preview.locator('.monaco-button', { hasText: /^Apply$/ }).click();
  await preview.waitFor({ state: 'hidden', timeout: WAIT });
  await waitFor('candidate 3 in the editor', async () => (await editorText()).includes(CANDIDATES[2].line));
  await page.locator('.notification-toast', { hasText: 'Agent fix: applied 1 of 1 change to best.py.' }).first().waitFor({ timeout: WAIT });
  await page
    .locator('.notification-toast', {
      hasText: new RegExp(`Agent fix: candidate 3 of 3 chosen; 2 alternatives: Ctrl\\+\\. on the changed lines to apply one; the chosen one is verified: ${check}`),
    })
    .first()
    .waitFor({ timeout: WAIT });
  await waitFor('the run to end', async () => runsEnded() > before);
  await screenshot('14-best-of-3-chosen');
});

step('Ctrl+. offers the two alternatives; one opens in the Refactor Preview and, applied, replaces the chosen one', async () => {
  const asked = requests().length;
  await page.locator('.monaco-editor .view-lines').first().click();
  await goToLine('2:5');
  const second = await pickCodeAction('Agent fix: alternative 2 (not verified: test failed)');
  await page.locator('.action-widget .monaco-list-row', { hasText: 'Agent fix: alternative 1 (not verified: test failed)' }).first().waitFor({ timeout: WAIT });
  assert.equal(await page.locator('.action-widget .monaco-list-row', { hasText: 'Agent fix: alternative 3' }).count(), 0, 'the chosen one is no alternative');
  await screenshot('15-alternatives');
  await second.click();
  const preview = page.locator('.bulk-edit-panel');
  await preview.waitFor({ state: 'visible', timeout: WAIT });
  await preview.locator('.monaco-list-row', { hasText: CANDIDATES[1].line.trim() }).first().waitFor({ timeout: WAIT });
  const label = `Agent fix: alternative 2 (not verified: test failed): ${CANDIDATES[1].summary} (1 file, 1 hunk)`;
  await page.locator('.notification-toast', { hasText: label }).first().waitFor({ state: 'visible', timeout: WAIT });
  assert.ok((await editorText()).includes(CANDIDATES[2].line), 'the chosen one stays while the preview is open');
  await sleep(500);
  await screenshot('16-alternative-preview');
  await preview.locator('.monaco-button', { hasText: /^Apply$/ }).click();
  await preview.waitFor({ state: 'hidden', timeout: WAIT });
  await waitFor('candidate 2 in the editor', async () => (await editorText()).includes(CANDIDATES[1].line));
  assert.ok(!(await editorText()).includes(CANDIDATES[2].line), 'not a mix of the two');
  await page.locator('.notification-toast', { hasText: 'Agent fix: alternative 2: applied 1 of 1 change to best.py.' }).first().waitFor({ timeout: WAIT });
  await waitFor('the answer in the log', async () => /alternative: applied true/.test(extensionLog()));
  assert.equal(requests().length, asked, 'no model is asked for an alternative');
  await waitFor('the status bar to say so', async () => /alternative 2 applied/.test(await statusText()));
});

step('the API key appears in no log and no settings file', async () => {
  const roots = [path.join(dirs.userData, 'logs'), path.join(dirs.userData, 'User'), path.join(dirs.userData, 'Machine'), dirs.logs, dirs.workspace];
  const leaks = [];
  for (const root of roots) {
    for (const entry of fs.readdirSync(root, { recursive: true })) {
      const file = path.join(root, entry);
      if (/\.vscdb$|[\\/]workspaceStorage[\\/]|[\\/]globalStorage[\\/]/.test(file) || !fs.statSync(file).isFile()) {
        continue; // VS Code's state databases, where SecretStorage keeps (encrypted) secrets
      }
      if (fs.readFileSync(file).includes(KEY)) {
        leaks.push(file);
      }
    }
  }
  assert.deepEqual(leaks, [], 'files that contain the API key');
  // The server's log is there and says where the key came from, by name only.
  const serverLog = fs.readdirSync(path.join(dirs.userData, 'logs'), { recursive: true }).find((f) => /agentfix\.log$/.test(f));
  assert.ok(serverLog, 'the agentfix output channel is logged');
  assert.match(fs.readFileSync(path.join(dirs.userData, 'logs', serverLog), 'utf8'), /API keys from secret storage: ANTHROPIC_API_KEY/);
});
