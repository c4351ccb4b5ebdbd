-- (1) Code action flow, diff review: accept the first hunk, reject the second,
-- finish. The buffer has exactly the first fix, the disk file is unchanged,
-- and the server was told applied = true.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("diff review: accept one hunk, reject the other", function()
  -- Every note the plugin echoes, without history, fits one line of the
  -- echo area (no hit-enter prompt at 80 columns).
  local echoed = {}
  local orig_echo = vim.api.nvim_echo
  vim.api.nvim_echo = function(chunks, history, opts)
    local text = ""
    for _, c in ipairs(chunks) do
      text = text .. c[1]
    end
    if not history and text:find("^agentfix") then
      table.insert(echoed, { text = text, room = tonumber(vim.v.echospace) })
    end
    return orig_echo(chunks, history, opts)
  end
  local url, log = H.start_mock(H.TWO_EDITS)
  local af, buf, root = H.fix_calc(url)

  local s = H.wait_review()
  H.eq(1, #s.files, "files in the proposal")
  H.eq(2, #s.files[1].hunks, "hunks in the proposal")
  H.truthy(s.label and s.label:find("Agent fix: Fixed add and mul", 1, true), "label " .. tostring(s.label))
  -- The real buffer is untouched while the review is open.
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer during review")

  -- The tab is titled plainly (the tab line shortens every part of a name
  -- before a "/", so the name has none).
  H.eq("agentfix review: calc.py", vim.fn.bufname(vim.api.nvim_win_get_buf(s.new_win)), "title of the review tab")
  H.eq("agentfix review: calc.py (current text)", vim.fn.bufname(vim.api.nvim_win_get_buf(s.old_win)), "left side")
  -- The header fits 80 columns: the whole label and the keys, wrapped.
  H.eq(80, vim.o.columns, "columns")
  H.eq(80, vim.api.nvim_win_get_width(s.header_win), "header width")
  local header = vim.api.nvim_buf_get_lines(s.header_buf, 0, -1, false)
  H.eq(#header, vim.api.nvim_win_get_height(s.header_win), "header height = its lines")
  for _, l in ipairs(header) do
    H.truthy(vim.fn.strdisplaywidth(l) <= 80, "header line within 80 columns: " .. l)
  end
  local text = table.concat(header, " ")
  H.truthy(text:find(s.label, 1, true), "whole label in the header: " .. vim.inspect(header))
  for _, k in ipairs({ "a/r accept/reject hunk", "A/R all", "q finish", "? help" }) do
    H.truthy(text:find(k, 1, true), k .. " in the header: " .. vim.inspect(header))
  end
  for _, w in ipairs({ s.old_win, s.new_win }) do
    local sl = vim.wo[w].statusline
    H.truthy(vim.fn.strdisplaywidth(sl) <= vim.api.nvim_win_get_width(w), "status line fits its window: " .. sl)
  end

  local h1 = H.cursor_on_hunk(s, 1)
  H.feed("a")
  H.wait(function()
    return h1.state == "accepted"
  end, 5000, "hunk 1 accepted")
  -- The cursor moved on to the next pending hunk.
  local h2 = s.files[1].hunks[2]
  H.wait(function()
    return vim.api.nvim_win_get_cursor(s.new_win)[1] == h2.new_first + 1
  end, 5000, "the cursor on hunk 2 after a")
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
  -- The final message says what the review applied.
  H.truthy((af.last_message or ""):find("^applied 1 of 2 hunks to calc.py; undo with u"), "message: " .. tostring(af.last_message))
  H.eq(true, vim.bo[buf].modified, "buffer modified (unsaved)")
  H.eq(1, #vim.api.nvim_list_tabpages(), "review tab closed")
  H.truthy(#echoed > 0, "notes echoed")
  for _, e in ipairs(echoed) do
    H.truthy(vim.fn.strdisplaywidth(e.text) <= e.room, string.format("note fits %d columns: %s", e.room, e.text))
  end
  vim.api.nvim_echo = orig_echo
  -- One undo restores the original text.
  vim.api.nvim_set_current_buf(buf)
  vim.cmd("silent undo")
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer after undo")
  H.wait(function()
    return #H.mock_requests(log) == 2
  end, 5000, "the mock's log of two model requests")
end)
