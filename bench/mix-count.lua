-- bench/mix.lua plus a count of response statuses (for the smoke mode:
-- the response callback costs wrk time, so the measured runs do without).
dofile("bench/mix.lua")

local threads = {}
counts = {}

function setup(thread)
   table.insert(threads, thread)
end

function response(status, headers, body)
   counts[status] = (counts[status] or 0) + 1
end

local plain_done = done
function done(summary, latency, requests)
   plain_done(summary, latency, requests)
   local total = {}
   for _, thread in ipairs(threads) do
      local c = thread:get("counts")
      for status, n in pairs(c) do total[status] = (total[status] or 0) + n end
   end
   for status, n in pairs(total) do
      io.write(string.format("STATUS %d %d\n", status, n))
   end
end
