// "Agent fix: all problems in this file" converts VS Code's diagnostics with
// vscode-languageclient's own converter (code2ProtocolConverter), as the
// extension does, then builds one agentfix.fix argument from them.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Diagnostic, DiagnosticSeverity, DiagnosticTag, Range, Uri } from './vscodeShim';
// After the shim: the converter imports `vscode`.
import { createConverter } from 'vscode-languageclient/lib/common/codeConverter';

import { fixAllArgument } from '../runs';

test('fix-all sends every diagnostic of every source, LSP-shaped, with the range spanning them', async () => {
  const c2p = createConverter();
  // As vscode.languages.getDiagnostics(uri) gives them: two sources, vscode's
  // 0-based severities, a code with a link, a tag.
  const lint = new Diagnostic(new Range(5, 11, 5, 16), 'Possible division by zero', DiagnosticSeverity.Warning);
  lint.source = 'fake-lint';
  lint.code = { value: 'W0012', target: Uri.parse('https://lint.example/W0012') };
  const types = new Diagnostic(new Range(1, 4, 1, 20), 'Name "totl" is not defined', DiagnosticSeverity.Error);
  types.source = 'fake-types';
  types.code = 'undefined-name';
  const unused = new Diagnostic(new Range(0, 0, 0, 9), '"os" is not accessed', DiagnosticSeverity.Hint);
  unused.tags = [DiagnosticTag.Unnecessary];

  const converted = await c2p.asDiagnostics([lint, types, unused] as never);
  // As JSON, the way it goes over the wire (the converter leaves `code: undefined` on some).
  const argument = JSON.parse(JSON.stringify(fixAllArgument('file:///w/stats.py', 7, converted)));
  assert.deepEqual(argument, {
    uri: 'file:///w/stats.py',
    version: 7,
    range: { start: { line: 0, character: 0 }, end: { line: 5, character: 16 } },
    diagnostics: [
      { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 9 } }, message: '"os" is not accessed', severity: 4, tags: [1] },
      {
        range: { start: { line: 1, character: 4 }, end: { line: 1, character: 20 } },
        message: 'Name "totl" is not defined',
        severity: 1,
        code: 'undefined-name',
        source: 'fake-types',
      },
      {
        range: { start: { line: 5, character: 11 }, end: { line: 5, character: 16 } },
        message: 'Possible division by zero',
        severity: 2,
        code: 'W0012',
        codeDescription: { href: 'https://lint.example/W0012' },
        source: 'fake-lint',
      },
    ],
  });
});
