// Where the agentfix binary is. Pure: the file system is passed in, so
// `npm test` checks every branch without VS Code.
//
// Order: the `agentfix.serverPath` setting; the binary bundled in the
// extension (`bin/<platform>-<arch>/agentfix`); `agentfix` on PATH; then
// `~/.cargo/bin/agentfix`, where `cargo install --path .` puts it (a desktop
// VS Code often starts without ~/.cargo/bin on its PATH).

import * as path from 'node:path';

export interface ResolveInput {
  /** `agentfix.serverPath`, possibly empty. */
  setting: string | undefined;
  /** The extension's installation directory. */
  extensionPath: string;
  platform: string;
  arch: string;
  env: { [name: string]: string | undefined };
  /** The first workspace folder, for a relative `serverPath`. */
  workspaceFolder?: string;
  /** Whether `file` exists and is an executable file. */
  isExecutable: (file: string) => boolean;
}

export type Resolved =
  | { ok: true; path: string; source: 'setting' | 'bundled' | 'PATH' | 'cargo' }
  | { ok: false; message: string };

/** The name of the server binary on this platform. */
export function binaryName(platform: string): string {
  return platform === 'win32' ? 'agentfix.exe' : 'agentfix';
}

/** `bin/<platform>-<arch>/agentfix` inside the extension. */
export function bundledPath(extensionPath: string, platform: string, arch: string): string {
  return path.join(extensionPath, 'bin', `${platform}-${arch}`, binaryName(platform));
}

/** The message shown when no binary is found. */
export const NOT_FOUND_MESSAGE =
  'agentfix: the agentfix server was not found (not bundled for this platform, not on PATH). ' +
  'Install it with `cargo install --path .` in a checkout of agentfix, ' +
  'or set `agentfix.serverPath` to the binary.';

function expandHome(p: string, env: ResolveInput['env']): string {
  const home = env.HOME ?? env.USERPROFILE;
  if (home && (p === '~' || p.startsWith('~/') || p.startsWith('~\\'))) {
    return path.join(home, p.slice(1));
  }
  return p;
}

export function resolveServerPath(input: ResolveInput): Resolved {
  const setting = input.setting?.trim();
  if (setting) {
    let file = expandHome(setting, input.env);
    if (!path.isAbsolute(file) && input.workspaceFolder) {
      file = path.join(input.workspaceFolder, file);
    }
    if (input.isExecutable(file)) {
      return { ok: true, path: file, source: 'setting' };
    }
    // A path the user gave that does not work is an error, not a reason to
    // run some other binary.
    return {
      ok: false,
      message:
        `agentfix: \`agentfix.serverPath\` is "${setting}", but ${file} is not an executable file. ` +
        'Fix the setting, or clear it to use the bundled binary or `agentfix` on PATH ' +
        '(install with `cargo install --path .`).',
    };
  }
  const bundled = bundledPath(input.extensionPath, input.platform, input.arch);
  if (input.isExecutable(bundled)) {
    return { ok: true, path: bundled, source: 'bundled' };
  }
  const name = binaryName(input.platform);
  const pathVar = input.env.PATH ?? input.env.Path ?? '';
  const separator = input.platform === 'win32' ? ';' : ':';
  for (const dir of pathVar.split(separator)) {
    if (dir && path.isAbsolute(dir)) {
      const candidate = path.join(dir, name);
      if (input.isExecutable(candidate)) {
        return { ok: true, path: candidate, source: 'PATH' };
      }
    }
  }
  const home = input.env.HOME ?? input.env.USERPROFILE;
  const cargoHome = input.env.CARGO_HOME ?? (home ? path.join(home, '.cargo') : undefined);
  if (cargoHome) {
    const candidate = path.join(cargoHome, 'bin', name);
    if (input.isExecutable(candidate)) {
      return { ok: true, path: candidate, source: 'cargo' };
    }
  }
  return { ok: false, message: NOT_FOUND_MESSAGE };
}
