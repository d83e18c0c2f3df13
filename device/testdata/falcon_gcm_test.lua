-- falcon_gcm_test.lua: run by device/dissector_keylog_test.go inside
-- tshark (the Lua 5.2 the dissector runs in):
--
--   tshark -X lua_script:falcon_gcm_test.lua -X lua_script1:GCM.lua -X lua_script1:VECTORS -r EMPTY.pcap
--
-- VECTORS has one AES-GCM vector a line, "key iv aad plaintext ciphertext
-- tag" in hex ("-" for empty), or "aes key plaintext ciphertext" for one
-- block of AES. Each GCM vector is sealed and opened, and opened again
-- with its tag, ciphertext and additional data flipped in turn (each must
-- fail). It prints "falcon_gcm: N vectors passed" or a "falcon_gcm FAIL"
-- line per failure.
local gcm_path, vectors = ...
local gcm = dofile(gcm_path)
local h, x = gcm.from_hex, gcm.to_hex
local function unhex(s) if s == "-" then return "" end return h(s) end
local function flip(s, i) return s:sub(1, i - 1) .. string.char(bit32.bxor(s:byte(i), 1)) .. s:sub(i + 1) end

local n, fails = 0, 0
local function fail(line, why)
  fails = fails + 1
  print("falcon_gcm FAIL line " .. line .. ": " .. why)
end

local line = 0
for l in io.lines(vectors) do
  line = line + 1
  local w = {}
  for f in l:gmatch("%S+") do w[#w + 1] = f end
  if w[1] == "aes" then
    local k = gcm.new(h(w[2]))
    local got = x(gcm.encrypt_block(k, h(w[3])))
    if got ~= w[4] then fail(line, "AES " .. got .. ", want " .. w[4]) end
    n = n + 1
  elseif #w == 6 then
    local key, iv, aad, p, c, t = h(w[1]), h(w[2]), unhex(w[3]), unhex(w[4]), unhex(w[5]), h(w[6])
    local k = gcm.new(key)
    local gc, gt = k:seal(iv, aad, p)
    if gc ~= c or gt ~= t then fail(line, "seal " .. x(gc) .. " " .. x(gt)) end
    if k:open(iv, aad, c, t) ~= p then fail(line, "open does not return the plaintext") end
    if k:open(iv, aad, c, flip(t, 16)) ~= nil then fail(line, "opens with a flipped tag") end
    if #c > 0 and k:open(iv, aad, flip(c, #c), t) ~= nil then fail(line, "opens with a flipped ciphertext") end
    if #aad > 0 and k:open(iv, flip(aad, 1), c, t) ~= nil then fail(line, "opens with flipped additional data") end
    if k:open(flip(iv, 12), aad, c, t) ~= nil then fail(line, "opens with a flipped IV") end
    n = n + 1
  elseif #w > 0 then
    fail(line, "unparsed vector")
  end
end
if gcm.new(string.rep("k", 24)) ~= nil then fail(0, "accepts a 24-byte key (not used by falconnic)") end
if fails == 0 then print("falcon_gcm: " .. n .. " vectors passed") end
