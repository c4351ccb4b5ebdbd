-- Small shims over the Neovim APIs that changed between 0.7 and 0.11, and
-- position-encoding helpers that do not depend on either version's
-- vim.str_utfindex / vim.str_byteindex signature.
local M = {}

M.has_011 = vim.fn.has("nvim-0.11") == 1
M.has_010 = vim.fn.has("nvim-0.10") == 1
M.has_08 = vim.fn.has("nvim-0.8") == 1

local uv = vim.uv or vim.loop
M.uv = uv

-- Client methods: `client:request(...)` since 0.11, `client.request(...)` before.
function M.request(client, method, params, handler, bufnr)
  if M.has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.notify(client, method, params)
  if M.has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.cancel_request(client, id)
  if M.has_011 then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

--- Clients attached to `bufnr` (all clients when nil).
function M.get_clients(bufnr, name)
  local list
  if vim.lsp.get_clients then
    list = vim.lsp.get_clients({ bufnr = bufnr, name = name })
  elseif bufnr then
    list = vim.tbl_values(vim.lsp.buf_get_clients(bufnr))
  else
    list = vim.lsp.get_active_clients()
  end
  if name then
    list = vim.tbl_filter(function(c)
      return c.name == name
    end, list)
  end
  return list
end

function M.is_stopped(client)
  if M.has_011 then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- The LSP version Neovim last sent for `bufnr` (0 right after didOpen).
function M.buf_version(bufnr)
  local v = vim.lsp.util.buf_versions[bufnr]
  if v == nil then
    return 0
  end
  return v
end

-- UTF-8 code point walking -------------------------------------------------

local function cp_len(byte)
  if byte < 0x80 then
    return 1
  elseif byte >= 0xF0 then
    return 4
  elseif byte >= 0xE0 then
    return 3
  elseif byte >= 0xC0 then
    return 2
  end
  return 1 -- continuation byte on its own: count it as one unit
end

--- Code units of `encoding` in the first `col` bytes of `line`.
function M.byte_to_units(line, col, encoding)
  if col > #line then
    col = #line
  end
  if encoding == "utf-8" then
    return col
  end
  local units, i = 0, 1
  while i <= col do
    local n = cp_len(line:byte(i))
    if encoding == "utf-16" and n == 4 then
      units = units + 2
    else
      units = units + 1
    end
    i = i + n
  end
  return units
end

--- Byte offset in `line` of `units` code units of `encoding` (clamped).
function M.units_to_byte(line, units, encoding)
  if encoding == "utf-8" then
    return math.min(units, #line)
  end
  local seen, i = 0, 1
  while i <= #line and seen < units do
    local n = cp_len(line:byte(i))
    seen = seen + ((encoding == "utf-16" and n == 4) and 2 or 1)
    i = i + n
  end
  return math.min(i - 1, #line)
end

--- The buffer's text as the server sees it.
function M.buf_text(bufnr)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local text = table.concat(lines, "\n")
  -- As Neovim's LSP client sends it (didOpen/didChange): 'eol' alone decides.
  if vim.bo[bufnr].eol then
    text = text .. "\n"
  end
  return text
end

--- Splits text into lines the way a buffer shows it (no empty last line for
--- a final newline).
function M.text_lines(text)
  local lines = vim.split(text, "\n", { plain = true })
  if #lines > 1 and lines[#lines] == "" then
    table.remove(lines)
  end
  return lines
end

function M.read_file(path)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local data = f:read("*a")
  f:close()
  return data
end

--- Runs `argv` and returns its combined output and exit code (blocking).
function M.system(argv, cwd)
  if vim.system then
    local r = vim.system(argv, { text = true, cwd = cwd }):wait()
    return (r.stdout or "") .. (r.stderr or ""), r.code
  end
  -- 0.7: jobstart with a wait, so argv is not passed through a shell.
  local out = {}
  local collect = function(_, data)
    for _, l in ipairs(data or {}) do
      table.insert(out, l)
    end
  end
  local job = vim.fn.jobstart(argv, {
    cwd = cwd,
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = collect,
    on_stderr = collect,
  })
  if job <= 0 then
    return "cannot run " .. argv[1], -1
  end
  local code = vim.fn.jobwait({ job }, 20000)[1]
  return table.concat(out, "\n"), code
end

return M
