-- wrk script for bench/load.sh: a realistic traffic mix, or pure
-- pass-through. Arguments after `--`: mixed | pass | robots, then "close"
-- for a new connection per request.
--
-- Every request carries the head a real client sends: the browsers' 10 to
-- 16 headers (Accept, Accept-Language, Accept-Encoding, Cookie, Referer,
-- the sec-ch-ua client hints, Sec-Fetch-*, ...; 700 to 1,000 bytes), the
-- crawlers' shorter ones. Five browser profiles (Chrome and Edge on
-- Windows, Firefox on Linux, Safari on iPhone, Chrome on Android) take
-- turns.
--
-- mixed, 20 requests in turn: 14 human page views (70 %), 3 robot page
-- views (15 %), 1 robot action URL (5 %, 403), 1 www address (5 %, 301),
-- 1 robots.txt (5 %).
-- pass: human page views only, the five profiles in turn.
-- robots: robot page views only (the three crawlers, 30 articles each).

local COOKIE = "PHPSESSID=q3k9v1b6m2s8d0f4h7j5l2n9p1; _ga=GA1.1.1849302755.1733050000; "
   .. "_ga_X1Y2Z3=GS1.1.1733050000.3.1.1733051234.0.0.0; cookie_consent=accepted; "
   .. "lang=en; cart=0; recently_viewed=article-12%2Carticle-7%2Carticle-3"

local BROWSERS = {
   { -- Chrome 131, Windows
      ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
      ["Accept-Language"] = "en-US,en;q=0.9,de;q=0.8",
      ["Accept-Encoding"] = "gzip, deflate, br, zstd",
      ["sec-ch-ua"] = "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"",
      ["sec-ch-ua-mobile"] = "?0",
      ["sec-ch-ua-platform"] = "\"Windows\"",
      ["Upgrade-Insecure-Requests"] = "1",
      ["Sec-Fetch-Site"] = "same-origin",
      ["Sec-Fetch-Mode"] = "navigate",
      ["Sec-Fetch-User"] = "?1",
      ["Sec-Fetch-Dest"] = "document",
      ["Priority"] = "u=0, i",
   },
   { -- Firefox 133, Linux
      ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
      ["Accept-Language"] = "en-US,en;q=0.5",
      ["Accept-Encoding"] = "gzip, deflate, br, zstd",
      ["Upgrade-Insecure-Requests"] = "1",
      ["Sec-Fetch-Dest"] = "document",
      ["Sec-Fetch-Mode"] = "navigate",
      ["Sec-Fetch-Site"] = "same-origin",
      ["Sec-Fetch-User"] = "?1",
      ["Priority"] = "u=0, i",
      ["TE"] = "trailers",
   },
   { -- Safari 18, iPhone
      ["User-Agent"] = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
      ["Accept-Language"] = "en-GB,en;q=0.9",
      ["Accept-Encoding"] = "gzip, deflate, br",
      ["Sec-Fetch-Site"] = "same-origin",
      ["Sec-Fetch-Mode"] = "navigate",
      ["Sec-Fetch-Dest"] = "document",
      ["Priority"] = "u=0, i",
   },
   { -- Edge 131, Windows
      ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
      ["Accept-Language"] = "de-DE,de;q=0.9,en;q=0.8,en-GB;q=0.7,en-US;q=0.6",
      ["Accept-Encoding"] = "gzip, deflate, br, zstd",
      ["sec-ch-ua"] = "\"Microsoft Edge\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"",
      ["sec-ch-ua-mobile"] = "?0",
      ["sec-ch-ua-platform"] = "\"Windows\"",
      ["Upgrade-Insecure-Requests"] = "1",
      ["Sec-Fetch-Site"] = "same-origin",
      ["Sec-Fetch-Mode"] = "navigate",
      ["Sec-Fetch-User"] = "?1",
      ["Sec-Fetch-Dest"] = "document",
   },
   { -- Chrome 131, Android
      ["User-Agent"] = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
      ["Accept-Language"] = "en-IN,en-GB;q=0.9,en-US;q=0.8,en;q=0.7,hi;q=0.6",
      ["Accept-Encoding"] = "gzip, deflate, br, zstd",
      ["sec-ch-ua"] = "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"",
      ["sec-ch-ua-mobile"] = "?1",
      ["sec-ch-ua-platform"] = "\"Android\"",
      ["Upgrade-Insecure-Requests"] = "1",
      ["Sec-Fetch-Site"] = "same-origin",
      ["Sec-Fetch-Mode"] = "navigate",
      ["Sec-Fetch-User"] = "?1",
      ["Sec-Fetch-Dest"] = "document",
   },
}

local CRAWLERS = {
   {
      ["User-Agent"] = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
      ["Accept-Encoding"] = "gzip, deflate, br",
      ["From"] = "googlebot(at)googlebot.com",
   },
   {
      ["User-Agent"] = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/131.0.0.0 Safari/537.36",
      ["Accept"] = "*/*",
      ["Accept-Encoding"] = "gzip, deflate",
   },
   {
      ["User-Agent"] = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
      ["Accept-Encoding"] = "gzip, br",
   },
}

local reqs = {}
local idx = 0

-- A second argument "close": every request asks for its connection to be
-- closed after it (a TLS handshake per request over https).
local close = false

local function get(path, profile, host, referer)
   local headers = { ["Host"] = host or "example.com" }
   if close then headers["Connection"] = "close" end
   for k, v in pairs(profile) do headers[k] = v end
   if referer then
      headers["Referer"] = "https://example.com" .. referer
      headers["Cookie"] = COOKIE
   end
   return wrk.format("GET", path, headers)
end

local function browser(i) return BROWSERS[(i - 1) % #BROWSERS + 1] end
local function crawler(i) return CRAWLERS[(i - 1) % #CRAWLERS + 1] end

function init(args)
   local mode = args[1] or "mixed"
   close = args[2] == "close"
   if mode == "pass" then
      for i = 1, #BROWSERS do
         reqs[i] = get("/article/" .. i .. "?ref=home", browser(i), nil, "/")
      end
   elseif mode == "robots" then
      for i = 1, 90 do
         reqs[i] = get("/article/" .. ((i - 1) % 30 + 1), crawler(i))
      end
   else
      for i = 1, 14 do
         reqs[#reqs + 1] = get("/article/" .. i .. "?ref=home", browser(i), nil, "/article/" .. (i + 1))
      end
      for i = 1, 3 do reqs[#reqs + 1] = get("/article/" .. i, crawler(i)) end
      reqs[#reqs + 1] = get("/article/1?do=vote", crawler(1))
      reqs[#reqs + 1] = get("/article/2", browser(2), "www.example.com", "/")
      reqs[#reqs + 1] = get("/robots.txt", crawler(2))
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
