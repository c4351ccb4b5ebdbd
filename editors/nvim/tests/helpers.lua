-- Test harness for the headless Neovim tests (0.7 and 0.11).
--
-- Each test file calls H.run(name, function() ... end). The body runs in a
-- coroutine; H.wait(cond) yields to the editor's event loop (polling every
-- 20 ms) so that server messages are handled and keys fed with H.feed() are
-- typed for real: by normal mode on 0.10+, by the review's modal loop on 0.7.
-- The outcome goes to $AGENTFIX_TEST_RESULTS as "PASS name" / "FAIL name: why".
local H = {}

local uv = vim.uv or vim.loop

H.agentfix_bin = assert(os.getenv("AGENTFIX_BIN"), "AGENTFIX_BIN")
H.mock_bin = assert(os.getenv("MOCK_MODEL_BIN"), "MOCK_MODEL_BIN")
H.results = assert(os.getenv("AGENTFIX_TEST_RESULTS"), "AGENTFIX_TEST_RESULTS")
H.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)

local jobs = {}
local finished = false

local function record(line)
  local f = assert(io.open(H.results, "a"))
  f:write(line .. "\n")
  f:close()
end

local function quit(code)
  for _, j in ipairs(jobs) do
    pcall(vim.fn.jobstop, j)
  end
  for _, c in ipairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do
    pcall(function()
      if c.stop then
        if vim.fn.has("nvim-0.11") == 1 then
          c:stop(true)
        else
          c.stop(true)
        end
      end
    end)
  end
  vim.cmd((code == 0) and "qall!" or "cquit! " .. code)
end

function H.fail(msg)
  error({ agentfix_test_failure = msg }, 0)
end

function H.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    H.fail(string.format("%s: expected %s, got %s", what or "value", vim.inspect(expected), vim.inspect(actual)))
  end
end

function H.truthy(v, what)
  if not v then
    H.fail((what or "condition") .. " is false")
  end
end

--- Yields until cond() is true (polled every 20 ms) or timeout_ms passes.
function H.wait(cond, timeout_ms, what)
  local co = coroutine.running()
  local deadline = uv.now() + (timeout_ms or 10000)
  local function poll()
    uv.update_time()
    local ok, v = pcall(cond)
    if ok and v then
      coroutine.resume(co, true)
    elseif uv.now() > deadline then
      coroutine.resume(co, false)
    else
      vim.defer_fn(poll, 20)
    end
  end
  vim.defer_fn(poll, 0)
  local ok = coroutine.yield()
  if not ok then
    H.fail("timed out waiting for " .. (what or "a condition"))
  end
end

--- Lets the editor run for `ms` (to check that something does not happen).
function H.sleep(ms)
  local co = coroutine.running()
  vim.defer_fn(function()
    coroutine.resume(co)
  end, ms)
  coroutine.yield()
end

--- Types keys as a user would (mappings apply).
function H.feed(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mt", false)
end

function H.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

function H.read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

--- A workspace (a temporary directory with .git) holding `files`.
function H.workspace(files)
  local root = vim.fn.tempname()
  vim.fn.mkdir(root .. "/.git", "p")
  for name, text in pairs(files) do
    H.write_file(root .. "/" .. name, text)
  end
  return vim.fn.resolve(root)
end

--- Starts the mock model with `replies`; returns its base URL and log path.
function H.start_mock(replies)
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir, "p")
  local replies_path = dir .. "/replies.json"
  local log = dir .. "/requests.jsonl"
  H.write_file(replies_path, vim.fn.json_encode(replies))
  local url
  local job = vim.fn.jobstart({ H.mock_bin, "--replies", replies_path, "--log", log }, {
    on_stdout = function(_, data)
      for _, l in ipairs(data or {}) do
        if not url and l:match("^http") then
          url = l
        end
      end
    end,
  })
  H.truthy(job > 0, "mock model started")
  table.insert(jobs, job)
  H.wait(function()
    return url ~= nil
  end, 10000, "the mock model's URL")
  return url, log
end

--- The mock's request log as a list of {method, path, body}.
function H.mock_requests(log)
  local out = {}
  local f = io.open(log, "rb")
  if not f then
    return out
  end
  for line in f:lines() do
    if line ~= "" then
      table.insert(out, vim.fn.json_decode(line))
    end
  end
  f:close()
  return out
end

