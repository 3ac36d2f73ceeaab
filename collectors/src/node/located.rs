//! What the daemon locator ([`super::daemons`]) says of one daemon: a leaf, so that the
//! answers can be shared ([`super::shared`]) without the two modules importing each other.

/// What the cheap ways said of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Pids in its unit's cgroup, or in its pod's (to be confirmed by the caller: `stat` names
    /// the daemon).
    InCgroup(Vec<u32>),
    /// None of its listeners is there: not running.
    Absent,
    /// Only the pass over `/proc` can tell (a listener without a unit, a name this module
    /// does not know, the listeners unreadable).
    Unknown,
}
