-- :AgentFixModel picks one of setup{ models } with vim.ui.select and the run
-- uses it (the mock sees it in the request body, over settings.model); a
-- cancelled pick sends nothing.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run(":AgentFixModel sends the picked model; a cancelled pick sends nothing", function()
  local url, log = H.start_mock({
    {
      tools = {
        { "toolu_1", "edit_file", { path = "calc.py", old_text = "    return a - b", new_text = "    return a + b" } },
      },
    },
    { text = "Fixed add." },
  })
  local root = H.workspace({ ["calc.py"] = H.CALC })
  vim.cmd("cd " .. vim.fn.fnameescape(root))
  local af = H.setup(url, {
    review = "apply",
    settings = { model = "settings-model" },
    models = { "model-cheap", "model-big" },
  })
  local buf = H.open(root .. "/calc.py")
  H.diagnose(buf, 1, 11, 16, "add() subtracts its arguments")
  vim.api.nvim_win_set_cursor(0, { 2, 12 })

  local offered, prompt, answer
  local asked = 0
  vim.ui.select = function(items, opts, on_choice)
    asked = asked + 1
    offered = vim.deepcopy(items)
    prompt = opts.prompt
    on_choice(answer, answer and 2 or nil)
  end

  -- Cancelled: nothing is sent.
  answer = nil
  vim.cmd("AgentFixModel")
  H.eq(1, asked, "vim.ui.select called")
  H.eq({ "model-cheap", "model-big" }, offered, "models offered")
  H.truthy(type(prompt) == "string" and prompt ~= "", "a prompt")
  H.sleep(800)
  H.eq(0, #af.runs(), "no run started")
  H.eq(nil, af.last_result, "no result")
  H.eq(0, #H.mock_requests(log), "no model request")

  -- Picked: the run has that model.
  answer = "model-big"
  vim.cmd("AgentFixModel")
  H.eq(2, asked, "vim.ui.select called again")
  H.wait(function()
    return af.last_result ~= nil
  end, 15000, "the command's result")
  H.eq(true, af.last_result.applied, "applied: " .. vim.inspect(af.last_result))
  -- The mock writes its log apart from its answers: wait for both requests.
  local reqs
  H.wait(function()
    reqs = H.mock_requests(log)
    return #reqs >= 2
  end, 5000, "the model was asked")
  for i, r in ipairs(reqs) do
    H.eq("model-big", r.body.model, "model of request " .. i)
  end
  H.truthy(vim.fn.json_encode(reqs[1].body.messages):find("add() subtracts its arguments", 1, true), "the diagnostic reached the prompt")
  H.truthy(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"):find("return a + b", 1, true), "fixed")
end)
