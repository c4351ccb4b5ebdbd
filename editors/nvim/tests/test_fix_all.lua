-- :AgentFixAll: one run with every diagnostic of the buffer (two sources,
-- one after CJK letters and an emoji, converted to the client's negotiated
-- encoding), the range spanning them. The proposal's hunks are annotated per
-- problem; the review accepts one problem (its two hunks together) and
-- rejects the other, and the buffer gets only the accepted problem's hunks.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

local ALL = table.concat({
  "def add(a, b):",
  "    # adds a and b",
  "    return a - b",
  "",
  "",
  "def greet(name):",
  '    return "数字😀" + name',
  "",
}, "\n")

-- Line 7 (0-based 6): the "+" after the emoji is byte 24; in UTF-16 units
-- 18 (数 字 one each, 😀 two), in UTF-32 17.
local PLUS = { ["utf-8"] = 24, ["utf-16"] = 18, ["utf-32"] = 17 }

H.run(":AgentFixAll: every diagnostic, review per problem", function()
  local url, log = H.start_mock({
    {
      tools = {
        {
          "toolu_1",
          "edit_file",
          { path = "calc.py", old_text = "def add(a, b):", new_text = "def add(a: int, b: int) -> int:" },
        },
        { "toolu_2", "edit_file", { path = "calc.py", old_text = "    return a - b", new_text = "    return a + b" } },
        {
          "toolu_3",
          "edit_file",
          { path = "calc.py", old_text = '"数字😀" + name', new_text = '"数字😀" + str(name)' },
        },
      },
    },
    { text = "Fixed add and greet." },
  })
  local root = H.workspace({ ["calc.py"] = ALL })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "diff" })
  local buf = H.open(root .. "/calc.py")
  local enc = af.client_for(buf).offset_encoding or "utf-16"
  print("offset encoding: " .. enc)
  if H.version == "0.7" then
    H.eq("utf-16", enc, "0.7 negotiates UTF-16")
  end
  -- Two sources, as two linters would publish them.
  vim.diagnostic.set(vim.api.nvim_create_namespace("agentfix_test_lint_a"), buf, {
    { lnum = 1, col = 4, end_lnum = 1, end_col = 17, severity = 2, message = "add() does not add", source = "linta" },
  })
  vim.diagnostic.set(vim.api.nvim_create_namespace("agentfix_test_lint_b"), buf, {
    { lnum = 6, col = 24, end_lnum = 6, end_col = 25, severity = 1, message = "str + name may fail", source = "lintb" },
  })
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.cmd("AgentFixAll")

  local s = H.wait_review()
  -- What the plugin sent.
  local arg = af.runs()[1].arg
  H.eq(2, #arg.diagnostics, "diagnostics sent")
  H.eq({ "add() does not add", "str + name may fail" }, { arg.diagnostics[1].message, arg.diagnostics[2].message }, "messages")
  H.eq({ "linta", "lintb" }, { arg.diagnostics[1].source, arg.diagnostics[2].source }, "sources")
  H.eq({ line = 6, character = PLUS[enc] }, arg.diagnostics[2].range.start, "start after the emoji (" .. enc .. ")")
  H.eq({ line = 6, character = PLUS[enc] + 1 }, arg.diagnostics[2].range["end"], "end after the emoji (" .. enc .. ")")
  H.eq({ start = { line = 1, character = 4 }, ["end"] = { line = 6, character = PLUS[enc] + 1 } }, arg.range, "range spans them")
  H.eq(nil, arg.followUp, "not a follow-up")

  -- The review groups the hunks per problem.
  H.eq(3, #s.files[1].hunks, "hunks")
  local groups = s:groups()
  H.eq(2, #groups, "groups: " .. vim.inspect(groups))
  H.eq("calc.py:2: add() does not add", groups[1].label, "label of problem 1")
  H.eq("calc.py:7: str + name may fail", groups[2].label, "label of problem 2")
  H.eq(2, #groups[1].hunks, "problem 1's hunks")
  H.eq(1, #groups[2].hunks, "problem 2's hunks")
  -- The label is shown on the hunk.
  local marks = vim.api.nvim_buf_get_extmarks(s.files[1].new_buf, vim.api.nvim_get_namespaces().agentfix_review, 0, -1, { details = true })
  local shown = vim.fn.json_encode(marks)
  H.truthy(shown:find("calc.py:2: add() does not add", 1, true), "label shown: " .. shown)

  -- Accept problem 1 from its first hunk: its second hunk follows.
  local h1 = H.cursor_on_hunk(s, 1)
  H.feed("a")
  H.wait(function()
    return h1.state == "accepted"
  end, 5000, "hunk 1 accepted")
  H.eq("accepted", s.files[1].hunks[2].state, "hunk 2 (same problem) accepted with it")
  H.eq("pending", s.files[1].hunks[3].state, "hunk 3 (other problem) still pending")
  -- The cursor skipped hunk 2 (decided with hunk 1) to the next pending one.
  local h3 = s.files[1].hunks[3]
  H.wait(function()
    return vim.api.nvim_win_get_cursor(s.new_win)[1] == h3.new_first + 1
  end, 5000, "the cursor on hunk 3 after a")
  H.feed("r")
  H.wait(function()
    return h3.state == "rejected"
  end, 5000, "hunk 3 rejected")
  H.eq("accepted", s.files[1].hunks[2].state, "hunk 2 still accepted")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")

  local expected = ALL:gsub("def add%(a, b%):", "def add(a: int, b: int) -> int:"):gsub("return a %- b", "return a + b")
  H.eq(expected, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer: problem 1 only")
  H.eq(true, af.last_result.applied, "applied")
  H.truthy((af.last_message or ""):find("^applied 2 of 3 hunks to calc.py;"), "message: " .. tostring(af.last_message))
  H.eq(ALL, H.read_file(root .. "/calc.py"), "file on disk")

  -- Every diagnostic reached the model, at the columns sent, told in
  -- characters whatever the encoding (the `+` is the 18th character).
  H.wait(function()
    return #H.mock_requests(log) >= 1
  end, 5000, "the mock's log of the request")
  local prompt = vim.fn.json_encode(H.mock_requests(log)[1].body.messages)
  H.truthy(prompt:find("line 2, column 5: warning: add() does not add", 1, true), "problem 1 in the prompt: " .. prompt)
  local col = "line 7, column 18: error: str + name may fail"
  H.truthy(prompt:find(col, 1, true), "problem 2 in the prompt (`" .. col .. "`, " .. enc .. "): " .. prompt)
  H.truthy(prompt:find("range 7:18-7:19 covers `+`", 1, true), "problem 2's range and text: " .. prompt)
end)
