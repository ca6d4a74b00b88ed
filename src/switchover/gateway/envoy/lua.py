"""The Lua HTTP filter the Envoy plane runs (https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/
http_filters/lua_filter): what Envoy cannot do with its own routing and access log, done in Envoy's worker so the
plane still scales with Envoy's replicas.

Request: the tenant's bucket, by the built-in gateway's rule (policy.tenant_hash / bucket_of: keyed blake2b, 8-byte
digest, person 'switchover-gw', key = the deployment's seed; the tenant is the tenant header, else the bearer token,
else 'anonymous'), written to dynamic metadata that the routes match on (RouteMatch.dynamic_metadata) and the access
log writes; a streamed generation that did not ask for usage gets `stream_options.include_usage` (as the built-in
gateway asks), so old's answer carries the server's own token count.
Response: streamed through `bodyChunks()` (never buffered): the time of the first event with text, and from a
bounded head and tail of the body the last `usage.completion_tokens` / `prompt_tokens` and `finish_reason`; the
usage-only event the plane asked for (the client did not) is dropped when it lies whole inside one chunk. A
malformed or unusual body leaves the fields unset (null in the row); nothing here can fail the request.
"""

from __future__ import annotations

NAMESPACE = "switchover"  # the dynamic-metadata namespace the routes match and the access log reads
LUA = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
LUA_PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute"
EDGE_BYTES = 4096  # head and tail of an answer kept for usage and finish_reason
FIRST_SCAN_BYTES = 65536  # bytes of one chunk searched for the first text
MAX_SCAN_BYTES = 1 << 20  # bytes of one answer searched for the first text, in all
MAX_INJECT_BYTES = 8 << 20  # request bodies above this are forwarded unread (no usage asked for)
CACHE_TENANTS = 10000  # bucket cache per Envoy worker, emptied when full

