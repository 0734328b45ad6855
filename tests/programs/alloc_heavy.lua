-- Deterministic allocation-heavy workload for runsel's programs test: tables, strings, big buffers; prints checksums.
local seed = 20240601
local function rand(n)  -- a 31-bit LCG, identical on every Lua 5.4
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n
end

local checksum = 0
local function mix(s)
  for i = 1, #s, 7 do checksum = (checksum * 31 + s:byte(i)) % 4294967296 end
end

-- Words, counted and grouped.
local letters = "abcdefghijklmnopqrstuvwxyz"
local words = {}
for i = 1, 40000 do
  local parts = {}
  for j = 1, 2 + rand(10) do
    local k = 1 + rand(26)
    parts[j] = letters:sub(k, k)
  end
  words[i] = table.concat(parts)
end
local counts, distinct = {}, {}
for _, w in ipairs(words) do
  if not counts[w] then distinct[#distinct + 1] = w end
  counts[w] = (counts[w] or 0) + 1
end
table.sort(distinct, function(a, b)
  if counts[a] ~= counts[b] then return counts[a] > counts[b] end
  return a < b
end)
local top = {}
for i = 1, 10 do top[i] = distinct[i] .. "=" .. counts[distinct[i]] end
print("distinct " .. #distinct .. " top " .. table.concat(top, " "))

-- Churn: many short-lived tables.
local total = 0
for round = 1, 40 do
  local t = {}
  for i = 1, 3000 do t[i] = {i, tostring(i * round), name = words[i]} end
  for i = 1, #t, 3 do total = total + #t[i][2] end
end
print("churn " .. total)

-- Strings grown by concatenation, and big buffers.
local pieces, text = {}, ""
for i = 1, 20000 do
  text = text .. words[i]:sub(1, 3)
  if #text > 1000 then pieces[#pieces + 1] = text; text = "" end
end
local joined = table.concat(pieces, "|")
mix(joined)
print("strings " .. #pieces .. " pieces, " .. #joined .. " chars")
local blobs, size = {}, 0
for i = 1, 20 do
  blobs[i] = string.rep(string.char(65 + i) .. "xyz", 50000 * i)
  size = size + #blobs[i]
  mix(blobs[i]:sub(1, 5000))
end
blobs = nil
collectgarbage()
print("blobs " .. size .. " bytes")

-- Sorting records.
local records = {}
for i = 1, 60000 do records[i] = {key = rand(1000000), word = words[1 + i % 5000]} end
table.sort(records, function(a, b)
  if a.word ~= b.word then return a.word < b.word end
  return a.key < b.key
end)
for i = 1, #records, 1000 do mix(records[i].word .. records[i].key) end
print("records first " .. records[1].word .. " last " .. records[#records].word)
print("checksum " .. checksum)
