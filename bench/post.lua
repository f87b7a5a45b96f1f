-- wrk script: POST one AdmissionReview to the URL given on wrk's command line (keep-alive).
-- The body is read once per thread from the file named by NICGUARD_BENCH_BODY.
local path = os.getenv("NICGUARD_BENCH_BODY")
if path == nil then
  error("NICGUARD_BENCH_BODY must name the AdmissionReview JSON file to post")
end
local file = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
