//! Waiting for the xtables lock's directory while it does not exist: an inotify watch on its
//! nearest existing ancestor, for the next missing component appearing there (created, moved
//! in, or replaced) or the ancestor itself going away. Nothing is read while nothing happens
//! there; each event that names the component makes the caller try its watch again.
//!
//! inotify does not see everything that can make the directory appear: a file system mounted
//! over the ancestor, or a symlink on the way whose target is created elsewhere. The caller
//! therefore also asks [`DirWait::stale`] now and then (three `stat`s).

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// What the ancestor is watched for: its entries appearing or going (any of them may be the
/// missing component), and its own removal, move or unmount.
const EVENTS: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);

/// Events about the watched directory itself (or the queue): the wait must be made again.
const SELF_EVENTS: AddWatchFlags = AddWatchFlags::IN_DELETE_SELF
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_IGNORED)
    .union(AddWatchFlags::IN_UNMOUNT)
    .union(AddWatchFlags::IN_Q_OVERFLOW);

/// `(st_dev, st_ino)` of a path, following symlinks.
pub(super) fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path)?;
    Ok((md.dev(), md.ino()))
}

/// What to do about an inotify error, in words a person can act on.
pub(super) fn inotify_error(what: &str, path: &Path, e: Errno) -> String {
    let hint = match e {
        Errno::EMFILE => " (the fs.inotify.max_user_instances limit is reached)",
        Errno::ENOSPC => " (the fs.inotify.max_user_watches limit is reached)",
        Errno::ENFILE => " (the system's open file limit is reached)",
        _ => "",
    };
    format!("{what} {}: {}{hint}", path.display(), e.desc())
}

/// The nearest directory on the way to `target` (above it) and the name below it towards
/// `target`; `None` when no directory on the way exists (a relative path, or `/` missing).
fn nearest_dir(target: &Path) -> Option<(PathBuf, OsString)> {
    let mut below: Option<OsString> = None;
    for p in target.ancestors() {
        if p.as_os_str().is_empty() {
            return None;
        }
        if let Some(name) = below.take() {
            if p.is_dir() {
                return Some((p.to_path_buf(), name));
            }
        }
        below = p.file_name().map(|n| n.to_os_string());
    }
    None
}

/// An inotify watch on the nearest existing ancestor of a directory that does not exist.
#[derive(Debug)]
pub struct DirWait {
    inotify: Inotify,
    target: PathBuf,
    ancestor: PathBuf,
    /// The ancestor's identity when it was watched (`None`: it could not be stat'ed then).
    ancestor_id: Option<(u64, u64)>,
    /// The component below the ancestor on the way to the target.
    next: OsString,
}

impl DirWait {
    /// Watches the nearest existing ancestor of `target`. `Err` (the reason) when no directory
    /// on the way exists or inotify refuses. Made before the caller's next look at `target`,
    /// so a directory that appears in between is seen by that look or sends an event.
    pub fn new(target: &Path) -> Result<DirWait, String> {
        let (ancestor, next) = nearest_dir(target)
            .ok_or_else(|| format!("no directory on the way to {} exists", target.display()))?;
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
            .map_err(|e| inotify_error("cannot watch", &ancestor, e))?;
        inotify
            .add_watch(&ancestor, EVENTS)
            .map_err(|e| inotify_error("cannot watch", &ancestor, e))?;
        Ok(DirWait {
            inotify,
            target: target.to_path_buf(),
            ancestor_id: identity(&ancestor).ok(),
            ancestor,
            next,
        })
    }

    /// The watched directory.
    pub fn ancestor(&self) -> &Path {
        &self.ancestor
    }

    /// Takes the pending events: true when one names the next component, or the ancestor
    /// itself went away (or events were lost): the caller looks again.
    pub fn events(&self) -> bool {
        let mut changed = false;
        loop {
            match self.inotify.read_events() {
                Ok(evs) if evs.is_empty() => return changed,
                Ok(evs) => {
                    changed |= evs.iter().any(|ev| {
                        ev.mask.intersects(SELF_EVENTS)
                            || ev.name.as_deref() == Some(self.next.as_os_str())
                    });
                }
                Err(Errno::EAGAIN) => return changed,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the xtables lock directory's inotify events failed");
                    return true;
                }
            }
        }
    }

    /// True when the wait is out of date and the caller must look again: the target is a
    /// directory now, or the next component is (reached through a symlink whose target
    /// appeared elsewhere, or mounted), or the ancestor is no longer the watched directory.
    pub fn stale(&self) -> bool {
        self.target.is_dir()
            || self.ancestor.join(&self.next).is_dir()
            || identity(&self.ancestor).ok() != self.ancestor_id
    }
}

impl AsFd for DirWait {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_existing_directory_is_watched_for_the_next_component() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("run/k8s/locks");
        let w = DirWait::new(&target).unwrap();
        assert_eq!(w.ancestor(), t.path());
        assert!(!w.events(), "nothing happened");
        assert!(!w.stale());
        // Another name in the ancestor: no reason to look.
        std::fs::write(t.path().join("other"), "").unwrap();
        std::fs::create_dir(t.path().join("runx")).unwrap();
        assert!(!w.events(), "not the next component");
        // The next component appears, as a file first: look again (it is not a directory,
        // the caller waits on).
        std::fs::write(t.path().join("run"), "").unwrap();
        assert!(w.events());
        assert!(!w.stale(), "a file is not the directory");
        std::fs::remove_file(t.path().join("run")).unwrap();
        assert!(w.events(), "removed");
        std::fs::create_dir(t.path().join("run")).unwrap();
        assert!(w.events(), "created as a directory");
        assert!(w.stale(), "one level nearer");
        // One level down, the wait is on run/.
        let w = DirWait::new(&target).unwrap();
        assert_eq!(w.ancestor(), t.path().join("run"));
        std::fs::create_dir_all(&target).unwrap();
        assert!(w.events());
        assert!(w.stale(), "the target exists");
    }

    #[test]
    fn what_inotify_cannot_see_is_found_by_stale() {
        let t = tempfile::tempdir().unwrap();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let host = t.path().join("host");
        std::fs::create_dir(&host).unwrap();
        // host/run is a symlink to a directory not made yet.
        std::os::unix::fs::symlink(elsewhere.join("run"), host.join("run")).unwrap();
        let w = DirWait::new(&host.join("run/k8s")).unwrap();
        assert_eq!(w.ancestor(), host);
        assert!(!w.stale());
        std::fs::create_dir(elsewhere.join("run")).unwrap();
        assert!(!w.events(), "created elsewhere: no event in host/");
        assert!(w.stale(), "the next component is a directory now");
        // The ancestor replaced (as by a mount over it): stale. (Renamed away, not removed,
        // so that the new directory cannot reuse its inode number.)
        let w = DirWait::new(&host.join("run/k8s")).unwrap();
        assert_eq!(w.ancestor(), host.join("run"));
        std::fs::rename(elsewhere.join("run"), elsewhere.join("old")).unwrap();
        std::fs::create_dir(elsewhere.join("run")).unwrap();
        assert!(w.stale(), "another directory at the ancestor's path");
    }

    #[test]
    fn the_ancestor_going_away_is_an_event_and_no_directory_at_all_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let w = DirWait::new(&a.join("b/c")).unwrap();
        assert_eq!(w.ancestor(), a);
        std::fs::remove_dir(&a).unwrap();
        assert!(w.events(), "the ancestor was removed");
        assert!(DirWait::new(Path::new("relative/dir")).is_err());
    }
}