_SCRIPT = r"""
local bit = require("bit")
local ffi = require("ffi")
local LITTLE = ffi.abi("le")
local NS = "@NS@"
local SEED = "@SEED@"
local TENANT_HEADER = "@HEADER@"
local GENERATION = {["/v1/completions"] = true, ["/v1/chat/completions"] = true}
local EDGE, FIRST_SCAN, MAX_SCAN, MAX_INJECT, CACHE = @EDGE@, @FIRST@, @MAXSCAN@, @MAXINJECT@, @CACHE@

-- blake2b (RFC 7693), 8-byte digest, keyed, with a personalization: the built-in gateway's tenant hash
local IV = {0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
            0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL}
local SIGMA = {
  {0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}, {14,10,4,8,9,15,13,6,1,12,0,2,11,7,5,3},
  {11,8,12,0,5,2,15,13,10,14,3,6,7,1,9,4}, {7,9,3,1,13,12,11,14,2,6,5,10,4,0,15,8},
  {9,0,5,7,2,4,10,15,14,1,11,12,6,8,3,13}, {2,12,6,10,0,11,8,3,4,13,7,5,15,14,1,9},
  {12,5,1,15,14,13,4,10,0,7,6,3,9,2,8,11}, {13,11,7,14,12,1,3,9,5,0,15,4,8,6,2,10},
  {6,15,14,9,11,3,0,8,12,2,13,7,1,4,10,5}, {10,2,8,4,7,6,1,5,15,11,9,14,3,12,13,0},
  {0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}, {14,10,4,8,9,15,13,6,1,12,0,2,11,7,5,3}}
local bxor, ror, bnot = bit.bxor, bit.ror, bit.bnot

local function word(s, i)  -- 8 bytes of s from index i, little-endian
  local w = 0ULL
  for j = i + 7, i, -1 do w = bit.bor(bit.lshift(w, 8), s:byte(j) or 0) end
  return w
end

-- a top-level function, not a closure made per block: LuaJIT compiles the rounds (a closure per call would not be)
local function g(v, a, b, c, d, x, y)
  v[a] = v[a] + v[b] + x; v[d] = ror(bxor(v[d], v[a]), 32)
  v[c] = v[c] + v[d]; v[b] = ror(bxor(v[b], v[c]), 24)
  v[a] = v[a] + v[b] + y; v[d] = ror(bxor(v[d], v[a]), 16)
  v[c] = v[c] + v[d]; v[b] = ror(bxor(v[b], v[c]), 63)
end

local function compress(h, block, t, last)
  local v, m = {}, {}
  for i = 1, 8 do v[i] = h[i]; v[i + 8] = IV[i] end
  v[13] = bxor(v[13], t)
  if last then v[15] = bnot(v[15]) end
  if LITTLE then  -- the block's 16 little-endian words, read in place
    local words = ffi.cast("const uint64_t *", block)
    for i = 0, 15 do m[i] = words[i] end
  else
    for i = 0, 15 do m[i] = word(block, 1 + 8 * i) end
  end
  for r = 1, 12 do
    local s = SIGMA[r]
    g(v, 1, 5, 9, 13, m[s[1]], m[s[2]]); g(v, 2, 6, 10, 14, m[s[3]], m[s[4]])
    g(v, 3, 7, 11, 15, m[s[5]], m[s[6]]); g(v, 4, 8, 12, 16, m[s[7]], m[s[8]])
    g(v, 1, 6, 11, 16, m[s[9]], m[s[10]]); g(v, 2, 7, 12, 13, m[s[11]], m[s[12]])
    g(v, 3, 8, 9, 14, m[s[13]], m[s[14]]); g(v, 4, 5, 10, 15, m[s[15]], m[s[16]])
  end
  for i = 1, 8 do h[i] = bxor(h[i], v[i], v[i + 8]) end
end

local KEY = (SEED:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
local PERSON = "switchover-gw" .. string.rep("\0", 3)

local function tenant_digest(msg)  -- the 64-bit value of policy.tenant_hash's hex digest
  local h = {}
  for i = 1, 8 do h[i] = IV[i] end
  h[1] = bxor(h[1], 0x01010000ULL + bit.lshift(0ULL + #KEY, 8) + 8ULL)
  h[7] = bxor(h[7], word(PERSON, 1)); h[8] = bxor(h[8], word(PERSON, 9))
  local data = msg
  if #KEY > 0 then data = KEY .. string.rep("\0", 128 - #KEY) .. msg end
  local n, off = #data, 0
  while n - off > 128 do
    off = off + 128
    compress(h, data:sub(off - 127, off), 0ULL + off, false)
  end
  local tail = data:sub(off + 1)
  compress(h, tail .. string.rep("\0", 128 - #tail), 0ULL + n, true)
  return bit.bswap(h[1])
end

local cache, cached = {}, 0

local function bearer(value)
  if value and #value >= 7 and value:sub(1, 7):lower() == "bearer " then
    local token = value:sub(8):match("^%s*(.-)%s*$")
    return token ~= "" and token or nil
  end
  return (value ~= "" and value) or nil
end

local function tenant_of(headers)
  local key = headers:get(TENANT_HEADER)
  if key == nil or key == "" then key = bearer(headers:get("authorization")) end
  key = key or "anonymous"
  local got = cache[key]
  if got == nil then
    local d = tenant_digest(key)
    got = {bit.tohex(d, 16), tonumber(d % 10000ULL)}
    if cached >= CACHE then cache, cached = {}, 0 end
    cache[key] = got; cached = cached + 1
  end
  return got
end

-- the top level of a JSON object: is "stream" true, is "stream_options" there, where its brace is; nil: not one
local function top_level(s)
  local i = s:find("[^ \t\r\n]")
  if not i or s:sub(i, i) ~= "{" then return nil end
  local open, depth, stream, opts, pos = i, 0, false, false, i
  while true do
    local k = s:find('[{}%[%]"]', pos)
    if not k then return nil end
    local c = s:sub(k, k)
    if c == '"' then
      local j = k + 1
      while true do
        local q = s:find('["\\]', j)
        if not q then return nil end
        if s:sub(q, q) == "\\" then j = q + 2 else j = q; break end
      end
      local colon = s:find("^[ \t\r\n]*:", j + 1)
      if depth == 1 and colon then
        local name = s:sub(k + 1, j - 1)
        if name == "stream_options" then opts = true end
        if name == "stream" then stream = s:find("^[ \t\r\n]*true", colon + 1) ~= nil end
      end
      pos = j + 1
    else
      if c == "{" or c == "[" then depth = depth + 1 else depth = depth - 1 end
      pos = k + 1
      if depth == 0 then return stream, opts, open end
    end
  end
end

function envoy_on_request(h)
  local md = h:streamInfo():dynamicMetadata()
  local headers = h:headers()
  local t = tenant_of(headers)
  md:set(NS, "tenant_hash", t[1]); md:set(NS, "bucket", t[2])
  h:clearRouteCache()
  local path = (headers:get(":path") or ""):match("^[^?]*")
  if headers:get(":method") == "POST" and GENERATION[path] then
    local body = h:body()
    if body and body:length() <= MAX_INJECT then
      local s = body:getBytes(0, body:length())
      local ok, stream, opts, open = false, false, false, nil
      if s:find('"stream"', 1, true) then ok, stream, opts, open = pcall(top_level, s) end
      if ok and stream and not opts then
        body:setBytes(s:sub(1, open) .. '"stream_options":{"include_usage":true},' .. s:sub(open + 1))
        h:streamInfo():dynamicMetadata():set(NS, "asked_usage", true)  -- objects from before body() are stale
      end
    end
  end
  h:streamInfo():dynamicMetadata():set(NS, "t0", tonumber(h:timestampString(EnvoyTimestampResolution.MICROSECOND)))
end

local function last(text, pattern)
  local found
  for x in text:gmatch(pattern) do found = x end
  return found
end

local function count(text, key)
  local n = last(text, '[^\\]"' .. key .. '"%s*:%s*(%d+)')
  return n and #n <= 9 and tonumber(n) or nil
end

local function usage_only(ev)
  return ev:find('"usage"', 1, true) and ev:find('"choices"%s*:%s*%[%s*%]') and true or false
end

-- the chunk without the usage-only events that lie whole inside it (starting at an event boundary)
local function strip(s, at_boundary)
  local out, pos, changed = {}, 1, false
  while true do
    local e = s:find("\n\n", pos, true)
    if not e then break end
    local ev = s:sub(pos, e + 1)
    if (pos > 1 or at_boundary) and usage_only(ev) then changed = true else out[#out + 1] = ev end
    pos = e + 2
  end
  out[#out + 1] = s:sub(pos)
  return changed and table.concat(out) or nil
end

local function watch(h)
  local meta = h:streamInfo():dynamicMetadata():get(NS) or {}
  local headers = h:headers()
  local stream = (headers:get("content-type") or ""):find("text/event-stream", 1, true) ~= nil
  local dropping = meta["asked_usage"] and stream and headers:get("content-length") == nil
  local head, tail, scanned, first, at_boundary = "", "", 0, nil, true
  for chunk in h:bodyChunks() do
    local n = chunk:length()
    -- one copy of a small chunk (an SSE event or a few) serves every look below; a large one is read in parts
    local s = n <= 2 * EDGE and chunk:getBytes(0, n) or nil
    if #head < EDGE then
      head = head .. (s and s:sub(1, EDGE - #head) or chunk:getBytes(0, math.min(n, EDGE - #head)))
    end
    local cut = math.min(n, EDGE)
    tail = (tail .. (s and s:sub(-cut) or chunk:getBytes(n - cut, cut))):sub(-EDGE)
    if stream and first == nil and scanned < MAX_SCAN and n > 0 then
      local look = s or chunk:getBytes(0, math.min(n, FIRST_SCAN))
      scanned = scanned + #look
      if look:find('[^\\]"text"%s*:%s*"[^"]') or look:find('[^\\]"content"%s*:%s*"[^"]') then
        first = tonumber(h:timestampString(EnvoyTimestampResolution.MICROSECOND))
      end
    end
    if dropping and s and n > 0 then
      local kept = s:find('"usage"', 1, true) and strip(s, at_boundary)
      if kept then chunk:setBytes(kept) end
    end
    if n >= 2 then at_boundary = (s and s:sub(-2) or chunk:getBytes(n - 2, 2)) == "\n\n" end
  end
  local md = h:streamInfo():dynamicMetadata()
  local text = stream and tail or (#head < EDGE and head or tail)
  local done = count(text, "completion_tokens")
  if done then md:set(NS, "completion_tokens", done); md:set(NS, "usage", true) end
  local asked = count(text, "prompt_tokens")
  if asked then md:set(NS, "prompt_tokens", asked) end
  local finish = last(text, '[^\\]"finish_reason"%s*:%s*"([%w_%-]+)"')
  if finish == nil and not stream then finish = last(head, '[^\\]"finish_reason"%s*:%s*"([%w_%-]+)"') end
  if finish and #finish <= 40 then md:set(NS, "finish_reason", finish) end
  if first and meta["t0"] then md:set(NS, "ttft_ms", (first - meta["t0"]) / 1000) end
end

function envoy_on_response(h)
  local ok, err = pcall(watch, h)
  if not ok then h:logWarn("switchover: answer not read: " .. tostring(err)) end
end
"""


def script(seed: bytes, tenant_header: str) -> str:
    """The filter's Lua source for a deployment: its seed (hex) and tenant header are the only inputs."""
    values = {
        "@NS@": NAMESPACE,
        "@SEED@": seed.hex(),
        "@HEADER@": tenant_header.lower(),
        "@EDGE@": str(EDGE_BYTES),
        "@FIRST@": str(FIRST_SCAN_BYTES),
        "@MAXSCAN@": str(MAX_SCAN_BYTES),
        "@MAXINJECT@": str(MAX_INJECT_BYTES),
        "@CACHE@": str(CACHE_TENANTS),
    }
    text = _SCRIPT
    for key, value in values.items():
        text = text.replace(key, value)
    return text
