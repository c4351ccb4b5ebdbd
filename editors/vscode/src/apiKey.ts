// Which environment variable carries the API key, and the server's
// environment. Pure, for `npm test`.
//
// The server reads the key only from its environment: ANTHROPIC_API_KEY,
// OPENAI_API_KEY or AGENTFIX_API_KEY by provider. The extension keeps keys in
// VS Code's SecretStorage under the variable's name and hands every stored
// one to the server process when it starts, so switching `agentfix.provider`
// needs no restart; a stored key wins over the same variable inherited from
// VS Code's own environment. Keys never go to settings or logs.

export const PROVIDERS = ['anthropic', 'openai', 'openai-compatible'] as const;
export type Provider = (typeof PROVIDERS)[number];

export const KEY_VARIABLES: Readonly<Record<Provider, string>> = {
  anthropic: 'ANTHROPIC_API_KEY',
  openai: 'OPENAI_API_KEY',
  'openai-compatible': 'AGENTFIX_API_KEY',
};

/** Every variable a key may be stored under. */
export const ALL_KEY_VARIABLES: readonly string[] = Object.values(KEY_VARIABLES);

/** The SecretStorage key of the API key for `variable`. */
export function secretName(variable: string): string {
  return `agentfix.apiKey.${variable}`;
}

/**
 * The provider in force: the setting when the user set one, else
 * AGENTFIX_PROVIDER from the environment, else anthropic (the server's
 * order; agentfix.toml may not set the provider).
 */
export function effectiveProvider(setting: unknown, env: { [name: string]: string | undefined }): Provider {
  for (const value of [setting, env.AGENTFIX_PROVIDER]) {
    if (typeof value === 'string' && (PROVIDERS as readonly string[]).includes(value)) {
      return value as Provider;
    }
  }
  return 'anthropic';
}

/** The environment variable of the key for `provider`. */
export function keyVariable(provider: Provider): string {
  return KEY_VARIABLES[provider];
}

/**
 * The server process's environment: `base` (VS Code's own) with the stored
 * keys on top. Empty stored values are ignored.
 */
export function serverEnv(
  base: { [name: string]: string | undefined },
  stored: { [variable: string]: string | undefined },
): { [name: string]: string } {
  const env: { [name: string]: string } = {};
  for (const [name, value] of Object.entries(base)) {
    if (value !== undefined) {
      env[name] = value;
    }
  }
  for (const [variable, value] of Object.entries(stored)) {
    if (value) {
      env[variable] = value;
    }
  }
  return env;
}
