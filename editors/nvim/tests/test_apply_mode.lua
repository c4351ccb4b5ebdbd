-- (4) review = "apply": the proposal is applied at once; the settings reach
-- the server (initializationOptions / workspace/configuration).
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run('review = "apply" applies directly; settings reach the server', function()
  local url, log = H.start_mock(H.TWO_EDITS)
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "apply", settings = { model = "nvim-test-model", maxOutputTokens = 1234 } })
  local review = require("agentfix.review")
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 9, 11, 16, "mul() adds its arguments")
  vim.api.nvim_win_set_cursor(0, { 10, 11 })
  vim.cmd("AgentFix")
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the command's result")
  H.eq(nil, review.current(), "no review opened")
  local expected = H.CALC:gsub("return a %- b", "return a + b"):gsub("def mul%(a, b%):\n    return a %+ b", "def mul(a, b):\n    return a * b")
  H.eq(expected, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer")
  H.eq(H.CALC, H.read_file(root .. "/calc.py"), "file on disk")
  H.eq(true, af.last_result.applied, "applied")
  H.truthy((af.last_message or ""):find("^applied 2 of 2 hunks to calc.py;"), "message: " .. tostring(af.last_message))
  H.wait(function()
    return #H.mock_requests(log) >= 1
  end, 5000, "the mock's request log")
  local reqs = H.mock_requests(log)
  H.eq("nvim-test-model", reqs[1].body.model, "model from the editor settings")
  H.eq(1234, reqs[1].body.max_tokens, "maxOutputTokens from the editor settings")
  -- The diagnostic under the cursor went to the model.
  local first = vim.fn.json_encode(reqs[1].body.messages)
  H.truthy(first:find("mul() adds its arguments", 1, true), "the diagnostic reached the prompt")
end)
