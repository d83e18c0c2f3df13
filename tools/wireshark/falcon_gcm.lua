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
-- Strings are Lua byte strings; 32-bit words are Lua numbers handled with
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

-- Round tables (§5.1.1-5.1.3 combined): TE0[a] is MixColumns' column
-- (2,1,1,3)·S[a] as a big-endian word, row 0 in the top byte; TE1..TE3
-- are the same rotated, for the bytes of rows 1..3 that ShiftRows brings
-- into the column.
local TE0, TE1, TE2, TE3 = {}, {}, {}, {}
for a = 0, 255 do
  local s = SBOX[a]
  local s2 = xtime(s)
  local s3 = bxor(s2, s)
  TE0[a] = bor(lshift(s2, 24), lshift(s, 16), lshift(s, 8), s3)
  TE1[a] = bor(lshift(s3, 24), lshift(s2, 16), lshift(s, 8), s)
  TE2[a] = bor(lshift(s, 24), lshift(s3, 16), lshift(s2, 8), s)
  TE3[a] = bor(lshift(s, 24), lshift(s, 16), lshift(s3, 8), s2)
end

local function word(s, i) -- big-endian word at 1-based index i of string s
  local a, b, c, d = sbyte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function subword(w)
  return bor(lshift(SBOX[rshift(w, 24)], 24), lshift(SBOX[band(rshift(w, 16), 0xff)], 16),
    lshift(SBOX[band(rshift(w, 8), 0xff)], 8), SBOX[band(w, 0xff)])
end

-- §5.2 KeyExpansion: Nk key words, Nr = Nk + 6 rounds, 4(Nr+1) round-key
-- words; Rcon[i] = x^(i-1) in the top byte.
local function expand(key)
  local nk = #key / 4
  local w = {}
  for i = 0, nk - 1 do w[i] = word(key, 4 * i + 1) end
  local rcon = 1
  local nr = nk + 6
  for i = nk, 4 * (nr + 1) - 1 do
    local t = w[i - 1]
    if i % nk == 0 then
      t = bxor(subword(bor(band(lshift(t, 8), 0xffffffff), rshift(t, 24))), lshift(rcon, 24))
      rcon = xtime(rcon)
    elseif nk > 6 and i % nk == 4 then
      t = subword(t)
    end
    w[i] = bxor(w[i - nk], t)
  end
  return w, nr
end

-- §5.1 Cipher on four state words (columns); returns the four output words.
local function cipher(k, s0, s1, s2, s3)
  local w, nr = k.w, k.nr
  s0, s1, s2, s3 = bxor(s0, w[0]), bxor(s1, w[1]), bxor(s2, w[2]), bxor(s3, w[3])
  for r = 1, nr - 1 do
    local o = 4 * r
    s0, s1, s2, s3 =
      bxor(TE0[rshift(s0, 24)], TE1[band(rshift(s1, 16), 0xff)], TE2[band(rshift(s2, 8), 0xff)], TE3[band(s3, 0xff)], w[o]),
      bxor(TE0[rshift(s1, 24)], TE1[band(rshift(s2, 16), 0xff)], TE2[band(rshift(s3, 8), 0xff)], TE3[band(s0, 0xff)], w[o + 1]),
      bxor(TE0[rshift(s2, 24)], TE1[band(rshift(s3, 16), 0xff)], TE2[band(rshift(s0, 8), 0xff)], TE3[band(s1, 0xff)], w[o + 2]),
      bxor(TE0[rshift(s3, 24)], TE1[band(rshift(s0, 16), 0xff)], TE2[band(rshift(s1, 8), 0xff)], TE3[band(s2, 0xff)], w[o + 3])
  end
  local o = 4 * nr
  local function last(a, b, c, d, rk)
    return bxor(bor(lshift(SBOX[rshift(a, 24)], 24), lshift(SBOX[band(rshift(b, 16), 0xff)], 16),
      lshift(SBOX[band(rshift(c, 8), 0xff)], 8), SBOX[band(d, 0xff)]), rk)
  end
  return last(s0, s1, s2, s3, w[o]), last(s1, s2, s3, s0, w[o + 1]), last(s2, s3, s0, s1, w[o + 2]),
    last(s3, s0, s1, s2, w[o + 3])
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
-- into a table per 4-bit group of X: tab[(g*16 + n)*4 + j] is word j of
-- the xor of V_{4g+b} over the bits b of n (bit 3 of n is x_{4g}).
local function ghash_table(h0, h1, h2, h3)
  local v = {}
  for i = 0, 127 do
    v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3] = h0, h1, h2, h3
    local lsb = band(h3, 1)
    h3 = bor(rshift(h3, 1), lshift(band(h2, 1), 31))
    h2 = bor(rshift(h2, 1), lshift(band(h1, 1), 31))
    h1 = bor(rshift(h1, 1), lshift(band(h0, 1), 31))
    h0 = rshift(h0, 1)
    if lsb == 1 then h0 = bxor(h0, 0xe1000000) end
  end
  local tab = {}
  for g = 0, 31 do
    for n = 0, 15 do
      local a, b, c, d = 0, 0, 0, 0
      for bit = 0, 3 do
        if band(n, lshift(1, 3 - bit)) ~= 0 then
          local i = 4 * (4 * g + bit)
          a, b, c, d = bxor(a, v[i]), bxor(b, v[i + 1]), bxor(c, v[i + 2]), bxor(d, v[i + 3])
        end
      end
      local o = (g * 16 + n) * 4
      tab[o], tab[o + 1], tab[o + 2], tab[o + 3] = a, b, c, d
    end
  end
  return tab
