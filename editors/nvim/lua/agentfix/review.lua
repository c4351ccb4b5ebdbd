-- Review of the agent's proposal (`workspace/applyEdit`) before any buffer
-- is touched.
--
-- review = "diff": a new tab shows, per file, the current text (left) and
-- the proposed text (right) side by side in diff mode; each TextEdit of the
-- proposal is one hunk, labelled with its state. Hunks that share a change
-- annotation (the hunks of one problem of a fix-all) are one group: `a`/`r`
-- accept or reject the whole group, and the annotation's label ("calc.py:2:
-- <message>") is shown on each of its hunks. A header window above both
-- sides, as wide as the tab, holds the proposal's label, the counts and the
-- keys, wrapped to its width. Keys (in both windows):
--   a  accept the hunk (group) under the cursor     r  reject it
--   x  reject it and say why (vim.ui.input; the reason goes to a follow-up)
--      (all three then move the cursor to the next pending hunk)
--   A  accept every hunk                    R  reject every hunk
--   ]f [f  next / previous file             q  finish: apply the accepted hunks
--   ?  help
-- Closing the tab any other way rejects everything. The answer goes to the
-- server when the review finishes: `{applied = true}` if a hunk was accepted
-- (and applied), else `{applied = false, failureReason = "rejected by the user"}`.
-- What became of each group (accepted, rejected with the reason typed) is
-- `Session:reviewed()`, which init.lua sends as `agentfix.reviewed` once
-- the run's id is known. The review's buffers are not editable, so a hunk
-- is never "changed" in it.
--
-- Neovim 0.10+ runs server-request handlers inside a coroutine, so the
-- handler yields and the answer is sent when the user finishes; the editor
-- stays usable meanwhile. Neovim 0.7–0.9 must answer from the handler's
-- return value, so there the same tab is driven by a modal key loop
-- (getcharstr) until `q`; motions (j, k, ]c, [c, gg, G, Ctrl-D/U/F/B,
-- Ctrl-W w, Tab) still work inside it.
--
-- review = "apply": every hunk is applied at once, as Neovim's own handler
-- would, after the same version check.
local compat = require("agentfix.compat")

local M = {}

local ns = vim.api.nvim_create_namespace("agentfix_review")
local sessions = {} -- by id
local next_id = 1

--- The review session shown in the current tab, or the most recent open one.
function M.current()
  local tab = vim.api.nvim_get_current_tabpage()
  local latest
  for _, s in pairs(sessions) do
    if not s.done then
      if s.tab == tab then
        return s
      end
      if not latest or s.id > latest.id then
        latest = s
      end
    end
  end
  return latest
end

--- Every open session.
function M.open_sessions()
  local out = {}
  for _, s in pairs(sessions) do
    if not s.done then
      table.insert(out, s)
    end
  end
  return out
end

M.last_result = nil

--- `msg` cut (with "…") to the room the echo area has on one line
--- (v:echospace: the columns less the ruler and showcmd), so that a progress
--- or final note never brings up the hit-enter prompt on an 80-column screen.
function M.fit(msg)
  local room = tonumber(vim.v.echospace) or (vim.o.columns - 12)
  room = math.max(room, 20)
  if vim.fn.strdisplaywidth(msg) <= room then
    return msg
  end
  local out = vim.fn.strcharpart(msg, 0, room)
  while vim.fn.strdisplaywidth(out) > room - 1 do
    out = vim.fn.strcharpart(out, 0, vim.fn.strchars(out) - 1)
  end
  return out .. "…"
end

local function hl_setup()
  vim.cmd("highlight default link AgentfixPending WarningMsg")
  vim.cmd("highlight default link AgentfixAccepted DiffAdd")
  vim.cmd("highlight default link AgentfixRejected DiffDelete")
end

-- Parsing the WorkspaceEdit -----------------------------------------------

local function is_nil(v)
  return v == nil or v == vim.NIL
end

local function line_starts(text)
  local starts = { 1 }
  for pos in text:gmatch("()\n") do
    table.insert(starts, pos + 1)
  end
  return starts
end

-- 0-based byte offset of an LSP position in `text`.
local function offset_of(text, starts, pos, enc)
  local l = pos.line + 1
  if l > #starts then
    return #text
  end
  local ls = starts[l]
  local le = starts[l + 1] and (starts[l + 1] - 1) or (#text + 1)
  local line = text:sub(ls, le - 1)
  return ls - 1 + compat.units_to_byte(line, pos.character, enc)
end

-- 0-based line of 0-based byte offset `off`.
local function line_of(text, off)
  local n = 0
  for _ in text:sub(1, off):gmatch("\n") do
    n = n + 1
  end
  return n
end

-- Line span [first, last) of bytes [s, e) of `text`; empty spans keep their line.
local function span(text, s, e)
  local first = line_of(text, s)
  if e <= s then
    return first, first
  end
  return first, line_of(text, e - 1) + 1
end

local function display_path(path, root)
  if root and path:sub(1, #root + 1) == root .. "/" then
    return path:sub(#root + 2)
  end
  return vim.fn.fnamemodify(path, ":~:.")
end

--- Turns the WorkspaceEdit into files with hunks; returns nil and a reason
--- when the proposal cannot be taken (stale version, unsupported operation).
local function parse(edit, enc, root)
  local files, by_uri = {}, {}
  local function file_for(uri, version)
    local f = by_uri[uri]
    if not f then
      local path = vim.uri_to_fname(uri)
      f = { uri = uri, path = path, display = display_path(path, root), edits = {}, version = nil }
      by_uri[uri] = f
      table.insert(files, f)
    end
    if not is_nil(version) then
      f.version = version
    end
    return f
  end
  if not is_nil(edit.documentChanges) then
    for _, change in ipairs(edit.documentChanges) do
      if change.kind == "create" then
        file_for(change.uri).create = true
      elseif change.kind ~= nil then
        return nil, "agentfix review does not support `" .. tostring(change.kind) .. "` operations"
      else
        local f = file_for(change.textDocument.uri, change.textDocument.version)
        vim.list_extend(f.edits, change.edits)
      end
    end
  elseif not is_nil(edit.changes) then
    for uri, edits in pairs(edit.changes) do
      vim.list_extend(file_for(uri).edits, edits)
    end
  end

  for _, f in ipairs(files) do
    local bufnr = vim.fn.bufnr(f.path)
    if bufnr ~= -1 and vim.api.nvim_buf_is_loaded(bufnr) then
      f.bufnr = bufnr
      if f.version and compat.buf_version(bufnr) ~= f.version then
        return nil,
          string.format(
            "%s changed since the agent read it (version %d, now %d)",
            f.display,
            f.version,
            compat.buf_version(bufnr)
          )
      end
      f.old = compat.buf_text(bufnr)
      f.filetype = vim.bo[bufnr].filetype
    elseif f.version then
      return nil, f.display .. " was closed since the agent read it"
    else
      f.old = compat.read_file(f.path)
      if f.old == nil then
        if not f.create then
          return nil, f.display .. " does not exist"
        end
        f.old = ""
      end
    end

    -- Hunks: one per TextEdit, in text order, with their line spans on both sides.
    local starts = line_starts(f.old)
    local hunks = {}
    for i, e in ipairs(f.edits) do
      local s = offset_of(f.old, starts, e.range.start, enc)
      local en = offset_of(f.old, starts, e.range["end"], enc)
      if en < s then
        s, en = en, s
      end
      local annotation = (type(e.annotationId) == "string") and e.annotationId or nil
      table.insert(hunks, { edit = e, s = s, e = en, order = i, file = f, annotation = annotation })
    end
    table.sort(hunks, function(a, b)
      if a.s == b.s then
        return a.order < b.order
      end
      return a.s < b.s
    end)
    local pieces, cursor, delta = {}, 0, 0
    for _, h in ipairs(hunks) do
      if h.s < cursor then
        return nil, f.display .. ": overlapping edits"
      end
      table.insert(pieces, f.old:sub(cursor + 1, h.s))
      table.insert(pieces, h.edit.newText)
      h.new_s = h.s + delta
      h.new_e = h.new_s + #h.edit.newText
      delta = delta + #h.edit.newText - (h.e - h.s)
      cursor = h.e
    end
    table.insert(pieces, f.old:sub(cursor + 1))
    f.new = table.concat(pieces)
    for _, h in ipairs(hunks) do
      h.old_first, h.old_last = span(f.old, h.s, h.e)
      h.new_first, h.new_last = span(f.new, h.new_s, h.new_e)
    end
    f.hunks = hunks
  end
  return files
end

-- Session ------------------------------------------------------------------

local Session = {}
Session.__index = Session

function Session:all_hunks()
  local out = {}
  for _, f in ipairs(self.files) do
    vim.list_extend(out, f.hunks)
  end
  return out
end

function Session:counts()
  local c = { pending = 0, accepted = 0, rejected = 0, total = 0 }
  for _, h in ipairs(self:all_hunks()) do
    c[h.state] = c[h.state] + 1
    c.total = c.total + 1
  end
  return c
end

--- The hunk under (or nearest to) the cursor in the review window.
function Session:hunk_at_cursor()
  local win = vim.api.nvim_get_current_win()
  local f = self.files[self.file_index]
  local side = (win == self.old_win) and "old" or "new"
  local row = vim.api.nvim_win_get_cursor(win)[1] - 1
  local best, best_d
  for _, h in ipairs(f.hunks) do
    local first, last = h[side .. "_first"], h[side .. "_last"]
    local d
    if row >= first and row < last then
      d = -1
    elseif row < first then
      d = first - row
    else
      d = row - math.max(first, last - 1)
    end
    if not best_d or d < best_d then
      best, best_d = h, d
    end
  end
  return best
end

--- The hunks accepted or rejected together with `h`: every hunk (of any
--- file) sharing its change annotation, else `h` alone.
function Session:group_of(h)
  if not h.annotation then
    return { h }
  end
  local out = {}
  for _, x in ipairs(self:all_hunks()) do
    if x.annotation == h.annotation then
      table.insert(out, x)
    end
  end
  return out
end

--- The change annotation of `h` ({label, description?, needsConfirmation?}), if any.
function Session:annotation_of(h)
  local a = h.annotation and self.annotations[h.annotation]
  if type(a) == "table" and type(a.label) == "string" then
    return a
  end
  return nil
end

--- The groups of the proposal, in hunk order: {id?, label?, description?,
--- hunks, state} (state "mixed" when its hunks differ).
function Session:groups()
  local out, by_id = {}, {}
  for _, h in ipairs(self:all_hunks()) do
    local g = h.annotation and by_id[h.annotation]
    if not g then
      local a = self:annotation_of(h)
      g = {
        id = h.annotation,
        label = a and a.label,
        description = a and type(a.description) == "string" and a.description or nil,
        hunks = {},
      }
      if h.annotation then
        by_id[h.annotation] = g
      end
      table.insert(out, g)
    end
    table.insert(g.hunks, h)
  end
  for _, g in ipairs(out) do
    g.state = g.hunks[1].state
    for _, h in ipairs(g.hunks) do
      if h.state ~= g.state then
        g.state = "mixed"
      end
    end
  end
  return out
end

--- Sets the state of `h` and of the hunks grouped with it.
function Session:set(h, state)
  if h and not self.done then
    for _, x in ipairs(self:group_of(h)) do
      x.state = state
      if state ~= "rejected" then
        x.reason = nil
      end
    end
    self:render()
  end
end

function Session:set_all(state)
  if self.done then
    return
  end
  for _, h in ipairs(self:all_hunks()) do
    h.state = state
    if state ~= "rejected" then
      h.reason = nil
    end
  end
  self:render()
end

--- Puts the cursor of the review window `win` (default: the current one, or
--- the proposed side) on hunk `h`, showing its file first.
function Session:goto_hunk(h, win)
  for i, f in ipairs(self.files) do
    if f == h.file and i ~= self.file_index then
      self:show_file(i)
    end
  end
  win = win or vim.api.nvim_get_current_win()
  if win ~= self.old_win and win ~= self.new_win then
    win = self.new_win
  end
  local side = (win == self.old_win) and "old" or "new"
  local buf = h.file[side .. "_buf"]
  local line = math.min(h[side .. "_first"] + 1, vim.api.nvim_buf_line_count(buf))
  pcall(vim.api.nvim_win_set_cursor, win, { line, 0 })
end

--- The first pending hunk after `h` (across files, wrapping around), or nil.
function Session:next_pending(h)
  local all = self:all_hunks()
  local at = 0
  for i, x in ipairs(all) do
    if x == h then
      at = i
    end
  end
  for k = 1, #all do
    local x = all[(at + k - 1) % #all + 1]
    if x.state == "pending" then
      return x
    end
  end
  return nil
end

--- Accepts or rejects the hunk (group) under the cursor, then moves the
--- cursor to the next pending hunk, if any.
function Session:decide_at_cursor(state)
  local h = self:hunk_at_cursor()
  if not h or self.done then
    return
  end
  local win = vim.api.nvim_get_current_win()
  self:set(h, state)
  local nxt = self:next_pending(h)
  if nxt then
    self:goto_hunk(nxt, win)
  end
end

function Session:accept_at_cursor()
  self:decide_at_cursor("accepted")
end

function Session:reject_at_cursor()
  self:decide_at_cursor("rejected")
end

--- Rejects the hunk (group) under the cursor, asks why with vim.ui.input
--- (one line; empty or cancelled: no reason) and moves on as `r` does. The
--- reason is shown on the hunk and goes to the server with the review's
--- outcomes (a follow-up tells the model).
function Session:reject_with_reason_at_cursor()
  local h = self:hunk_at_cursor()
  if not h or self.done then
    return
  end
  local win = vim.api.nvim_get_current_win()
  self:set(h, "rejected")
  local group = self:group_of(h)
  vim.ui.input({ prompt = "Why reject it? (optional, for a follow-up) " }, function(text)
    local reason = type(text) == "string" and vim.trim((text:gsub("%s+", " "))) or ""
    for _, x in ipairs(group) do
      if x.state == "rejected" then
        x.reason = reason ~= "" and reason or nil
      end
    end
    self:render()
  end)
  local nxt = self:next_pending(h)
  if nxt and not self.done and vim.api.nvim_win_is_valid(win) then
    self:goto_hunk(nxt, win)
  end
end

--- What the review did with each group of hunks, for `agentfix.reviewed`:
--- `{annotationId, outcome = "accepted" | "rejected", reason?}` per change
--- annotation, in hunk order (hunks still pending count as rejected, as
--- q leaves them out). Hunks without an annotation are left out (the server
--- works them out from the file).
function Session:reviewed()
  local out = {}
  for _, g in ipairs(self:groups()) do
    if g.id then
      local accepted = g.state == "accepted"
      local entry = { annotationId = g.id, outcome = accepted and "accepted" or "rejected" }
      if not accepted then
        for _, h in ipairs(g.hunks) do
          entry.reason = entry.reason or h.reason
        end
      end
      table.insert(out, entry)
    end
  end
  return out
end

-- At most 80 columns with the "agentfix: " before it.
local help = "a/r/x accept/reject/reject+why hunk · A/R all · ]f/[f file · q finish"
-- The key line of the review's header, in pieces that wrap between them.
local keys = { "a/r accept/reject hunk", "x reject, say why", "A/R all", "]f/[f file", "q finish", "? help" }

--- Joins `pieces` with `sep` into lines of at most `width` display cells
--- (a piece longer than a line gets a line of its own, cut by 'wrap').
local function wrap_joined(pieces, width, sep)
  local lines, cur = {}, nil
  for _, p in ipairs(pieces) do
    if cur and vim.fn.strdisplaywidth(cur .. sep .. p) <= width then
      cur = cur .. sep .. p
    else
      if cur then
        table.insert(lines, cur)
      end
      cur = p
    end
  end
  if cur then
    table.insert(lines, cur)
  end
  return lines
end

--- Joins `pieces` with " · " into lines of at most `width` display cells.
local function wrap_pieces(pieces, width)
  return wrap_joined(pieces, width, " · ")
end

--- Splits `text` at spaces into lines of at most `width` display cells.
local function wrap_words(text, width)
  local words = {}
  for w in text:gmatch("%S+") do
    table.insert(words, w)
  end
  return wrap_joined(words, width, " ")
end

--- The header's lines for a window `width` cells wide: the proposal's label
--- (wrapped at spaces), the file and counts, and the keys.
function Session:header_lines(width)
  width = math.max(width, 20)
  local c = self:counts()
  local total = c.total
  local counts = string.format("%d accepted, %d rejected, %d pending", c.accepted, c.rejected, c.pending)
  local ngroups = #self:groups()
  if ngroups < total then
    counts = string.format("%d problems, %d hunks: %s", ngroups, total, counts)
  end
  local f = self.files[self.file_index]
  local where = (#self.files > 1 and string.format("file %d/%d: ", self.file_index, #self.files) or "") .. f.display
  local lines = wrap_words(self.label or "Agent fix", width)
  if self.note then
    -- What the plugin knows of the run beyond the label (best of N).
    vim.list_extend(lines, wrap_words(self.note, width))
  end
  local nlabel = #lines
  vim.list_extend(lines, wrap_pieces({ where, counts }, width))
  local k = vim.deepcopy(keys)
  if #self.files < 2 then
    table.remove(k, 4) -- ]f/[f
  end
  local nkeys = #lines
  vim.list_extend(lines, wrap_pieces(k, width))
  return lines, nlabel, nkeys
end

--- Fills the header window (created if needed, above both diff windows and
--- as wide as the tab) and fits its height to its lines.
function Session:render_header()
  if not (self.header_win and vim.api.nvim_win_is_valid(self.header_win)) then
    return
  end
  local width = vim.api.nvim_win_get_width(self.header_win)
  local lines, nlabel, nkeys = self:header_lines(width)
  local buf = self.header_buf
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for i = 0, #lines - 1 do
    local hl = (i < nlabel and "Title") or (i < nkeys and "Normal") or "Special"
    pcall(vim.api.nvim_buf_add_highlight, buf, ns, hl, i, 0, -1)
  end
  pcall(vim.api.nvim_win_set_height, self.header_win, #lines)
end

function Session:render()
  if self.done or not self.new_win then
    return
  end
  local f = self.files[self.file_index]
  for _, buf in ipairs({ f.old_buf, f.new_buf }) do
    if buf and vim.api.nvim_buf_is_valid(buf) then
      vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    end
  end
  local total = #self:all_hunks()
  local c = self:counts()
  local function esc(t)
    return (t:gsub("%%", "%%%%"))
  end
  -- The label, counts and keys are in the header window (full width,
  -- wrapped); the status lines only say which side is which, short enough
  -- for half of an 80-column screen.
  self:render_header()
  vim.wo[self.new_win].statusline = esc(string.format("proposed: %s (%d/%d decided)", f.display, c.total - c.pending, c.total))
  vim.wo[self.old_win].statusline = esc("current (unchanged until q): " .. f.display)
  -- Hunk numbers run across files.
  local n = 0
  for fi, ff in ipairs(self.files) do
    for _, h in ipairs(ff.hunks) do
      n = n + 1
      if fi == self.file_index then
        local hl = ({ pending = "AgentfixPending", accepted = "AgentfixAccepted", rejected = "AgentfixRejected" })[h.state]
        -- The state first: the end of a long label goes past a half-screen window.
        -- A rejected hunk shows the reason typed with x.
        local state = h.reason and string.format("%s (%s)", h.state, h.reason) or h.state
        local text = string.format(" %s · hunk %d/%d ", state, n, total)
        local a = self:annotation_of(h)
        local chunks
        if a then
          local size = #self:group_of(h)
          text = string.format(
            " %s · hunk %d/%d · %s%s ",
            state,
            n,
            total,
            a.label,
            size > 1 and string.format(" (%d hunks)", size) or ""
          )
          chunks = { { text, hl } }
          local d = type(a.description) == "string" and a.description or ""
          if d ~= "" and d ~= "proposed by the agent" then
            if vim.fn.strchars(d) > 80 then
              d = vim.fn.strcharpart(d, 0, 79) .. "…"
            end
            table.insert(chunks, { " " .. d, "Comment" })
          end
        end
        for _, side in ipairs({ "old", "new" }) do
          local buf = ff[side .. "_buf"]
          local count = vim.api.nvim_buf_line_count(buf)
          local line = math.min(h[side .. "_first"], count - 1)
          pcall(vim.api.nvim_buf_set_extmark, buf, ns, line, 0, {
            virt_text = chunks or { { text, hl } },
            virt_text_pos = "eol",
          })
        end
      end
    end
  end
end

--- `name`, or `name (N)` when a buffer already has that name.
local function unique_name(name)
  local candidate, n = name, 1
  while vim.fn.bufexists(candidate) == 1 do
    n = n + 1
    candidate = string.format("%s (%d)", name, n)
  end
  return candidate
end

local function scratch(name, lines, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].buftype = "nofile"
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  if filetype and filetype ~= "" then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

function Session:show_file(i)
  local f = self.files[i]
  if not f then
    return
  end
  self.file_index = i
  for _, w in ipairs({ self.old_win, self.new_win }) do
    vim.api.nvim_win_call(w, function()
      vim.cmd("diffoff")
    end)
  end
  vim.api.nvim_win_set_buf(self.old_win, f.old_buf)
  vim.api.nvim_win_set_buf(self.new_win, f.new_buf)
  for _, w in ipairs({ self.old_win, self.new_win }) do
    vim.api.nvim_win_call(w, function()
      vim.cmd("diffthis")
      vim.wo.foldenable = true
    end)
  end
  local first = f.hunks[1]
  if first then
    local line = math.min(first.new_first + 1, vim.api.nvim_buf_line_count(f.new_buf))
    pcall(vim.api.nvim_win_set_cursor, self.new_win, { line, 0 })
  end
  self:render()
end

-- Keys, shared by the mappings (0.10+) and the modal loop (0.7–0.9).
function Session:actions()
  return {
    ["a"] = function()
      self:accept_at_cursor()
    end,
    ["r"] = function()
      self:reject_at_cursor()
    end,
    ["x"] = function()
      self:reject_with_reason_at_cursor()
    end,
    ["A"] = function()
      self:set_all("accepted")
    end,
    ["R"] = function()
      self:set_all("rejected")
    end,
    ["]f"] = function()
      self:show_file(self.file_index % #self.files + 1)
    end,
    ["[f"] = function()
      self:show_file((self.file_index - 2) % #self.files + 1)
    end,
    ["q"] = function()
      self:finish()
    end,
    ["?"] = function()
      vim.api.nvim_echo({ { "agentfix: " .. help, "Normal" } }, false, {})
    end,
  }
end

function Session:open_ui()
  hl_setup()
  vim.cmd("tabnew")
  self.tab = vim.api.nvim_get_current_tabpage()
  local empty = vim.api.nvim_get_current_buf()
  self.old_win = vim.api.nvim_get_current_win()
  for _, f in ipairs(self.files) do
    -- The tab's title is the name of its current window's buffer, and the
    -- tab line shortens every part of it before a "/" (agentfix://1/proposed/x
    -- showed as "a//1/p/x"): a plain name, the relative path's "/" shown as
    -- "∕" (U+2215), made unique with " (N)" when a review of the same file
    -- is already open.
    local title = "agentfix review: " .. f.display:gsub("/", "∕")
    f.new_buf = scratch(unique_name(title), compat.text_lines(f.new), f.filetype)
    f.old_buf = scratch(unique_name(title .. " (current text)"), compat.text_lines(f.old), f.filetype)
    for _, buf in ipairs({ f.old_buf, f.new_buf }) do
      for lhs, fn in pairs(self:actions()) do
        vim.api.nvim_buf_set_keymap(buf, "n", lhs, "", { callback = fn, nowait = true, noremap = true, silent = true })
      end
    end
  end
  vim.api.nvim_win_set_buf(self.old_win, self.files[1].old_buf)
  vim.cmd("rightbelow vsplit")
  self.new_win = vim.api.nvim_get_current_win()
  if
    vim.api.nvim_buf_is_valid(empty)
    and vim.api.nvim_buf_get_name(empty) == ""
    and not vim.bo[empty].modified
    and empty ~= self.files[1].old_buf
  then
    pcall(vim.api.nvim_buf_delete, empty, { force = true })
  end
  -- The header: the label, counts and keys, wrapped to the tab's width, in
  -- a window above both sides (status lines and winbars are one line each
  -- and cut at half the screen).
  vim.cmd("topleft 1split")
  self.header_win = vim.api.nvim_get_current_win()
  self.header_buf = scratch(unique_name("agentfix review header"), { "" }, nil)
  vim.api.nvim_win_set_buf(self.header_win, self.header_buf)
  for opt, v in pairs({
    diff = false,
    scrollbind = false,
    cursorbind = false,
    foldenable = false,
    foldcolumn = "0",
    number = false,
    relativenumber = false,
    signcolumn = "no",
    list = false,
    wrap = true,
    linebreak = true,
    winfixheight = true,
    cursorline = false,
    statusline = " ",
  }) do
    pcall(function()
      vim.wo[self.header_win][opt] = v
    end)
  end
  vim.api.nvim_set_current_win(self.new_win)
  self:show_file(1)
  -- Closing a review window without `q` rejects everything.
  self.augroup = vim.api.nvim_create_augroup("agentfix_review_" .. self.id, { clear = true })
  -- The header is not for the cursor: entering it goes on to a side.
  vim.api.nvim_create_autocmd("WinLeave", {
    group = self.augroup,
    callback = function()
      self.last_win = vim.api.nvim_get_current_win()
    end,
  })
  vim.api.nvim_create_autocmd("WinEnter", {
    group = self.augroup,
    callback = function()
      if vim.api.nvim_get_current_win() == self.header_win and not self.done then
        local to = (self.last_win == self.new_win) and self.old_win or self.new_win
        vim.schedule(function()
          if not self.done and vim.api.nvim_win_is_valid(to) and vim.api.nvim_get_current_win() == self.header_win then
            vim.api.nvim_set_current_win(to)
          end
        end)
      end
    end,
  })
  vim.api.nvim_create_autocmd("VimResized", {
    group = self.augroup,
    callback = function()
      self:render()
    end,
  })
  vim.api.nvim_create_autocmd("WinClosed", {
    group = self.augroup,
    callback = function(args)
      local w = tonumber(args.match)
      if (w == self.old_win or w == self.new_win) and not self.done then
        vim.schedule(function()
          self:set_all("rejected")
          self:finish()
        end)
      end
    end,
  })
end

function Session:close_ui()
  if self.augroup then
    pcall(vim.api.nvim_del_augroup_by_id, self.augroup)
  end
  if self.header_win and vim.api.nvim_win_is_valid(self.header_win) then
    pcall(vim.api.nvim_win_close, self.header_win, true)
  end
  if self.header_buf and vim.api.nvim_buf_is_valid(self.header_buf) then
    pcall(vim.api.nvim_buf_delete, self.header_buf, { force = true })
  end
  if self.tab and vim.api.nvim_tabpage_is_valid(self.tab) then
    if #vim.api.nvim_list_tabpages() > 1 then
      local nr = vim.api.nvim_tabpage_get_number(self.tab)
      pcall(vim.cmd, "tabclose " .. nr)
    else
      -- The review is the only tab left: show the file instead.
      pcall(vim.cmd, "only")
      pcall(vim.cmd, "diffoff!")
      local b = self.files[1].bufnr or vim.fn.bufadd(self.files[1].path)
      pcall(vim.api.nvim_win_set_buf, 0, b)
    end
  end
  for _, f in ipairs(self.files) do
    for _, buf in ipairs({ f.old_buf, f.new_buf }) do
      if buf and vim.api.nvim_buf_is_valid(buf) then
        pcall(vim.api.nvim_buf_delete, buf, { force = true })
      end
    end
  end
end

--- What the review applied, in words: "applied 1 of 2 hunks to calc.py",
--- "applied 3 of 4 hunks to 2 files (calc.py: 1 of 2, test_calc.py: 2 of 2)"
--- or "applied nothing (2 hunks rejected)". From the hunks' states, not the
--- server's label (which counts the whole proposal).
function Session:summary()
  local c = self:counts()
  local function hunks(n)
    return n == 1 and "1 hunk" or (n .. " hunks")
  end
  if c.accepted == 0 then
    return string.format("applied nothing (%s rejected)", hunks(c.total))
  end
  local touched = {}
  for _, f in ipairs(self.files) do
    local a = 0
    for _, h in ipairs(f.hunks) do
      if h.state == "accepted" then
        a = a + 1
      end
    end
    if a > 0 then
      table.insert(touched, { f = f, accepted = a })
    end
  end
  local head = string.format("applied %d of %s", c.accepted, hunks(c.total))
  if #touched == 1 then
    return head .. " to " .. touched[1].f.display
  end
  local parts = {}
  for _, t in ipairs(touched) do
    table.insert(parts, string.format("%s: %d of %d", t.f.display, t.accepted, #t.f.hunks))
  end
  return string.format("%s to %d files (%s)", head, #touched, table.concat(parts, ", "))
end

--- Applies the accepted hunks to the real buffers and computes the answer.
function Session:apply()
  local accepted_any = false
  for _, f in ipairs(self.files) do
    for _, h in ipairs(f.hunks) do
      if h.state == "accepted" then
        accepted_any = true
      end
    end
  end
  if not accepted_any then
    return { applied = false, failureReason = "rejected by the user" }
  end
  -- The buffers must still be the text the agent read.
  for _, f in ipairs(self.files) do
    if f.bufnr and f.version then
      if not vim.api.nvim_buf_is_loaded(f.bufnr) then
        return { applied = false, failureReason = f.display .. " was closed during the review" }
      end
      if compat.buf_version(f.bufnr) ~= f.version then
        return {
          applied = false,
          failureReason = string.format(
            "%s changed during the review (version %d, now %d)",
            f.display,
            f.version,
            compat.buf_version(f.bufnr)
          ),
        }
      end
    elseif f.bufnr and compat.buf_text(f.bufnr) ~= f.old then
      return { applied = false, failureReason = f.display .. " changed during the review" }
    end
  end
  local ok, err = pcall(function()
    for _, f in ipairs(self.files) do
      local edits = {}
      for _, h in ipairs(f.hunks) do
        if h.state == "accepted" then
          table.insert(edits, h.edit)
        end
      end
      if #edits > 0 then
        local bufnr = f.bufnr
        if not bufnr or not vim.api.nvim_buf_is_valid(bufnr) then
          bufnr = vim.fn.bufadd(f.path)
          vim.fn.bufload(bufnr)
        end
        vim.bo[bufnr].buflisted = true
        if f.create and f.old == "" and compat.buf_text(bufnr) == "\n" then
          -- A new file: its text as lines (an insert into the empty buffer
          -- would leave an extra empty last line).
          vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, compat.text_lines(f.new))
        else
          vim.lsp.util.apply_text_edits(edits, bufnr, self.enc)
        end
      end
    end
  end)
  if not ok then
    return { applied = false, failureReason = "applying the edit failed: " .. tostring(err) }
  end
  return { applied = true }
end

-- A key the modal loop reads and ignores: it wakes the loop (blocked in
-- getcharstr) when the review is finished from outside it (:AgentFixCancel,
-- a closed window).
local WAKE = "\12" -- Ctrl-L

function Session:finish()
  if self.done then
    return
  end
  self.done = true
  if self.in_modal and not self.dispatching then
    vim.api.nvim_feedkeys(WAKE, "n", false)
  end
  self:close_ui()
  local result = self:apply()
  self.result = result
  M.last_result = result
  sessions[self.id] = nil
  if result.applied then
    M.last_summary = self:summary()
  else
    M.last_summary = "applied nothing"
  end
  -- Short notes only: the server reports the outcome too (window/showMessage
  -- when nothing was applied, the command's result otherwise).
  if result.applied then
    vim.api.nvim_echo({ { M.fit("agentfix: " .. M.last_summary .. "; undo with u"), "Normal" } }, false, {})
  elseif result.failureReason ~= "rejected by the user" then
    vim.api.nvim_echo({ { "agentfix: not applied: " .. result.failureReason, "WarningMsg" } }, true, {})
  end
  if self.on_summary then
    self.on_summary(M.last_summary)
  end
  -- What the review did with each hunk (agentfix.reviewed), when the
  -- buffers hold what was decided: the accepted hunks applied, or nothing
  -- because everything was rejected.
  if self.on_reviewed and (result.applied or result.failureReason == "rejected by the user") then
    self.on_reviewed(self)
  end
  if self.on_done then
    self.on_done(result)
  end
end

-- The modal loop for Neovim versions that cannot answer a server request later.
local motions = {
  ["j"] = true,
  ["k"] = true,
  ["h"] = true,
  ["l"] = true,
  ["G"] = true,
  ["w"] = true,
  ["b"] = true,
  ["{"] = true,
  ["}"] = true,
  ["0"] = true,
  ["$"] = true,
}
local prefixes = { ["]"] = true, ["["] = true, ["g"] = true, ["z"] = true }

function Session:modal()
  local tc = function(s)
    return vim.api.nvim_replace_termcodes(s, true, false, true)
  end
  local special = {
    [tc("<Down>")] = "j",
    [tc("<Up>")] = "k",
    [tc("<C-d>")] = tc("<C-d>"),
    [tc("<C-u>")] = tc("<C-u>"),
    [tc("<C-f>")] = tc("<C-f>"),
    [tc("<C-b>")] = tc("<C-b>"),
    [tc("<C-e>")] = tc("<C-e>"),
    [tc("<C-y>")] = tc("<C-y>"),
    [tc("<Tab>")] = tc("<C-w>w"),
  }
  local actions = self:actions()
  vim.api.nvim_echo({ { "agentfix review: this Neovim waits here until q", "ModeMsg" } }, false, {})
  self.in_modal = true
  while not self.done do
    vim.cmd("redraw")
    local ok, key = pcall(vim.fn.getcharstr)
    if self.done then
      break
    end
    if not ok or key == "\3" then
      self.dispatching = true
      self:set_all("rejected")
      self:finish()
      break
    end
    if prefixes[key] or key == tc("<C-w>") then
      local ok2, k2 = pcall(vim.fn.getcharstr)
      key = key .. (ok2 and k2 or "")
    end
    if self.done then
      break -- woken by WAKE after a finish from outside the loop
    elseif actions[key] then
      self.dispatching = true
      local aok, aerr = pcall(actions[key])
      self.dispatching = false
      if not aok then
        vim.api.nvim_echo({ { "agentfix review: " .. tostring(aerr), "ErrorMsg" } }, true, {})
      end
    elseif motions[key] or special[key] or key:match("^[%]%[][cC]$") or key == "gg" or key:match("^z[oczRMt]$") or key:sub(1, #tc("<C-w>")) == tc("<C-w>") then
      pcall(vim.cmd, "normal! " .. (special[key] or key))
    end
  end
  self.in_modal = false
end

--- The `workspace/applyEdit` handler for the agentfix client.
--- `opts`: { review = "diff" | "apply", root = path, on_state = function(state)?,
--- on_summary = function(text)? (what was applied, when the review ends),
--- on_reviewed = function(session)? (the review ended with the buffers
--- holding what it decided: `session:reviewed()` says it per hunk; not
--- called with review = "apply"), note = string? (a line of the header
--- under the label) }
function M.handle(params, client, opts)
  local enc = client.offset_encoding or "utf-16"
  local files, problem = parse(params.edit or {}, enc, opts.root)
  if not files then
    vim.api.nvim_echo({ { "agentfix: proposal refused: " .. problem, "WarningMsg" } }, true, {})
    M.last_result = { applied = false, failureReason = problem }
    return M.last_result
  end
  local annotations = params.edit and params.edit.changeAnnotations
  local s = setmetatable({
    id = next_id,
    files = files,
    annotations = type(annotations) == "table" and annotations or {},
    enc = enc,
    label = params.label,
    note = opts.note,
    client_id = client.id,
    on_summary = opts.on_summary,
    on_reviewed = opts.on_reviewed,
  }, Session)
  next_id = next_id + 1
  for _, h in ipairs(s:all_hunks()) do
    h.state = "pending"
  end
  if #s:all_hunks() == 0 then
    M.last_result = { applied = false, failureReason = "the proposal has no edits" }
    return M.last_result
  end
  if opts.review == "apply" then
    s:set_all("accepted")
    s.done = true
    local result = s:apply()
    M.last_result = result
    M.last_summary = result.applied and s:summary() or "applied nothing"
    if opts.on_summary then
      opts.on_summary(M.last_summary)
    end
    if result.applied then
      vim.api.nvim_echo({ { (params.label or "agentfix") .. " — applied; undo with u", "Normal" } }, true, {})
    else
      vim.api.nvim_echo({ { "agentfix: not applied: " .. result.failureReason, "WarningMsg" } }, true, {})
    end
    return result
  end

  sessions[s.id] = s
  local co = coroutine.running()
  local ok, err = pcall(s.open_ui, s)
  if not ok then
    sessions[s.id] = nil
    s.done = true
    pcall(s.close_ui, s)
    M.last_result = { applied = false, failureReason = "review failed: " .. tostring(err) }
    return M.last_result
  end
  if opts.on_state then
    opts.on_state("review")
  end
  if co then
    -- Neovim 0.10+: the response is sent when this coroutine returns.
    s.on_done = function(result)
      vim.schedule(function()
        local rok, rerr = coroutine.resume(co, result)
        if not rok then
          vim.api.nvim_echo({ { "agentfix: " .. tostring(rerr), "ErrorMsg" } }, true, {})
        end
      end)
    end
    return coroutine.yield()
  end
  -- Neovim 0.7–0.9: answer from the return value, after a modal review.
  s:modal()
  return s.result or { applied = false, failureReason = "the review ended without an answer" }
end

return M
