//! `node-doctor`: the agent binary (CLI, scheduler, state, HTTP server).

mod explain_cmd;
mod registry;

fn main() {
    let host = collectors::HostPaths::new("/");
    let cs = registry::all(&host);
    println!(
        "node-doctor {} ({} collectors)",
        env!("CARGO_PKG_VERSION"),
        cs.len()
    );
}
