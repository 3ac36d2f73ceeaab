//! Bench (not a test): the gpu collector's cost, printing measured CPU time (getrusage, so
//! other processes' load on the machine does not count):
//! 1. its kernel-log matcher per message against the hardware collector's and the kernel
//!    collector's (hung task, fs error) over the same messages, most of which match nothing;
//! 2. a healthy cycle on a staged 8-GPU node with 64 PCI devices (the walk at start, a cycle
//!    between sweeps, a sweep cycle) and on a staged node without GPUs.
//!
//! Run: `cargo bench -p collectors --bench gpu`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collectors::gpu::{lines, GpuCollector, GpuConfig};
use collectors::kernel::{fs_error, hung_task};
use collectors::{CollectContext, Collector, HostPaths, Node};
use nix::sys::resource::{getrusage, UsageWho};

#[path = "common/thread_cpu.rs"]
mod common;
use common::thread_cpu;

const RECORDS: u64 = 100_000;

fn cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// A busy node's kernel log: one line in 100 an Xid, one an AER report, the rest not ours.
fn message(i: u64) -> String {
    match i % 100 {
        0 => format!("NVRM: Xid (PCI:0000:{:02x}:00): 13, pid={i}, name=python3, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter", i % 256),
        1 => "pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5".to_string(),
        n if n % 4 == 0 => format!("IPv6: ADDRCONF(NETDEV_CHANGE): veth{i}: link becomes ready"),
        n if n % 4 == 1 => format!("cni0: port {}(veth{i}) entered forwarding state", i % 64),
        n if n % 4 == 2 => format!("EXT4-fs (dm-{}): mounted filesystem {i:032x} r/w with ordered data mode. Quota mode: none.", i % 8),
        _ => format!("audit: type=1400 audit({i}.123:{i}): apparmor=\"DENIED\" operation=\"open\" profile=\"cri-containerd.apparmor.d\" name=\"/proc/{i}/status\" pid={i} comm=\"node\""),
    }
}

/// One pass of a matcher over the messages: CPU nanoseconds per message, and its hits.
fn pass(messages: &[String], f: fn(&str) -> bool) -> (f64, usize) {
    let c0 = thread_cpu();
    let hits = messages
        .iter()
        .filter(|m| f(std::hint::black_box(m.as_str())))
        .count();
    let per = (thread_cpu() - c0).as_secs_f64() * 1e9 / messages.len() as f64;
    (per, hits)
}

const ROUNDS: usize = 15;

/// A matcher under test: whether a message is one of its lines.
type Matcher = fn(&str) -> bool;

/// Step 1: the matchers, per message. The machine is shared: each round runs every matcher
/// once, in turn, over the same messages, and each matcher's figure is its fastest round (what
/// it costs when nothing else takes its caches), with the median beside it.
fn matchers() {
    let messages: Vec<String> = (0..RECORDS).map(message).collect();
    let matchers: [(&str, Matcher); 4] = [
        ("gpu::lines::parse", |m| lines::parse(m).is_some()),
        ("hardware::lines::parse", |m| {
            collectors::hardware::lines::parse(m).is_some()
        }),
        ("kernel hung_task::parse", |m| hung_task::parse(m).is_some()),
        ("kernel fs_error::parse", |m| fs_error::parse(m).is_some()),
    ];
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); matchers.len()];
    let mut hits = vec![0; matchers.len()];
    for _ in 0..ROUNDS {
        for (i, (_, f)) in matchers.iter().enumerate() {
            let (ns, h) = pass(&messages, *f);
            per[i].push(ns);
            hits[i] = h;
        }
    }
    println!(
        "matchers over {RECORDS} messages (1 % Xid, 1 % AER), CPU per message (thread clock), fastest / median of {ROUNDS} rounds:"
    );
    let mut best = Vec::new();
    for (i, (label, _)) in matchers.iter().enumerate() {
        per[i].sort_by(f64::total_cmp);
        let (min, median) = (per[i][0], per[i][ROUNDS / 2]);
        println!(
            "  {label}: {min:.1} / {median:.1} ns/message ({} hits)",
            hits[i]
        );
        best.push(min);
    }
    let none_of_ours: Vec<String> = messages
        .iter()
        .filter(|m| lines::parse(m).is_none())
        .cloned()
        .collect();
    let mut alone: Vec<f64> = (0..ROUNDS)
        .map(|_| pass(&none_of_ours, |m| lines::parse(m).is_some()).0)
        .collect();
    alone.sort_by(f64::total_cmp);
    println!(
        "  gpu::lines::parse on the {} messages that are none of its lines (the prefilter alone): {:.1} / {:.1} ns/message",
        none_of_ours.len(),
        alone[0],
        alone[ROUNDS / 2]
    );
    let cheapest_other = best[1..].iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "  gpu's matcher is {:.2}x the hardware collector's, {:.2}x hung_task's, {:.2}x fs_error's: {}",
        best[0] / best[1],
        best[0] / best[2],
        best[0] / best[3],
        if best[0] <= cheapest_other {
            "at most the cheapest existing matcher's"
        } else if best[0] <= best[1] {
            "at most the hardware collector's"
        } else {
            "ABOVE the existing matchers'"
        }
    );
}

/// Step 2: cycles on a staged node; `gpus` false stages the same tree with no GPU.
fn cycles(gpus: bool) {
    let t = tempfile::tempdir().expect("temp dir");
    collectors::testing::gpu_node::stage(t.path(), gpus).expect("staged node");
    let node = Node::new(HostPaths::new(t.path()));
    let clock = Arc::new(AtomicU64::new(0));
    let c2 = Arc::clone(&clock);
    let mut g = GpuCollector::new(node, GpuConfig::default())
        .with_clock(move || c2.load(Ordering::SeqCst) as f64);
    let ctx = CollectContext::new("bench", collectors::HostNetns::NotProcfs);
    let run = |g: &mut GpuCollector| {
        let c0 = cpu();
        let out = g.collect(&ctx);
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
        (cpu() - c0).as_secs_f64() * 1e6
    };
    let name = if gpus {
        "8 GPUs, 64 PCI devices"
    } else {
        "no GPU, 64 PCI devices"
    };
    let first = run(&mut g);
    clock.fetch_add(15, Ordering::SeqCst);
    let second = run(&mut g);
    let (mut between, mut sweeps) = (Vec::new(), Vec::new());
    // The collector sweeps when 60 s have passed since its last sweep (at 15 s).
    let mut last = 15u64;
    for _ in 0..200 {
        let t = clock.fetch_add(15, Ordering::SeqCst) + 15;
        let us = run(&mut g);
        if t - last >= 60 {
            last = t;
            sweeps.push(us);
        } else {
            between.push(us);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let all: Vec<f64> = between.iter().chain(&sweeps).copied().collect();
    println!(
        "{name}: first cycle (walk + sweep) {first:.0} µs, second (sweep) {second:.0} µs; steady: between sweeps {:.0} µs, sweep cycle {:.0} µs, mean over 15 s cycles {:.0} µs",
        mean(&between),
        mean(&sweeps),
        mean(&all)
    );
}

fn main() {
    matchers();
    cycles(true);
    cycles(false);
}
