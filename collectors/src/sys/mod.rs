//! Readers of the host's `/sys`: one module per source file or directory.

pub mod block;
pub mod cpu_online;
