//! lariat's clients of one cluster share one transport, as client-go's transport cache makes every
//! client built from one config share one `http.Transport`: a request of one controller reuses the
//! connection another left idle, instead of each User-Agent opening (and keeping) its own.
//!
//! Alone in its test binary: it counts this process's TCP connections to the API server, which
//! another test running beside it in the same process would disturb.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashSet;
use std::time::Duration;

use lariat::ClusterOptions;
use support::*;
use testenv::{EnvOptions, TestEnv};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions::default())
}

/// The inodes of this process's sockets.
fn own_sockets() -> HashSet<u64> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// How many established TCP connections this process has to `port` (`/proc/net/tcp{,6}`: the
/// remote address is the third column as `HEX_IP:HEX_PORT`, the state the fourth (`01` is
/// ESTABLISHED), the inode the tenth).
fn connections_to(port: u16) -> usize {
    let own = own_sockets();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let remote_port = cols
                .get(2)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            let inode = cols.get(9).and_then(|i| i.parse::<u64>().ok());
            remote_port == Some(port)
                && cols.get(3) == Some(&"01")
                && inode.is_some_and(|i| own.contains(&i))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_of_a_cluster_reuses_one_idle_connection() {
    let config = env().host().kube_config().await.unwrap();
    let port = config.cluster_url.port_u16().unwrap();
    assert_eq!(connections_to(port), 0, "connections before any client");

    let c = cluster("it-transport", config, ClusterOptions::default());
    let f = c.clients();
    let clients = [
        ("the default client", f.client()),
        ("controller a", f.client_for_controller("a").unwrap()),
        ("controller b", f.client_for_controller("b").unwrap()),
        ("a component", f.client_for_component("scheduler").unwrap()),
        ("the background client", f.background_client().unwrap()),
    ];
    // One after another: each finds the connection the one before left idle in the pool.
    for (who, client) in &clients {
        client.apiserver_version().await.unwrap();
        assert_eq!(
            connections_to(port),
            1,
            "connections to the API server after a request of {who}"
        );
    }
    // At once: the pool opens what the concurrency needs, and keeps them for the next requests.
    let all = futures::future::join_all(clients.iter().map(|(_, c)| c.apiserver_version())).await;
    assert!(all.iter().all(Result::is_ok), "{all:?}");
    let opened = connections_to(port);
    assert!(
        (1..=clients.len()).contains(&opened),
        "{opened} connections for {} concurrent requests",
        clients.len()
    );
    for (_, client) in &clients {
        client.apiserver_version().await.unwrap();
    }
    assert_eq!(
        connections_to(port),
        opened,
        "idle connections were not reused"
    );
    c.stop(Duration::from_secs(5)).await;
}
