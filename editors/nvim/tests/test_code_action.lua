-- (7) The standard vim.lsp.buf.code_action() path: the "Agent fix: …" action
-- goes through the plugin's client command (progress, cancel, review).
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("vim.lsp.buf.code_action() picks Agent fix", function()
  local url = H.start_mock(H.TWO_EDITS)
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "apply" })
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 12 })
  local titles
  vim.ui.select = function(items, opts, on_choice)
    titles = {}
    local pick
    for i, item in ipairs(items) do
      local action = item.action or item[2]
      local title = action and action.title or tostring(opts.format_item and opts.format_item(item))
      table.insert(titles, title)
      if not pick and title:find("^Agent fix: add%(%) subtracts") then
        pick = i
      end
    end
    on_choice(pick and items[pick], pick)
  end
  vim.lsp.buf.code_action()
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the command's result")
  H.truthy(titles and #titles >= 1, "code actions offered")
  H.eq(true, af.last_result.applied, "applied: " .. vim.inspect(af.last_result))
  local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
  H.truthy(text:find("return a + b", 1, true) and text:find("return a * b", 1, true), "buffer has both fixes")
end)
