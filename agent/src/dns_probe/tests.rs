//! The probe against DNS servers of the tests' own on loopback: answering, losing one query
//! of the pair on its first try, losing everything over UDP while TCP answers, refusing
//! (nothing bound), and answering with error codes.

use std::collections::HashMap;
use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::*;

/// What the test server does with the `n`th query (from 1) of a type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Act {
    Answer(u8),
    Drop,
}

type Policy = fn(u16, u32) -> Act;

/// An answer to `query` with `rcode`, and one A (or AAAA) record when NOERROR.
fn answer_to(query: &[u8], rcode: u8) -> Vec<u8> {
    let q = question(query).unwrap().to_vec();
    let t = qtype(query).unwrap();
    let mut m = query[..2].to_vec();
    m.extend_from_slice(&(0x8180u16 | u16::from(rcode)).to_be_bytes());
    let records: u16 = u16::from(rcode == 0);
    m.extend_from_slice(&[0, 1]);
    m.extend_from_slice(&records.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0]);
    m.extend_from_slice(&q);
    if records == 1 {
        m.extend_from_slice(&[0xc0, 12]);
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 0, 0, 30]);
        let rdata: &[u8] = if t == TYPE_A {
            &[10, 96, 0, 1]
        } else {
            &[0xfd; 16]
        };
        m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        m.extend_from_slice(rdata);
    }
    m
}

struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A UDP server on 127.0.0.1 following `policy`, and a TCP one on the same port answering
/// NOERROR when `tcp`.
fn serve(policy: Policy, tcp: bool) -> Server {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<HashMap<u16, u32>>> = Arc::default();
    let mut threads = Vec::new();
    let s = Arc::clone(&stop);
    threads.push(std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while !s.load(Ordering::Relaxed) {
            let Ok((n, from)) = udp.recv_from(&mut buf) else {
                continue;
            };
            let q = &buf[..n];
            let t = qtype(q).unwrap();
            let count = {
                let mut seen = seen.lock().unwrap();
                let c = seen.entry(t).or_default();
                *c += 1;
                *c
            };
            if let Act::Answer(rcode) = policy(t, count) {
                udp.send_to(&answer_to(q, rcode), from).unwrap();
            }
        }
    }));
    if tcp {
        let listener = TcpListener::bind(addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        let s = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut c, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                c.set_nonblocking(false).unwrap();
                let mut len = [0u8; 2];
                c.read_exact(&mut len).unwrap();
                let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                c.read_exact(&mut q).unwrap();
                let a = answer_to(&q, 0);
                let mut framed = (a.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&a);
                c.write_all(&framed).unwrap();
            }
        }));
    }
    Server {
        addr,
        stop,
        threads,
    }
}

fn plan(server: SocketAddr) -> DnsPlan {
    DnsPlan {
        servers: vec![server],
        name: "kubernetes.default.svc.cluster.local.".into(),
        try_timeout: Duration::from_millis(300),
        tcp_timeout: Duration::from_millis(300),
    }
}

fn probe_one(server: SocketAddr) -> ServerReply {
    let mut r = HostDnsProbe.probe(&plan(server));
    assert_eq!(r.servers.len(), 1);
    r.servers.remove(0)
}

#[test]
fn the_codec_round_trips_and_refuses_what_is_not_an_answer() {
    let q = encode_query(0x1234, "kubernetes.default.svc.cluster.local.", TYPE_AAAA).unwrap();
    assert_eq!(qtype(&q), Some(TYPE_AAAA));
    assert_eq!(decode_answer(&q), None, "a query is not an answer");
    let a = answer_to(&q, 0);
    let d = decode_answer(&a).unwrap();
    assert_eq!(
        (d.id, d.rcode, d.records, d.truncated),
        (0x1234, 0, 1, false)
    );
    assert!(same_question(&q, &a));
    let other = encode_query(0x1234, "kubernetes.default.svc.k8s.test", TYPE_AAAA).unwrap();
    assert!(!same_question(&other, &a));
    assert!(encode_query(1, "a..b", TYPE_A).is_none());
    assert!(encode_query(1, &"x".repeat(64), TYPE_A).is_none());
    // Truncated or garbage answers are never read past their end.
    for cut in 0..a.len() - 1 {
        let _ = decode_answer(&a[..cut]);
    }
    let mut loop_ptr = a.clone();
    loop_ptr[12] = 0x80;
    assert_eq!(decode_answer(&loop_ptr), None);
}

#[test]
fn a_healthy_server_answers_both_on_the_first_try() {
    let s = serve(|_, _| Act::Answer(0), false);
    let t = Instant::now();
    let r = probe_one(s.addr);
    let whole = t.elapsed();
    assert!(r.failed.is_none() && r.tcp.is_none());
    for (_, q) in r.queries() {
        let a = q.answer().expect("answered");
        assert!(a.ok() && a.records == 1 && q.retry.is_none());
        // Measured from its own query to its answer: some time, within the probe's.
        assert!(
            a.latency > Duration::ZERO && a.latency <= whole,
            "{a:?} of {whole:?}"
        );
    }
}

