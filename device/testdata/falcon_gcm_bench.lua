-- falcon_gcm_bench.lua: what falcon_gcm.lua costs inside tshark's Lua, in
-- CPU time (os.clock) per datagram opened (tag checked, then decrypted):
--
--   tshark -X lua_script:device/testdata/falcon_gcm_bench.lua \
--          -X lua_script1:tools/wireshark/falcon_gcm.lua -r ANY.pcapng   # runs as it loads
local gcm = dofile((...))
for _, n in ipairs({ 64, 4096 }) do
  local k = gcm.new(string.rep("a", 16))
  local iv, aad, p = string.rep("b", 12), string.rep("c", 20), string.rep("x", n)
  local c, t = k:seal(iv, aad, p)
  local reps = math.floor(400000 / (n + 64))
  local t0 = os.clock()
  for _ = 1, reps do assert(k:open(iv, aad, c, t) == p) end
  local dt = os.clock() - t0
  print(string.format("open %d B: %.1f us/datagram CPU, %.2f MB/s (%d datagrams)", n, dt / reps * 1e6, n * reps / dt / 1e6, reps))
end
local t0 = os.clock()
for i = 1, 100 do gcm.new(string.rep(string.char(i), 16)):tab() end
print(string.format("new key and its GHASH table: %.0f us", (os.clock() - t0) / 100 * 1e6))
