-- (1) Code action flow, diff review: accept the first hunk, reject the second,
-- finish. The buffer has exactly the first fix, the disk file is unchanged,
-- and the server was told applied = true.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("diff review: accept one hunk, reject the other", function()
  local url, log = H.start_mock(H.TWO_EDITS)
  local af, buf, root = H.fix_calc(url)

  local s = H.wait_review()
  H.eq(1, #s.files, "files in the proposal")
  H.eq(2, #s.files[1].hunks, "hunks in the proposal")
  H.truthy(s.label and s.label:find("Agent fix: Fixed add and mul", 1, true), "label " .. tostring(s.label))
  -- The real buffer is untouched while the review is open.
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer during review")

  local h1 = H.cursor_on_hunk(s, 1)
  H.feed("a")
  H.wait(function()
    return h1.state == "accepted"
  end, 5000, "hunk 1 accepted")
  local h2 = H.cursor_on_hunk(s, 2)
  H.feed("r")
  H.wait(function()
    return h2.state == "rejected"
  end, 5000, "hunk 2 rejected")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")

  local expected = H.CALC:gsub("return a %- b", "return a + b")
  H.eq(expected, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer after review")
  H.eq(H.CALC, H.read_file(root .. "/calc.py"), "file on disk")
  H.eq(true, af.last_result.applied, "applied in the command's result")
  H.eq("end_turn", af.last_result.stopReason, "stopReason")
  H.eq(true, vim.bo[buf].modified, "buffer modified (unsaved)")
  H.eq(1, #vim.api.nvim_list_tabpages(), "review tab closed")
  -- One undo restores the original text.
  vim.api.nvim_set_current_buf(buf)
  vim.cmd("silent undo")
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer after undo")
  H.wait(function()
    return #H.mock_requests(log) == 2
  end, 5000, "the mock's log of two model requests")
end)
