// A stand-in linter for the end-to-end test (code-server has no Python
// language server). It reads `.fake-diagnostics.json` at the root of the
// workspace, a list of
//   {"file": "calc.py", "match": "return a / b", "message": "…", "source": "…"}
// and reports an error on every line of that file whose trimmed text is
// `match`, over the matched text, whenever the document opens or changes.
// Once a fix rewrites the line, the diagnostic goes away, as a linter's would.
//
// The command "agentfix e2e: Apply settings" writes the user settings listed
// in the workspace's `.e2e-settings.json` ({"agentfix.x": value}) through the
// configuration API, as the Settings editor does.
'use strict';
const vscode = require('vscode');

function activate(context) {
  const collection = vscode.languages.createDiagnosticCollection('fake-lint');
  context.subscriptions.push(collection);
  let rules = [];

  async function loadRules() {
    const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
    if (!folder) {
      return;
    }
    try {
      const bytes = await vscode.workspace.fs.readFile(vscode.Uri.joinPath(folder.uri, '.fake-diagnostics.json'));
      rules = JSON.parse(Buffer.from(bytes).toString('utf8'));
    } catch (e) {
      rules = [];
    }
  }

  function lint(document) {
    const relative = vscode.workspace.asRelativePath(document.uri, false);
    const found = [];
    for (const rule of rules) {
      if (rule.file !== relative) {
        continue;
      }
      for (let line = 0; line < document.lineCount; line++) {
        const text = document.lineAt(line).text;
        if (text.trim() === rule.match) {
          const start = text.indexOf(rule.match);
          const d = new vscode.Diagnostic(
            new vscode.Range(line, start, line, start + rule.match.length),
            rule.message,
            vscode.DiagnosticSeverity.Error,
          );
          d.source = rule.source || 'fake-lint';
          found.push(d);
        }
      }
    }
    collection.set(document.uri, found);
  }

  context.subscriptions.push(
    vscode.commands.registerCommand('agentfixE2e.applySettings', async () => {
      const folder = vscode.workspace.workspaceFolders[0];
      const bytes = await vscode.workspace.fs.readFile(vscode.Uri.joinPath(folder.uri, '.e2e-settings.json'));
      const settings = JSON.parse(Buffer.from(bytes).toString('utf8'));
      for (const [key, value] of Object.entries(settings)) {
        await vscode.workspace.getConfiguration().update(key, value, vscode.ConfigurationTarget.Global);
      }
      vscode.window.showInformationMessage(`agentfix e2e: applied ${Object.keys(settings).join(', ')}`);
    }),
  );

  loadRules().then(() => {
    vscode.workspace.textDocuments.forEach(lint);
    context.subscriptions.push(
      vscode.workspace.onDidOpenTextDocument(lint),
      vscode.workspace.onDidChangeTextDocument((e) => lint(e.document)),
    );
  });
}

function deactivate() {}

module.exports = { activate, deactivate };
