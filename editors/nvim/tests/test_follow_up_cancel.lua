-- A follow-up whose instruction prompt is cancelled or left empty sends
-- nothing (from :AgentFixFollowUp and from the code action menu); without an
-- earlier run on the buffer, :AgentFixFollowUp does not even ask.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("follow-ups: a cancelled or empty instruction sends nothing", function()
  local url, log = H.start_mock({
    {
      tools = {
        { "toolu_1", "edit_file", { path = "calc.py", old_text = "    return a - b", new_text = "    return a + b" } },
      },
    },
    { text = "Fixed add." },
  })
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "apply" })
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 12 })

  local asked = 0
  local answer
  vim.ui.input = function(_, on_confirm)
    asked = asked + 1
    on_confirm(answer)
  end

  -- No earlier run: a warning, no prompt.
  vim.cmd("AgentFixFollowUp")
  H.eq(0, asked, "not asked without an earlier run")
  H.eq(0, #af.runs(), "no run")

  vim.cmd("AgentFix")
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the first result")
  H.truthy(af.last_run_id(buf), "a runId kept")
  H.wait(function()
    return #H.mock_requests(log) == 2
  end, 5000, "two model requests")
  local first = af.last_result
  af.last_result = nil

  -- Cancelled (nil) and empty answers to :AgentFixFollowUp.
  for i, a in ipairs({ vim.NIL, "", "   " }) do
    answer = (a ~= vim.NIL) and a or nil
    vim.cmd("AgentFixFollowUp")
    H.eq(i, asked, "asked for the instruction (" .. i .. ")")
  end

  -- Cancelled from the code action menu.
  vim.ui.select = function(items, opts, on_choice)
    local pick
    for i, item in ipairs(items) do
      local action = item.action or item[2]
      local title = action and action.title or tostring(opts.format_item and opts.format_item(item))
      if not pick and title:find("^Agent fix: follow up") then
        pick = i
      end
    end
    on_choice(pick and items[pick], pick)
  end
  answer = nil
  vim.api.nvim_win_set_cursor(0, { 2, 4 })
  vim.lsp.buf.code_action()
  H.wait(function()
    return asked == 4
  end, 10000, "the code action's prompt")

  H.sleep(800)
  H.eq(0, #af.runs(), "no run started")
  H.eq(nil, af.last_result, "no new result")
  H.eq(2, #H.mock_requests(log), "no new model request")
  H.eq(first.runId, af.last_run_id(buf), "the kept runId is unchanged")
end)
