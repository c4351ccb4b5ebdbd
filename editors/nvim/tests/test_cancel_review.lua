-- :AgentFixCancel while the review is open closes it and rejects everything.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run(":AgentFixCancel during the review", function()
  local url = H.start_mock(H.TWO_EDITS)
  local af, buf, root = H.fix_calc(url)
  local review = require("agentfix.review")
  local s = H.wait_review()
  H.truthy(af.status():find("review", 1, true), "status() during the review: " .. af.status())
  H.cursor_on_hunk(s, 1)
  H.feed("a")
  H.wait(function()
    return s.files[1].hunks[1].state == "accepted"
  end, 5000, "hunk 1 accepted")
  vim.cmd("AgentFixCancel")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")
  H.eq(false, af.last_result.applied, "applied")
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer")
  H.eq(1, #vim.api.nvim_list_tabpages(), "review tab closed")
  H.eq(nil, review.current(), "no review open")
end)
