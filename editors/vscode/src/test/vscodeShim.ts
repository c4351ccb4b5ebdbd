// Just enough of the `vscode` module for vscode-languageclient's code
// converters (code2ProtocolConverter, protocol2CodeConverter) to run under plain node, so that unit
// tests convert diagnostics exactly as the extension does. Install it before
// requiring anything that imports `vscode`.

import Module from 'node:module';

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(startLine: number, startCharacter: number, endLine: number, endCharacter: number) {
    this.start = new Position(startLine, startCharacter);
    this.end = new Position(endLine, endCharacter);
  }
}

export class Uri {
  private constructor(private readonly text: string) {}
  static parse(text: string): Uri {
    return new Uri(text);
  }
  toString(): string {
    return this.text;
  }
}

/** vscode's enums are 0-based where LSP's are 1-based. */
export const DiagnosticSeverity = { Error: 0, Warning: 1, Information: 2, Hint: 3 } as const;
export const DiagnosticTag = { Unnecessary: 1, Deprecated: 2 } as const;

export class Diagnostic {
  source?: string;
  code?: string | number | { value: string | number; target: Uri };
  tags?: number[];
  constructor(
    readonly range: Range,
    readonly message: string,
    readonly severity: number = DiagnosticSeverity.Error,
  ) {}
}

/** The entries a WorkspaceEdit was given, in order. */
export class WorkspaceEdit {
  readonly entries: { kind: 'replace' | 'create'; uri: Uri; range?: Range; newText?: string; options?: unknown; metadata?: unknown }[] = [];
  replace(uri: Uri, range: Range, newText: string, metadata?: unknown): void {
    this.entries.push({ kind: 'replace', uri, range, newText, metadata });
  }
  createFile(uri: Uri, options?: unknown, metadata?: unknown): void {
    this.entries.push({ kind: 'create', uri, options, metadata });
  }
}

const known: Record<string, unknown> = { Position, Range, Uri, Diagnostic, DiagnosticSeverity, DiagnosticTag, WorkspaceEdit };

/** Anything else the library touches when it loads: a class to extend, or an empty enum. */
const shim = new Proxy(known, {
  get(target, name) {
    if (typeof name !== 'string') {
      return undefined;
    }
    if (!(name in target)) {
      target[name] = class {};
    }
    return target[name];
  },
});

type Load = (request: string, parent: unknown, isMain: boolean) => unknown;
const loader = Module as unknown as { _load: Load };
const original = loader._load;
loader._load = function (request: string, parent: unknown, isMain: boolean) {
  return request === 'vscode' ? shim : original.call(this, request, parent, isMain);
};
