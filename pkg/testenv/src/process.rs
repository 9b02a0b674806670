//! Child processes that can never outlive the process that started them.
//!
//! Every child is started with `PR_SET_PDEATHSIG = SIGKILL`. Linux delivers that signal when the *thread*
//! that forked the child ends, so all children are forked by one keeper thread that lives as long as the
//! process: when the test binary exits, panics, or is killed, the kernel kills every child it started.
//! Dropping a [`ManagedProcess`] stops it earlier (SIGTERM, then SIGKILL after a grace period).

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Sender, SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::Error;

type SpawnRequest = (Command, SyncSender<io::Result<Child>>);

fn keeper() -> &'static Mutex<Sender<SpawnRequest>> {
    static KEEPER: OnceLock<Mutex<Sender<SpawnRequest>>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnRequest>();
        // The keeper must never exit while children run: it is the parent thread PDEATHSIG watches.
        // It owns no children itself (the Child handles go back to the caller), so it only forks.
        let spawned = std::thread::Builder::new()
            .name("testenv-process-keeper".into())
            .spawn(move || {
                while let Ok((mut cmd, reply)) = rx.recv() {
                    let _ = reply.send(cmd.spawn());
                }
                // All senders are gone only at process exit; park so the thread (and the
                // children's parent-death watch) ends with the process, not before.
                loop {
                    std::thread::park();
                }
            });
        if let Err(e) = spawned {
            // Startup invariant: without the keeper no child can be started safely.
            panic!("testenv: cannot start the process keeper thread: {e}");
        }
        Mutex::new(tx)
    })
}

/// A child process with its output in a log file; stopped when dropped.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ManagedProcess {
    /// Starts `program args…`, appending stdout and stderr to `log`, and records its pid in `pid_file`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        pid_file: &Path,
    ) -> Result<Self, Error> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| Error::io(log, e))?;
        let err = out.try_clone().map_err(|e| Error::io(log, e))?;
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl: then nobody would kill us.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let (reply_tx, reply_rx) = sync_channel(1);
        let send = keeper()
            .lock()
            .map_err(|_| Error::Process(format!("{name}: process keeper lock poisoned")))?
            .send((cmd, reply_tx));
        if send.is_err() {
            return Err(Error::Process(format!("{name}: process keeper is gone")));
        }
        let child = reply_rx
            .recv()
            .map_err(|_| Error::Process(format!("{name}: process keeper did not answer")))?
            .map_err(|e| {
                Error::Process(format!("{name}: cannot start {}: {e}", program.display()))
            })?;
        let mut pids = File::options()
            .create(true)
            .append(true)
            .open(pid_file)
            .map_err(|e| Error::io(pid_file, e))?;
        use std::io::Write;
        writeln!(pids, "{} {}", child.id(), name).map_err(|e| Error::io(pid_file, e))?;
        Ok(ManagedProcess {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// The operating-system process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The name it was started with (`<cluster>/<binary>` for a cluster's components).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file its output goes to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Whether it is still running; an exited process is reaped.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Fails with the end of its log if the process has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::Exited {
                name: self.name.clone(),
                status: status.to_string(),
                log_tail: log_tail(&self.log),
            }),
            Err(e) => Err(Error::Process(format!("{}: {e}", self.name))),
        }
    }

    /// Sends `signal` to the process if it still runs.
    pub fn signal(&mut self, signal: libc::c_int) {
        if !self.is_running() {
            return;
        }
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`. A paused (SIGSTOPped) process is
    /// continued first so it can handle the SIGTERM.
    pub fn stop(&mut self, grace: Duration) {
        if !self.is_running() {
            return;
        }
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.is_running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGKILL at once, the way a crash or an OOM kill would end it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// The last lines of a log file, for error messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(20);
    lines[start..].join("\n")
}

/// Whether a process with this pid exists (and is not a zombie).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; the caller binds it next).
///
/// Picked below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`): a port the kernel
/// assigns for `bind(0)` is also one it may give the next outgoing connection, which then holds it
/// when the server binds ("address already in use", seen when a busy controller-manager opened
/// connections meanwhile). Ports handed out by this process are not handed out again, so two
/// servers started back to back cannot get the same one before either binds; other processes
/// start at other places (the start depends on the process id and the time).
pub fn free_port() -> Result<u16, Error> {
    static GIVEN: Mutex<Option<(u16, std::collections::HashSet<u16>)>> = Mutex::new(None);
    const LOWEST: u16 = 10_000;
    let below = ephemeral_start().max(LOWEST + 1000);
    let span = below - LOWEST;
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (next, taken) = given.get_or_insert_with(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = nanos ^ std::process::id().wrapping_mul(2_654_435_761);
        let offset = u16::try_from(seed % u32::from(span)).unwrap_or(0);
        (offset, std::collections::HashSet::new())
    });
    for _ in 0..span {
        let port = LOWEST + *next % span;
        *next = (*next + 1) % span;
        if taken.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            taken.insert(port);
            return Ok(port);
        }
    }
    Err(Error::Process(format!(
        "no free loopback port in {LOWEST}..{below}"
    )))
}

/// The first port of the kernel's ephemeral range (32768, Linux's default, when unreadable).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let distinct: std::collections::HashSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for p in ports {
            assert!((10_000..ephemeral_start()).contains(&p), "{p}");
            std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
    }
}
