"""Closed-loop clients at two prompt lengths: the server's mean TPOT difference is the prefill carried."""
import json, random, re, sys, threading, time, urllib.request
U = "http://127.0.0.1:8000"
def hist(name):
    t = urllib.request.urlopen(U + "/metrics").read().decode()
    s = re.search(r"vllm:%s_sum\{[^}]*\} ([0-9.e+-]+)" % name, t); c = re.search(r"vllm:%s_count\{[^}]*\} ([0-9.e+-]+)" % name, t)
    return float(s.group(1)), float(c.group(1))
def step(clients, prompt, seconds, output=128):
    stop = time.time() + seconds
    def client(i):
        rng = random.Random(f"{i}:{prompt}")
        while time.time() < stop:
            body = json.dumps({"model": "llama-8b-dummy", "prompt": [rng.randrange(100, 30000) for _ in range(prompt)],
                               "max_tokens": output, "ignore_eos": True}).encode()
            urllib.request.urlopen(urllib.request.Request(U + "/v1/completions", body, {"Content-Type": "application/json"})).read()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads: t.start()
    time.sleep(5)  # settle
    a = hist("inter_token_latency_seconds"); g0 = hist("request_prefill_time_seconds")
    time.sleep(seconds - 10)
    b = hist("inter_token_latency_seconds"); g1 = hist("request_prefill_time_seconds")
    for t in threads: t.join()
    tpot = (b[0] - a[0]) / (b[1] - a[1]); pf = (g1[0] - g0[0]) / max(1, g1[1] - g0[1])
    print(f"clients {clients} prompt {prompt}: TPOT mean {tpot*1000:.2f} ms over {b[1]-a[1]:.0f} tokens; prefill-time mean {pf*1000:.1f} ms", flush=True)
    return tpot
for clients in (8, 24):
    r = {p: step(clients, p, 25) for p in (1024, 128, 1024, 128)}
