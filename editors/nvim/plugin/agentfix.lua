-- Commands only; nothing starts until require("agentfix").setup({...}).
if vim.g.loaded_agentfix then
  return
end
vim.g.loaded_agentfix = true

local function range_opts(opts)
  return { instruction = opts.args, range = opts.range, line1 = opts.line1, line2 = opts.line2 }
end

vim.api.nvim_create_user_command("AgentFix", function(opts)
  require("agentfix").fix(range_opts(opts))
end, { nargs = "*", range = true, desc = "agentfix: fix the diagnostic at the cursor (or do [instruction])" })

vim.api.nvim_create_user_command("AgentFixModel", function(opts)
  require("agentfix").fix_with_model(range_opts(opts))
end, { nargs = "*", range = true, desc = "agentfix: pick a model, then fix as :AgentFix does" })

-- :AgentFixBest [N] [instruction]: a leading whole number is N.
vim.api.nvim_create_user_command("AgentFixBest", function(opts)
  local o = range_opts(opts)
  local n, rest = (opts.args or ""):match("^%s*(%d+)%s*(.-)%s*$")
  if n then
    o.candidates, o.instruction = tonumber(n), rest
  end
  require("agentfix").fix_best(o)
end, { nargs = "*", range = true, desc = "agentfix: fix as :AgentFix does, best of [N] candidates (default 3)" })

vim.api.nvim_create_user_command("AgentFixFollowUp", function(opts)
  require("agentfix").follow_up(range_opts(opts))
end, { nargs = "*", range = true, desc = "agentfix: follow up on this buffer's last fix with [instruction]" })

vim.api.nvim_create_user_command("AgentFixAll", function(opts)
  require("agentfix").fix_all({ instruction = opts.args })
end, { nargs = "*", desc = "agentfix: fix every diagnostic of the buffer in one run" })

vim.api.nvim_create_user_command("AgentFixCancel", function()
  require("agentfix").cancel()
end, { nargs = 0, desc = "agentfix: cancel the running fix" })
