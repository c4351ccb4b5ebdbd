-- Follow-ups: the result's runId is kept per buffer; "Agent fix: follow up…"
-- from vim.lsp.buf.code_action() asks for the instruction (vim.ui.input) and
-- continues the run (the mock's request carries the earlier conversation and
-- ends with "The user's request: <instruction>"); :AgentFixFollowUp
-- <instruction> continues the buffer's last run without asking.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

-- The text of the last message of a request body.
local function last_user_text(body)
  local m = body.messages[#body.messages]
  local parts = {}
  if type(m.content) == "string" then
    return m.role, m.content
  end
  for _, b in ipairs(m.content) do
    if b.type == "text" then
      table.insert(parts, b.text)
    end
  end
  return m.role, table.concat(parts, "\n")
end

H.run("follow-ups: code action with a prompt, and :AgentFixFollowUp", function()
  local url, log = H.start_mock({
    {
      tools = {
        { "toolu_1", "edit_file", { path = "calc.py", old_text = "    return a - b", new_text = "    return a + b" } },
      },
    },
    { text = "Fixed add." },
    { text = "Negative numbers already work." },
    { text = "Nothing to speed up." },
  })
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, { review = "apply" })
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 12 })
  H.eq(nil, af.last_run_id(buf), "no run yet")

  -- 1. The first run; its runId is kept for the buffer.
  vim.cmd("AgentFix")
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the first result")
  H.eq(true, af.last_result.applied, "first run applied: " .. vim.inspect(af.last_result))
  local first_id = af.last_result.runId
  H.truthy(type(first_id) == "string" and first_id ~= "", "a runId: " .. vim.inspect(first_id))
  H.eq(first_id, af.last_run_id(buf), "runId kept for the buffer")
  H.wait(function()
    return #H.mock_requests(log) == 2
  end, 5000, "two model requests")

  -- 2. "Agent fix: follow up…" from the code action menu, with a prompt.
  local titles, prompted
  vim.ui.select = function(items, opts, on_choice)
    titles = {}
    local pick
    for i, item in ipairs(items) do
      local action = item.action or item[2]
      local title = action and action.title or tostring(opts.format_item and opts.format_item(item))
      table.insert(titles, title)
      if not pick and title:find("^Agent fix: follow up") then
        pick = i
      end
    end
    on_choice(pick and items[pick], pick)
  end
  vim.ui.input = function(opts, on_confirm)
    prompted = opts.prompt
    on_confirm("also handle negative numbers")
  end
  af.last_result = nil
  vim.api.nvim_win_set_cursor(0, { 2, 4 })
  vim.lsp.buf.code_action()
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the follow-up's result")
  H.truthy(titles and vim.tbl_contains(titles, "Agent fix: follow up…"), "follow up offered: " .. vim.inspect(titles))
  H.truthy(type(prompted) == "string" and prompted ~= "", "the instruction was asked for")
  H.truthy(af.last_result.runId and af.last_result.runId ~= first_id, "a new runId: " .. vim.inspect(af.last_result))
  H.eq(af.last_result.runId, af.last_run_id(buf), "the follow-up's runId kept")
  H.wait(function()
    return #H.mock_requests(log) == 3
  end, 5000, "the follow-up's model request")
  local reqs = H.mock_requests(log)
  local role, text = last_user_text(reqs[3].body)
  H.eq("user", role, "last message role")
  H.truthy(text:find("The user's request: also handle negative numbers", 1, true), "the instruction: " .. text)
  -- The earlier conversation comes first, unchanged in substance.
  local earlier = reqs[2].body.messages
  local now = reqs[3].body.messages
  H.truthy(#now > #earlier, "the follow-up carries more messages than the run it continues")
  H.eq(vim.fn.json_encode(earlier[1].content[1].text), vim.fn.json_encode(now[1].content[1].text), "the first prompt")
  local all = vim.fn.json_encode(now)
  H.truthy(all:find("add() subtracts its arguments", 1, true), "the first prompt's diagnostic")
  H.truthy(all:find("toolu_1", 1, true) and all:find("Fixed add.", 1, true), "the earlier tool call and answer")

  -- 3. :AgentFixFollowUp <instruction>: no prompt, the buffer's last run.
  local follow_id = af.last_result.runId
  prompted = nil
  vim.ui.input = function()
    prompted = "asked"
  end
  af.last_result = nil
  vim.cmd("AgentFixFollowUp make it faster")
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the second follow-up's result")
  H.eq(nil, prompted, "not asked when the instruction is given")
  H.wait(function()
    return #H.mock_requests(log) == 4
  end, 5000, "the second follow-up's model request")
  reqs = H.mock_requests(log)
  role, text = last_user_text(reqs[4].body)
  H.truthy(text:find("The user's request: make it faster", 1, true), "the instruction: " .. text)
  H.truthy(vim.fn.json_encode(reqs[4].body.messages):find("Negative numbers already work.", 1, true), "continues the follow-up " .. follow_id)
end)
