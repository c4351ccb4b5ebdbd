-- (3) :AgentFixCancel while the model hangs: the run ends as cancelled and
-- nothing is edited.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run(":AgentFixCancel during a hanging model request", function()
  local url, log = H.start_mock({ { hang = true } })
  local af, buf, root = H.fix_calc(url)
  local review = require("agentfix.review")
  -- Running, with the server's progress token known, and the model asked.
  H.wait(function()
    local r = af.runs()[1]
    return r and r.token ~= nil and #H.mock_requests(log) >= 1
  end, 15000, "the run to start")
  H.truthy(af.status():find("^agentfix: "), "status() while running: " .. af.status())
  vim.cmd("AgentFixCancel")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command to end")
  local r = af.last_result
  H.truthy(r.stopReason == "cancelled" or r.cancelled, "the run ended cancelled: " .. vim.inspect(r))
  H.truthy(not r.applied, "nothing applied")
  H.eq(nil, review.last_result, "no proposal reached the editor")
  H.eq(H.CALC, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n", "buffer")
  H.eq(false, vim.bo[buf].modified, "buffer modified")
  H.eq("", af.status(), "status() after the run")
end)
