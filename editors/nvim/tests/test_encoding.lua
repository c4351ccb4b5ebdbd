-- Position conversions used for diagnostics and proposal hunks (UTF-8 bytes
-- to and from UTF-16 / UTF-32 / UTF-8 units), on text with a 2-byte letter
-- and a 4-byte emoji (two UTF-16 units).
local H = dofile(os.getenv("AGENTFIX_TEST_DIR") .. "/helpers.lua")

H.run("position encodings", function()
  local compat = require("agentfix.compat")
  local line = "aé😀b" -- bytes: a(1) é(2) 😀(4) b(1)
  local cases = {
    -- byte offset, utf-8, utf-16, utf-32
    { 0, 0, 0, 0 },
    { 1, 1, 1, 1 },
    { 3, 3, 2, 2 },
    { 7, 7, 4, 3 },
    { 8, 8, 5, 4 },
  }
  for _, c in ipairs(cases) do
    H.eq(c[2], compat.byte_to_units(line, c[1], "utf-8"), "utf-8 units of byte " .. c[1])
    H.eq(c[3], compat.byte_to_units(line, c[1], "utf-16"), "utf-16 units of byte " .. c[1])
    H.eq(c[4], compat.byte_to_units(line, c[1], "utf-32"), "utf-32 units of byte " .. c[1])
    H.eq(c[1], compat.units_to_byte(line, c[3], "utf-16"), "byte of utf-16 unit " .. c[3])
    H.eq(c[1], compat.units_to_byte(line, c[4], "utf-32"), "byte of utf-32 unit " .. c[4])
  end
  -- Past the end clamps to the line's length.
  H.eq(8, compat.units_to_byte(line, 99, "utf-16"), "clamped")
  H.eq(5, compat.byte_to_units(line, 99, "utf-16"), "clamped units")
end)
