//! After the process that started an environment dies, even by SIGKILL, none of its processes survive.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testenv::process::pid_alive;

#[test]
fn killing_the_owner_leaves_no_process_behind() {
    let dir = std::env::temp_dir().join(format!("karmada-rs-leftovers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ready = dir.join("ready");
    let mut owner = Command::new(env!("CARGO_BIN_EXE_testenv"))
        .args(["up", "--members", "1"])
        .arg("--dir")
        .arg(dir.join("env"))
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready.exists() {
        if let Some(status) = owner.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            owner
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("testenv up exited early ({status}):\n{err}");
        }
        assert!(Instant::now() < deadline, "testenv up not ready in 120s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pids: Vec<u32> = std::fs::read_to_string(dir.join("env/pids"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    // etcd, host kube-apiserver, host kube-controller-manager, member kube-apiserver.
    assert_eq!(pids.len(), 4, "recorded pids: {pids:?}");
    assert!(
        pids.iter().all(|p| pid_alive(*p)),
        "all started processes run"
    );

    owner.kill().unwrap();
    owner.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| pid_alive(*p)).collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes still alive 10s after their owner was killed: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
