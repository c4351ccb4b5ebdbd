-- What the review did with each hunk reaches the server: `a` accepts one
-- hunk, `x` rejects the other and asks why (vim.ui.input); after q the
-- plugin sends `agentfix.reviewed` with each hunk's annotation id, its
-- outcome and the reason (made one line) once the run's id is known, the
-- server records both, and a follow-up's model request says per hunk
-- "accepted in the review" and "rejected in the review; the user's reason: …".
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

-- The text of the last message of a request body.
local function last_text(body)
  local m = body.messages[#body.messages]
  if type(m.content) == "string" then
    return m.content
  end
  local parts = {}
  for _, b in ipairs(m.content) do
    if b.type == "text" then
      table.insert(parts, b.text)
    end
  end
  return table.concat(parts, "\n")
end

H.run("the review reports each hunk's outcome and the reason typed with x; the follow-up says it", function()
  local url, log = H.start_mock({ H.TWO_EDITS[1], H.TWO_EDITS[2], { text = "Understood: mul keeps adding." } })
  local af, buf = H.fix_calc(url)
  local s = H.wait_review()
  local prompts = {}
  vim.ui.input = function(opts, on_confirm)
    table.insert(prompts, opts.prompt)
    on_confirm("  mul is meant\nto add here ")
  end

  local h1 = H.cursor_on_hunk(s, 1)
  H.feed("a")
  H.wait(function()
    return h1.state == "accepted"
  end, 5000, "hunk 1 accepted")
  local h2 = H.cursor_on_hunk(s, 2)
  H.feed("x")
  H.wait(function()
    return h2.state == "rejected" and h2.reason ~= nil
  end, 5000, "hunk 2 rejected with a reason")
  H.eq(1, #prompts, "asked once")
  H.truthy(prompts[1]:find("Why reject it?", 1, true), "the prompt: " .. tostring(prompts[1]))
  H.eq("mul is meant to add here", h2.reason, "the reason, one line")
  H.eq(nil, h1.reason, "the accepted hunk has none")
  -- The reason is shown on the hunk.
  local marks = vim.api.nvim_buf_get_extmarks(s.files[1].new_buf, vim.api.nvim_get_namespaces().agentfix_review, 0, -1, { details = true })
  local shown = vim.fn.json_encode(marks)
  H.truthy(shown:find("rejected (mul is meant to add here)", 1, true), "reason shown: " .. shown)
  -- Both hunks carry change annotations of their own.
  H.truthy(type(h1.annotation) == "string" and type(h2.annotation) == "string", "annotation ids")
  H.truthy(h1.annotation ~= h2.annotation, "two annotations: " .. h1.annotation)

  H.feed("q")
  H.wait(function()
    return af.last_reviewed ~= nil and af.last_reviewed.answer ~= nil
  end, 15000, "agentfix.reviewed answered")
  H.eq(true, af.last_result.applied, "applied")
  H.eq(af.last_result.runId, af.last_reviewed.runId, "reported for the run")
  H.eq({
    { annotationId = h1.annotation, outcome = "accepted" },
    { annotationId = h2.annotation, outcome = "rejected", reason = "mul is meant to add here" },
  }, af.last_reviewed.hunks, "what was sent")
  H.eq(nil, af.last_reviewed.error, "no error")
  H.eq(2, af.last_reviewed.answer.recorded, "recorded: " .. vim.inspect(af.last_reviewed.answer))
  H.eq(0, #af.last_reviewed.answer.unknown, "no unknown ids")
  local now = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
  H.truthy(not now:find("return a - b", 1, true) and not now:find("return a * b", 1, true), "hunk 1 applied, hunk 2 not: " .. now)

  -- The follow-up says it per hunk.
  vim.cmd("AgentFixFollowUp why was mul left alone?")
  H.wait(function()
    return #H.mock_requests(log) == 3
  end, 15000, "the follow-up's model request")
  local text = last_text(H.mock_requests(log)[3].body)
  H.truthy(text:find("(`return a + b`): accepted in the review.", 1, true), "hunk 1 accepted: " .. text)
  H.truthy(
    text:find("(`return a * b`): rejected in the review; the user's reason: mul is meant to add here.", 1, true),
    "hunk 2 rejected with the reason: " .. text
  )
end)
