-- admit_check: an HAProxy action that asks admit serve's /v1/check about a request, with
-- HAProxy's own HTTP client (core.httpclient, HAProxy 2.5 and later); deploy/haproxy/README.md
-- shows its use. The only argument is the check's URL, such as
-- http://127.0.0.1:8080/v1/check?policy=per-ip; the subject is the variable txn.admit_key, which
-- the configuration sets (such as to src) and which is appended as key=; txn.admit_request_id,
-- when set (such as to uuid), is appended as request_id=. HAProxy 2.6's client sends a request
-- that timed out again, up to 3 times, each attempt given timeout_ms: the request ID makes admit
-- count such a check once. It sets:
--   txn.admit_status                admit's status: 200 allowed, 429 limited, anything else (or
--                                   unset, when the check failed) means no decision
--   txn.admit_retry_after           admit's Retry-After
--   txn.admit_ratelimit_policy      admit's RateLimit-Policy
--   txn.admit_ratelimit             admit's RateLimit
-- The client's header fields are not sent to admit: none of them can steer the check.

local timeout_ms = 500

-- escape percent-encodes s for a query, all but the unreserved characters of RFC 3986.
local function escape(s)
    return (string.gsub(s, "[^%w%-%._~]", function(c)
        return string.format("%%%02X", string.byte(c))
    end))
end

-- first returns the first value of the header field name (lower case) of an httpclient answer.
local function first(headers, name)
    local values = headers and headers[name]
    if values == nil then
        return nil
    end
    return values[0] or values[1]
end

core.register_action("admit_check", { "http-req" }, function(txn, url)
    local key = txn:get_var("txn.admit_key")
    if key == nil or key == "" then
        txn:Warning("admit_check: txn.admit_key is not set: no subject to check")
        return
    end
    local sep = "&"
    if not string.find(url, "?", 1, true) then
        sep = "?"
    end
    local query = sep .. "key=" .. escape(tostring(key))
    local id = txn:get_var("txn.admit_request_id")
    if id ~= nil and id ~= "" then
        query = query .. "&request_id=" .. escape(tostring(id))
    end
    local res = core.httpclient():get({ url = url .. query, timeout = timeout_ms })
    if res == nil or res.status == nil then
        txn:Warning("admit_check: no answer from " .. url)
        return
    end
    txn:set_var("txn.admit_status", res.status)
    for var, field in pairs({
        admit_retry_after = "retry-after",
        admit_ratelimit_policy = "ratelimit-policy",
        admit_ratelimit = "ratelimit",
    }) do
        local v = first(res.headers, field)
        if v ~= nil then
            txn:set_var("txn." .. var, v)
        end
    end
end, 1)
