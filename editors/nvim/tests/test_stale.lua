-- (6) The user types in the buffer while the review is open: finishing
-- refuses the proposal (version check) and keeps the user's text.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("diff review: a buffer changed during the review is not overwritten", function()
  local url = H.start_mock(H.TWO_EDITS)
  local af, buf, root = H.fix_calc(url)
  local review = require("agentfix.review")
  local s = H.wait_review()
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
