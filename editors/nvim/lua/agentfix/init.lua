-- agentfix for Neovim 0.7+: one agentfix language server per workspace root,
-- a reviewed `workspace/applyEdit`, `:AgentFix`, `:AgentFixModel`,
-- `:AgentFixBest`, `:AgentFixFollowUp`, `:AgentFixAll`, `:AgentFixCancel`,
-- the alternatives of a best-of-N run from the code actions, progress in the
-- echo area and `require("agentfix").status()`.
local compat = require("agentfix.compat")
local review = require("agentfix.review")

local M = {}

local FIX = "agentfix.fix"
local ALTERNATIVE = "agentfix.applyAlternative"
local REVIEWED = "agentfix.reviewed"

local defaults = {
  cmd = { "agentfix", "--stdio" },
  -- Environment for the server process (merged into Neovim's). Keep the API
  -- key in Neovim's own environment rather than here.
  cmd_env = nil,
  -- The `agentfix` settings (README "Configuration"); sent as
  -- initializationOptions and as the `agentfix` section of workspace/configuration.
  settings = {},
  -- "diff": review in a diff tab before anything changes; "apply": apply at once.
  review = "diff",
  -- nil: every normal file buffer; or a list of filetypes.
  filetypes = nil,
  -- Files whose presence marks a workspace root (searched upward); else the cwd.
  root_markers = { ".git" },
  -- Show progress in the echo area.
  echo_progress = true,
  -- Fill in the diagnostics of other sources in agentfix's code action
  -- requests (Neovim 0.10+ sends a server only its own); see below.
  inject_diagnostics = true,
  -- Called as on_attach(client, bufnr) when a buffer gets the agentfix client.
  on_attach = nil,
  -- How long the graceful cancel (window/workDoneProgress/cancel) may take
  -- before :AgentFixCancel also sends $/cancelRequest.
  cancel_grace_ms = 2000,
  -- The model ids :AgentFixModel offers (`model` of agentfix.fix: that run
  -- only, over settings.model).
  models = { "claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-5" },
  -- The candidates :AgentFixBest makes without a count (`candidates` of
  -- agentfix.fix, 2 to 8): each checked as `settings.verify` says, the best
  -- proposed, the others offered as code actions.
  best_of = 3,
}

M.config = vim.deepcopy(defaults)
M.last_result = nil -- the last agentfix.fix result (or {error = …})
M.last_run_ids = {} -- bufnr → runId of the last finished run on that buffer (for follow-ups)
M.last_alternative = nil -- the last agentfix.applyAlternative answer (or {error = …})
M.last_reviewed = nil -- the last agentfix.reviewed sent: {runId, hunks, answer?, error?}

local clients_by_root = {} -- root → client id (0.7 path; 0.8+ lets vim.lsp.start reuse)
local runs = {} -- active runs, in start order
local alternatives = {} -- agentfix.applyAlternative requests waiting for their answer
local augroup

-- A non-empty string (not nil, vim.NIL or blanks).
local function present(v)
  return type(v) == "string" and v:match("%S") ~= nil
end

-- Roots ---------------------------------------------------------------------

local function exists(path)
  return compat.uv.fs_stat(path) ~= nil
end

function M.root_for(path)
  local dir = (path and path ~= "") and vim.fn.fnamemodify(path, ":p:h") or vim.fn.getcwd()
  local cur = dir
  while cur and cur ~= "" do
    for _, marker in ipairs(M.config.root_markers) do
      if exists(cur .. "/" .. marker) then
        return cur
      end
    end
    local parent = vim.fn.fnamemodify(cur, ":h")
    if parent == cur then
      break
    end
    cur = parent
  end
  return vim.fn.getcwd()
end

-- Runs and progress -----------------------------------------------------------

local function echo(msg, hl)
  if M.config.echo_progress then
    vim.api.nvim_echo({ { review.fit("agentfix: " .. msg), hl or "Normal" } }, false, {})
  end
end

local function active_runs(client_id)
  local out = {}
  for _, r in ipairs(runs) do
    if not r.done and (client_id == nil or r.client_id == client_id) then
      table.insert(out, r)
    end
  end
  return out
end

function M.runs()
  return active_runs()
end

--- Statusline text: the running fix's last progress message, or "".
function M.status()
  local open = review.open_sessions()
  if #open > 0 then
    return "agentfix: review (q to finish)"
  end
  local r = active_runs()[1]
  if not r then
    return ""
  end
  return "agentfix: " .. (r.message or "working")
end

local function plural(n, what)
  return n == 1 and ("1 " .. what) or (n .. " " .. what .. "s")
end

--- The line a `verification` record reads as, as the server words it in
--- the proposal's label: "verified: 1 fixed, 0 new; test passed (4.1 s)",
--- "not verified: test failed"; nil when nothing checked the proposal.
function M.check_line(v)
  if type(v) ~= "table" then
    return nil
  end
  local d = type(v.diagnostics) == "table" and v.diagnostics or nil
  local commands = type(v.commands) == "table" and v.commands or {}
  if not d and #commands == 0 then
    return nil
  end
  local parts = {}
  if v.verified then
    if d then
      table.insert(parts, string.format("%d fixed, %d new", d.fixed or 0, d.introduced or 0))
    end
    for _, c in ipairs(commands) do
      table.insert(parts, string.format("%s passed (%.1f s)", c.name, tonumber(c.secs) or 0))
    end
    return "verified: " .. table.concat(parts, "; ")
  end
  local commands_failed = false
  for _, c in ipairs(commands) do
    if not c.passed then
      commands_failed = true
    end
  end
  if d and (d.introduced or 0) > 0 then
    table.insert(parts, plural(d.introduced, "new error"))
  elseif d and not commands_failed then
    table.insert(parts, "the problem is still reported")
  end
  for _, c in ipairs(commands) do
    if not c.passed then
      table.insert(parts, c.name .. " failed")
    end
  end
  return "not verified: " .. table.concat(parts, "; ")
end

--- What a best-of-N result says about its candidates: "candidate 3 of 3
--- chosen; 2 alternatives: use the code actions to apply one; the chosen
--- one is verified: test passed (0.1 s)" (what to do first: the echo area
--- shows one line); nil for a run of one candidate.
function M.best_of_summary(result)
  local candidates = type(result) == "table" and result.candidates
  if type(candidates) ~= "table" or #candidates < 2 then
    return nil
  end
  local chosen, others = nil, 0
  for _, c in ipairs(candidates) do
    local proposes = (tonumber(c.linesChanged) or 0) > 0
    if c.chosen and proposes then
      chosen = c
    elseif proposes then
      -- Those that propose something are the alternatives.
      others = others + 1
    end
  end
  if not chosen then
    return string.format("none of the %d candidates proposed an edit", #candidates)
  end
  local text = string.format("candidate %d of %d chosen; ", chosen.index, #candidates)
  if others == 0 then
    text = text .. "no alternatives"
  elseif others == 1 then
    text = text .. "1 alternative: use the code actions to apply it"
  else
    text = text .. string.format("%d alternatives: use the code actions to apply one", others)
  end
  local line = M.check_line(result.verification)
  if line then
    text = text .. "; the chosen one is " .. line
  end
  return text
end

-- Sends what the finished reviews of `owner` (a run, or an alternative being
-- applied) did with each hunk as `agentfix.reviewed`, once its runId is
-- known: at once for an alternative, with agentfix.fix's result for a run.
-- The server keeps it for a follow-up on the run, which then says per hunk
-- "accepted in the review" or "rejected in the review; the user's reason: …".
local function send_reviews(owner)
  if not present(owner.run_id) then
    return
  end
  local client = vim.lsp.get_client_by_id(owner.client_id)
  while owner.reviews and #owner.reviews > 0 do
    local session = table.remove(owner.reviews, 1)
    -- Read now, so that a reason typed after q (an asynchronous vim.ui.input) counts.
    local hunks = session:reviewed()
    if client and #hunks > 0 then
      local sent = { runId = owner.run_id, hunks = hunks }
      M.last_reviewed = sent
      compat.request(client, "workspace/executeCommand", {
        command = REVIEWED,
        arguments = { { runId = owner.run_id, hunks = hunks } },
      }, function(err, answer)
        -- Nothing for the user to do either way: kept for :lua =require("agentfix").last_reviewed.
        sent.answer = answer
        sent.error = err
      end)
    end
  end
end

local function finish_run(run, result, err)
  if run.done then
    return
  end
  run.done = true
  if run.timer then
    pcall(function()
      run.timer:stop()
      run.timer:close()
    end)
  end
  for i, r in ipairs(runs) do
    if r == run then
      table.remove(runs, i)
      break
    end
  end
  M.last_message = nil
  if err then
    M.last_result = { error = err, cancelled = run.cancelled or nil }
    if run.cancelled then
      echo("cancelled; nothing was changed")
    else
      vim.api.nvim_echo({ { "agentfix: " .. tostring(err.message or err), "ErrorMsg" } }, true, {})
    end
  else
    M.last_result = result
    -- Cancelled runs are not kept by the server; every other one can be
    -- followed up on.
    if type(result) == "table" and type(result.runId) == "string" and result.stopReason ~= "cancelled" then
      -- Its review (over by now, unless the server stopped waiting) says
      -- what became of each hunk.
      run.run_id = result.runId
      send_reviews(run)
      -- The buffer of the run's document (without creating one).
      local b = run.bufnr
      if type(run.arg) == "table" and type(run.arg.uri) == "string" then
        local ok, nr = pcall(vim.fn.bufnr, vim.uri_to_fname(run.arg.uri))
        if ok and nr ~= -1 then
          b = nr
        end
      end
      if b and b ~= 0 then
        M.last_run_ids[b] = result.runId
      end
    end
    if result and result.applied then
      M.last_message = string.format(
        "%s; undo with u (%d turn(s), %d+%d tokens)",
        run.summary or result.message or "applied",
        result.turns or 0,
        result.inputTokens or 0,
        result.outputTokens or 0
      )
      -- Best of N: which candidate, its check and the alternatives first.
      local best = M.best_of_summary(result)
      if best then
        M.last_message = best .. "; " .. M.last_message
      end
      echo(M.last_message)
    elseif result and result.stopReason == "cancelled" then
      echo("cancelled; nothing was changed")
    end
    -- Other outcomes: the server says why with window/showMessage.
  end
  pcall(vim.cmd, "doautocmd <nomodeline> User AgentFixDone")
  pcall(vim.cmd, "redrawstatus")
end

--- Runs `agentfix.fix` with `arg` ({uri, version, range, diagnostics,
--- instruction?, model?, followUp?, candidates?}) on `client`; returns the
--- run record.
function M.run(client, bufnr, arg)
  local run = { client_id = client.id, bufnr = bufnr, message = "starting", arg = arg, reviews = {} }
  local ok, id = compat.request(client, "workspace/executeCommand", {
    command = FIX,
    arguments = { arg },
  }, function(err, result)
    finish_run(run, result, err)
  end, bufnr)
  if not ok then
    vim.api.nvim_echo({ { "agentfix: the server is not running", "ErrorMsg" } }, true, {})
    return nil
  end
  run.request_id = id
  table.insert(runs, run)
  local best = (tonumber(arg.candidates) or 1) > 1 and string.format(" (best of %d)", arg.candidates) or ""
  echo((present(arg.model) and ("asking " .. arg.model) or "asking the model") .. best .. "…")
  return run
end

--- Runs `agentfix.applyAlternative` with `arg` ({runId, index}, from the
--- code action "Agent fix: alternative K (…)") through
--- `workspace/executeCommand`; the server's `workspace/applyEdit` of the
--- alternative goes through the review like any proposal.
function M.apply_alternative(client, bufnr, arg)
  -- Its review reports to the run it is an alternative of.
  local pending = { client_id = client.id, run_id = arg.runId, reviews = {} }
  table.insert(alternatives, pending)
  local ok = compat.request(client, "workspace/executeCommand", {
    command = ALTERNATIVE,
    arguments = { arg },
  }, function(err, result)
    for i, a in ipairs(alternatives) do
      if a == pending then
        table.remove(alternatives, i)
        break
      end
    end
    if err then
      M.last_alternative = { error = err }
      vim.api.nvim_echo({ { "agentfix: " .. tostring(err.message or err), "ErrorMsg" } }, true, {})
    else
      M.last_alternative = result
      if type(result) == "table" and result.applied then
        M.last_message = string.format(
          "alternative %s: %s; undo with u",
          tostring(arg.index),
          review.last_summary or "applied"
        )
        echo(M.last_message)
      end
      -- Otherwise the server says why with window/showMessage.
    end
    pcall(vim.cmd, "doautocmd <nomodeline> User AgentFixDone")
  end, bufnr)
  if not ok then
    table.remove(alternatives)
    vim.api.nvim_echo({ { "agentfix: the server is not running", "ErrorMsg" } }, true, {})
    return
  end
  M.last_alternative = nil
  echo("applying alternative " .. tostring(arg.index) .. "…")
end

--- Runs `arg` like M.run, but first asks for the instruction of a follow-up
--- that has none (vim.ui.input); an empty or cancelled answer sends nothing.
function M.execute(client, bufnr, arg)
  if not (present(arg.followUp) and not present(arg.instruction)) then
    return M.run(client, bufnr, arg)
  end
  vim.ui.input({ prompt = "Agent fix, follow up: " }, function(text)
    if not present(text) then
      echo("no instruction; nothing was sent")
      return
    end
    local a = vim.deepcopy(arg)
    a.instruction = text
    M.run(client, bufnr, a)
  end)
  return nil
end

-- `$/progress` for the agentfix client: the default handler runs first (so
-- LspProgress / vim.lsp.status() keep working), then the echo area and status().
local function on_progress(err, result, ctx, config)
  local default = vim.lsp.handlers["$/progress"]
  local ret
  if default then
    ret = default(err, result, ctx, config)
  end
  local value = result and result.value
  if type(value) ~= "table" then
    return ret
  end
  local token = result.token
  local run
  for _, r in ipairs(active_runs(ctx.client_id)) do
    if r.token == token then
      run = r
      break
    end
  end
  if not run and value.kind == "begin" then
    for _, r in ipairs(active_runs(ctx.client_id)) do
      if r.token == nil then
        r.token = token
        run = r
        break
      end
    end
  end
  if run then
    if value.message then
      run.message = value.message
    end
    if value.kind == "end" then
      run.message = value.message or "done"
    end
    echo(run.message)
    pcall(vim.cmd, "redrawstatus")
  end
  return ret
end

-- The client --------------------------------------------------------------------

local to_lsp -- defined below

--- The diagnostics of every source on lines first..last of `bufnr`, as LSP
--- diagnostics in `enc`.
function M.diagnostics_for(bufnr, first, last, enc)
  local diags = vim.tbl_filter(function(d)
    return d.lnum <= last and (d.end_lnum or d.lnum) >= first
  end, vim.diagnostic.get(bufnr))
  return to_lsp(bufnr, diags, enc)
end

-- Neovim 0.10+ sends each server only its own diagnostics with
-- textDocument/codeAction; agentfix publishes none, so "Agent fix: <message>"
-- would never be offered by vim.lsp.buf.code_action(). For this client only,
-- an empty context.diagnostics is filled with the range's diagnostics from
-- every source (as Neovim 0.7–0.9 did for all servers).
local function fill_code_action_diagnostics(client)
  local method_style = compat.has_011
  local orig = client.request
  local function fill(method, params, bufnr)
    if
      method == "textDocument/codeAction"
      and M.config.inject_diagnostics
      and type(params) == "table"
      and type(params.context) == "table"
      and (params.context.diagnostics == nil or #params.context.diagnostics == 0)
      and params.range
    then
      local b = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
      if params.textDocument and params.textDocument.uri then
        b = vim.uri_to_bufnr(params.textDocument.uri)
      end
      params.context.diagnostics = M.diagnostics_for(
        b,
        params.range.start.line,
        params.range["end"].line,
        client.offset_encoding or "utf-16"
      )
    end
  end
  if method_style then
    client.request = function(self, method, params, handler, bufnr)
      fill(method, params, bufnr)
      return orig(self, method, params, handler, bufnr)
    end
  else
    client.request = function(method, params, handler, bufnr)
      fill(method, params, bufnr)
      return orig(method, params, handler, bufnr)
    end
  end
end

-- The active run of `client_id` whose document `edit` (a WorkspaceEdit) changes.
local function run_of_edit(client_id, edit)
  local uris = {}
  if type(edit) == "table" then
    for _, change in ipairs(type(edit.documentChanges) == "table" and edit.documentChanges or {}) do
      if type(change.textDocument) == "table" then
        uris[change.textDocument.uri] = true
      end
    end
    for uri in pairs(type(edit.changes) == "table" and edit.changes or {}) do
      uris[uri] = true
    end
  end
  for _, r in ipairs(active_runs(client_id)) do
    if type(r.arg) == "table" and uris[r.arg.uri] then
      return r
    end
  end
  return nil
end

-- Whose review a `workspace/applyEdit` is: the alternative being applied
-- (its label says "Agent fix: alternative K (…)"), else the active run
-- whose document the edit changes, else the only active run; nil when it
-- cannot be told (then nothing is reported: the server works each hunk out
-- from the file when a follow-up starts).
local function owner_of(client_id, params)
  if type(params.label) == "string" and params.label:match("^Agent fix: alternative %d+ %(") then
    for i = #alternatives, 1, -1 do
      if alternatives[i].client_id == client_id then
        return alternatives[i]
      end
    end
    return nil
  end
  local run = run_of_edit(client_id, params.edit)
  if run then
    return run
  end
  local active = active_runs(client_id)
  return #active == 1 and active[1] or nil
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  -- Neovim handles documentChanges but (0.7–0.11) does not declare it; the
  -- review needs the versioned form, so declare it for this client.
  caps.workspace = caps.workspace or {}
  caps.workspace.workspaceEdit = caps.workspace.workspaceEdit or {}
  caps.workspace.workspaceEdit.documentChanges = true
  -- Hunks then carry change annotations: a fix-all's hunks share one per
  -- problem, and the review accepts or rejects them together.
  caps.workspace.workspaceEdit.changeAnnotationSupport = { groupsOnLabel = false }
  caps.workspace.applyEdit = true
  caps.window = caps.window or {}
  caps.window.workDoneProgress = true
  return caps
end

local function client_config(root)
  local settings = M.config.settings or {}
  return {
    name = "agentfix",
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = settings,
    settings = { agentfix = settings },
    capabilities = capabilities(),
    handlers = {
      ["workspace/applyEdit"] = function(_, params, ctx)
        local client = vim.lsp.get_client_by_id(ctx.client_id)
        if not client then
          return { applied = false, failureReason = "client gone" }
        end
        local run = run_of_edit(ctx.client_id, params.edit)
        local n = run and tonumber(run.arg.candidates) or 1
        local owner = owner_of(ctx.client_id, params)
        return review.handle(params, client, {
          review = M.config.review,
          root = root,
          -- Which candidate this is comes with the command's result, after
          -- the review; the review says what it is.
          note = n > 1 and string.format(
            'best of %d: the candidate agentfix ranked first; after this review the others that propose something are code actions ("Agent fix: alternative K") on the lines it changed',
            n
          ) or nil,
          on_state = function(state)
            for _, r in ipairs(active_runs(ctx.client_id)) do
              r.message = state
            end
            pcall(vim.cmd, "redrawstatus")
          end,
          -- The final message says what the review applied, not the
          -- proposal's size (the server's label).
          on_summary = function(text)
            for _, r in ipairs(active_runs(ctx.client_id)) do
              r.summary = text
            end
          end,
          -- What the review did with each hunk goes to the server
          -- (agentfix.reviewed) once the run's id is known.
          on_reviewed = function(session)
            if owner then
              table.insert(owner.reviews, session)
              send_reviews(owner)
            end
          end,
        })
      end,
      ["$/progress"] = on_progress,
    },
    -- `vim.lsp.buf.code_action()` on an "Agent fix" action comes here too,
    -- so that progress, status() and :AgentFixCancel know the run.
    commands = {
      [FIX] = function(command, ctx)
        local client = vim.lsp.get_client_by_id(ctx.client_id)
        local arg = command.arguments and command.arguments[1]
        if client and arg then
          -- "Agent fix: follow up…" asks for the instruction first.
          M.execute(client, ctx.bufnr, arg)
        end
      end,
      -- "Agent fix: alternative K (…)": executed on the server, its
      -- applyEdit reviewed by the handler above.
      [ALTERNATIVE] = function(command, ctx)
        local client = vim.lsp.get_client_by_id(ctx.client_id)
        local arg = command.arguments and command.arguments[1]
        if client and arg then
          M.apply_alternative(client, ctx.bufnr, arg)
        end
      end,
    },
    flags = { debounce_text_changes = 150 },
    on_init = function(client)
      fill_code_action_diagnostics(client)
    end,
    on_attach = M.config.on_attach,
  }
end

local function wanted(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= "" then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" or name:match("^%a[%w+.-]*://") then
    return false
  end
  local fts = M.config.filetypes
  if fts then
    return vim.tbl_contains(fts, vim.bo[bufnr].filetype)
  end
  return true
end

--- The agentfix client attached to `bufnr`, if any.
function M.client_for(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  return compat.get_clients(bufnr, "agentfix")[1]
end

--- Starts (or reuses) the workspace's agentfix client and attaches `bufnr`.
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if not wanted(bufnr) then
    return nil
  end
  local root = M.root_for(vim.api.nvim_buf_get_name(bufnr))
  if vim.lsp.start then
    return vim.lsp.start(client_config(root), { bufnr = bufnr })
  end
  -- Neovim 0.7: start_client once per root, then buf_attach_client.
  local id = clients_by_root[root]
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or compat.is_stopped(client) then
    id = vim.lsp.start_client(client_config(root))
    if not id then
      return nil
    end
    clients_by_root[root] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  if opts and opts.cmd then
    M.config.cmd = opts.cmd
  end
  if opts and opts.root_markers then
    M.config.root_markers = opts.root_markers
  end
  if opts and opts.filetypes then
    M.config.filetypes = opts.filetypes
  end
  if opts and opts.models then
    M.config.models = opts.models
  end
  assert(M.config.review == "diff" or M.config.review == "apply", 'agentfix: review must be "diff" or "apply"')
  augroup = vim.api.nvim_create_augroup("agentfix", { clear = true })
  vim.api.nvim_create_autocmd({ "FileType", "BufReadPost", "BufNewFile" }, {
    group = augroup,
    callback = function(args)
      if not M.client_for(args.buf) then
        M.attach(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("BufWipeout", {
    group = augroup,
    callback = function(args)
      M.last_run_ids[args.buf] = nil
    end,
  })
  -- Buffers already open (lazy loading).
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and not M.client_for(b) then
      M.attach(b)
    end
  end
end

-- :AgentFix -------------------------------------------------------------------------

local function lsp_severity(s)
  return s -- vim.diagnostic.severity and LSP DiagnosticSeverity share 1..4
end

--- vim.diagnostic items → LSP diagnostics in the client's encoding.
function to_lsp(bufnr, diags, enc)
  local out = {}
  local function line(l)
    return vim.api.nvim_buf_get_lines(bufnr, l, l + 1, false)[1] or ""
  end
  for _, d in ipairs(diags) do
    local end_lnum = d.end_lnum or d.lnum
    local end_col = d.end_col or d.col
    local lsp = d.user_data and d.user_data.lsp
    table.insert(out, {
      range = {
        start = { line = d.lnum, character = compat.byte_to_units(line(d.lnum), d.col, enc) },
        ["end"] = { line = end_lnum, character = compat.byte_to_units(line(end_lnum), end_col, enc) },
      },
      severity = lsp_severity(d.severity),
      message = d.message,
      source = d.source,
      code = d.code or (lsp and lsp.code),
    })
  end
  return out
end

-- What a command works on: the current buffer, its ready agentfix client,
-- the cursor and the lines (the cursor line, or opts.line1..line2 when
-- opts.range > 0). Nil after telling the user why not.
local function command_context(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client_for(bufnr)
  if not client then
    -- Not attached (yet): attaching starts or reuses the workspace's client,
    -- which attaches the buffer once it is initialized.
    local id = M.attach(bufnr)
    client = M.client_for(bufnr) or (id and vim.lsp.get_client_by_id(id))
  end
  if not client then
    vim.api.nvim_echo({
      { "agentfix: no agentfix client for this buffer (setup() not called, or not a file buffer)", "ErrorMsg" },
    }, true, {})
    return nil
  end
  if not client.initialized then
    vim.api.nvim_echo({ { "agentfix: the server is still starting; try again", "WarningMsg" } }, true, {})
    return nil
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  local first, last = cursor[1] - 1, cursor[1] - 1
  local ranged = opts.range ~= nil and opts.range > 0
  if ranged then
    first, last = opts.line1 - 1, opts.line2 - 1
  end
  return {
    bufnr = bufnr,
    client = client,
    enc = client.offset_encoding or "utf-16",
    cursor = cursor,
    first = first,
    last = last,
    ranged = ranged,
  }
end

-- Whole lines first..last of the context's buffer as an LSP range.
local function lines_range(ctx)
  local last_text = vim.api.nvim_buf_get_lines(ctx.bufnr, ctx.last, ctx.last + 1, false)[1] or ""
  return {
    start = { line = ctx.first, character = 0 },
    ["end"] = { line = ctx.last, character = compat.byte_to_units(last_text, #last_text, ctx.enc) },
  }
end

local function warn(msg)
  vim.api.nvim_echo({ { "agentfix: " .. msg, "WarningMsg" } }, true, {})
end

-- :AgentFix on a command context: asks the server for its code actions on
-- the lines and runs the first "Agent fix" one (with opts.model, if any).
local function fix_in(ctx, opts)
  local bufnr, client, enc, cursor = ctx.bufnr, ctx.client, ctx.enc, ctx.cursor
  local first, last, ranged = ctx.first, ctx.last, ctx.ranged
  local instruction = present(opts.instruction) and opts.instruction or nil
  local diags = vim.tbl_filter(function(d)
    return d.lnum <= last and (d.end_lnum or d.lnum) >= first
  end, vim.diagnostic.get(bufnr))
  -- The diagnostic under the cursor first.
  local col = cursor[2]
  table.sort(diags, function(a, b)
    local function score(d)
      local on = d.lnum == cursor[1] - 1 and d.col <= col and (d.end_col or d.col) >= col
      return (on and 0 or 1) * 1e6 + (d.severity or 4) * 1e4 + d.lnum
    end
    return score(a) < score(b)
  end)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = lines_range(ctx),
    context = { diagnostics = to_lsp(bufnr, diags, enc) },
  }
  compat.request(client, "textDocument/codeAction", params, function(err, actions)
    if err then
      vim.api.nvim_echo({ { "agentfix: code actions failed: " .. tostring(err.message), "ErrorMsg" } }, true, {})
      return
    end
    local pick
    for _, kind in ipairs({ "quickfix", "refactor.rewrite" }) do
      for _, a in ipairs(actions or {}) do
        local title = a.title or ""
        local cmd = type(a.command) == "table" and a.command or nil
        local arg = cmd and type(cmd.arguments) == "table" and cmd.arguments[1]
        -- Follow-ups have their own command (:AgentFixFollowUp); the
        -- alternatives of a best-of run are not fixes to start.
        local follow_up = type(arg) == "table" and present(arg.followUp)
        local fix = cmd and cmd.command == FIX
        if not pick and fix and title:sub(1, 10) == "Agent fix:" and a.kind == kind and not follow_up then
          pick = a
        end
      end
    end
    if pick and pick.kind == "refactor.rewrite" and not (instruction or ranged) then
      pick = nil
    end
    if not pick then
      warn("no diagnostic on this line; say what to do: :AgentFix <instruction>, or select lines")
      return
    end
    local command = pick.command
    if type(command) ~= "table" or command.command ~= FIX then
      vim.api.nvim_echo({ { "agentfix: unexpected code action " .. vim.inspect(pick), "ErrorMsg" } }, true, {})
      return
    end
    local arg = vim.deepcopy(command.arguments[1])
    if instruction then
      arg.instruction = instruction
    end
    if present(opts.model) then
      arg.model = opts.model
    end
    if opts.candidates then
      arg.candidates = opts.candidates
    end
    M.run(client, bufnr, arg)
  end, bufnr)
end

--- `:AgentFix [instruction]` (with a range: on those lines).
--- opts: { instruction?, model?, candidates?, range?, line1?, line2? }
function M.fix(opts)
  opts = opts or {}
  local ctx = command_context(opts)
  if ctx then
    fix_in(ctx, opts)
  end
end

--- `:AgentFixModel [instruction]`: picks one of `config.models` with
--- vim.ui.select, then does what :AgentFix does with that model for the run.
--- With opts.model, runs with it at once.
function M.fix_with_model(opts)
  opts = vim.deepcopy(opts or {})
  local ctx = command_context(opts)
  if not ctx then
    return
  end
  if present(opts.model) then
    return fix_in(ctx, opts)
  end
  local models = M.config.models or {}
  if #models == 0 then
    warn("no models to pick from (setup({ models = { ... } }))")
    return
  end
  local current = (M.config.settings or {}).model
  vim.ui.select(models, {
    prompt = "Agent fix with model:",
    format_item = function(m)
      return m == current and (m .. " (settings)") or m
    end,
  }, function(choice)
    if not present(choice) then
      echo("no model chosen; nothing was sent")
      return
    end
    opts.model = choice
    fix_in(ctx, opts)
  end)
end

--- `:AgentFixBest [N] [instruction]`: what :AgentFix does, as a best-of-N
--- run (`candidates`: opts.candidates, else `config.best_of`). The review
--- says it is the best of N; the final message which candidate was chosen,
--- its check and how many alternatives the code actions offer.
function M.fix_best(opts)
  opts = vim.deepcopy(opts or {})
  local n = tonumber(opts.candidates or M.config.best_of)
  if not n or n ~= math.floor(n) or n < 2 or n > 8 then
    warn("best of " .. tostring(opts.candidates or M.config.best_of) .. "? the candidates must be 2 to 8")
    return
  end
  opts.candidates = n
  M.fix(opts)
end

--- The runId of the last finished run on `bufnr` (nil if none).
function M.last_run_id(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  return M.last_run_ids[bufnr]
end

--- `:AgentFixFollowUp [instruction]`: continues the buffer's last run
--- (opts.run_id overrides it) with an instruction, asked for with
--- vim.ui.input when not given.
function M.follow_up(opts)
  opts = opts or {}
  local ctx = command_context(opts)
  if not ctx then
    return
  end
  local run_id = present(opts.run_id) and opts.run_id or M.last_run_ids[ctx.bufnr]
  if not run_id then
    warn("no earlier Agent fix on this buffer to follow up on; run :AgentFix first")
    return
  end
  local arg = {
    uri = vim.uri_from_bufnr(ctx.bufnr),
    version = compat.buf_version(ctx.bufnr),
    range = lines_range(ctx),
    diagnostics = M.diagnostics_for(ctx.bufnr, ctx.first, ctx.last, ctx.enc),
    followUp = run_id,
    instruction = present(opts.instruction) and opts.instruction or nil,
    model = present(opts.model) and opts.model or nil,
  }
  return M.execute(ctx.client, ctx.bufnr, arg)
end

--- `:AgentFixAll [instruction]`: one run with every diagnostic Neovim has for
--- the buffer (all sources), the range spanning them. Its proposal annotates
--- the hunks per problem; the review accepts or rejects them per problem.
function M.fix_all(opts)
  opts = opts or {}
  local ctx = command_context(opts)
  if not ctx then
    return
  end
  local diags = vim.diagnostic.get(ctx.bufnr)
  if #diags == 0 then
    warn("no diagnostics in this buffer")
    return
  end
  table.sort(diags, function(a, b)
    if a.lnum ~= b.lnum then
      return a.lnum < b.lnum
    end
    return (a.col or 0) < (b.col or 0)
  end)
  local lsp = to_lsp(ctx.bufnr, diags, ctx.enc)
  local function before(p, q)
    return p.line < q.line or (p.line == q.line and p.character < q.character)
  end
  local s, e = lsp[1].range.start, lsp[1].range["end"]
  for _, d in ipairs(lsp) do
    if before(d.range.start, s) then
      s = d.range.start
    end
    if before(e, d.range["end"]) then
      e = d.range["end"]
    end
  end
  local arg = {
    uri = vim.uri_from_bufnr(ctx.bufnr),
    version = compat.buf_version(ctx.bufnr),
    range = { start = vim.deepcopy(s), ["end"] = vim.deepcopy(e) },
    diagnostics = lsp,
    instruction = present(opts.instruction) and opts.instruction or nil,
    model = present(opts.model) and opts.model or nil,
  }
  return M.run(ctx.client, ctx.bufnr, arg)
end

--- `:AgentFixCancel`: cancels the running fixes (and an open review).
function M.cancel()
  local any = false
  for _, s in ipairs(review.open_sessions()) do
    any = true
    s:set_all("rejected")
    s:finish()
  end
  for _, run in ipairs(active_runs()) do
    any = true
    run.cancelled = true
    local client = vim.lsp.get_client_by_id(run.client_id)
    if client then
      local function hard()
        if not run.done and run.request_id then
          compat.cancel_request(client, run.request_id)
          -- Neovim drops the RequestCancelled answer, so the run ends here.
          finish_run(run, nil, { code = -32800, message = "cancelled" })
        end
      end
      if run.token ~= nil then
        -- Graceful: the server stops the run and answers with stopReason "cancelled".
        compat.notify(client, "window/workDoneProgress/cancel", { token = run.token })
        run.timer = compat.uv.new_timer()
        run.timer:start(M.config.cancel_grace_ms, 0, vim.schedule_wrap(hard))
      else
        hard()
      end
    end
  end
  if not any then
    echo("nothing to cancel")
  else
    echo("cancelling…")
  end
end

return M
