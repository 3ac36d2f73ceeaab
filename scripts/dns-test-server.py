#!/usr/bin/env python3
"""A DNS server for tests and benchmarks (not part of the product): answers one kind of
question, `kubernetes.default.svc.<domain>` A or AAAA, on ADDR port 53 over UDP and TCP.

    dns-test-server.py ADDR MODE

MODE: `answer` (every query at once), `drop` (UDP dropped, TCP answered), `delay-aaaa`
(every odd AAAA query over UDP answered after 5 s, the rest at once: the first try of each
probe lost, as the conntrack race loses it). Prints `ready` once bound. Used by
tests/e2e/real_dns.rs (in a network namespace the test creates) and
scripts/bench-cost.py (the DNS probe's cost, on the bench namespace's loopback).
"""
import socket, struct, sys, threading, time
addr, mode = sys.argv[1], sys.argv[2]
counts = {}
def answer(q):
    qd_end = 12
    while q[qd_end] != 0:
        qd_end += 1 + q[qd_end]
    qd_end += 5
    qtype = struct.unpack('>H', q[qd_end-4:qd_end-2])[0]
    rdata = bytes([10, 96, 0, 1]) if qtype == 1 else bytes(16)
    rr = b'\xc0\x0c' + struct.pack('>HHIH', qtype, 1, 30, len(rdata)) + rdata
    return q[:2] + struct.pack('>HHHHH', 0x8180, 1, 1, 0, 0) + q[12:qd_end] + rr, qtype
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((addr, 53))
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind((addr, 53)); tcp.listen(8)
def serve_tcp():
    while True:
        c, _ = tcp.accept()
        n = struct.unpack('>H', c.recv(2))[0]
        q = b''
        while len(q) < n:
            q += c.recv(n - len(q))
        a, _ = answer(q)
        c.sendall(struct.pack('>H', len(a)) + a); c.close()
threading.Thread(target=serve_tcp, daemon=True).start()
print('ready', flush=True)
while True:
    q, peer = udp.recvfrom(512)
    a, qtype = answer(q)
    if mode == 'drop':
        continue
    n = counts[qtype] = counts.get(qtype, 0) + 1
    if mode == 'delay-aaaa' and qtype == 28 and n % 2 == 1:
        threading.Timer(5.0, udp.sendto, (a, peer)).start()
        continue
    udp.sendto(a, peer)
