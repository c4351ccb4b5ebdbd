-- (2) Diff review, reject all: the buffer is unchanged and the server is told
-- applied = false ("rejected by the user").
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("diff review: reject all", function()
  local url = H.start_mock(H.TWO_EDITS)
  local af, buf, root = H.fix_calc(url, 0)
  -- A buffer already has the review's title (an earlier review of calc.py
  -- still open, say): the new one is made unique.
  local other = vim.api.nvim_create_buf(false, true)
  vim.bo[other].buftype = "nofile"
  vim.api.nvim_buf_set_name(other, "agentfix review: calc.py")
  local review = require("agentfix.review")
  local s = H.wait_review()
  H.eq("agentfix review: calc.py (2)", vim.fn.bufname(vim.api.nvim_win_get_buf(s.new_win)), "unique title")
  vim.api.nvim_set_current_win(s.new_win)
  H.feed("R")
  H.wait(function()
    local c = s:counts()
    return c.rejected == c.total
  end, 5000, "every hunk rejected")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer")
  H.eq(false, vim.bo[buf].modified, "buffer modified")
  H.eq(false, af.last_result.applied, "applied")
  H.truthy(
    (af.last_result.message or ""):find("rejected by the user", 1, true),
    "the server's message names the reason: " .. tostring(af.last_result.message)
  )
  H.eq({ applied = false, failureReason = "rejected by the user" }, review.last_result, "the answer sent")
end)
