//! The dns collector's probe ([`collectors::dns::probe`]): the collectors crate decides whom
//! to ask and judges; this module speaks DNS (RFC 1035) over UDP and TCP.
//!
//! Per server, on a thread of its own (a probe asks at most four servers; the last one on the
//! caller's thread, so that a node with one cluster DNS starts no thread): one UDP socket
//! bound to an ephemeral port and connected to the server (so an ICMP port unreachable comes
//! back as `ECONNREFUSED`), the `A` and the `AAAA` query sent back to back from it, as glibc
//! and musl send them; answers matched by id and question; what is not answered within the
//! try timeout is sent once more with a new id; when no UDP query was answered, or an answer
//! was truncated, the `A` query once over TCP (two-byte length prefix, RFC 1035 §4.2.2).
//!
//! Hand-written rather than a resolver crate (hickory): the probe needs what a resolver hides
//! (which of the pair was lost, on which try, a connected socket shared by both queries) and
//! the messages are one fixed question each way; the whole codec is the two functions below.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use collectors::dns::probe::{Answer, Attempt, DnsPlan, DnsProbe, DnsReport, Query, ServerReply};

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
/// Largest answer read: a UDP answer is at most 512 bytes without EDNS, a TCP one is
/// length-prefixed; ours carry one question and a few records.
const MAX_MESSAGE: usize = 4096;
/// How much of an OS error is kept for people.
const DETAIL_BYTES: usize = 200;

/// The agent's probe: real sockets in the agent's network namespace (the host's, with
/// `hostNetwork`).
#[derive(Debug, Default, Clone, Copy)]
pub struct HostDnsProbe;

impl DnsProbe for HostDnsProbe {
    fn probe(&self, plan: &DnsPlan) -> DnsReport {
        let Some((last, others)) = plan.servers.split_last() else {
            return DnsReport {
                servers: Vec::new(),
            };
        };
        let servers = std::thread::scope(|s| {
            let handles: Vec<_> = others
                .iter()
                .map(|server| (*server, s.spawn(move || ask(*server, plan))))
                .collect();
            // The last server on this thread (one server, as most nodes have: no thread).
            let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ask(*last, plan)))
                .unwrap_or_else(|_| failed(*last, "the probe panicked"));
            handles
                .into_iter()
                .map(|(server, h)| {
                    h.join()
                        .unwrap_or_else(|_| failed(server, "the probe's thread panicked"))
                })
                .chain(std::iter::once(own))
                .collect()
        });
        DnsReport { servers }
    }
}

fn failed(server: SocketAddr, why: &str) -> ServerReply {
    let not_sent = || Query {
        first: Attempt::Failed(why.to_string()),
        retry: None,
    };
    ServerReply {
        server,
        a: not_sent(),
        aaaa: not_sent(),
        tcp: None,
        failed: Some(why.to_string()),
    }
}

fn detail(e: &std::io::Error) -> String {
    collectors::bounded::ellipsis(&e.to_string(), DETAIL_BYTES)
}

/// A query id: not a security boundary here (the probe caches nothing), only distinct per
/// try so that a late answer to a first try is not taken for the retry's.
fn next_id() -> u16 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ n.wrapping_mul(0x9e37_79b9) ^ std::process::id()) as u16
}

