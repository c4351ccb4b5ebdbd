-- Best of N: :AgentFixBest runs agentfix.fix with `candidates` (setup's
-- best_of, 3); the mock answers each candidate on its own ("for" its note),
-- and the verify command passes only for candidate 3. The review says it is
-- the best of 3 and leads with the check; the final message names the
-- candidate chosen, its check and the 2 alternatives. Then "Agent fix:
-- alternative 2 (not verified: test failed)" from vim.lsp.buf.code_action()
-- goes through workspace/executeCommand, its applyEdit through the same
-- review, and once accepted the buffer holds candidate 2's text (it replaces
-- the chosen one), with no model asked.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

local CALC = "def add(a, b):\n    return a - b\n"
local OLD = "    return a - b"
-- Candidates 1 and 2 change the line in ways the test does not accept.
local NEW = { "    return a - (-b)", "    return sum([a, b])", "    return a + b" }
local SUMMARY = { "Negated b twice.", "Summed a list.", "Added a and b." }

local function buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n"
end

H.run("best of 3: the chosen candidate's review and summary, then an alternative from the code actions", function()
  local replies = {}
  for i = 1, 3 do
    local marker = string.format("candidate %d of 3", i)
    table.insert(replies, {
      ["for"] = marker,
      tools = { { "toolu_" .. i, "edit_file", { path = "calc.py", old_text = OLD, new_text = NEW[i] } } },
    })
    table.insert(replies, { ["for"] = marker, text = SUMMARY[i] })
  end
  local url, log = H.start_mock(replies)
  local root = H.workspace({ ["calc.py"] = CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, {
    review = "diff",
    settings = {
      maxRetries = 0,
      commands = { test = { "sh", "-c", "grep -q 'return a + b' calc.py" }, autoApprove = true, sandbox = "off" },
      verify = { commands = { "test" }, rounds = 1 },
    },
  })
  H.eq(3, af.config.best_of, "best_of's default")
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 11 })

  -- 1. :AgentFixBest: three candidates, the third verified and proposed.
  vim.cmd("AgentFixBest")
  local s = H.wait_review()
  H.truthy(
    s.label and s.label:find("^Agent fix: verified: test passed %(%d+%.%d s%); Added a and b%."),
    "the label leads with the check: " .. tostring(s.label)
  )
  local header = table.concat(vim.api.nvim_buf_get_lines(s.header_buf, 0, -1, false), " ")
  H.truthy(header:find("best of 3", 1, true), "the header says best of 3: " .. header)
  H.truthy(header:find("Agent fix: alternative K", 1, true), "and where the others go: " .. header)
  H.eq(CALC, buffer_text(buf), "nothing applied during the review")
  -- The mock writes its log apart from its answers: wait for all six.
  local reqs
  H.wait(function()
    reqs = H.mock_requests(log)
    return #reqs == 6
  end, 5000, "the six model requests")
  for i = 1, 3 do
    local asked = 0
    for _, r in ipairs(reqs) do
      if vim.fn.json_encode(r.body.messages[1]):find(string.format("candidate %d of 3", i), 1, true) then
        asked = asked + 1
      end
    end
    H.eq(2, asked, "model requests of candidate " .. i)
  end
  H.feed("A")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the command's result")
  local result = af.last_result
  H.eq(true, result.applied, "applied: " .. vim.inspect(result))
  H.eq(3, #result.candidates, "three candidates listed")
  for _, c in ipairs(result.candidates) do
    H.eq(c.index == 3, c.chosen, "candidate " .. c.index .. " chosen")
    H.eq(c.index == 3, c.verified, "candidate " .. c.index .. " verified")
  end
  H.eq(true, result.verification.verified, "the chosen one's verification")
  H.eq("def add(a, b):\n    return a + b\n", buffer_text(buf), "candidate 3's text")
  local msg = af.last_message or ""
  H.truthy(
    msg:find("^candidate 3 of 3 chosen; 2 alternatives: use the code actions to apply one; the chosen one is verified: test passed %(%d+%.%d s%); applied 1 of 1 hunk to calc%.py; undo with u"),
    "the final message: " .. msg
  )
  H.eq(6, #H.mock_requests(log), "six model requests")

  -- 2. The code actions on the line offer the two others, each with its check.
  local titles
  vim.ui.select = function(items, opts, on_choice)
    titles = {}
    local pick
    for i, item in ipairs(items) do
      local action = item.action or item[2]
      local title = action and action.title or tostring(opts.format_item and opts.format_item(item))
      table.insert(titles, title)
      if title == "Agent fix: alternative 2 (not verified: test failed)" then
        pick = i
      end
    end
    on_choice(pick and items[pick], pick)
  end
  vim.api.nvim_win_set_cursor(0, { 2, 4 })
  vim.lsp.buf.code_action()
  local alt = H.wait_review()
  H.truthy(
    titles and vim.tbl_contains(titles, "Agent fix: alternative 1 (not verified: test failed)"),
    "alternative 1 offered: " .. vim.inspect(titles)
  )
  H.truthy(vim.tbl_contains(titles, "Agent fix: alternative 2 (not verified: test failed)"), "alternative 2 offered")
  H.truthy(vim.tbl_contains(titles, "Agent fix: follow up…"), "the follow-up offered too")
  H.truthy(not vim.tbl_contains(titles, "Agent fix: alternative 3 (verified: test passed)"), "not the chosen one")

  -- 3. Its applyEdit is reviewed like any proposal; accepted, it replaces the chosen one.
  H.eq("Agent fix: alternative 2 (not verified: test failed): Summed a list. (1 file, 1 hunk)", alt.label, "its label")
  H.eq("def add(a, b):\n    return a + b\n", buffer_text(buf), "nothing applied during the review")
  H.eq(nil, af.last_alternative, "no answer before the review ends")
  H.feed("A")
  H.feed("q")
  H.wait(function()
    return af.last_alternative ~= nil
  end, 15000, "the alternative's answer")
  H.eq(true, af.last_alternative.applied, "applied: " .. vim.inspect(af.last_alternative))
  H.eq("def add(a, b):\n    return sum([a, b])\n", buffer_text(buf), "candidate 2's text")
  H.truthy(
    (af.last_message or ""):find("^alternative 2: applied 1 of 1 hunk to calc%.py; undo with u"),
    "the message: " .. tostring(af.last_message)
  )
  H.eq(6, #H.mock_requests(log), "no model asked for the alternative")
  H.eq(result.runId, af.last_run_id(buf), "the run to follow up on is still the best-of run")
end)
