// Pure helpers of a run: which code action "Agent fix" runs, the arguments
// of the other commands (model, follow-up, fix-all, best of N), what the
// progress reports say, and how a result reads in the status bar.

/** The server's command, carried by every `Agent fix: …` code action. */
export const FIX_COMMAND = 'agentfix.fix';
/** The command of the code actions `Agent fix: alternative K (…)` (a best-of-N candidate not chosen). */
export const ALTERNATIVE_COMMAND = 'agentfix.applyAlternative';
/** The server's command a review ends with: what the user did with each hunk (docs/protocol.md, "Follow-ups"). */
export const REVIEWED_COMMAND = 'agentfix.reviewed';
/** The candidates "Agent fix: best of N…" offers first. */
export const DEFAULT_BEST_OF = 3;
/** The most candidates a run may make (the server refuses more). */
export const MAX_CANDIDATES = 8;

/** An LSP position (0-based line and character). */
export interface Position {
  line: number;
  character: number;
}

/** An LSP range. */
export interface Range {
  start: Position;
  end: Position;
}

/** `agentfix.fix`'s argument (README, "The `agentfix.fix` contract"). */
export interface FixArgument {
  uri: string;
  version?: number | null;
  range: unknown;
  diagnostics: unknown[];
  instruction?: string;
  model?: string;
  followUp?: string;
  /** How many candidates this run makes (1 to 8): best of N. */
  candidates?: number;
}

/** One candidate of a best-of-N result (docs/protocol.md). */
export interface Candidate {
  index: number;
  verified: boolean;
  chosen: boolean;
  costUsd?: number | null;
  linesChanged: number;
  stopReason: string;
}

/** `agentfix.applyAlternative`'s one argument. */
export interface AlternativeArgument {
  runId: string;
  index: number;
}

/** `agentfix.reviewed`'s answer: the hunks recorded, and the annotation ids the run's proposal has none of. */
export interface ReviewedResult {
  recorded?: number;
  unknown?: string[];
}

/** `agentfix.applyAlternative`'s answer. */
export interface AlternativeResult {
  applied?: boolean;
  message?: string;
  conflicts?: string[];
}

/** The command's result (README, "The command's result"). */
export interface FixResult {
  runId?: string;
  applied?: boolean;
  stopReason?: string;
  turns?: number;
  inputTokens?: number;
  outputTokens?: number;
  message?: string;
  transcript?: string | null;
  /** How the proposal fared in agentfix's own check (docs/protocol.md). */
  verification?: Verification | null;
  /** With several candidates, each of them (the chosen one marked); empty for a single run. */
  candidates?: Candidate[];
}

/** The `verification` record of the command's result. */
export interface Verification {
  verified: boolean;
  rounds: number;
  diagnostics: { fixed: number; introduced: number; remaining: number } | null;
  commands: { name: string; passed: boolean; exitCode: number | null; secs: number }[];
}

/** `verified`, `not verified`, or undefined when nothing checked the proposal. */
export function verificationWord(v: Verification | null | undefined): string | undefined {
  if (!v || (v.diagnostics === null && v.commands.length === 0)) {
    return undefined;
  }
  return v.verified ? 'verified' : 'not verified';
}

/**
 * The line the check reads as, worded as the server words it in the
 * proposal's label: `verified: 1 fixed, 0 new; test passed (4.1 s)`,
 * `not verified: test failed`; undefined when nothing checked it.
 */
export function checkLine(v: Verification | null | undefined): string | undefined {
  if (!v || (v.diagnostics === null && v.commands.length === 0)) {
    return undefined;
  }
  const parts: string[] = [];
  if (v.verified) {
    if (v.diagnostics) {
      parts.push(`${v.diagnostics.fixed} fixed, ${v.diagnostics.introduced} new`);
    }
    parts.push(...v.commands.map((c) => `${c.name} passed (${c.secs.toFixed(1)} s)`));
    return `verified: ${parts.join('; ')}`;
  }
  const commandsFailed = v.commands.some((c) => !c.passed);
  if (v.diagnostics && v.diagnostics.introduced > 0) {
    parts.push(`${v.diagnostics.introduced} new error${v.diagnostics.introduced === 1 ? '' : 's'}`);
  } else if (v.diagnostics && !commandsFailed) {
    parts.push('the problem is still reported');
  }
  parts.push(...v.commands.filter((c) => !c.passed).map((c) => `${c.name} failed`));
  return `not verified: ${parts.join('; ')}`;
}

/**
 * What a best-of-N result says of its candidates: `candidate 3 of 3 chosen;
 * 2 alternatives: Ctrl+. on the changed lines to apply one; the chosen one
 * is verified: test passed (0.1 s)` (what to do first: a notification
 * shows one line). Undefined for a run of one candidate. The alternatives
 * are the candidates not chosen that propose something.
 */
export function bestOfSummary(result: FixResult): string | undefined {
  const candidates = result.candidates ?? [];
  if (candidates.length < 2) {
    return undefined;
  }
  const chosen = candidates.find((c) => c.chosen && c.linesChanged > 0);
  if (!chosen) {
    return `none of the ${candidates.length} candidates proposed an edit`;
  }
  const others = candidates.filter((c) => !c.chosen && c.linesChanged > 0).length;
  const alternatives =
    others === 0
      ? 'no alternatives'
      : others === 1
        ? '1 alternative: Ctrl+. on the changed lines to apply it'
        : `${others} alternatives: Ctrl+. on the changed lines to apply one`;
  const line = checkLine(result.verification);
  return `candidate ${chosen.index} of ${candidates.length} chosen; ${alternatives}${line ? `; the chosen one is ${line}` : ''}`;
}

