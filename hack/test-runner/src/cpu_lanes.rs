//! How the timed lane gets the CPU first: two cgroups of the `cpu` controller when the machine lets
//! the runner make them, `nice` otherwise.
//!
//! Why groups: `nice` weighs each thread on its own, so the jobs beside the timed lane (three test
//! binaries, each with a few API servers, etcds and controller-managers, dozens of runnable threads
//! in a burst) outweigh the timed file's handful of nice-0 threads however low their priority: a
//! timed burst measured while the others were idle, then again while they were busy, could differ
//! by half. A cgroup weighs all its threads together: the timed group at 1024 shares against the
//! other group at [`BESIDE_SHARES`] gets eight ninths of a contended machine, whatever either runs.
//! Uncontended, each group uses all it wants.
//!
//! Only cgroup v1's `cpu` hierarchy is used (as this machine and CI have it); without it, or
//! without the right to make a group there, the jobs beside the timed lane run at
//! [`NICE_BESIDE_TIMED`], and the runner says so.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The niceness of the jobs beside the timed files when there are no groups: a timed file's
/// threads get about nine tenths of a core each against one of theirs. Not 19: a timed file's
/// bursts would then all but stop the others (one fiftieth of a core each), past their own
/// timeouts.
pub const NICE_BESIDE_TIMED: i32 = 10;

/// The beside group's `cpu.shares`, against 1024 for the timed group: an eighth of a contended
/// machine at least, so a timed burst slows the others but never stops them.
const BESIDE_SHARES: u32 = 128;

/// Which lane a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// The timed files, one at a time, and the doc-tests: the CPU first.
    Timed,
    /// Everything else, several at a time: what the timed lane leaves.
    Beside,
}

/// The two lanes' CPU weights: groups, or `nice` for the beside lane.
pub enum CpuLanes {
    /// cgroup v1 `cpu` groups (`<parent>/timed`, `<parent>/beside`), removed on drop.
    Groups { parent: PathBuf },
    /// No groups: the beside lane at [`NICE_BESIDE_TIMED`]; why not groups.
    Nice { why: String },
}

impl CpuLanes {
    /// Makes the groups under the runner's own `cpu` cgroup, or says why it cannot.
    pub fn new() -> Self {
        match make_groups() {
            Ok(parent) => CpuLanes::Groups { parent },
            Err(why) => CpuLanes::Nice { why },
        }
    }

    /// One line for the runner's header: how the lanes are weighed.
    pub fn describe(&self) -> String {
        match self {
            CpuLanes::Groups { parent } => format!(
                "the timed lane in cpu cgroup {}/timed (1024 shares), the others in .../beside \
                 ({BESIDE_SHARES} shares)",
                parent.display()
            ),
            CpuLanes::Nice { why } => {
                format!("the others at nice {NICE_BESIDE_TIMED} (no cpu cgroups: {why})")
            }
        }
    }

    /// Sets up `command` so the process it starts, and every process that one starts, runs on
    /// `lane`. The returned file (a group's `cgroup.procs`, opened here) must live until the
    /// command is spawned.
    pub fn place(&self, command: &mut Command, lane: Lane) -> Result<Option<File>, String> {
        match self {
            CpuLanes::Groups { parent } => {
                let group = parent.join(group_name(lane));
                let procs_path = group.join("cgroup.procs");
                let procs = OpenOptions::new()
                    .write(true)
                    .open(&procs_path)
                    .map_err(|e| format!("open {}: {e}", procs_path.display()))?;
                let fd = procs.as_raw_fd();
                // SAFETY: the closure runs in the forked child before exec and makes one
                // async-signal-safe system call on a descriptor the parent keeps open until the
                // spawn returns. Writing 0 to `cgroup.procs` moves the writing process.
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(command, move || {
                        if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                            Ok(())
                        } else {
                            Err(std::io::Error::last_os_error())
                        }
                    });
                }
                Ok(Some(procs))
            }
            CpuLanes::Nice { .. } if lane == Lane::Beside => {
                // SAFETY: the closure runs in the forked child before exec and only makes one
                // async-signal-safe system call.
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(command, move || {
                        if libc::setpriority(libc::PRIO_PROCESS, 0, NICE_BESIDE_TIMED) == 0 {
                            Ok(())
                        } else {
                            Err(std::io::Error::last_os_error())
                        }
                    });
                }
                Ok(None)
            }
            CpuLanes::Nice { .. } => Ok(None),
        }
    }
}

impl Drop for CpuLanes {
    /// Removes the groups once their last processes are gone (the API servers of a test binary's
    /// shared environment die a moment after it, on their parent-death signal); a group still in
    /// use after a few seconds is left for the next run to remove.
    fn drop(&mut self) {
        if let CpuLanes::Groups { parent } = self {
            for _ in 0..50 {
                let timed = remove_group(&parent.join(group_name(Lane::Timed)));
                let beside = remove_group(&parent.join(group_name(Lane::Beside)));
                if timed && beside && std::fs::remove_dir(&*parent).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn group_name(lane: Lane) -> &'static str {
    match lane {
        Lane::Timed => "timed",
        Lane::Beside => "beside",
    }
}

/// Whether `group` is gone (removed now or before).
fn remove_group(group: &Path) -> bool {
    !group.exists() || std::fs::remove_dir(group).is_ok()
}

/// The prefix of the runner's group folders: `<prefix><pid>`.
const PREFIX: &str = "karmada-rs-test-runner-";

/// Makes `<runner's cpu cgroup>/karmada-rs-test-runner-<pid>/{timed,beside}`, after removing the
/// empty ones earlier runs left.
fn make_groups() -> Result<PathBuf, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("read /proc/self/cgroup: {e}"))?;
    let path = own
        .lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "cpu")
                .then(|| path.to_owned())
        })
        .ok_or("no cgroup v1 cpu controller in /proc/self/cgroup")?;
    let mount = Path::new("/sys/fs/cgroup/cpu");
    let base = mount.join(path.trim_start_matches('/'));
    if !base.join("cpu.shares").exists() {
        return Err(format!("{} has no cpu.shares", base.display()));
    }
    remove_stale(&base);
    let parent = base.join(format!("{PREFIX}{}", std::process::id()));
    let write = |file: PathBuf, value: &str| {
        std::fs::write(&file, value).map_err(|e| format!("write {}: {e}", file.display()))
    };
    std::fs::create_dir_all(&parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    for (lane, shares) in [(Lane::Timed, 1024), (Lane::Beside, BESIDE_SHARES)] {
        let group = parent.join(group_name(lane));
        std::fs::create_dir_all(&group).map_err(|e| format!("mkdir {}: {e}", group.display()))?;
        write(group.join("cpu.shares"), &shares.to_string())?;
    }
    Ok(parent)
}

/// Removes the groups of earlier runs that ended (their runner is gone) and have no processes left.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(PREFIX) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let parent = entry.path();
            let _ = remove_group(&parent.join(group_name(Lane::Timed)));
            let _ = remove_group(&parent.join(group_name(Lane::Beside)));
            let _ = std::fs::remove_dir(&parent);
        }
    }
}