/// Probes one server as the module documentation says.
fn ask(server: SocketAddr, plan: &DnsPlan) -> ServerReply {
    let bind: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().expect("a literal address")
    } else {
        "[::]:0".parse().expect("a literal address")
    };
    let socket = match UdpSocket::bind(bind).and_then(|s| s.connect(server).map(|()| s)) {
        Ok(s) => s,
        Err(e) => return failed(server, &format!("cannot open a UDP socket: {}", detail(&e))),
    };
    let name = plan.name.as_str();
    let first = udp_round(&socket, name, &[TYPE_A, TYPE_AAAA], plan.try_timeout);
    let mut a = Query {
        first: first[0].clone(),
        retry: None,
    };
    let mut aaaa = Query {
        first: first[1].clone(),
        retry: None,
    };
    let again: Vec<u16> = [(TYPE_A, &a), (TYPE_AAAA, &aaaa)]
        .iter()
        .filter(|(_, q)| !matches!(q.first, Attempt::Answered(_) | Attempt::Failed(_)))
        .map(|(t, _)| *t)
        .collect();
    if !again.is_empty() {
        let retry = udp_round(&socket, name, &again, plan.try_timeout);
        for (t, r) in again.iter().zip(retry) {
            if *t == TYPE_A {
                a.retry = Some(r);
            } else {
                aaaa.retry = Some(r);
            }
        }
    }
    let truncated = [&a, &aaaa]
        .iter()
        .any(|q| q.answer().is_some_and(|x| x.truncated));
    let none = a.answer().is_none() && aaaa.answer().is_none();
    let tcp = (none || truncated).then(|| tcp_query(server, name, plan.tcp_timeout));
    ServerReply {
        server,
        a,
        aaaa,
        tcp,
        failed: None,
    }
}

/// Sends one query per type from `socket`, back to back, and waits up to `timeout` for their
/// answers; one [`Attempt`] per type, in order.
fn udp_round(socket: &UdpSocket, name: &str, types: &[u16], timeout: Duration) -> Vec<Attempt> {
    let mut pending: Vec<(u16, Vec<u8>, Instant)> = Vec::new();
    let mut out: Vec<Option<Attempt>> = vec![None; types.len()];
    let mut refused = false;
    for (i, t) in types.iter().enumerate() {
        let id = next_id();
        let msg = match encode_query(id, name, *t) {
            Some(m) => m,
            None => {
                out[i] = Some(Attempt::Failed("the name is not a DNS name".into()));
                continue;
            }
        };
        match socket.send(&msg) {
            Ok(_) => pending.push((id, msg, Instant::now())),
            // An ICMP error is the socket's, not this query's: the port unreachable of the
            // query sent before it comes back on this send. Nothing listens there.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => refused = true,
            Err(e) => out[i] = Some(Attempt::Failed(detail(&e))),
        }
    }
    if refused {
        pending.clear();
        for slot in out.iter_mut() {
            slot.get_or_insert(Attempt::Refused);
        }
    }
    let start = Instant::now();
    let mut buf = [0u8; MAX_MESSAGE];
    while out.iter().any(Option::is_none) && !pending.is_empty() {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        if socket.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match socket.recv(&mut buf) {
            Ok(n) => {
                let Some(reply) = decode_answer(&buf[..n]) else {
                    continue;
                };
                let Some(p) = pending
                    .iter()
                    .position(|(id, q, _)| *id == reply.id && same_question(q, &buf[..n]))
                else {
                    continue;
                };
                let (_, query, sent) = pending.remove(p);
                let Some(i) = types.iter().position(|t| Some(*t) == qtype(&query)) else {
                    continue;
                };
                out[i] = Some(Attempt::Answered(Answer {
                    latency: sent.elapsed(),
                    rcode: reply.rcode,
                    records: reply.records,
                    truncated: reply.truncated,
                }));
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                // The host said no one listens: every query still waiting was refused.
                pending.clear();
                for slot in out.iter_mut() {
                    slot.get_or_insert(Attempt::Refused);
                }
            }
            Err(e) => {
                let why = detail(&e);
                for slot in out.iter_mut() {
                    slot.get_or_insert_with(|| Attempt::Failed(why.clone()));
                }
            }
        }
    }
    out.into_iter()
        .map(|a| a.unwrap_or(Attempt::NoAnswer { after: timeout }))
        .collect()
}

