// The agentfix extension: starts the agentfix language server with
// vscode-languageclient and adds what a generic client lacks: the API key
// from SecretStorage, the "Agent fix" commands (with an instruction, with a
// model picked from `agentfix.models`, best of N, follow-ups, all problems
// of a file), cancellable progress notifications and a status bar item.
//
// It also takes the server's `workspace/applyEdit` (the run's one proposal,
// or the alternative of a best-of-N run the user picked from the code
// actions) from the client's default handler: the progress closes, the
// proposal opens in VS Code's Refactor Preview with every hunk ticked (see
// review.ts), the run's summary and cost are shown, and once the user
// applied what they kept the extension says what was applied and answers
// the server. When something was rejected it asks why (an InputBox that
// Escape skips), and it tells the server what became of each hunk
// (`agentfix.reviewed`) once the run's id is known, for a follow-up.

import * as fs from 'node:fs';
import * as vscode from 'vscode';
import {
  type ApplyWorkspaceEditParams,
  ApplyWorkspaceEditRequest,
  type ApplyWorkspaceEditResult,
  CodeActionRequest,
  CodeActionTriggerKind,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  State,
  type ClientCapabilities,
  type FeatureState,
  type ProgressToken,
  ResponseError,
  RevealOutputChannelOn,
  type ServerOptions,
  ShowMessageNotification,
  MessageType,
  type StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  type WorkDoneProgressBegin,
  type WorkDoneProgressReport,
} from 'vscode-languageclient/node';

import { ALL_KEY_VARIABLES, effectiveProvider, keyVariable, secretName, serverEnv } from './apiKey';
import {
  ALTERNATIVE_COMMAND,
  type AlternativeResult,
  alternativeArgument,
  bestOfSummary,
  candidateChoices,
  FIX_COMMAND,
  type FixArgument,
  type FixResult,
  fixAllArgument,
  followUpArgument,
  isFollowUp,
  modelList,
  pickFixArgument,
  REVIEWED_COMMAND,
  type ReviewedResult,
  resultStatus,
  runningStatus,
  tokensOf,
  turnOf,
  withCandidates,
  withInstruction,
  withModel,
} from './runs';
import {
  appliedHunks,
  appliedMessage,
  applyAnswer,
  fileHunks,
  type FileOutcome,
  type HunkReview,
  hunkReviews,
  type LspWorkspaceEdit,
  type OffsetHunk,
  rejectionQuestion,
  sentinelTarget,
  ticked,
  withReason,
} from './review';
import { resolveServerPath } from './serverPath';
import { configurationFor, isOurSection, SECTION, serverSettingNames, serverSettings, type ServerSettings } from './settings';

/** JSON-RPC error codes after which the server has already told the user. */
const SERVER_SHOWED = new Set([-32803, -32603]);
const REQUEST_CANCELLED = -32800;
/** How long "Agent fix: Cancel" waits for a progress-cancelled run before cancelling its request. */
const CANCEL_GRACE_MS = 2000;
/** The server's message when the editor answered `applied: false` (ours already said so). */
const NOT_APPLIED = "The editor did not apply the agent's proposal";

let extension: AgentFix | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new AgentFix(context);
  await extension.activate();
}

export async function deactivate(): Promise<void> {
  await extension?.dispose();
  extension = undefined;
}

/** One `$/progress` token the server created for a run. */
interface ProgressPart {
  token: ProgressToken;
  message?: string;
  turn?: number;
  tokens?: number;
  progress?: vscode.Progress<{ message?: string }>;
  finish?: () => void;
  done: boolean;
  /** Its notification was closed (the proposal arrived) before the server's `end`. */
  hidden?: boolean;
  dispose: () => void;
}

/**
 * A run, or an alternative being applied, whose review reports to the
 * server: what the user did with each hunk goes out as `agentfix.reviewed`
 * once both the review's outcomes and the run's id are there.
 */
interface ReviewOwner {
  /** An `agentfix.applyAlternative` (its runId known from the start). */
  alternative: boolean;
  /** The run's document (a fix), to tell runs apart when a proposal comes. */
  document?: string;
  /** The run's id: an alternative's at once, a fix's with its result. */
  runId?: string;
  /** The run ended without one that the server keeps (failed, cancelled, restarted): nothing is sent. */
  gone?: boolean;
  /** Finished reviews waiting for the runId, one list of hunks each. */
  reports: HunkReview[][];
}

