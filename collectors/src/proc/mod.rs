//! Readers of the host's `/proc`: one module per source file, each a pure `parse` plus a thin
//! reader that adds the path to errors.

pub mod cgroup;
pub mod locks;
pub mod ns;
pub mod pid;
