//! Readers of the host's `/proc`: one module per source file, each a pure `parse` plus a thin
//! reader that adds the path to errors.

pub mod buddyinfo;
pub mod cgroup;
pub mod diskstats;
pub mod loadavg;
pub mod locks;
pub mod meminfo;
pub mod mountinfo;
pub mod net_udp;
pub mod netstat;
pub mod nf_conntrack_stat;
pub mod ns;
pub mod pid;
pub mod pid_io;
pub mod pressure;
pub mod snmp;
pub mod stat;
pub mod uptime;
pub mod vmstat;