class AgentFix {
  private readonly output: vscode.OutputChannel;
  private readonly status: vscode.StatusBarItem;
  private client: LanguageClient | undefined;
  /** Why there is no client, when there is none. */
  private startError: string | undefined;
  /** Start/stop steps, one at a time. */
  private lifecycle: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  /** Pending `agentfix.fix` requests. */
  private readonly pending = new Set<vscode.CancellationTokenSource>();
  /** Progress of runs, by token. */
  private readonly parts = new Map<string, ProgressPart>();
  private last: { text: string; tooltip: string } | undefined;
  /** The `runId` of the last finished run, by document URI (for "follow up on the last run"). */
  private readonly lastRuns = new Map<string, string>();
  /** The candidates of the best-of-N runs pending, by document URI (for their review). */
  private readonly bestOf = new Map<string, number>();
  /** The runs and alternatives waiting for their answer, whose proposals may come for review. */
  private readonly owners = new Set<ReviewOwner>();
  /** The label of the proposal under review, while the Refactor Preview is open. */
  private reviewing: string | undefined;
  /** When the extension last answered a proposal with `applied: false` (after saying so itself). */
  private refusedAt = 0;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel('agentfix');
    this.status = vscode.window.createStatusBarItem('agentfix.status', vscode.StatusBarAlignment.Right, 100);
    this.status.name = 'Agent fix';
  }

  async activate(): Promise<void> {
    const { context } = this;
    const command = (id: string, f: (...args: unknown[]) => unknown) =>
      context.subscriptions.push(vscode.commands.registerCommand(id, f));
    command('agentfix.run', () => this.guarded(() => this.fixHere({})));
    command('agentfix.runWithInstruction', () => this.guarded(() => this.fixHere({ askInstruction: true })));
    command('agentfix.fixWithModel', () => this.guarded(() => this.fixHere({ askModel: true })));
    command('agentfix.bestOf', () => this.guarded(() => this.fixHere({ askCandidates: true })));
    command('agentfix.followUp', () => this.guarded(() => this.followUpLast()));
    command('agentfix.fixAll', () => this.guarded(() => this.fixAll()));
    command('agentfix.cancelRun', () => this.cancel());
    command('agentfix.setApiKey', () => this.setApiKey());
    command('agentfix.showOutput', () => this.output.show(true));
    command('agentfix.restart', () => this.restart());
    context.subscriptions.push(
      this.output,
      this.status,
      context.secrets.onDidChange((e) => {
        if (ALL_KEY_VARIABLES.some((v) => secretName(v) === e.key)) {
          this.scheduleRestart('the API key changed');
        }
      }),
      vscode.workspace.onDidChangeConfiguration((e) => {
        // Other settings reach the running server (didChangeConfiguration);
        // the binary can only change by starting another one.
        if (e.affectsConfiguration(`${SECTION}.serverPath`)) {
          this.scheduleRestart('agentfix.serverPath changed');
        }
      }),
    );
    this.refreshStatus();
    this.status.show();
    await this.enqueue(() => this.start());
  }

  async dispose(): Promise<void> {
    clearTimeout(this.restartTimer);
    await this.enqueue(() => this.stop());
  }

  private log(line: string): void {
    this.output.appendLine(`[extension ${new Date().toLocaleTimeString()}] ${line}`);
  }

  // ---- settings ---------------------------------------------------------

  /** The server settings the user set (see settings.ts). */
  private settings(scope?: vscode.Uri): ServerSettings {
    const names = serverSettingNames(this.context.extension.packageJSON);
    const config = vscode.workspace.getConfiguration(SECTION, scope ?? null);
    return serverSettings(names, (name) => config.inspect(name));
  }

  // ---- lifecycle --------------------------------------------------------

  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.lifecycle.then(step).catch((e: unknown) => this.log(`error: ${errorText(e)}`));
    this.lifecycle = next;
    return next;
  }

  private scheduleRestart(why: string): void {
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      this.log(`restarting the server: ${why}`);
      void this.restart();
    }, 200);
  }

  private restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.stop();
      await this.start();
    });
  }

  private async start(): Promise<void> {
    const config = vscode.workspace.getConfiguration(SECTION);
    const resolved = resolveServerPath({
      setting: config.get<string>('serverPath'),
      extensionPath: this.context.extensionPath,
      platform: process.platform,
      arch: process.arch,
      env: process.env,
      workspaceFolder: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
      isExecutable,
    });
    if (!resolved.ok) {
      this.startError = resolved.message;
      this.log(resolved.message);
      this.refreshStatus();
      void this.showStartError();
      return;
    }
    this.log(`starting ${resolved.path} (${resolved.source})`);
    const stored: { [variable: string]: string | undefined } = {};
    for (const variable of ALL_KEY_VARIABLES) {
      stored[variable] = await this.context.secrets.get(secretName(variable));
    }
    const keys = Object.keys(stored).filter((v) => stored[v]);
    this.log(keys.length ? `API keys from secret storage: ${keys.join(', ')}` : 'no API key in secret storage');
    const serverOptions: ServerOptions = {
      command: resolved.path,
      args: ['--stdio'],
      options: { env: serverEnv(process.env, stored) },
    };
    const clientOptions: LanguageClientOptions = {
      // Any file: the diagnostics can come from any language's tools.
      documentSelector: [{ scheme: 'file' }],
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: () => this.settings(),
      // Pushes didChangeConfiguration on changes; the server then pulls.
      synchronize: { configurationSection: SECTION },
      middleware: {
        // Code actions picked with Ctrl+. run through here too, so that
        // they can be cancelled and show in the status bar; a follow-up
        // ("Agent fix: follow up…") first asks for its instruction. An
        // alternative of a best-of-N run ("Agent fix: alternative K (…)")
        // is executed on the server, which sends its edit with
        // workspace/applyEdit: reviewed as any proposal (ProposalReview).
        executeCommand: (command, args, next) =>
          command === FIX_COMMAND
            ? this.runAction(args)
            : command === ALTERNATIVE_COMMAND
              ? this.applyAlternative(args)
              : next(command, args),
        workspace: {
          configuration: async (params, token, next) => {
            const answers: unknown[] = params.items.map((item) =>
              isOurSection(item.section)
                ? configurationFor(item.section, this.settings(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined))
                : undefined,
            );
            const others = params.items.filter((item) => !isOurSection(item.section));
            if (others.length > 0) {
              const rest = await next({ items: others }, token);
              if (!Array.isArray(rest)) {
                return rest;
              }
              let i = 0;
              params.items.forEach((item, index) => {
                if (!isOurSection(item.section)) {
                  answers[index] = rest[i++];
                }
              });
            }
            return answers;
          },
          didChangeConfiguration: async () => {
            await this.client?.sendNotification(DidChangeConfigurationNotification.type, {
              settings: { [SECTION]: this.settings() },
            });
          },
        },
      },
    };
    const client = new LanguageClient('agentfix', 'agentfix', serverOptions, clientOptions);
    client.registerFeature(new ProgressNotifications(client, this));
    client.registerFeature(new ProposalReview(client, this));
    client.onDidChangeState(() => this.refreshStatus());
    this.client = client;
    this.startError = undefined;
    this.refreshStatus();
    try {
      await client.start();
      this.log(`server ${client.initializeResult?.serverInfo?.version ?? ''} running`);
    } catch (e) {
      this.startError = `agentfix: the server at ${resolved.path} did not start: ${errorText(e)}`;
      this.log(this.startError);
      void vscode.window.showErrorMessage(this.startError, 'Show Output').then((c) => c && this.output.show(true));
    }
    this.refreshStatus();
  }

  private async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    // A new server keeps none of the old one's runs.
    this.lastRuns.clear();
    for (const owner of this.owners) {
      owner.gone = true;
    }
    for (const cts of this.pending) {
      cts.cancel();
    }
    for (const part of [...this.parts.values()]) {
      part.dispose();
    }
    if (client) {
      try {
        await client.stop(3000);
      } catch (e) {
        this.log(`stopping the server: ${errorText(e)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    this.refreshStatus();
  }

  private async showStartError(): Promise<void> {
    const choice = await vscode.window.showErrorMessage(this.startError ?? '', 'Open Settings', 'Show Output');
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.serverPath`);
    } else if (choice === 'Show Output') {
      this.output.show(true);
    }
  }

  /** The running client, or undefined after telling the user why not. */
  private async ready(): Promise<LanguageClient | undefined> {
    await this.lifecycle;
    if (this.client?.isRunning()) {
      return this.client;
    }
    if (this.startError) {
      void this.showStartError();
    } else {
      void vscode.window.showErrorMessage('agentfix: the server is not running. Run "Agent fix: Restart server" or see "Agent fix: Show output".');
    }
    return undefined;
  }

  // ---- runs -------------------------------------------------------------

  /**
   * A code action's `agentfix.fix`: a follow-up without an instruction asks
   * for one first (Escape: nothing is sent); the rest run as they are.
   */
  private async runAction(args: unknown[]): Promise<FixResult | undefined> {
    const argument = args[0];
    if (isFollowUp(argument) && argument.instruction === undefined) {
      const instruction = await this.askFollowUpInstruction();
      if (instruction === undefined) {
        this.log('follow-up: no instruction given (Escape); nothing sent');
        return undefined;
      }
      args = [withInstruction(argument, instruction), ...args.slice(1)];
    }
    return this.runFix(args);
  }

  /** The instruction of a follow-up; undefined when the user pressed Escape. */
  private askFollowUpInstruction(): Thenable<string | undefined> {
    return vscode.window.showInputBox({
      title: 'Agent fix: follow up',
      prompt: 'What should the agent do next? (Empty: check the result and finish the fix.)',
      placeHolder: 'e.g. also handle negative numbers',
      ignoreFocusOut: true,
    });
  }

  /** `agentfix.fix` with a cancellation token; feeds the status bar. */
  private async runFix(args: unknown[]): Promise<FixResult | undefined> {
    const client = await this.ready();
    if (!client) {
      return undefined;
    }
    const argument = args[0] as FixArgument | undefined;
    const document = typeof argument?.uri === 'string' ? documentKey(argument.uri) : undefined;
    const candidates = typeof argument?.candidates === 'number' ? argument.candidates : 1;
    const cts = new vscode.CancellationTokenSource();
    this.pending.add(cts);
    const owner: ReviewOwner = { alternative: false, document, reports: [] };
    this.owners.add(owner);
    if (document && candidates > 1) {
      this.bestOf.set(document, candidates);
    }
    this.last = undefined;
    this.refreshStatus();
    try {
      const result = (await client.sendRequest(
        ExecuteCommandRequest.type,
        { command: FIX_COMMAND, arguments: args },
        cts.token,
      )) as FixResult | null;
      const view = resultStatus(result ?? {});
      this.last = view;
      if (document && result?.runId) {
        this.lastRuns.set(document, result.runId);
      }
      // A cancelled run is not kept: its review has no one to tell.
      if (result?.runId && result.stopReason !== 'cancelled') {
        owner.runId = result.runId;
      }
      this.log(`run: ${result?.stopReason}, ${result?.turns} turns, ${result?.inputTokens} in / ${result?.outputTokens} out tokens: ${result?.message}`);
      const best = result && result.stopReason !== 'cancelled' ? bestOfSummary(result) : undefined;
      if (best) {
        // Which candidate the review was, its check, and what else there is.
        this.log(`best of ${result?.candidates?.length}: ${best}`);
        void vscode.window.showInformationMessage(`Agent fix: ${best}`);
      }
      return result ?? undefined;
    } catch (e) {
      const code = e instanceof ResponseError ? e.code : undefined;
      if (cts.token.isCancellationRequested || code === REQUEST_CANCELLED || e instanceof vscode.CancellationError) {
        this.last = resultStatus({ stopReason: 'cancelled', message: 'Agent fix cancelled; nothing was changed.' });
        this.log('run: cancelled');
      } else {
        const message = errorText(e);
        if (document && isFollowUp(argument) && this.lastRuns.get(document) === argument.followUp) {
          // Refused (no longer kept, or the server restarted): do not offer it again.
          this.lastRuns.delete(document);
        }
        this.last = { text: '$(error) Agent fix: failed', tooltip: `${message}\nClick to show the output.` };
        this.log(`run failed: ${message}`);
        if (code === undefined || !SERVER_SHOWED.has(code)) {
          void vscode.window.showErrorMessage(`Agent fix failed: ${message}`);
        }
      }
      return undefined;
    } finally {
      this.pending.delete(cts);
      this.owners.delete(owner);
      owner.gone = owner.gone || owner.runId === undefined;
      void this.sendReviews(owner);
      if (document && this.bestOf.get(document) === candidates) {
        this.bestOf.delete(document);
      }
      cts.dispose();
      this.refreshStatus();
    }
  }

  /**
   * A code action's `agentfix.applyAlternative` (`Agent fix: alternative K
   * (…)`, a candidate of a best-of-N run that was not chosen): asks no
   * model; the server sends the alternative with `workspace/applyEdit`,
   * which opens in the Refactor Preview like any proposal (`review`).
   */
  private async applyAlternative(args: unknown[]): Promise<AlternativeResult | undefined> {
    const client = await this.ready();
    if (!client) {
      return undefined;
    }
    const alternative = alternativeArgument(args[0]);
    this.log(`alternative ${alternative?.index ?? '?'} of ${alternative?.runId ?? '?'}`);
    // Its review reports to the run it is an alternative of.
    const owner: ReviewOwner = { alternative: true, runId: alternative?.runId, gone: !alternative, reports: [] };
    this.owners.add(owner);
    try {
      const result = (await client.sendRequest(ExecuteCommandRequest.type, {
        command: ALTERNATIVE_COMMAND,
        arguments: args,
      })) as AlternativeResult | null;
      this.log(`alternative: applied ${result?.applied ?? false}: ${result?.message ?? ''}`);
      if (result?.applied) {
        this.last = {
          text: `$(check) Agent fix: alternative ${alternative?.index ?? ''} applied`,
          tooltip: `${result.message ?? ''}\nClick to show the output.`,
        };
      }
      // Not applied: the server says why (window/showMessage).
      return result ?? undefined;
    } catch (e) {
      const code = e instanceof ResponseError ? e.code : undefined;
      this.log(`alternative failed: ${errorText(e)}`);
      if (code === undefined || !SERVER_SHOWED.has(code)) {
        void vscode.window.showErrorMessage(`Agent fix: the alternative failed: ${errorText(e)}`);
      }
      return undefined;
    } finally {
      this.owners.delete(owner);
      this.refreshStatus();
    }
  }

  /** Runs a command; an unexpected error becomes a message and a log line. */
  private async guarded(f: () => Promise<void>): Promise<void> {
    try {
      await f();
    } catch (e) {
      this.log(`error: ${errorText(e)}`);
      void vscode.window.showErrorMessage(`Agent fix: ${errorText(e)}`);
    }
  }

  /** The active editor on a file, or undefined after telling the user what is missing. */
  private fileEditor(): vscode.TextEditor | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage('Agent fix: open a file and put the cursor on a problem (or select code) first.');
      return undefined;
    }
    if (editor.document.uri.scheme !== 'file') {
      void vscode.window.showWarningMessage('Agent fix works on files on disk; save this buffer to a file first.');
      return undefined;
    }
    return editor;
  }

  /**
   * "Agent fix", "Agent fix with instruction…", "Agent fix with model…" and
   * "Agent fix: best of N…": the fix at the cursor or for the selection.
   */
  private async fixHere(options: { askInstruction?: boolean; askModel?: boolean; askCandidates?: boolean }): Promise<void> {
    const editor = this.fileEditor();
    if (!editor) {
      return;
    }
    let instruction: string | undefined;
    if (options.askInstruction) {
      instruction = await vscode.window.showInputBox({
        title: 'Agent fix with instruction',
        prompt: 'What should the agent do here?',
        placeHolder: 'e.g. guard against b == 0',
        ignoreFocusOut: true,
      });
      if (instruction === undefined) {
        return;
      }
    }
    let model: string | undefined;
    if (options.askModel) {
      model = await this.pickModel(editor.document.uri);
      if (model === undefined) {
        return;
      }
    }
    let candidates: number | undefined;
    if (options.askCandidates) {
      candidates = await this.pickCandidates(editor.document.uri);
      if (candidates === undefined) {
        return;
      }
    }
    const client = await this.ready();
    if (!client) {
      return;
    }
    let argument = await this.argumentAt(client, editor);
    if (instruction?.trim()) {
      argument = { ...argument, instruction: instruction.trim() };
    }
    if (model !== undefined) {
      argument = withModel(argument, model);
    }
    if (candidates !== undefined) {
      argument = withCandidates(argument, candidates);
    }
    await this.runFix([argument]);
  }

  /**
   * "Agent fix: best of N…": how many candidates (2 to 8), starting on
   * `agentfix.candidates` when it is more than one, else 3 (Enter takes
   * it); undefined on Escape.
   */
  private pickCandidates(scope: vscode.Uri): Promise<number | undefined> {
    const setting = this.settings(scope).candidates;
    const { counts, preselected } = candidateChoices(setting);
    type Item = vscode.QuickPickItem & { n: number };
    return new Promise((resolve) => {
      const pick = vscode.window.createQuickPick<Item>();
      pick.title = 'Agent fix: best of N';
      pick.placeholder = 'Candidates: each checked as agentfix.verify says; the best is proposed, the others offered as alternatives';
      pick.items = counts.map((n) => ({ n, label: `best of ${n}`, description: n === setting ? 'agentfix.candidates' : undefined }));
      pick.activeItems = pick.items.filter((i) => i.n === preselected);
      pick.ignoreFocusOut = true;
      let chosen: number | undefined;
      pick.onDidAccept(() => {
        chosen = (pick.selectedItems[0] ?? pick.activeItems[0])?.n;
        pick.hide();
      });
      pick.onDidHide(() => {
        pick.dispose();
        resolve(chosen);
      });
      pick.show();
    });
  }

  /** A model of `agentfix.models`, picked by the user; undefined on Escape (or with none listed). */
  private async pickModel(scope: vscode.Uri): Promise<string | undefined> {
    const models = modelList(vscode.workspace.getConfiguration(SECTION, scope).get('models'));
    if (models.length === 0) {
      const choice = await vscode.window.showInformationMessage(
        'Agent fix: list the model ids to choose from in the setting agentfix.models.',
        'Open Settings',
      );
      if (choice) {
        await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.models`);
      }
      return undefined;
    }
    const configured = this.settings(scope).model;
    const picked = await vscode.window.showQuickPick(
      models.map((id) => ({ label: id, description: id === configured ? 'agentfix.model' : undefined })),
      { title: 'Agent fix with model', placeHolder: 'The model of this run (agentfix.models)', ignoreFocusOut: true },
    );
    return picked?.label;
  }

  /**
   * The `agentfix.fix` argument at the cursor or for the selection: the
   * server's first "Agent fix: …" action there (see `pickFixArgument`), with
   * every diagnostic VS Code has there, whatever its source.
   */
  private async argumentAt(client: LanguageClient, editor: vscode.TextEditor): Promise<FixArgument> {
    const document = editor.document;
    let range: vscode.Range = editor.selection;
    const all = vscode.languages.getDiagnostics(document.uri);
    let diagnostics = all.filter((d) => d.range.intersection(range) !== undefined);
    if (diagnostics.length === 0 && range.isEmpty) {
      // The cursor is on the line of a problem but not on it.
      const line = all.filter((d) => d.range.start.line <= range.start.line && range.start.line <= d.range.end.line);
      if (line.length > 0) {
        diagnostics = line;
        range = line[0].range;
      }
    }
    const c2p = client.code2ProtocolConverter;
    const actions = await client.sendRequest(CodeActionRequest.type, {
      textDocument: c2p.asTextDocumentIdentifier(document),
      range: c2p.asRange(range),
      context: { diagnostics: await c2p.asDiagnostics(diagnostics), triggerKind: CodeActionTriggerKind.Invoked },
    });
    return (
      pickFixArgument(actions as never, !range.isEmpty) ?? {
        uri: c2p.asUri(document.uri),
        version: document.version,
        range: c2p.asRange(range),
        diagnostics: [],
      }
    );
  }

  /** "Agent fix: follow up on the last run": continues this file's last run at the cursor. */
  private async followUpLast(): Promise<void> {
    const editor = this.fileEditor();
    if (!editor) {
      return;
    }
    const runId = this.lastRuns.get(documentKey(editor.document.uri.toString()));
    if (!runId) {
      void vscode.window.showInformationMessage(
        'Agent fix: no run on this file to follow up on (since the extension started). Run "Agent fix" first.',
      );
      return;
    }
    const instruction = await this.askFollowUpInstruction();
    if (instruction === undefined) {
      return;
    }
    const client = await this.ready();
    if (!client) {
      return;
    }
    await this.runFix([followUpArgument(await this.argumentAt(client, editor), runId, instruction)]);
  }

  /** "Agent fix: all problems in this file": one run with every diagnostic VS Code has for the file. */
  private async fixAll(): Promise<void> {
    const editor = this.fileEditor();
    if (!editor) {
      return;
    }
    const document = editor.document;
    const all = vscode.languages.getDiagnostics(document.uri);
    if (all.length === 0) {
      void vscode.window.showInformationMessage('Agent fix: VS Code reports no problems in this file.');
      return;
    }
    const client = await this.ready();
    if (!client) {
      return;
    }
    const c2p = client.code2ProtocolConverter;
    const argument = fixAllArgument(c2p.asUri(document.uri), document.version, await c2p.asDiagnostics(all));
    if (argument) {
      this.log(`fix-all: ${argument.diagnostics.length} problems in ${vscode.workspace.asRelativePath(document.uri)}`);
      await this.runFix([argument]);
    }
  }

  /** "Agent fix: Cancel": the progress Cancel of every run, then the requests themselves. */
  private async cancel(): Promise<void> {
    const client = this.client;
    if (!client || (this.pending.size === 0 && this.parts.size === 0)) {
      void vscode.window.showInformationMessage('Agent fix: nothing to cancel.');
      return;
    }
    const requests = [...this.pending];
    if (this.parts.size > 0) {
      // The run ends as `cancelled` and still answers with its turns and tokens.
      for (const part of this.parts.values()) {
        await client.sendNotification(WorkDoneProgressCancelNotification.type, { token: part.token });
      }
      await new Promise((r) => setTimeout(r, CANCEL_GRACE_MS));
    }
    for (const cts of requests) {
      if (this.pending.has(cts)) {
        cts.cancel(); // $/cancelRequest
      }
    }
  }

  // ---- progress ---------------------------------------------------------

  /** `window/workDoneProgress/create`: a run's progress, as a notification with Cancel. */
  trackProgress(client: LanguageClient, token: ProgressToken): void {
    const key = String(token);
    this.parts.get(key)?.dispose();
    const part: ProgressPart = { token, done: false, dispose: () => undefined };
    const end = () => {
      if (part.done) {
        return;
      }
      part.done = true;
      subscription.dispose();
      part.finish?.();
      if (this.parts.get(key) === part) {
        this.parts.delete(key);
      }
      this.refreshStatus();
    };
    const subscription = client.onProgress(WorkDoneProgress.type, token, (value) => {
      switch (value.kind) {
        case 'begin':
          this.beginProgress(client, part, value);
          break;
        case 'report':
          this.reportProgress(part, value);
          break;
        case 'end':
          end();
          break;
      }
    });
    part.dispose = end;
    this.parts.set(key, part);
    this.refreshStatus();
  }

  private beginProgress(client: LanguageClient, part: ProgressPart, begin: WorkDoneProgressBegin): void {
    part.message = begin.message;
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: begin.title, cancellable: begin.cancellable ?? false },
      (progress, cancelled) =>
        new Promise<void>((resolve) => {
          if (part.done || part.hidden) {
            resolve();
            return;
          }
          part.progress = progress;
          part.finish = resolve;
          cancelled.onCancellationRequested(() => {
            this.log('cancel requested from the progress notification');
            void client.sendNotification(WorkDoneProgressCancelNotification.type, { token: part.token });
          });
          if (part.message) {
            progress.report({ message: part.message });
          }
        }),
    );
    this.refreshStatus();
  }

  private reportProgress(part: ProgressPart, report: WorkDoneProgressReport): void {
    if (report.message === undefined) {
      return;
    }
    part.message = report.message;
    part.turn = turnOf(report.message) ?? part.turn;
    part.tokens = tokensOf(report.message) ?? part.tokens;
    part.progress?.report({ message: report.message });
    this.refreshStatus();
  }

  /** Closes the progress notifications (the proposal is there); the runs stay cancellable. */
  private hideProgress(): void {
    for (const part of this.parts.values()) {
      part.hidden = true;
      part.progress = undefined;
      part.finish?.();
    }
  }

  // ---- the review -------------------------------------------------------

  /**
   * `workspace/applyEdit`: the run's proposal. Opens it in the Refactor
   * Preview with every hunk ticked, says what it is (summary, size, cost)
   * and, after the review, what was applied; answers `applied: true` when
   * anything was (the server reads the documents for what became of each
   * hunk), else `applied: false` with the reason.
   */
  async review(client: LanguageClient, params: ApplyWorkspaceEditParams): Promise<ApplyWorkspaceEditResult> {
    this.hideProgress();
    const p2c = client.protocol2CodeConverter;
    const sent = params.edit as LspWorkspaceEdit;
    const label = params.label ?? 'Agent fix: proposal';
    const files = fileHunks(sent);
    this.log(`proposal: ${label}`);
    // As the client's own handler: an edit for another version of an open buffer is refused.
    for (const f of files) {
      if (typeof f.version === 'number' && f.version >= 0) {
        const uri = p2c.asUri(f.uri).toString();
        const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
        if (open && open.version !== f.version) {
          return { applied: false, failureReason: `${vscode.workspace.asRelativePath(open.uri)} changed since the proposal was made` };
        }
      }
    }
    // Whose proposal this is: known now, while its request waits for the answer.
    const owner = this.ownerOf(label, files.map((f) => documentKey(f.uri)));
    this.reviewing = label;
    this.refreshStatus();
    try {
      // The text of each file before the review, and its hunks as offsets in it.
      const snapshots = await Promise.all(
        files.map(async (f) => {
          const uri = p2c.asUri(f.uri);
          const document = f.created ? undefined : await openDocument(uri);
          const offset = (position: { line: number; character: number }) =>
            document ? document.offsetAt(p2c.asPosition(position)) : 0;
          const hunks: OffsetHunk[] = f.hunks.map((h) => ({ start: offset(h.range.start), end: offset(h.range.end), newText: h.newText }));
          const ids = f.hunks.map((h) => h.annotationId);
          return { uri, name: vscode.workspace.asRelativePath(uri), before: document?.getText() ?? '', hunks, ids };
        }),
      );
      const first = snapshots[0]?.uri;
      const folder = (first && vscode.workspace.getWorkspaceFolder(first)) || vscode.workspace.workspaceFolders?.[0];
      // `agentfix.review: unticked`: the edit as the server sent it (each change needs confirmation).
      const tickAll = vscode.workspace.getConfiguration(SECTION, first).get<string>('review') !== 'unticked';
      const sentinel = tickAll ? sentinelTarget(files, folder?.uri.toString()) : undefined;
      const edit = await p2c.asWorkspaceEdit(sentinel ? (ticked(sent) as typeof params.edit) : params.edit);
      if (sentinel) {
        // Opens the preview, is not listed in it, and would change nothing (review.ts).
        edit.createFile(p2c.asUri(sentinel), { ignoreIfExists: true }, { needsConfirmation: true, label: 'Agent fix' });
      }
      // An alternative of a best-of-N run, picked from the code actions (its label says which).
      const alternative = /^Agent fix: (alternative \d+) \(/.exec(label)?.[1];
      // A best-of-N run's proposal: which candidate it is comes with the
      // command's result, after the review.
      const n = alternative ? 0 : Math.max(0, ...files.map((f) => this.bestOf.get(documentKey(f.uri)) ?? 0));
      const note = n > 1 ? `Best of ${n}: the candidate agentfix ranked first; the others become code actions ("Agent fix: alternative K") after this review; ` : '';
      const ok = await this.withSummary(label, note, () => vscode.workspace.applyEdit(edit, { isRefactoring: true }));
      const outcomes: FileOutcome[] = [];
      const fates: { annotationId?: string; applied: boolean | undefined }[] = [];
      for (const s of snapshots) {
        const after = (await openDocument(s.uri))?.getText() ?? '';
        const picks = appliedHunks(s.before, after, s.hunks);
        outcomes.push({ name: s.name, total: s.hunks.length, applied: picks?.filter(Boolean).length });
        fates.push(...s.ids.map((annotationId, i) => ({ annotationId, applied: picks?.[i] })));
      }
      // An alternative says which one it was: "Agent fix: alternative 2: applied 1 of 1 change to calc.py."
      const message = alternative ? appliedMessage(outcomes).replace(/^Agent fix: /, `Agent fix: ${alternative}: `) : appliedMessage(outcomes);
      const answer = applyAnswer(outcomes);
      this.log(`review: ${message} (workspace.applyEdit: ${ok})`);
      if (!answer.applied) {
        this.refusedAt = Date.now();
      }
      void vscode.window.showInformationMessage(message);
      // Asks why when something was rejected, then tells the server; the answer does not wait for it.
      void this.reportReview(owner, hunkReviews(fates), sent.changeAnnotations ?? {}).catch((e: unknown) =>
        this.log(`review report: ${errorText(e)}`),
      );
      return answer;
    } finally {
      this.reviewing = undefined;
      this.refreshStatus();
    }
  }

  /**
   * Whose review a proposal is: the alternative being applied (its label
   * says "Agent fix: alternative K (…)"), else the pending run whose
   * document the edit changes, else the only pending run; undefined when
   * it cannot be told (nothing is reported then: the server works each
   * hunk out from the file when a follow-up starts).
   */
  private ownerOf(label: string, documents: readonly string[]): ReviewOwner | undefined {
    const alternative = /^Agent fix: alternative \d+ \(/.test(label);
    const candidates = [...this.owners].filter((o) => o.alternative === alternative && !o.gone);
    if (candidates.length <= 1) {
      return candidates[0];
    }
    const theirs = candidates.filter((o) => o.document !== undefined && documents.includes(o.document));
    return theirs.length === 1 ? theirs[0] : undefined;
  }

  /**
   * After a review: when something was rejected, asks why in an InputBox
   * (one line, optional: Escape or clicking elsewhere skips it), then
   * queues what became of each hunk for `agentfix.reviewed`.
   */
  private async reportReview(
    owner: ReviewOwner | undefined,
    reviews: HunkReview[],
    annotations: { [id: string]: { label?: string } },
  ): Promise<void> {
    if (reviews.length === 0) {
      return;
    }
    if (!owner) {
      this.log('review: several runs are pending and which one this proposal is cannot be told; what became of its hunks is not reported');
      return;
    }
    const question = rejectionQuestion(reviews, annotations);
    let reason: string | undefined;
    if (question && vscode.workspace.getConfiguration(SECTION).get<boolean>('askRejectReason') !== false) {
      reason = await vscode.window.showInputBox({
        title: `Agent fix: ${question} (optional)`,
        prompt: 'One line; a follow-up on this run tells the agent. Escape skips.',
        placeHolder: 'e.g. mul must stay a float',
        ignoreFocusOut: false,
      });
    }
    owner.reports.push(withReason(reviews, reason));
    await this.sendReviews(owner);
  }

  /** Sends the owner's finished reviews as `agentfix.reviewed`, once its runId is known. */
  private async sendReviews(owner: ReviewOwner): Promise<void> {
    if (owner.gone) {
      if (owner.reports.length > 0) {
        this.log('review: the run ended without a runId the server keeps; what became of its hunks is not reported');
      }
      owner.reports = [];
      return;
    }
    const runId = owner.runId;
    const client = this.client;
    if (!runId || !client?.isRunning()) {
      return;
    }
    for (const hunks of owner.reports.splice(0)) {
      const said = hunks.map((h) => `${h.annotationId} ${h.outcome}${h.reason ? ` ("${h.reason}")` : ''}`).join(', ');
      try {
        const answer = (await client.sendRequest(ExecuteCommandRequest.type, {
          command: REVIEWED_COMMAND,
          arguments: [{ runId, hunks }],
        })) as ReviewedResult | null;
        const unknown = answer?.unknown?.length ? `; unknown: ${answer.unknown.join(', ')}` : '';
        this.log(`reviewed ${runId}: ${said}; recorded ${answer?.recorded ?? 0}${unknown}`);
      } catch (e) {
        this.log(`reviewed ${runId}: ${said}; failed: ${errorText(e)}`);
      }
    }
  }

  /**
   * The proposal's label (summary, size, cost) in a notification while the
   * review lasts: it closes with the preview, and its Cancel discards the
   * proposal. (A plain message would be cut to one line, and stay.)
   */
  private async withSummary<T>(label: string, note: string, review: () => Thenable<T>): Promise<T> {
    let close = () => {};
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: label, cancellable: true },
      (progress, cancelled) =>
        new Promise<void>((resolve) => {
          close = resolve;
          progress.report({ message: `${note}untick in the Refactor Preview what you reject, then Apply.` });
          cancelled.onCancellationRequested(() => {
            void vscode.commands.executeCommand('refactorPreview.discard').then(undefined, () => undefined);
          });
        }),
    );
    try {
      return await review();
    } finally {
      close();
    }
  }

  /** The server's `window/showMessage`, as the client shows it, less what the review already said. */
  showServerMessage(type: MessageType, message: string): void {
    if (message.startsWith(NOT_APPLIED) && Date.now() - this.refusedAt < 60_000) {
      this.log(`server: ${message}`);
      return;
    }
    switch (type) {
      case MessageType.Error:
        void vscode.window.showErrorMessage(message);
        break;
      case MessageType.Warning:
        void vscode.window.showWarningMessage(message);
        break;
      default:
        void vscode.window.showInformationMessage(message);
    }
  }

  // ---- status bar -------------------------------------------------------

  private refreshStatus(): void {
    if (this.reviewing) {
      this.status.text = '$(checklist) Agent fix: review the proposal';
      this.status.tooltip = `${this.reviewing}\nUntick in the Refactor Preview what you reject, then Apply (or Discard).`;
      this.status.command = undefined;
      return;
    }
    const runs = Math.max(this.pending.size, this.parts.size);
    if (runs > 0) {
      const latest = [...this.parts.values()].pop();
      const view = runningStatus(runs, latest?.turn, latest?.tokens, latest?.message);
      this.status.text = view.text;
      this.status.tooltip = view.tooltip;
      this.status.command = 'agentfix.cancelRun';
      return;
    }
    this.status.command = 'agentfix.showOutput';
    if (this.startError) {
      this.status.text = '$(error) agentfix';
      this.status.tooltip = `${this.startError}\nClick to show the output.`;
    } else if (!this.client || this.client.state === State.Stopped) {
      this.status.text = '$(circle-slash) agentfix';
      this.status.tooltip = 'The agentfix server is stopped. Click to show the output; "Agent fix: Restart server" starts it.';
    } else if (this.client.state === State.Starting) {
      this.status.text = '$(loading~spin) agentfix';
      this.status.tooltip = 'Starting the agentfix server…';
    } else if (this.last) {
      this.status.text = this.last.text;
      this.status.tooltip = this.last.tooltip;
    } else {
      this.status.text = '$(sparkle) agentfix';
      this.status.tooltip = 'Agent fix is idle: put the cursor on a problem and press Ctrl+. (or run "Agent fix").';
    }
  }

  // ---- API key ----------------------------------------------------------

  private async setApiKey(): Promise<void> {
    const provider = effectiveProvider(this.settings().provider, process.env);
    const variable = keyVariable(provider);
    const name = secretName(variable);
    const stored = Boolean(await this.context.secrets.get(name));
    const value = await vscode.window.showInputBox({
      title: `Agent fix: API key for ${provider}`,
      prompt:
        `Kept in VS Code's secret storage and given to the server as ${variable}.` +
        (stored ? ' A key is stored; leave this empty to remove it.' : ''),
      placeHolder: variable,
      password: true,
      ignoreFocusOut: true,
    });
    if (value === undefined) {
      return;
    }
    if (value.trim() === '') {
      if (stored) {
        await this.context.secrets.delete(name);
        void vscode.window.showInformationMessage(`Agent fix: removed the stored ${variable}.`);
      }
    } else {
      await this.context.secrets.store(name, value.trim());
      void vscode.window.showInformationMessage(`Agent fix: ${variable} stored; the server restarts to use it.`);
    }
    // Also restarted by secrets.onDidChange; the restart is debounced.
    this.scheduleRestart(`${variable} was set`);
  }
}

