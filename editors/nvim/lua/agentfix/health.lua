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

local SERVERS = {
  "rust-analyzer",
  "pyright-langserver",
  "basedpyright-langserver",
  "pylsp",
  "typescript-language-server",
  "clangd",
  "gopls",
}

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
  local check_out, check_code = compat.system({ exe, "check", "--offline", "--root", root }, root)
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

  start("agentfix: language servers on PATH")
  for _, name in ipairs(SERVERS) do
    local p = vim.fn.exepath(name)
    if p ~= "" then
      ok(name .. ": " .. p)
    else
      info(name .. ": not found")
    end
  end
end

return M
