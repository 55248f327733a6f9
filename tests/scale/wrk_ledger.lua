-- wrk script for the replica rig: writes and reads alternate, through HAProxy, 2026-07-28 stateless.
-- Every write carries a write id and a host idempotency key of its own (PREFIX-thread-n), so the
-- ledger can be checked afterwards: each id executed once. wrk only measures; it does not read
-- the answers (non-2xx are counted), and it does not retry.
-- Environment: TOKEN (bearer), PREFIX (unique per run), NAMESPACE (default "ledger").
local token = os.getenv("TOKEN") or ""
local prefix = os.getenv("PREFIX") or "wrk"
local namespace = os.getenv("NAMESPACE") or "ledger"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

local n = 0
local envelope = '"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{},'
  .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"4"}'

local function call(tool, arguments, meta)
  local headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = "2026-07-28",
    ["Mcp-Method"] = "tools/call",
    ["Mcp-Name"] = tool,
    ["Authorization"] = "Bearer " .. token,
  }
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s,"_meta":{%s%s}}}',
    n, tool, arguments, envelope, meta)
  return wrk.format("POST", nil, headers, body)
end

request = function()
  n = n + 1
  local id = string.format("%s-%d-%d", prefix, tid, n)
  if n % 2 == 1 then
    return call(namespace .. ".record", string.format('{"write_id":"%s"}', id),
      string.format(',"io.maitre/idempotencyKey":"%s"', id))
  end
  return call(namespace .. ".lookup", string.format('{"write_id":"%s-%d-%d"}', prefix, tid, n - 1), "")
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK {"requests":%d,"duration_us":%d,"non2xx":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,'
      .. '"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
