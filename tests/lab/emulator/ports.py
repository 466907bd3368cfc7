"""Free loopback port ranges for tests that need consecutive ports (`--base-port`)."""

from __future__ import annotations

import socket


def free_port_range(count: int, attempts: int = 50) -> int:
    """A base port P with P..P+count-1 free on 127.0.0.1 a moment ago (another process may still
    take one: callers that start servers on it should retry on a bind error)."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        sockets: list[socket.socket] = []
        try:
            for offset in range(count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError(f"no {count} consecutive free ports found in {attempts} attempts")
