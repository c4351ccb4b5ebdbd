-- (6) The user types in the buffer while the review is open: finishing
-- refuses the proposal (version check) and keeps the user's text.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("diff review: a buffer changed during the review is not overwritten", function()
  local url = H.start_mock(H.TWO_EDITS)
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "diff" })
  local review = require("agentfix.review")
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 11 })
  vim.cmd("AgentFix")
  H.wait(function()
    return review.current() ~= nil
  end, 15000, "the review to open")
  local s = review.current()
  vim.api.nvim_buf_set_lines(buf, 0, 0, false, { "# typed meanwhile" })
  vim.api.nvim_set_current_win(s.new_win)
  H.feed("A")
  H.wait(function()
    return s:counts().accepted == 2
  end, 5000, "every hunk accepted")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")
  H.eq(false, af.last_result.applied, "applied")
  H.truthy(review.last_result.failureReason:find("changed during the review", 1, true), review.last_result.failureReason)
  H.eq("# typed meanwhile\n" .. H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer")
end)
