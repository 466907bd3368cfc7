"""Bursts of k concurrent requests of P prompt tokens from idle: the burst's last TTFT against k*P."""
import json, random, threading, time, urllib.request
U = "http://127.0.0.1:8000"
def one(prompt, out, i):
    body = json.dumps({"model": "llama-8b-dummy", "prompt": prompt, "max_tokens": 2, "stream": True}).encode()
    t0 = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(U + "/v1/completions", body, {"Content-Type": "application/json"})) as r:
        for line in r:
            if line.startswith(b"data:") and b'"text"' in line:
                out[i] = time.perf_counter() - t0; break
        r.read()
rng = random.Random(0)
for P in (1024, 256):
    res = {}
    for rnd in range(4):
        for k in rng.sample([1, 2, 4, 8, 16], 5):
            out = [None] * k
            ts = [threading.Thread(target=one, args=([rng.randrange(100, 30000) for _ in range(P)], out, i)) for i in range(k)]
            for t in ts: t.start()
            for t in ts: t.join()
            res.setdefault(k, []).append(round(max(out) * 1000, 1))
            time.sleep(0.2)
    for k in sorted(res): print(f"P {P} k {k} tokens {k*P}: last TTFT ms {res[k]}", flush=True)
