import json, random, re, time, urllib.request
U = "http://127.0.0.1:8000"
def metrics():
    t = urllib.request.urlopen(U + "/metrics").read().decode()
    out = {}
    for name in ["time_to_first_token_seconds", "request_prefill_time_seconds", "request_queue_time_seconds", "request_inference_time_seconds"]:
        s = re.search(r"vllm:%s_sum\{[^}]*\} ([0-9.e+-]+)" % name, t); c = re.search(r"vllm:%s_count\{[^}]*\} ([0-9.e+-]+)" % name, t)
        out[name] = (float(s.group(1)), float(c.group(1))) if s and c else None
    return out
rng = random.Random(0)
for rnd in range(4):
    for n in rng.sample([128, 512, 1024, 2000], 4):
        body = json.dumps({"model": "llama-8b-dummy", "prompt": [rng.randrange(100, 30000) for _ in range(n)], "max_tokens": 1}).encode()
        a = metrics(); t0 = time.perf_counter()
        urllib.request.urlopen(urllib.request.Request(U + "/v1/completions", body, {"Content-Type": "application/json"})).read()
        e2e = time.perf_counter() - t0; time.sleep(0.05); b = metrics()
        d = {k: round((b[k][0] - a[k][0]) * 1000, 1) for k in a if a[k] and b[k] and b[k][1] - a[k][1] == 1}
        print(n, "client e2e ms", round(e2e * 1000, 1), d, flush=True)
