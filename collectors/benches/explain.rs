//! Cost of `explain`: parsing the embedded catalogue (once per process) and looking queries up,
//! including every paste of the acceptance corpus (tests/fixtures/explain/corpus.toml) and the
//! largest paste the HTTP route accepts (16 KiB). Prints CPU time (user + sys from getrusage)
//! per operation.
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

/// CPU time per run of `f`, over `n` runs.
fn measure(n: u32, mut f: impl FnMut()) -> Duration {
    let start = cpu();
    for _ in 0..n {
        f();
    }
    (cpu() - start) / n
}

fn per_op(name: &str, n: u32, f: impl FnMut()) {
    let d = measure(n, f);
    println!(
        "{name:<44} {n:>6} runs  {:>10.1} µs CPU per run",
        d.as_secs_f64() * 1e6
    );
}

#[derive(serde::Deserialize)]
struct Corpus {
    paste: Vec<Paste>,
}

#[derive(serde::Deserialize)]
struct Paste {
    id: String,
    text: String,
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
    per_op("mangled code E 4053", 20_000, || {
        black_box(lookup_in(&cat, black_box("E 4053")));
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
    // The worst case the HTTP route admits: 16 KiB of varied log text, every line different
    // and full of words the catalogue does not know (each is tried against the vocabulary).
    let mut big = String::new();
    let mut i = 0u32;
    while big.len() < 16 * 1024 - 200 {
        big.push_str(&format!(
            "E1123 12:{:02}:{:02}.{i:06}    1234 reconciler{i}.go:{i}] operationExecutor{i} \
             MountVolume failed for volume pvc-{i:08x} worker{i} allocaton qouta tabel retrying\n",
            i % 60,
            (i * 7) % 60
        ));
        i += 1;
    }
    per_op("pasted log, 16 KiB (HTTP limit)", 50, || {
        black_box(lookup_in(&cat, black_box(&big)));
    });
    // The typo corrector's worst case: 16 KiB of distinct all-letter words, each one tried
    // against the vocabulary.
    let mut words = String::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while words.len() < 16 * 1024 - 16 {
        for _ in 0..(5 + x % 6) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            words.push(char::from(b'a' + (x % 26) as u8));
        }
        words.push(' ');
    }
    per_op("16 KiB of distinct random words", 50, || {
        black_box(lookup_in(&cat, black_box(&words)));
    });

    // Every paste of the acceptance corpus.
    let corpus: Corpus = toml::from_str(include_str!("../tests/fixtures/explain/corpus.toml"))
        .expect("corpus parses");
    let mut times: Vec<(Duration, &str, usize)> = corpus
        .paste
        .iter()
        .map(|p| {
            let d = measure(200, || {
                black_box(lookup_in(&cat, black_box(&p.text)));
            });
            (d, p.id.as_str(), p.text.len())
        })
        .collect();
    times.sort();
    let total: Duration = times.iter().map(|t| t.0).sum();
    let n = u32::try_from(times.len()).unwrap_or(u32::MAX);
    let median = times[times.len() / 2].0;
    let (max, max_id, max_len) = times[times.len() - 1];
    println!(
        "corpus: {} pastes, CPU per paste: mean {:.1} µs, median {:.1} µs, max {:.1} µs ({max_id}, {max_len} B)",
        times.len(),
        (total / n).as_secs_f64() * 1e6,
        median.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6,
    );
}