/// The `A` query over TCP, within `timeout` for connect, query and answer.
fn tcp_query(server: SocketAddr, name: &str, timeout: Duration) -> Attempt {
    let start = Instant::now();
    let Some(msg) = encode_query(next_id(), name, TYPE_A) else {
        return Attempt::Failed("the name is not a DNS name".into());
    };
    let mut stream = match TcpStream::connect_timeout(&server, timeout) {
        Ok(s) => s,
        Err(e) => {
            return match e.kind() {
                ErrorKind::ConnectionRefused => Attempt::Refused,
                ErrorKind::TimedOut | ErrorKind::WouldBlock => Attempt::NoAnswer { after: timeout },
                _ => Attempt::Failed(detail(&e)),
            }
        }
    };
    let io = |stream: &mut TcpStream| -> std::io::Result<Option<Vec<u8>>> {
        let left = timeout
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left))?;
        stream.set_write_timeout(Some(left))?;
        let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&msg);
        stream.write_all(&framed)?;
        let mut len = [0u8; 2];
        stream.read_exact(&mut len)?;
        let len = usize::from(u16::from_be_bytes(len));
        if len > MAX_MESSAGE {
            return Ok(None);
        }
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body)?;
        Ok(Some(body))
    };
    match io(&mut stream) {
        Ok(Some(body)) => match decode_answer(&body) {
            Some(r) if same_question(&msg, &body) => Attempt::Answered(Answer {
                latency: start.elapsed(),
                rcode: r.rcode,
                records: r.records,
                truncated: r.truncated,
            }),
            _ => Attempt::Failed("the TCP answer was not an answer to the question".into()),
        },
        Ok(None) => Attempt::Failed("the TCP answer was larger than any answer to it".into()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Attempt::NoAnswer { after: timeout }
        }
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Attempt::Refused,
        Err(e) => Attempt::Failed(detail(&e)),
    }
}

/// A query message: id, recursion desired, one question (`name` IN `qtype`). `None` when
/// `name` is not a DNS name (a label of 1-63 bytes, 255 in all).
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let mut m = Vec::with_capacity(18 + name.len());
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&0x0100u16.to_be_bytes()); // RD
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // QD 1, AN 0, NS 0, AR 0
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes()); // IN
    Some(m)
}

/// What the probe reads of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    pub id: u16,
    pub rcode: u8,
    pub truncated: bool,
    /// Answer records of the question's type.
    pub records: u16,
}

/// Reads a response message: `None` unless it is a response (QR) with one question, well
/// formed up to the end of its answer section.
pub fn decode_answer(m: &[u8]) -> Option<Decoded> {
    let u16_at =
        |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*m.get(i)?, *m.get(i + 1)?])) };
    let id = u16_at(0)?;
    let flags = u16_at(2)?;
    if flags & 0x8000 == 0 || u16_at(4)? != 1 {
        return None;
    }
    let ancount = u16_at(6)?;
    let mut at = skip_name(m, 12)?;
    let qtype = u16_at(at)?;
    at += 4;
    let mut records = 0u16;
    for _ in 0..ancount {
        at = skip_name(m, at)?;
        let rtype = u16_at(at)?;
        let rdlength = usize::from(u16_at(at + 8)?);
        at = at.checked_add(10 + rdlength)?;
        if at > m.len() {
            return None;
        }
        if rtype == qtype {
            records = records.saturating_add(1);
        }
    }
    Some(Decoded {
        id,
        rcode: (flags & 0x000f) as u8,
        truncated: flags & 0x0200 != 0,
        records,
    })
}

/// The offset after a (possibly compressed) name starting at `at`.
fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *m.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => {
                m.get(at + 1)?;
                return Some(at + 2);
            }
            l if l & 0xc0 == 0 => at = at.checked_add(1 + usize::from(l))?,
            _ => return None,
        }
    }
}

/// The question section of a message (from byte 12 to the end of its first question).
fn question(m: &[u8]) -> Option<&[u8]> {
    let end = skip_name(m, 12)?.checked_add(4)?;
    m.get(12..end)
}

/// The question's type.
fn qtype(m: &[u8]) -> Option<u16> {
    let q = question(m)?;
    let n = q.len();
    Some(u16::from_be_bytes([q[n - 4], q[n - 3]]))
}

/// The answer repeats our question (names compared without regard to ASCII case).
fn same_question(query: &[u8], answer: &[u8]) -> bool {
    match (question(query), question(answer)) {
        (Some(q), Some(a)) => q.eq_ignore_ascii_case(a),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