--- setup() against the mock at `url`, with the plugin's commands loaded.
function H.setup(url, opts)
  vim.cmd("runtime plugin/agentfix.lua")
  local af = require("agentfix")
  af.setup(vim.tbl_deep_extend("force", {
    cmd = { H.agentfix_bin, "--stdio" },
    cmd_env = {
      ANTHROPIC_API_KEY = "test-key-0123",
      ANTHROPIC_BASE_URL = url,
      AGENTFIX_TRANSCRIPTS = "0",
      -- Hermetic: no downstream language servers (pyright may or may not be on PATH).
      AGENTFIX_DEFAULT_LANGUAGE_SERVERS = "0",
    },
    settings = { maxRetries = 0 },
  }, opts or {}))
  return af
end

--- Opens `path` and waits for the agentfix client to be ready on it.
function H.open(path)
  vim.cmd("edit " .. vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  local af = require("agentfix")
  H.wait(function()
    local c = af.client_for(buf)
    return c and c.initialized
  end, 10000, "the agentfix client to initialize")
  return buf
end

--- The common start of a test: calc.py in a fresh workspace (made the
--- current directory), setup() in diff review mode, the buffer opened with
--- a diagnostic on line 2, the cursor at column `col` of line 2, and
--- :AgentFix run. Returns the plugin, the buffer and the root.
function H.fix_calc(url, col)
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "diff" })
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, col or 11 })
  vim.cmd("AgentFix")
  return af, buf, root
end

--- Waits for the review of the proposal to open and returns its session.
function H.wait_review()
  local review = require("agentfix.review")
  H.wait(function()
    return review.current() ~= nil
  end, 15000, "the review to open")
  return review.current()
end

--- Puts the cursor on hunk `i` of the open review (proposed side).
function H.cursor_on_hunk(session, i)
  local f = session.files[session.file_index]
  local h = f.hunks[i]
  vim.api.nvim_set_current_win(session.new_win)
  local line = math.min(h.new_first + 1, vim.api.nvim_buf_line_count(f.new_buf))
  vim.api.nvim_win_set_cursor(session.new_win, { line, 0 })
  return h
end

function H.run(name, body)
  local full = name .. " [nvim " .. H.version .. "]"
  local timer = uv.new_timer()
  timer:start(
    45000,
    0,
    vim.schedule_wrap(function()
      if not finished then
        finished = true
        record("FAIL " .. full .. ": test timed out")
        quit(1)
      end
    end)
  )
  local co = coroutine.create(function()
    local ok, err = xpcall(body, function(e)
      if type(e) == "table" and e.agentfix_test_failure then
        return e.agentfix_test_failure
      end
      return debug.traceback(tostring(e), 2)
    end)
    finished = true
    if ok then
      record("PASS " .. full)
      quit(0)
    else
      record("FAIL " .. full .. ": " .. tostring(err))
      quit(1)
    end
  end)
  vim.schedule(function()
    local ok, err = coroutine.resume(co)
    if not ok and not finished then
      finished = true
      record("FAIL " .. full .. ": " .. tostring(err))
      quit(1)
    end
  end)
end

-- Shared fixtures -------------------------------------------------------------

H.CALC = table.concat({
  "def add(a, b):",
  "    return a - b",
  "",
  "",
  "def div(a, b):",
  "    return a / b",
  "",
  "",
  "def mul(a, b):",
  "    return a + b",
  "",
}, "\n")

-- Two edit_file calls on two separate places of calc.py, then a summary.
H.TWO_EDITS = {
  {
    tools = {
      {
        "toolu_1",
        "edit_file",
        { path = "calc.py", old_text = "def add(a, b):\n    return a - b", new_text = "def add(a, b):\n    return a + b" },
      },
      {
        "toolu_2",
        "edit_file",
        { path = "calc.py", old_text = "def mul(a, b):\n    return a + b", new_text = "def mul(a, b):\n    return a * b" },
      },
    },
  },
  { text = "Fixed add and mul." },
}

--- Sets a diagnostic on line `lnum` (0-based) of `buf`, as a linter would.
function H.diagnose(buf, lnum, col, end_col, message)
  local ns = vim.api.nvim_create_namespace("agentfix_test_linter")
  vim.diagnostic.set(ns, buf, {
    { lnum = lnum, col = col, end_lnum = lnum, end_col = end_col, severity = 1, message = message, source = "testlint" },
  })
end

return H
