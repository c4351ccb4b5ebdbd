// The `agentfix.*` settings that go to the server, as the server wants them.
//
// Pure: no `vscode` import, so `npm test` runs it under plain node.
//
// The server layers its configuration: built-in defaults < agentfix.toml <
// environment < editor settings. The editor layer must therefore hold only
// what the user really set; the defaults shown in the settings UI
// (package.json) are documentation, and sending them would override the
// project file and the environment. So a setting is sent only when the user
// set it somewhere VS Code lets it count (see `explicitValue`), and empty
// strings and nulls mean "not set".
//
// Which settings exist comes from package.json itself
// (`contributes.configuration.properties`): every `agentfix.<name>` there is
// sent as `<name>` unless it is one of the client's own (`CLIENT_ONLY`), so a
// new server setting (`agentfix.languageServers`, `agentfix.commands`, …) is
// a package.json change only. Dotted names become nested objects.

/** The settings section, in VS Code and in `workspace/configuration`. */
export const SECTION = 'agentfix';

/**
 * Settings the extension itself uses; never sent to the server (which
 * ignores unknown settings anyway): `models` is the list "Agent fix with
 * model…" offers, each run's choice going in the command's `model`;
 * `review` is how a proposal opens in the Refactor Preview.
 */
export const CLIENT_ONLY: ReadonlySet<string> = new Set(['serverPath', 'trace.server', 'models', 'review', 'askRejectReason']);

/** Scopes whose values VS Code takes from user (or remote) settings only. */
const USER_ONLY_SCOPES: ReadonlySet<string> = new Set(['application', 'machine']);

/** One property of `contributes.configuration.properties`. */
export interface PropertySchema {
  scope?: string;
  type?: string | string[];
  [other: string]: unknown;
}

/** What `WorkspaceConfiguration.inspect` returns, as far as we use it. */
export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** A JSON object of settings in the server's camelCase form. */
export type ServerSettings = { [key: string]: unknown };

/**
 * The server settings declared by a package.json manifest: their names
 * without the `agentfix.` prefix, with their schema.
 */
export function serverSettingNames(manifest: unknown): Map<string, PropertySchema> {
  const names = new Map<string, PropertySchema>();
  const contributes = (manifest as { contributes?: { configuration?: unknown } })?.contributes;
  const configuration = contributes?.configuration;
  // `configuration` may be one object or an array of them.
  const blocks = Array.isArray(configuration) ? configuration : configuration ? [configuration] : [];
  for (const block of blocks) {
    const properties = (block as { properties?: Record<string, PropertySchema> }).properties ?? {};
    for (const [key, schema] of Object.entries(properties)) {
      if (!key.startsWith(SECTION + '.')) {
        continue;
      }
      const name = key.slice(SECTION.length + 1);
      if (!CLIENT_ONLY.has(name)) {
        names.set(name, schema ?? {});
      }
    }
  }
  return names;
}

/** Whether a value counts as set: not undefined, null or an empty string. */
function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

/**
 * The value the user set for one setting, or undefined. Machine- and
 * application-scoped settings (`provider`, `baseUrl`, `transcriptDir`) count
 * only from user settings, as VS Code itself does, so a cloned repository's
 * `.vscode/settings.json` cannot send the API key elsewhere.
 */
export function explicitValue(schema: PropertySchema, inspected: Inspected | undefined): unknown {
  if (!inspected) {
    return undefined;
  }
  const candidates = USER_ONLY_SCOPES.has(schema.scope ?? '')
    ? [inspected.globalValue]
    : [inspected.workspaceFolderValue, inspected.workspaceValue, inspected.globalValue];
  return candidates.find(isSet);
}

/** Sets `path` (dotted) in `target`, creating nested objects as needed. */
function setPath(target: ServerSettings, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      node[part] = {};
    }
    node = node[part] as ServerSettings;
  }
  node[parts[parts.length - 1]] = value;
}

/**
 * The server settings object (for `initializationOptions`, the answer to
 * `workspace/configuration` and `didChangeConfiguration`): every declared
 * server setting the user set, by its camelCase name.
 */
export function serverSettings(
  names: Map<string, PropertySchema>,
  inspect: (name: string) => Inspected | undefined,
): ServerSettings {
  const settings: ServerSettings = {};
  for (const [name, schema] of names) {
    const value = explicitValue(schema, inspect(name));
    if (value !== undefined) {
      setPath(settings, name, value);
    }
  }
  return settings;
}

/**
 * The answer to one `workspace/configuration` item whose section is
 * `agentfix` or below it (`agentfix.maxTurns`): the settings object or the
 * part of it the section names (null when unset, as VS Code answers).
 */
export function configurationFor(section: string, settings: ServerSettings): unknown {
  if (section === SECTION) {
    return settings;
  }
  let node: unknown = settings;
  for (const part of section.slice(SECTION.length + 1).split('.')) {
    if (typeof node !== 'object' || node === null) {
      return null;
    }
    node = (node as ServerSettings)[part];
  }
  return node === undefined ? null : node;
}

/** Whether a `workspace/configuration` section is ours. */
export function isOurSection(section: string | null | undefined): section is string {
  return section === SECTION || (typeof section === 'string' && section.startsWith(SECTION + '.'));
}