/** Registers our handler of `window/workDoneProgress/create` after the built-in one, replacing it. */
class ProgressNotifications implements StaticFeature {
  constructor(
    private readonly client: LanguageClient,
    private readonly owner: AgentFix,
  ) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.window = { ...capabilities.window, workDoneProgress: true };
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
      this.owner.trackProgress(this.client, params.token);
    });
  }

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {}
}

/** Takes the server's `workspace/applyEdit` and `window/showMessage` from the client's default handlers. */
class ProposalReview implements StaticFeature {
  constructor(
    private readonly client: LanguageClient,
    private readonly owner: AgentFix,
  ) {}

  fillClientCapabilities(): void {}

  initialize(): void {
    // Registered after the client's own handlers (features initialize last), so these replace them.
    this.client.onRequest(ApplyWorkspaceEditRequest.type, (params) => this.owner.review(this.client, params));
    this.client.onNotification(ShowMessageNotification.type, (params) => this.owner.showServerMessage(params.type, params.message));
  }

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {}
}

/** The document at `uri`, opened in the background if need be; undefined when there is none. */
async function openDocument(uri: vscode.Uri): Promise<vscode.TextDocument | undefined> {
  const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (open) {
    return open;
  }
  try {
    return await vscode.workspace.openTextDocument(uri);
  } catch {
    return undefined;
  }
}

function isExecutable(file: string): boolean {
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) {
      return false;
    }
    if (process.platform !== 'win32') {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

/** A document's URI in one spelling, whoever wrote it (the server echoes the client's). */
function documentKey(uri: string): string {
  try {
    return vscode.Uri.parse(uri).toString();
  } catch {
    return uri;
  }
}

function errorText(e: unknown): string {
  if (e instanceof Error) {
    return e.message;
  }
  return String(e);
}
