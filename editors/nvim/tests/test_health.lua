-- (5) :checkhealth agentfix runs, names the binary and its version, shows
-- `agentfix check --offline`, and never prints the key.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run(":checkhealth agentfix", function()
  vim.env.ANTHROPIC_API_KEY = "sk-ant-health-secret-0042"
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  H.setup("http://127.0.0.1:9", { settings = { model = "health-model" } })
  vim.cmd("checkhealth agentfix")
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  local must = {
    "binary: " .. H.agentfix_bin,
    "version: agentfix ",
    "provider: anthropic",
    "api key: ANTHROPIC_API_KEY is set",
    "ANTHROPIC_API_KEY: set",
    'model = "health-model"',
    -- The plugin's settings reach `agentfix check` too.
    "model: health-model (",
    "rust-analyzer",
    "gopls",
  }
  -- A language server on PATH is started, not only found.
  if vim.fn.exepath("pyright-langserver") ~= "" then
    table.insert(must, "pyright-langserver: " .. vim.fn.exepath("pyright-langserver") .. " (answers initialize)")
  end
  for _, s in ipairs(must) do
    H.truthy(text:find(s, 1, true), "the report mentions `" .. s .. "`:\n" .. text)
  end
  H.truthy(not text:find("health-secret", 1, true), "the key is never printed")
  H.truthy(not text:find("ERROR", 1, true), "no ERROR in the report:\n" .. text)
end)
