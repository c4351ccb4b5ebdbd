-- The check of a proposal shows in Neovim: with a verify command set up in
-- the plugin's settings, the review's label and the command's result lead
-- with "verified: …"; the result carries the typed `verification` record.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("verification: the review's label leads with the check", function()
  local url = H.start_mock(H.TWO_EDITS)
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  -- The project's test passes once add() adds; approved in the editor's own
  -- settings, outside the sandbox (this test is about the surface).
  local af = H.setup(url, {
    review = "diff",
    settings = {
      maxRetries = 0,
      commands = { test = { "sh", "-c", "grep -q 'return a + b' calc.py" }, autoApprove = true, sandbox = "off" },
      verify = { commands = { "test" } },
    },
  })
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 11 })
  vim.cmd("AgentFix")
  local s = H.wait_review()
  H.truthy(s.label and s.label:find("^Agent fix: verified: test passed %(%d+%.%d s%); Fixed add and mul"), "label " .. tostring(s.label))
  local header = table.concat(vim.api.nvim_buf_get_lines(s.header_buf, 0, -1, false), " ")
  H.truthy(header:find("verified: test passed", 1, true), "the header shows the check: " .. header)
  H.feed("A")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")
  local v = af.last_result.verification
  H.truthy(type(v) == "table", "verification in the result: " .. vim.inspect(af.last_result))
  H.eq(true, v.verified, "verified")
  H.eq(1, v.rounds, "one round")
  H.eq("test", v.commands[1].name, "the verify command")
  H.eq(0, v.commands[1].exitCode, "its exit code")
end)
