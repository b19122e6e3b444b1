-- wrk script: POST the AdmissionReview in the file named by $BODY, as kube-apiserver does.
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
