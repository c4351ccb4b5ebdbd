// Pure helpers of a run: which code action "Agent fix" runs, what the
// progress reports say, and how a result reads in the status bar.

/** The server's command, carried by every `Agent fix: …` code action. */
export const FIX_COMMAND = 'agentfix.fix';

/** `agentfix.fix`'s argument (README, "Code actions"). */
export interface FixArgument {
  uri: string;
  version?: number | null;
  range: unknown;
  diagnostics: unknown[];
  instruction?: string;
}

/** The command's result (README, "The command's result"). */
export interface FixResult {
  applied?: boolean;
  stopReason?: string;
  turns?: number;
  inputTokens?: number;
  outputTokens?: number;
  message?: string;
  transcript?: string | null;
}

/** A code action or command as `textDocument/codeAction` answers it. */
export interface ActionLike {
  title: string;
  kind?: string;
  command?: string | { title?: string; command: string; arguments?: unknown[] };
  arguments?: unknown[];
}

/**
 * The argument of the action "Agent fix" runs: with a selection, the
 * `Agent fix: selection` action; otherwise (or without one) the first
 * `Agent fix: …` action, which is the first diagnostic's. Undefined when the
 * server offered none (no diagnostic there and no selection).
 */
export function pickFixArgument(actions: readonly ActionLike[] | null | undefined, hasSelection: boolean): FixArgument | undefined {
  const fixes: { action: ActionLike; argument: FixArgument }[] = [];
  for (const action of actions ?? []) {
    if (!action.title.startsWith('Agent fix:')) {
      continue;
    }
    // A Command has `command: string` and `arguments`; a CodeAction has `command: Command`.
    const command = typeof action.command === 'string' ? { command: action.command, arguments: action.arguments } : action.command;
    const argument = command?.command === FIX_COMMAND ? command.arguments?.[0] : undefined;
    if (argument && typeof argument === 'object') {
      fixes.push({ action, argument: argument as FixArgument });
    }
  }
  if (hasSelection) {
    const selection = fixes.find((f) => f.action.kind === 'refactor.rewrite');
    if (selection) {
      return selection.argument;
    }
  }
  return fixes[0]?.argument;
}

/** The turn a progress message names (`turn 2: read_file calc.py`). */
export function turnOf(message: string | undefined): number | undefined {
  const m = /^turn (\d+)\b/.exec(message ?? '');
  return m ? Number(m[1]) : undefined;
}

/** Tokens a progress message names, if it does (`… 12,345 tokens …`). */
export function tokensOf(message: string | undefined): number | undefined {
  const m = /(\d[\d,]*) tokens\b/.exec(message ?? '');
  return m ? Number(m[1].replace(/,/g, '')) : undefined;
}

/** 950 → "950", 12345 → "12.3k", 2000000 → "2.0M". */
export function formatTokens(n: number): string {
  if (n < 1000) {
    return String(n);
  }
  if (n < 1_000_000) {
    return `${(n / 1000).toFixed(1)}k`;
  }
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** Stop reasons of a run that ended as the model meant to. */
const NATURAL = new Set(['end_turn', 'stop_sequence']);

export interface StatusView {
  text: string;
  tooltip: string;
}

/** The status bar while runs are pending. */
export function runningStatus(runs: number, turn: number | undefined, tokens: number | undefined, last: string | undefined): StatusView {
  const parts = [runs > 1 ? `${runs} runs` : 'running'];
  if (turn !== undefined) {
    parts.push(`turn ${turn}`);
  }
  if (tokens !== undefined) {
    parts.push(`${formatTokens(tokens)} tokens`);
  }
  return {
    text: `$(sync~spin) Agent fix: ${parts.join(' · ')}`,
    tooltip: `${last ?? 'Agent fix is running.'}\nClick to cancel.`,
  };
}

/** The status bar after a run. */
export function resultStatus(result: FixResult): StatusView {
  const reason = result.stopReason ?? 'unknown';
  const tokens = (result.inputTokens ?? 0) + (result.outputTokens ?? 0);
  const icon = reason === 'cancelled' ? '$(circle-slash)' : result.applied && NATURAL.has(reason) ? '$(check)' : '$(warning)';
  const lines = [
    result.message ?? '',
    `stop reason: ${reason}; turns: ${result.turns ?? 0}; tokens: ${result.inputTokens ?? 0} in, ${result.outputTokens ?? 0} out`,
  ];
  if (result.transcript) {
    lines.push(`transcript: ${result.transcript}`);
  }
  lines.push('Click to show the output.');
  return { text: `${icon} Agent fix: ${reason} · ${formatTokens(tokens)} tokens`, tooltip: lines.filter(Boolean).join('\n') };
}