#[test]
fn one_of_the_pair_lost_is_answered_on_the_retry() {
    // The conntrack race's shape: the AAAA's first packet vanishes.
    let s = serve(
        |t, n| {
            if t == TYPE_AAAA && n == 1 {
                Act::Drop
            } else {
                Act::Answer(0)
            }
        },
        false,
    );
    let r = probe_one(s.addr);
    assert!(matches!(r.a.first, Attempt::Answered(_)) && r.a.retry.is_none());
    assert!(matches!(r.aaaa.first, Attempt::NoAnswer { .. }));
    assert!(r.aaaa.answered_on_retry());
    assert!(r.tcp.is_none());
}

#[test]
fn udp_lost_and_tcp_answering_is_told_apart() {
    let s = serve(|_, _| Act::Drop, true);
    let r = probe_one(s.addr);
    for (_, q) in r.queries() {
        assert!(matches!(q.first, Attempt::NoAnswer { .. }), "{q:?}");
        assert!(matches!(q.retry, Some(Attempt::NoAnswer { .. })), "{q:?}");
    }
    assert!(
        matches!(r.tcp, Some(Attempt::Answered(ref a)) if a.ok()),
        "{:?}",
        r.tcp
    );
}

#[test]
fn nothing_listening_is_refused() {
    // A port bound and closed again: nothing listens there on loopback.
    let addr = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = probe_one(addr);
    assert!(matches!(r.a.first, Attempt::Refused), "{:?}", r.a);
    assert!(matches!(r.aaaa.first, Attempt::Refused), "{:?}", r.aaaa);
    assert!(matches!(r.tcp, Some(Attempt::Refused)), "{:?}", r.tcp);
    let round = collectors::dns::Round::of(&r);
    assert!(round.refused && !round.answered());
}

#[test]
fn error_codes_come_back_as_they_are() {
    let s = serve(|_, _| Act::Answer(2), false);
    let r = probe_one(s.addr);
    assert_eq!(r.a.answer().map(|a| a.rcode), Some(2));
    assert_eq!(r.a.answer().map(|a| a.records), Some(0));
    let round = collectors::dns::Round::of(&r);
    assert_eq!(round.error_rcode, Some(2));
}

/// A UDP server on 127.0.0.1 that marks `mine` when a query reaches it and answers its
/// queries (NOERROR) only once `other` is marked: two such servers, each the other's `other`,
/// answer only when they are asked together, never when one is waited for before the other is
/// asked.
fn serve_when_both_asked(mine: Arc<AtomicBool>, other: Arc<AtomicBool>) -> Server {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        let mut held: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
        while !s.load(Ordering::Relaxed) {
            if let Ok((n, from)) = udp.recv_from(&mut buf) {
                mine.store(true, Ordering::SeqCst);
                held.push((buf[..n].to_vec(), from));
            }
            if other.load(Ordering::SeqCst) {
                for (q, from) in held.drain(..) {
                    udp.send_to(&answer_to(&q, 0), from).unwrap();
                }
            }
        }
    });
    Server {
        addr,
        stop,
        threads: vec![thread],
    }
}

/// Two servers that each answer only after the other has been asked: both answer only when
/// the probe asks them together. Asked in turn, the first would get no answer (its tries
/// and its TCP fallback, refused, end before the second is asked).
#[test]
fn servers_are_asked_together() {
    let first = Arc::new(AtomicBool::new(false));
    let second = Arc::new(AtomicBool::new(false));
    let a = serve_when_both_asked(Arc::clone(&first), Arc::clone(&second));
    let b = serve_when_both_asked(second, first);
    let mut p = plan(a.addr);
    p.servers.push(b.addr);
    // Long tries: a thread that starts late on a busy machine still meets the other's.
    p.try_timeout = Duration::from_secs(2);
    let r = HostDnsProbe.probe(&p);
    assert_eq!(r.servers.len(), 2);
    assert_eq!(r.servers[0].server, a.addr);
    assert_eq!(r.servers[1].server, b.addr);
    for s in &r.servers {
        assert!(s.a.answer().is_some() && s.aaaa.answer().is_some(), "{s:?}");
    }
}

#[test]
fn no_server_is_no_reply_and_one_alone_is_answered() {
    let mut p = plan("127.0.0.1:9".parse().unwrap());
    p.servers.clear();
    assert!(HostDnsProbe.probe(&p).servers.is_empty());
    let live = serve(|_, _| Act::Answer(0), false);
    let r = probe_one(live.addr);
    assert!(r.a.answer().is_some() && r.aaaa.answer().is_some());
}
