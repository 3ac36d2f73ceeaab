//! Writes a staged GPU node's host root (`collectors::testing::gpu_node`) into an empty
//! directory, for `scripts/bench-cost.sh --gpu-hosts`: `stage_gpu_node DIR` (8 GPUs and 64
//! PCI devices) or `stage_gpu_node DIR --no-gpus` (the same 64 devices, no GPU).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, gpus) = match args.as_slice() {
        [dir] => (PathBuf::from(dir), true),
        [dir, flag] if flag == "--no-gpus" => (PathBuf::from(dir), false),
        _ => {
            eprintln!("usage: stage_gpu_node DIR [--no-gpus]");
            return ExitCode::from(2);
        }
    };
    match collectors::testing::gpu_node::stage(&dir, gpus) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stage_gpu_node: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
