-- wrk script for bench/load.sh: a realistic traffic mix, or pure
-- pass-through. Arguments after `--`: mixed | pass.
--
-- mixed, 20 requests in turn: 14 human page views (70 %), 3 robot page
-- views (15 %), 1 robot action URL (5 %, 403), 1 www address (5 %, 301),
-- 1 robots.txt (5 %).

local HUMAN = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
local BOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

local reqs = {}
local idx = 0

local function get(path, ua, host)
   return wrk.format("GET", path, { ["Host"] = host or "example.com", ["User-Agent"] = ua })
end

function init(args)
   local mode = args[1] or "mixed"
   if mode == "pass" then
      reqs[1] = get("/article/1?ref=home", HUMAN)
   else
      for i = 1, 14 do reqs[#reqs + 1] = get("/article/" .. i .. "?ref=home", HUMAN) end
      for i = 1, 3 do reqs[#reqs + 1] = get("/article/" .. i, BOT) end
      reqs[#reqs + 1] = get("/article/1?do=vote", BOT)
      reqs[#reqs + 1] = get("/article/2", HUMAN, "www.example.com")
      reqs[#reqs + 1] = get("/robots.txt", BOT)
   end
   idx = math.random(#reqs) - 1
end

function request()
   idx = idx % #reqs + 1
   return reqs[idx]
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d\n",
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
      e.connect + e.read + e.write + e.timeout))
end