end

-- mul returns X·H for X in four words.
local function mul(tab, x0, x1, x2, x3)
  local a, b, c, d = 0, 0, 0, 0
  for wi = 0, 3 do
    local x
    if wi == 0 then x = x0 elseif wi == 1 then x = x1 elseif wi == 2 then x = x2 else x = x3 end
    if x ~= 0 then
      local o = wi * 8 * 64 -- group (wi*8)'s entries
      for sh = 28, 0, -4 do
        local n = band(rshift(x, sh), 15)
        if n ~= 0 then
          local e = o + n * 4
          a, b, c, d = bxor(a, tab[e]), bxor(b, tab[e + 1]), bxor(c, tab[e + 2]), bxor(d, tab[e + 3])
        end
        o = o + 64
      end
    end
  end
  return a, b, c, d
end

-- ghash_update folds string s, zero-padded to whole blocks, into Y.
local function ghash_update(tab, y, s)
  local n = #s
  local y0, y1, y2, y3 = y[1], y[2], y[3], y[4]
  local i = 1
  while i + 15 <= n do
    local b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16 = sbyte(s, i, i + 15)
    y0, y1, y2, y3 = mul(tab, bxor(y0, ((b1 * 256 + b2) * 256 + b3) * 256 + b4), bxor(y1, ((b5 * 256 + b6) * 256 + b7) * 256 + b8),
      bxor(y2, ((b9 * 256 + b10) * 256 + b11) * 256 + b12), bxor(y3, ((b13 * 256 + b14) * 256 + b15) * 256 + b16))
    i = i + 16
  end
  if i <= n then
    local blk = s:sub(i) .. string.rep("\0", 16 - (n - i + 1))
    y0, y1, y2, y3 = mul(tab, bxor(y0, word(blk, 1)), bxor(y1, word(blk, 5)), bxor(y2, word(blk, 9)), bxor(y3, word(blk, 13)))
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
  return wbytes(cipher(k, word(blk, 1), word(blk, 5), word(blk, 9), word(blk, 13)))
end

function Key:tab()
  if self.htab == nil then self.htab = ghash_table(cipher(self, 0, 0, 0, 0)) end
  return self.htab
end

-- gctr (§6.5) xors s with the key stream from counter block
-- iv || (ctr, ctr+1, ...) (inc32 wraps the last word).
local function bytes4(w) -- a word's four bytes, top first
  return rshift(w, 24), band(rshift(w, 16), 0xff), band(rshift(w, 8), 0xff), band(w, 0xff)
end

local function gctr(k, n0, n1, n2, ctr, s)
  local out = {}
  local n = #s
  local i, j = 1, 1
  while i + 15 <= n do -- whole blocks: a word at a time
    local a, b, c, d = cipher(k, n0, n1, n2, ctr)
    ctr = (ctr + 1) % 4294967296
    local b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16 = sbyte(s, i, i + 15)
    a = bxor(a, ((b1 * 256 + b2) * 256 + b3) * 256 + b4)
    b = bxor(b, ((b5 * 256 + b6) * 256 + b7) * 256 + b8)
    c = bxor(c, ((b9 * 256 + b10) * 256 + b11) * 256 + b12)
    d = bxor(d, ((b13 * 256 + b14) * 256 + b15) * 256 + b16)
    local a1, a2, a3, a4 = bytes4(a)
    local c1, c2, c3, c4 = bytes4(c)
    out[j] = schar(a1, a2, a3, a4, bytes4(b)) .. schar(c1, c2, c3, c4, bytes4(d))
    i, j = i + 16, j + 1
  end
  if i <= n then -- the last, partial block
    local ks = wbytes(cipher(k, n0, n1, n2, ctr))
    local t = {}
    for q = 1, n - i + 1 do t[q] = schar(bxor(sbyte(s, i + q - 1), sbyte(ks, q))) end
    out[j] = concat(t)
  end
  return concat(out)
end

-- tag computes T (§7.1 steps 5-6) over aad and ciphertext c.
local function tag(k, n0, n1, n2, aad, c)
  local tab = k:tab()
  local y = { 0, 0, 0, 0 }
  ghash_update(tab, y, aad)
  ghash_update(tab, y, c)
  local la, lc = #aad * 8, #c * 8 -- bit lengths, each as a 64-bit word
  y[1], y[2], y[3], y[4] = mul(tab, bxor(y[1], math.floor(la / 4294967296)), bxor(y[2], la % 4294967296),
    bxor(y[3], math.floor(lc / 4294967296)), bxor(y[4], lc % 4294967296))
  local e0, e1, e2, e3 = cipher(k, n0, n1, n2, 1) -- E_K(J0)
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