/** The argument as a best-of-`n` run (`candidates`, 2 to 8). */
export function withCandidates(argument: FixArgument, n: number): FixArgument {
  if (!Number.isInteger(n) || n < 2 || n > MAX_CANDIDATES) {
    throw new RangeError(`best of ${n}: the candidates must be 2 to ${MAX_CANDIDATES}`);
  }
  return { ...argument, candidates: n };
}

/**
 * The counts "Agent fix: best of N…" offers (2 to 8) and the one it
 * starts on: `agentfix.candidates` when it is more than one, else 3.
 */
export function candidateChoices(setting: unknown): { counts: number[]; preselected: number } {
  const counts = Array.from({ length: MAX_CANDIDATES - 1 }, (_, i) => i + 2);
  const preselected = typeof setting === 'number' && counts.includes(setting) ? setting : DEFAULT_BEST_OF;
  return { counts, preselected };
}

/** Whether a code action (or command) is an alternative of a best-of run, and its argument. */
export function alternativeArgument(argument: unknown): AlternativeArgument | undefined {
  const a = argument as { runId?: unknown; index?: unknown } | null | undefined;
  return typeof a?.runId === 'string' && typeof a.index === 'number' ? { runId: a.runId, index: a.index } : undefined;
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
 * server offered none (no diagnostic there and no selection). A follow-up
 * (`followUp`) or a fix-all (`source.fixAll…`) is never picked: "Agent fix"
 * starts a fresh run on what is under the cursor.
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
    if (argument && typeof argument === 'object' && !isFollowUp(argument) && !action.kind?.startsWith('source.fixAll')) {
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

/** Whether an `agentfix.fix` argument continues an earlier run. */
export function isFollowUp(argument: unknown): argument is FixArgument & { followUp: string } {
  const followUp = (argument as { followUp?: unknown } | null | undefined)?.followUp;
  return typeof followUp === 'string' && followUp !== '';
}

/**
 * A follow-up action's argument with what the user typed: the instruction
 * trimmed; an empty one is left out (the server then asks the model to check
 * the result and finish the fix).
 */
export function withInstruction(argument: FixArgument, instruction: string | undefined): FixArgument {
  const { instruction: _old, ...rest } = argument;
  const text = instruction?.trim();
  return text ? { ...rest, instruction: text } : rest;
}

/** The argument with the model of this run (over the settings' `model`). */
export function withModel(argument: FixArgument, model: string): FixArgument {
  const id = model.trim();
  return id ? { ...argument, model: id } : argument;
}

/** "Agent fix: follow up on the last run": the argument at the cursor, continuing `runId`. */
export function followUpArgument(argument: FixArgument, runId: string, instruction: string | undefined): FixArgument {
  return withInstruction({ ...argument, followUp: runId }, instruction);
}

/** The model ids of `agentfix.models`: strings, trimmed, non-empty, each once. */
export function modelList(setting: unknown): string[] {
  const models: string[] = [];
  for (const item of Array.isArray(setting) ? setting : []) {
    const id = typeof item === 'string' ? item.trim() : '';
    if (id && !models.includes(id)) {
      models.push(id);
    }
  }
  return models;
}

function before(a: Position, b: Position): boolean {
  return a.line < b.line || (a.line === b.line && a.character < b.character);
}

/** The smallest range holding every one of `ranges` (which must not be empty). */
export function spanOf(ranges: readonly Range[]): Range {
  let { start, end } = ranges[0];
  for (const r of ranges.slice(1)) {
    start = before(r.start, start) ? r.start : start;
    end = before(end, r.end) ? r.end : end;
  }
  return { start: { ...start }, end: { ...end } };
}

/**
 * "Agent fix: all problems in this file": one run with every diagnostic of
 * the document (LSP shape, as the protocol converter gives them), in
 * document order, over the range spanning them. Undefined without any.
 */
export function fixAllArgument(
  uri: string,
  version: number | null | undefined,
  diagnostics: readonly { range: Range }[],
): FixArgument | undefined {
  if (diagnostics.length === 0) {
    return undefined;
  }
  const sorted = [...diagnostics].sort((a, b) =>
    before(a.range.start, b.range.start) ? -1 : before(b.range.start, a.range.start) ? 1 : 0,
  );
  return { uri, version, range: spanOf(sorted.map((d) => d.range)), diagnostics: sorted };
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
  const checked = verificationWord(result.verification);
  const good = result.applied && NATURAL.has(reason) && checked !== 'not verified';
  const icon = reason === 'cancelled' ? '$(circle-slash)' : good ? '$(check)' : '$(warning)';
  const lines = [
    result.message ?? '',
    `stop reason: ${reason}; turns: ${result.turns ?? 0}; tokens: ${result.inputTokens ?? 0} in, ${result.outputTokens ?? 0} out`,
  ];
  const best = bestOfSummary(result);
  if (best) {
    lines.push(best);
  }
  if (result.transcript) {
    lines.push(`transcript: ${result.transcript}`);
  }
  lines.push('Click to show the output.');
  const lead = checked ? `${checked} · ` : '';
  return { text: `${icon} Agent fix: ${lead}${reason} · ${formatTokens(tokens)} tokens`, tooltip: lines.filter(Boolean).join('\n') };
}
