-- :checkhealth agentfix
local compat = require("agentfix.compat")

local M = {}

-- vim.health (0.10+) or the 0.7–0.9 `health` module.
local h = vim.health or require("health")
local start = h.start or h.report_start
local ok = h.ok or h.report_ok
local warn = h.warn or h.report_warn
local err = h.error or h.report_error
local info = h.info or h.report_info

-- The language servers looked for, each with the arguments that make it speak LSP on stdio.
local SERVERS = {
  { "rust-analyzer" },
  { "pyright-langserver", "--stdio" },
  { "basedpyright-langserver", "--stdio" },
  { "pylsp" },
  { "typescript-language-server", "--stdio" },
  { "clangd" },
  { "gopls" },
}

-- Starts `argv` and sends it an LSP `initialize`: nil when it answers within `ms`,
-- else what went wrong (its first line of output, or "no answer").
local function starts(argv, ms)
  local init = vim.fn.json_encode({
    jsonrpc = "2.0",
    id = 1,
    method = "initialize",
    params = { processId = vim.NIL, rootUri = vim.NIL, capabilities = vim.empty_dict() },
  })
  local out, errs, exited = "", {}, nil
  local ok_job, job = pcall(vim.fn.jobstart, argv, {
    on_stdout = function(_, data)
      out = out .. table.concat(data or {}, "\n")
    end,
    on_stderr = function(_, data)
      for _, l in ipairs(data or {}) do
        if l ~= "" then
          table.insert(errs, l)
        end
      end
    end,
    on_exit = function(_, code)
      exited = code
    end,
  })
  if not ok_job or job <= 0 then
    return "cannot run " .. argv[1]
  end
  vim.fn.chansend(job, "Content-Length: " .. #init .. "\r\n\r\n" .. init)
  local answered = vim.wait(ms, function()
    return out:find('"id":%s*1') ~= nil or exited ~= nil
  end, 50)
  pcall(vim.fn.jobstop, job)
  if answered and out:find('"id":%s*1') then
    return nil
  end
  if exited ~= nil then
    return "exited " .. tostring(exited) .. (errs[1] and (": " .. errs[1]) or "")
  end
  return "no answer to initialize within " .. (ms / 1000) .. " s"
end

local KEY_VARS = { "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTFIX_API_KEY" }

-- Settings for display: no secrets live there, but strip URL credentials anyway.
local function shown(v)
  if type(v) == "string" then
    return (v:gsub("://[^/@]+@", "://***@"))
  end
  return v
end

function M.check()
  local agentfix = require("agentfix")
  local config = agentfix.config
  start("agentfix: server binary")
  local cmd = config.cmd or { "agentfix", "--stdio" }
  local exe = vim.fn.exepath(cmd[1])
  if exe == "" then
    err("`" .. cmd[1] .. "` not found (setup({ cmd = {...} }) or put agentfix on PATH: `cargo install --path .`)")
    return
  end
  ok("binary: " .. exe)
  local out, code = compat.system({ exe, "--version" })
  if code == 0 then
    ok("version: " .. vim.trim(out))
  else
    err("`" .. exe .. " --version` failed (exit " .. tostring(code) .. "): " .. vim.trim(out))
  end

  start("agentfix: configuration in force (`agentfix check --offline`)")
  local root = agentfix.root_for(vim.api.nvim_buf_get_name(0))
  -- With the plugin's own settings on top, as the server gets them.
  local argv = { exe, "check", "--offline", "--root", root }
  if config.settings and next(config.settings) then
    table.insert(argv, "--settings")
    table.insert(argv, vim.fn.json_encode(config.settings))
  end
  local check_out, check_code = compat.system(argv, root)
  for _, line in ipairs(vim.split(vim.trim(check_out), "\n")) do
    if line ~= "" then
      info(line)
    end
  end
  if check_code == 0 then
    ok("`agentfix check --offline --root " .. root .. "` passed")
  else
    warn("`agentfix check --offline` exited " .. tostring(check_code) .. " (see above; a missing key is the usual cause)")
  end
  for _, var in ipairs(KEY_VARS) do
    info(var .. ": " .. ((vim.env[var] and vim.env[var] ~= "") and "set" or "not set"))
  end
  local settings = config.settings or {}
  if next(settings) then
    local keys = vim.tbl_keys(settings)
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do
      table.insert(parts, k .. " = " .. vim.inspect(shown(settings[k])))
    end
    info("editor settings (override the above): " .. table.concat(parts, ", "))
  else
    info("editor settings: none (setup({ settings = {...} }))")
  end
  info("review mode: " .. tostring(config.review))

  start("agentfix: clients")
  local clients = compat.get_clients(nil, "agentfix")
  if #clients == 0 then
    info("no agentfix client running (open a file after setup())")
  end
  for _, c in ipairs(clients) do
    ok(string.format("client %d, root %s, encoding %s", c.id, tostring(c.config.root_dir), tostring(c.offset_encoding)))
  end

  start("agentfix: language servers on PATH (each started and asked to initialize)")
  for _, server in ipairs(SERVERS) do
    local name = server[1]
    local p = vim.fn.exepath(name)
    if p == "" then
      info(name .. ": not found")
    else
      local argv = vim.deepcopy(server)
      argv[1] = p
      local failed = starts(argv, 10000)
      if failed then
        warn(name .. ": " .. p .. " is on PATH but does not start: " .. failed)
      else
        ok(name .. ": " .. p .. " (answers initialize)")
      end
    end
  end
end

return M
