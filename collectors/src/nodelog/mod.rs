//! Node logs (WIP)
pub mod follow;
pub mod journal;
pub mod syslog;
pub mod tz;
