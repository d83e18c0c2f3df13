-- falcon_gcm.lua: AES (FIPS-197) and AES-GCM (NIST SP 800-38D) in pure
-- Lua 5.2, for falcon.lua to open the PSP datagrams and CM envelopes of a
-- capture with the keys of a key log. Wireshark 4.0 gives Lua scripts no
-- cipher, so this file is the decryption; it only decrypts (GCM's CTR
-- mode needs the block cipher's encryption direction only) and verifies
-- tags. It is written for clarity and capture-sized work, not speed, and
-- makes no claim to be constant-time: never use it to protect anything.
--
--   local gcm = dofile("falcon_gcm.lua")
--   local k = gcm.new(key)              -- key: a 16- or 32-byte string; nil, err if not
--   local p = k:open(iv, aad, c, tag)   -- 12-byte IV; plaintext, or nil if the tag fails
--   local c, tag = k:seal(iv, aad, p)   -- the same in the other direction (tests)
--   gcm.encrypt_block(k, block)         -- AES of one 16-byte string (tests)
--
-- Strings are Lua byte strings; bytes and 32-bit words are Lua numbers handled with
-- bit32 (Lua 5.2's standard library).

local band, bor, bxor = bit32.band, bit32.bor, bit32.bxor
local lshift, rshift = bit32.lshift, bit32.rshift
local sbyte, schar, concat = string.byte, string.char, table.concat

local M = {}

-- FIPS-197 §4.2: multiplication by x in GF(2^8) modulo x^8+x^4+x^3+x+1.
local function xtime(a)
  a = a * 2
  if a >= 256 then a = bxor(a, 0x11b) end
  return a
end

-- §5.1.1: the S-box is the multiplicative inverse in GF(2^8) (0 for 0)
-- followed by the affine transformation b ^ rot(b,1..4) ^ 0x63. The
-- inverses come from the powers of the generator 3.
local SBOX = {}
do
  local exp, log = {}, {}
  local p = 1
  for i = 0, 254 do
    exp[i], log[p] = p, i
    p = bxor(p, xtime(p)) -- p * 3
  end
  local function rotl8(b, n) return band(bor(lshift(b, n), rshift(b, 8 - n)), 0xff) end
  for x = 0, 255 do
    local inv = 0
    if x ~= 0 then inv = exp[(255 - log[x]) % 255] end
    SBOX[x] = bxor(inv, rotl8(inv, 1), rotl8(inv, 2), rotl8(inv, 3), rotl8(inv, 4), 0x63)
  end
end
M.SBOX = SBOX

-- Round tables (§5.1.1-5.1.3 combined): one round's output byte is the
-- xor of four S-box values of the ShiftRows-moved input bytes, each
-- multiplied by MixColumns' coefficient for its row (1, 2 or 3), and of
-- the round key's byte. S2[a] = 2·S[a], S3[a] = 3·S[a].
local S1, S2, S3 = SBOX, {}, {}
for a = 0, 255 do
  S2[a] = xtime(SBOX[a])
  S3[a] = bxor(S2[a], SBOX[a])
end

local function word(s, i) -- big-endian word at 1-based index i of string s
  local a, b, c, d = sbyte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- §5.2 KeyExpansion: Nk key words, Nr = Nk + 6 rounds, 4(Nr+1) round-key
-- words, Rcon[i] = x^(i-1); kept as bytes, rk[0..16(Nr+1)-1].
local function expand(key)
  local nk = #key / 4
  local nr = nk + 6
  local w = {} -- w[4i + j]: byte j of word i
  for i = 0, #key - 1 do w[i] = sbyte(key, i + 1) end
  local rcon = 1
  for i = nk, 4 * (nr + 1) - 1 do
    local t0, t1, t2, t3 = w[4 * i - 4], w[4 * i - 3], w[4 * i - 2], w[4 * i - 1]
    if i % nk == 0 then -- SubWord(RotWord(t)) xor Rcon
      t0, t1, t2, t3 = bxor(SBOX[t1], rcon), SBOX[t2], SBOX[t3], SBOX[t0]
      rcon = xtime(rcon)
    elseif nk > 6 and i % nk == 4 then
      t0, t1, t2, t3 = SBOX[t0], SBOX[t1], SBOX[t2], SBOX[t3]
    end
    local o = 4 * (i - nk)
    w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3] = bxor(w[o], t0), bxor(w[o + 1], t1), bxor(w[o + 2], t2), bxor(w[o + 3], t3)
  end
  return w, nr
end

-- §5.1 Cipher on the 16 input bytes (column by column: s0..s3 the first
-- column); returns the 16 output bytes.
local function cipher(k, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15)
  local w, nr = k.w, k.nr
  s0, s1, s2, s3 = bxor(s0, w[0]), bxor(s1, w[1]), bxor(s2, w[2]), bxor(s3, w[3])
  s4, s5, s6, s7 = bxor(s4, w[4]), bxor(s5, w[5]), bxor(s6, w[6]), bxor(s7, w[7])
  s8, s9, s10, s11 = bxor(s8, w[8]), bxor(s9, w[9]), bxor(s10, w[10]), bxor(s11, w[11])
  s12, s13, s14, s15 = bxor(s12, w[12]), bxor(s13, w[13]), bxor(s14, w[14]), bxor(s15, w[15])
  for r = 1, nr - 1 do
    local o = 16 * r
    -- Column c takes row j from column c + j (ShiftRows), then mixes.
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15 =
      bxor(S2[s0], S3[s5], S1[s10], S1[s15], w[o]),
      bxor(S1[s0], S2[s5], S3[s10], S1[s15], w[o + 1]),
      bxor(S1[s0], S1[s5], S2[s10], S3[s15], w[o + 2]),
      bxor(S3[s0], S1[s5], S1[s10], S2[s15], w[o + 3]),
      bxor(S2[s4], S3[s9], S1[s14], S1[s3], w[o + 4]),
      bxor(S1[s4], S2[s9], S3[s14], S1[s3], w[o + 5]),
      bxor(S1[s4], S1[s9], S2[s14], S3[s3], w[o + 6]),
      bxor(S3[s4], S1[s9], S1[s14], S2[s3], w[o + 7]),
      bxor(S2[s8], S3[s13], S1[s2], S1[s7], w[o + 8]),
      bxor(S1[s8], S2[s13], S3[s2], S1[s7], w[o + 9]),
      bxor(S1[s8], S1[s13], S2[s2], S3[s7], w[o + 10]),
      bxor(S3[s8], S1[s13], S1[s2], S2[s7], w[o + 11]),
      bxor(S2[s12], S3[s1], S1[s6], S1[s11], w[o + 12]),
      bxor(S1[s12], S2[s1], S3[s6], S1[s11], w[o + 13]),
      bxor(S1[s12], S1[s1], S2[s6], S3[s11], w[o + 14]),
      bxor(S3[s12], S1[s1], S1[s6], S2[s11], w[o + 15])
  end
  local o = 16 * nr -- the last round: no MixColumns
  return bxor(S1[s0], w[o]), bxor(S1[s5], w[o + 1]), bxor(S1[s10], w[o + 2]), bxor(S1[s15], w[o + 3]),
    bxor(S1[s4], w[o + 4]), bxor(S1[s9], w[o + 5]), bxor(S1[s14], w[o + 6]), bxor(S1[s3], w[o + 7]),
    bxor(S1[s8], w[o + 8]), bxor(S1[s13], w[o + 9]), bxor(S1[s2], w[o + 10]), bxor(S1[s7], w[o + 11]),
    bxor(S1[s12], w[o + 12]), bxor(S1[s1], w[o + 13]), bxor(S1[s6], w[o + 14]), bxor(S1[s11], w[o + 15])
end

-- cipher_words is cipher on and to four big-endian words.
local function cipher_words(k, a, b, c, d)
  local function bytes(x) return rshift(x, 24), band(rshift(x, 16), 0xff), band(rshift(x, 8), 0xff), band(x, 0xff) end
  local a0, a1, a2, a3 = bytes(a)
  local b0, b1, b2, b3 = bytes(b)
  local c0, c1, c2, c3 = bytes(c)
  local d0, d1, d2, d3 = bytes(d)
  local o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14, o15 =
    cipher(k, a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3)
  return ((o0 * 256 + o1) * 256 + o2) * 256 + o3, ((o4 * 256 + o5) * 256 + o6) * 256 + o7,
    ((o8 * 256 + o9) * 256 + o10) * 256 + o11, ((o12 * 256 + o13) * 256 + o14) * 256 + o15
end

local function wbytes(a, b, c, d) -- four words as a 16-byte string
  local t = {}
  for i, x in ipairs({ a, b, c, d }) do
    t[i] = schar(rshift(x, 24), band(rshift(x, 16), 0xff), band(rshift(x, 8), 0xff), band(x, 0xff))
  end
  return concat(t)
end

-- GHASH (SP 800-38D §6.3-6.4). The product X·H of Algorithm 1 is the xor,
-- over the bits x_i of X set (x_0 the leftmost), of V_i, where V_0 = H and
-- V_{i+1} = V_i >> 1, xored with R = 0xe1 || 0^120 when V_i's rightmost
-- bit was set. The V_i depend on H alone, so they are summed once per key
-- into a table per byte of X: tab[j][(p*256 + n)] is word j (1..4) of the
-- xor of V_{8p+b} over the bits b of n (bit 7 of n is x_{8p}).
local function ghash_table(h0, h1, h2, h3)
  local v0, v1, v2, v3 = {}, {}, {}, {}
  for i = 0, 127 do
    v0[i], v1[i], v2[i], v3[i] = h0, h1, h2, h3
    local lsb = band(h3, 1)
    h3 = bor(rshift(h3, 1), lshift(band(h2, 1), 31))
    h2 = bor(rshift(h2, 1), lshift(band(h1, 1), 31))
    h1 = bor(rshift(h1, 1), lshift(band(h0, 1), 31))
    h0 = rshift(h0, 1)
    if lsb == 1 then h0 = bxor(h0, 0xe1000000) end
  end
  local t0, t1, t2, t3 = {}, {}, {}, {}
  for p = 0, 15 do
    local o = p * 256
    t0[o], t1[o], t2[o], t3[o] = 0, 0, 0, 0
    for n = 1, 255 do
      -- n = its highest set bit (bit 7 - b, x_{8p+b}) plus the rest, done
      local b, hi = 0, 128
      while n < hi do b, hi = b + 1, hi / 2 end
      local rest, i = o + n - hi, 8 * p + b
      t0[o + n], t1[o + n] = bxor(t0[rest], v0[i]), bxor(t1[rest], v1[i])
      t2[o + n], t3[o + n] = bxor(t2[rest], v2[i]), bxor(t3[rest], v3[i])
    end
  end
  return { t0, t1, t2, t3 }
end

-- mul returns X·H for X in 16 bytes.
local function mul(tab, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15)
  x1, x2, x3, x4, x5, x6, x7 = x1 + 256, x2 + 512, x3 + 768, x4 + 1024, x5 + 1280, x6 + 1536, x7 + 1792
  x8, x9, x10, x11, x12, x13, x14, x15 = x8 + 2048, x9 + 2304, x10 + 2560, x11 + 2816, x12 + 3072, x13 + 3328, x14 + 3584,
    x15 + 3840
  local r = {}
  for j = 1, 4 do
    local t = tab[j]
    r[j] = bxor(t[x0], t[x1], t[x2], t[x3], t[x4], t[x5], t[x6], t[x7], t[x8], t[x9], t[x10], t[x11], t[x12], t[x13],
      t[x14], t[x15])
  end
  return r[1], r[2], r[3], r[4]
end

-- mul_words is mul of X = the four words a..d xored with the 16 bytes b1..b16.
local function mul_words(tab, a, b, c, d, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16)
  a = bxor(a, ((b1 * 256 + b2) * 256 + b3) * 256 + b4)
  b = bxor(b, ((b5 * 256 + b6) * 256 + b7) * 256 + b8)
  c = bxor(c, ((b9 * 256 + b10) * 256 + b11) * 256 + b12)
  d = bxor(d, ((b13 * 256 + b14) * 256 + b15) * 256 + b16)
  return mul(tab, rshift(a, 24), band(rshift(a, 16), 0xff), band(rshift(a, 8), 0xff), band(a, 0xff),
    rshift(b, 24), band(rshift(b, 16), 0xff), band(rshift(b, 8), 0xff), band(b, 0xff),
    rshift(c, 24), band(rshift(c, 16), 0xff), band(rshift(c, 8), 0xff), band(c, 0xff),
    rshift(d, 24), band(rshift(d, 16), 0xff), band(rshift(d, 8), 0xff), band(d, 0xff))
end

-- ghash_update folds string s, zero-padded to whole blocks, into Y.
local function ghash_update(tab, y, s)
  local n = #s
  local y0, y1, y2, y3 = y[1], y[2], y[3], y[4]
  local i = 1
  while i + 15 <= n do
    y0, y1, y2, y3 = mul_words(tab, y0, y1, y2, y3, sbyte(s, i, i + 15))
    i = i + 16
  end
  if i <= n then
    y0, y1, y2, y3 = mul_words(tab, y0, y1, y2, y3, sbyte(s:sub(i) .. string.rep("\0", 16 - (n - i + 1)), 1, 16))
  end
  y[1], y[2], y[3], y[4] = y0, y1, y2, y3
end

local Key = {}
Key.__index = Key

-- new returns the GCM context of an AES-128 or AES-256 key (a string).
function M.new(key)
  if type(key) ~= "string" or (#key ~= 16 and #key ~= 32) then
    return nil, "AES key must be 16 or 32 bytes"
  end
  local k = setmetatable({}, Key)
  k.w, k.nr = expand(key)
  k.htab = nil -- built on first use
  return k
end

-- encrypt_block returns AES_K of one 16-byte string.
function M.encrypt_block(k, blk)
  return schar(cipher(k, sbyte(blk, 1, 16)))
end

function Key:tab()
  if self.htab == nil then self.htab = ghash_table(cipher_words(self, 0, 0, 0, 0)) end
  return self.htab
end

-- gctr (§6.5) xors s with the key stream from counter block
-- iv || (ctr, ctr+1, ...) (inc32 wraps the last word).
local function gctr(k, n0, n1, n2, ctr, s)
  local function bytes(x) return rshift(x, 24), band(rshift(x, 16), 0xff), band(rshift(x, 8), 0xff), band(x, 0xff) end
  local a0, a1, a2, a3 = bytes(n0)
  local b0, b1, b2, b3 = bytes(n1)
  local c0, c1, c2, c3 = bytes(n2)
  local out = {}
  local n = #s
  local i, j = 1, 1
  while i <= n do
    local d3 = ctr % 256
    local d2 = (ctr - d3) / 256 % 256
    local d1 = (ctr - d3 - d2 * 256) / 65536 % 256
    local d0 = (ctr - d3 - d2 * 256 - d1 * 65536) / 16777216
    ctr = (ctr + 1) % 4294967296
    local k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12, k13, k14, k15 =
      cipher(k, a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3)
    if i + 15 <= n then
      local p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15 = sbyte(s, i, i + 15)
      out[j] = schar(bxor(k0, p0), bxor(k1, p1), bxor(k2, p2), bxor(k3, p3), bxor(k4, p4), bxor(k5, p5), bxor(k6, p6),
        bxor(k7, p7), bxor(k8, p8), bxor(k9, p9), bxor(k10, p10), bxor(k11, p11), bxor(k12, p12), bxor(k13, p13),
        bxor(k14, p14), bxor(k15, p15))
    else -- the last, partial block
      local ks = { k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12, k13, k14, k15 }
      local t = {}
      for q = 1, n - i + 1 do t[q] = schar(bxor(sbyte(s, i + q - 1), ks[q])) end
      out[j] = concat(t)
    end
    i, j = i + 16, j + 1
  end
  return concat(out)
end

-- tag computes T (§7.1 steps 5-6) over aad and ciphertext c.
local function tag(k, n0, n1, n2, aad, c)
  local tab = k:tab()
  local y = { 0, 0, 0, 0 }
  ghash_update(tab, y, aad)
  ghash_update(tab, y, c)
  -- The lengths block: len(A) and len(C) in bits, 64 bits each (both
  -- under 2^32 here: captures hold at most 65535 bytes a packet).
  local la, lc = #aad * 8, #c * 8
  y[1], y[2], y[3], y[4] = mul_words(tab, y[1], y[2], y[3], y[4], 0, 0, 0, 0,
    rshift(la, 24), band(rshift(la, 16), 0xff), band(rshift(la, 8), 0xff), band(la, 0xff), 0, 0, 0, 0,
    rshift(lc, 24), band(rshift(lc, 16), 0xff), band(rshift(lc, 8), 0xff), band(lc, 0xff))
  local e0, e1, e2, e3 = cipher_words(k, n0, n1, n2, 1) -- E_K(J0)
  return wbytes(bxor(e0, y[1]), bxor(e1, y[2]), bxor(e2, y[3]), bxor(e3, y[4]))
end

local function nonce(iv)
  if type(iv) ~= "string" or #iv ~= 12 then return nil end
  return word(iv, 1), word(iv, 5), word(iv, 9)
end

-- open is GCM-AD_K (§7.2) with a 96-bit IV and a 128-bit tag: the
-- plaintext of ciphertext c, or nil when the tag does not verify.
function Key:open(iv, aad, c, t)
  local n0, n1, n2 = nonce(iv)
  if n0 == nil or type(t) ~= "string" or #t ~= 16 then return nil end
  local want = tag(self, n0, n1, n2, aad, c)
  local diff = 0
  for i = 1, 16 do diff = bor(diff, bxor(sbyte(want, i), sbyte(t, i))) end
  if diff ~= 0 then return nil end
  return gctr(self, n0, n1, n2, 2, c)
end

-- seal is GCM-AE_K (§7.1): ciphertext and tag.
function Key:seal(iv, aad, p)
  local n0, n1, n2 = nonce(iv)
  if n0 == nil then return nil end
  local c = gctr(self, n0, n1, n2, 2, p)
  return c, tag(self, n0, n1, n2, aad, c)
end

-- Hex helpers for key logs and tests.
function M.from_hex(h)
  if type(h) ~= "string" or #h % 2 ~= 0 or h:find("[^0-9a-fA-F]") then return nil end
  return (h:gsub("..", function(x) return schar(tonumber(x, 16)) end))
end

function M.to_hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", sbyte(c)) end))
end

return M
