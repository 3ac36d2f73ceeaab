//! Readers of the host's `/proc`: one module per source file, each a pure `parse` plus a thin
//! reader that adds the path to errors.

pub mod cgroup;
pub mod diskstats;
pub mod loadavg;
pub mod pid;
pub mod pid_io;
pub mod pressure;
pub mod stat;
pub mod uptime;
