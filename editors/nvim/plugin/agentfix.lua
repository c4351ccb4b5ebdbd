-- Commands only; nothing starts until require("agentfix").setup({...}).
if vim.g.loaded_agentfix then
  return
end
vim.g.loaded_agentfix = true

vim.api.nvim_create_user_command("AgentFix", function(opts)
  require("agentfix").fix({ instruction = opts.args, range = opts.range, line1 = opts.line1, line2 = opts.line2 })
end, { nargs = "*", range = true, desc = "agentfix: fix the diagnostic at the cursor (or do [instruction])" })

vim.api.nvim_create_user_command("AgentFixCancel", function()
  require("agentfix").cancel()
end, { nargs = 0, desc = "agentfix: cancel the running fix" })
