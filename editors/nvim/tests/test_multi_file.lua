-- Two files in one proposal (an edit and a new file): the review pages
-- through them with ]f, accepting everything creates the new buffer (unsaved)
-- and edits the open one; nothing is written to disk.
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("diff review: an edited file and a new file", function()
  local url = H.start_mock({
    {
      tools = {
        {
          "toolu_1",
          "edit_file",
          { path = "calc.py", old_text = "def add(a, b):\n    return a - b", new_text = "def add(a, b):\n    return a + b" },
        },
        { "toolu_2", "write_file", { path = "test_calc.py", content = "from calc import add\n\nassert add(1, 2) == 3\n" } },
      },
    },
    { text = "Fixed add, added a test." },
  })
  local af, buf, root = H.fix_calc(url)
  local s = H.wait_review()
  H.eq(2, #s.files, "files in the proposal")
  local names = { s.files[1].display, s.files[2].display }
  table.sort(names)
  H.eq({ "calc.py", "test_calc.py" }, names, "files")
  vim.api.nvim_set_current_win(s.new_win)
  H.feed("]f")
  H.wait(function()
    return s.file_index == 2
  end, 5000, "the second file shown")
  H.eq(s.files[2].new_buf, vim.api.nvim_win_get_buf(s.new_win), "proposed side shows file 2")
  H.feed("A")
  H.wait(function()
    return s:counts().accepted == 2
  end, 5000, "every hunk accepted")
  H.feed("q")
  H.wait(function()
    return af.last_result ~= nil
  end, 10000, "the command's result")
  H.eq(true, af.last_result.applied, "applied")
  H.truthy(
    (af.last_message or ""):find("^applied 2 of 2 hunks to 2 files %(calc.py: 1 of 1, test_calc.py: 1 of 1%)")
      or (af.last_message or ""):find("^applied 2 of 2 hunks to 2 files %(test_calc.py: 1 of 1, calc.py: 1 of 1%)"),
    "message: " .. tostring(af.last_message)
  )
  local nb = vim.fn.bufnr(root .. "/test_calc.py")
  H.truthy(nb ~= -1, "a buffer for the new file")
  H.eq({ "from calc import add", "", "assert add(1, 2) == 3" }, vim.api.nvim_buf_get_lines(nb, 0, -1, false), "new buffer")
  H.eq(0, vim.fn.filereadable(root .. "/test_calc.py"), "new file not on disk")
  H.truthy(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"):find("return a + b", 1, true), "calc.py fixed")
  H.eq(H.CALC, H.read_file(root .. "/calc.py"), "calc.py on disk")
end)
