//! Readers of the host's `/sys`: one module per source file or directory; and [`statvfs`],
//! the filesystem figures of a directory.

pub mod block;
pub mod cgroup_io;
pub mod cpu_online;
pub mod kubepods;
pub mod net_class;
pub mod statvfs;
