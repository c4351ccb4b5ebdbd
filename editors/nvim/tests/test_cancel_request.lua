-- (3b) :AgentFixCancel before the server's progress token is known: the
-- plugin sends $/cancelRequest for the command; the run ends as cancelled,
-- nothing is edited, and the server keeps answering.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run(":AgentFixCancel with $/cancelRequest", function()
  local url, log = H.start_mock({ { hang = true } })
  local af, buf, root = H.fix_calc(url)
  H.wait(function()
    local r = af.runs()[1]
    return r and r.request_id and #H.mock_requests(log) >= 1
  end, 15000, "the run to start")
  -- Forget the progress token, so that only $/cancelRequest can stop the run.
  af.runs()[1].token = nil
  vim.cmd("AgentFixCancel")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command to end")
  H.eq(true, af.last_result.cancelled, "cancelled: " .. vim.inspect(af.last_result))
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer")
  -- The server still answers requests.
  local client = af.client_for(buf)
  local answered
  require("agentfix.compat").request(client, "textDocument/codeAction", {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = 1, character = 0 }, ["end"] = { line = 1, character = 4 } },
    context = { diagnostics = {} },
  }, function(err, actions)
    answered = { err = err, actions = actions }
  end, buf)
  H.wait(function()
    return answered ~= nil
  end, 5000, "a code action answer after the cancel")
  H.eq(nil, answered.err, "code action error")
  H.eq("Agent fix: selection", answered.actions[1].title, "the selection action")
end)
