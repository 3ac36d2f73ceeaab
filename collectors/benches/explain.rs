//! Cost of `explain`: parsing the embedded catalogue (once per process) and looking queries up.
//! Prints CPU time (user + sys from getrusage) per operation.
//!
//! Run: `cargo bench -p collectors --bench explain`

use std::hint::black_box;
use std::time::Duration;

use collectors::explain::{lookup_in, Catalogue};
use nix::sys::resource::{getrusage, UsageWho};

fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(u.user_time()) + tv(u.system_time())
}

fn per_op(name: &str, n: u32, mut f: impl FnMut()) {
    let start = cpu();
    for _ in 0..n {
        f();
    }
    let spent = cpu() - start;
    println!(
        "{name:<40} {n:>6} runs  {:>10.1} µs CPU per run",
        spent.as_secs_f64() * 1e6 / f64::from(n)
    );
}

fn main() {
    per_op("load catalogue (parse all TOML)", 50, || {
        black_box(Catalogue::load().expect("catalogue loads"));
    });
    let cat = Catalogue::load().expect("catalogue loads");
    println!("entries: {}", cat.entries.len());

    per_op("exact code E4008", 20_000, || {
        black_box(lookup_in(&cat, black_box("E4008")));
    });
    per_op("exit code 137", 20_000, || {
        black_box(lookup_in(&cat, black_box("137")));
    });
    let line = "Warning SyncLoadBalancerFailed 2m service-controller Error syncing load balancer: \
                failed to ensure load balancer: Status Code: 400 Code: VSwitchAvailableIpNotExist \
                Message: The specified VSwitch has no available ip.";
    per_op("pasted event line (200 B)", 2_000, || {
        black_box(lookup_in(&cat, black_box(line)));
    });
    // A whole `kubectl describe pod` dump: ~8 KB of text.
    let mut dump = String::new();
    while dump.len() < 8_000 {
        dump.push_str("  Normal  Pulled  3m  kubelet  Container image \"nginx:1.25\" already present on machine\n");
    }
    dump.push_str("    Last State: Terminated\n      Reason: OOMKilled\n      Exit Code: 137\n");
    per_op("pasted describe dump (8 KB)", 200, || {
        black_box(lookup_in(&cat, black_box(&dump)));
    });
}
