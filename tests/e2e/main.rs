//! End-to-end tests, one binary (as ripgrep gathers its integration tests): they drive the
//! built `node-doctor` against fake host roots built by the tests.

mod as_deployed;
mod check;
mod deploy;
mod explain;
mod host_files;
mod hostile;
mod kube;
mod real_disk;
mod real_load;
mod see_also;
mod serve;
mod server_limits;
mod support;
