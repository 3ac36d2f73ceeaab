//! The typed reading of the `disk` collector: one [`DiskSample`] of the filesystems under the
//! runtime and kubelet directories with what fills them ([`FsSample`]), the kubelet's disk
//! settings, docker's logging setup ([`DockerSample`]) and which daemons run. The collector
//! reads it; `judge` decides on it; tests build it directly.

use crate::config::docker::DaemonConfig;
use crate::config::kubelet::Settings;
use crate::node::discover::{Daemons, Role};
use crate::sys::statvfs::FsUsage;

use super::deleted::DeletedFile;
use super::logs::LogFile;
use super::trend::Fit;
use super::walk::DirSizes;

/// A directory serving a role, with its host-side path (symlinks resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct RoleDir {
    pub role: Role,
    pub host_path: String,
}

/// One filesystem serving one or more roles, with what fills it.
#[derive(Debug, Clone, PartialEq)]
pub struct FsSample {
    pub mount_point: String,
    pub device: String,
    pub fstype: String,
    /// `st_dev` of the role directories.
    pub dev: u64,
    pub roles: Vec<RoleDir>,
    pub usage: FsUsage,
    /// The largest container logs on this filesystem, largest first (host-side paths).
    pub logs: Vec<LogFile>,
    /// Top-level directory sizes per walked role root (host path, figures).
    pub dirs: Vec<(Role, String, DirSizes)>,
    /// Deleted-but-open files on this filesystem (when scanned).
    pub deleted: Vec<DeletedFile>,
    /// How fast it fills, from the history the collector keeps (`serve` only: one run has
    /// none).
    pub trend: Trend,
}

/// The time-to-full reading of one filesystem: the fits of its space and inodes (`None`
/// until there is enough history), whether the filling rules were raised on the last run
/// (their own hysteresis), and what grew fastest between the last two complete walks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trend {
    pub space: Option<Fit>,
    pub inodes: Option<Fit>,
    /// Seconds of history and points kept so far.
    pub history_secs: f64,
    pub history_points: usize,
    /// The points themselves, oldest first (what the agent's page draws).
    pub points: Vec<super::trend::Point>,
    pub raised_space: bool,
    pub raised_inodes: bool,
    /// Items (a pod's directory or emptyDir, a container's log directory, a layer) that
    /// grew between the last two complete walks, fastest first.
    pub growers: Vec<Grower>,
}

/// An item of a walked root that grew between two complete walks.
#[derive(Debug, Clone, PartialEq)]
pub struct Grower {
    /// Host path of the item.
    pub path: String,
    /// What it is: `pod_log`, `empty_dir`, `pod_dir`, `container_dir`, `layer`, `image`,
    /// `image_content`, `volume`, `dir`.
    pub kind: &'static str,
    /// The pod's uid for items under a pod directory, when it is a valid one.
    pub pod_uid: Option<String>,
    /// Growth per second (bytes, or entries for the inode rule).
    pub bytes_per_second: f64,
    pub entries_per_second: f64,
    pub bytes: u64,
}

impl FsSample {
    pub fn has(&self, role: Role) -> bool {
        self.roles.iter().any(|r| r.role == role)
    }

    pub fn role_names(&self) -> String {
        self.roles
            .iter()
            .map(|r| r.role.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(super) fn path_of(&self, role: Role) -> Option<&str> {
        self.roles
            .iter()
            .find(|r| r.role == role)
            .map(|r| r.host_path.as_str())
    }
}

/// Docker's logging setup, when docker's data root exists.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerSample {
    /// The daemon config; `None` when the file does not exist (docker's defaults apply).
    pub config: Option<DaemonConfig>,
    /// Host path of `daemon.json`.
    pub daemon_json: String,
    /// Host path of the data root.
    pub data_root: String,
}

/// Everything the disk rules look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskSample {
    /// The filesystems of the runtime and kubelet directories whose usage could be read.
    pub filesystems: Vec<FsSample>,
    /// The kubelet's effective disk settings and its config path, when a kubelet is present.
    pub kubelet: Option<(Settings, String)>,
    pub docker: Option<DockerSample>,
    /// The largest container logs of the node, largest first (host-side paths; a metric).
    pub largest_logs: Vec<LogFile>,
    /// Which of the kubelet, dockerd and containerd run: the advice to restart a runtime or
    /// drain the node says so when they do not.
    pub daemons: Daemons,
}
