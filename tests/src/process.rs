//! What the benchmark reads off the controller-manager process: CPU seconds and memory from `/proc`,
//! and request counters from its `/metrics` endpoint.

use std::collections::BTreeMap;

use serde::Serialize;

/// CPU and memory of one process at one moment, from `/proc/<pid>/stat` and `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ProcessSample {
    /// User + system CPU time since the process started, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size now, in MiB.
    pub rss_mib: f64,
    /// Peak resident set size since the process started (`VmHWM`), in MiB.
    pub peak_rss_mib: f64,
}

impl ProcessSample {
    /// Reads the sample of `pid`; `None` when the process is gone or `/proc` cannot be read.
    pub fn read(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name is in parentheses and may hold spaces: fields count from after the last ')'.
        let after = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        // After ')': state is field 3 of stat(5), so utime (14) and stime (15) are at 11 and 12 here.
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kib = |key: &str| -> Option<f64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        Some(ProcessSample {
            cpu_seconds: (utime + stime) / ticks.max(1.0),
            rss_mib: kib("VmRSS:")? / 1024.0,
            peak_rss_mib: kib("VmHWM:")? / 1024.0,
        })
    }
}

/// Established TCP connections from the processes `pids` to each local port of `ports` (summed
/// over the processes; 0 for a port none reaches): the sockets among their file descriptors
/// (`/proc/<pid>/fd`) whose remote end, in `/proc/<pid>/net/tcp` and `tcp6`, is that port. A process
/// that is gone counts nothing.
pub fn connections_to(pids: &[u32], ports: &[u16]) -> BTreeMap<u16, usize> {
    let mut out: BTreeMap<u16, usize> = ports.iter().map(|&p| (p, 0)).collect();
    for &pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let sockets: std::collections::BTreeSet<String> = fds
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter_map(|target| {
                let t = target.to_str()?;
                Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
            })
            .collect();
        for table in ["tcp", "tcp6"] {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                // sl, local, remote, state ("01": established), …, inode (field 9).
                let (Some(remote), Some(&"01"), Some(inode)) = (f.get(2), f.get(3), f.get(9))
                else {
                    continue;
                };
                let port = remote
                    .rsplit_once(':')
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
                if let Some(n) = port.and_then(|p| out.get_mut(&p))
                    && sockets.contains(*inode)
                {
                    *n += 1;
                }
            }
        }
    }
    out
}

/// One sample line of the Prometheus text format: name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Label pairs.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// Parses the samples of a Prometheus text exposition; comment and malformed lines are skipped.
pub fn parse_metrics(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        None => (series, BTreeMap::new()),
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)?),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `a="x",b="y"` (values may contain escaped quotes and commas).
fn parse_labels(mut s: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.insert(key.trim_start_matches(',').trim().to_string(), value);
        s = rest[end + 1..].trim_start_matches(',');
    }
    Some(out)
}

/// API requests by target (`host` or `members`) and HTTP method, from `rest_client_requests_total`
/// (the control plane's series carry `cluster=""`, a member's its name).
pub type RequestCounts = BTreeMap<String, BTreeMap<String, u64>>;

/// Sums `rest_client_requests_total` by target and method.
pub fn request_counts(samples: &[Sample]) -> RequestCounts {
    let mut out = RequestCounts::new();
    for s in samples
        .iter()
        .filter(|s| s.name == "rest_client_requests_total")
    {
        let target = match s.labels.get("cluster").map(String::as_str) {
            None | Some("") => "host",
            Some(_) => "members",
        };
        let method = s.labels.get("method").cloned().unwrap_or_default();
        *out.entry(target.to_string())
            .or_default()
            .entry(method)
            .or_default() += s.value as u64;
    }
    out
}

/// `after - before`, per target and method (counters only grow within one process).
pub fn request_delta(before: &RequestCounts, after: &RequestCounts) -> RequestCounts {
    let mut out = RequestCounts::new();
    for (target, methods) in after {
        for (method, n) in methods {
            let prior = before
                .get(target)
                .and_then(|m| m.get(method))
                .copied()
                .unwrap_or(0);
            out.entry(target.clone())
                .or_default()
                .insert(method.clone(), n.saturating_sub(prior));
        }
    }
    out
}

/// Writes (POST, PUT, PATCH, DELETE) to one target.
pub fn writes(counts: &RequestCounts, target: &str) -> u64 {
    counts.get(target).map_or(0, |m| {
        m.iter()
            .filter(|(method, _)| matches!(method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE"))
            .map(|(_, n)| n)
            .sum()
    })
}

/// The API server's own request counts (`apiserver_request_total`) for `verbs`, with each
/// sample's verb.
fn request_samples<'a>(
    samples: &'a [Sample],
    verbs: &'a [&str],
) -> impl Iterator<Item = (&'a Sample, &'a str)> {
    samples
        .iter()
        .filter(|s| s.name == "apiserver_request_total")
        .filter_map(move |s| {
            let verb = s.labels.get("verb").map_or("", String::as_str);
            verbs.contains(&verb).then_some((s, verb))
        })
}

/// Write verbs as `apiserver_request_total` names them.
const WRITE_VERBS: &[&str] = &["POST", "PUT", "PATCH", "DELETE"];
/// Single-object and list reads (watches are long-running and counted apart).
const READ_VERBS: &[&str] = &["GET", "LIST"];

/// Writes to Events (`core/v1`) the API server served, by verb (`POST`, `PATCH`, …), from its own
/// `apiserver_request_total`: what Event recorders cost.
pub fn event_writes(samples: &[Sample]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (s, verb) in request_samples(samples, WRITE_VERBS).filter(|(s, _)| {
        s.labels.get("resource").map(String::as_str) == Some("events")
            && s.labels.get("group").is_none_or(String::is_empty)
    }) {
        *out.entry(verb.to_string()).or_default() += s.value as u64;
    }
    out
}

/// Writes the host API server served, by resource (`events`, `resourcebindings/status`, …; the
/// group left out), from its own `apiserver_request_total`: what each kind of object costs, whoever
/// wrote it (the benchmark's own template creates and kube-controller-manager's few writes included).
pub fn host_writes_by_resource(samples: &[Sample]) -> BTreeMap<String, u64> {
    by_resource(samples, WRITE_VERBS)
}

/// Reads (GET and LIST) the host API server served, by resource, like
/// [`host_writes_by_resource`] (the benchmark's and its observer's own reads are few: watches).
pub fn host_reads_by_resource(samples: &[Sample]) -> BTreeMap<String, u64> {
    by_resource(samples, READ_VERBS)
}

fn by_resource(samples: &[Sample], verbs: &[&str]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (s, _) in request_samples(samples, verbs) {
        let resource = s.labels.get("resource").cloned().unwrap_or_default();
        let key = match s.labels.get("subresource").filter(|r| !r.is_empty()) {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        *out.entry(key).or_default() += s.value as u64;
    }
    out
}

/// `after - before`, per key.
pub fn count_delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, n)| {
            (
                k.clone(),
                n.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .collect()
}

/// Sum of every series of `name`.
pub fn total(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.value)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_process_connections_to_a_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (port, unused) = (
            listener.local_addr().unwrap().port(),
            other.local_addr().unwrap().port(),
        );
        let _a = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _b = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        // The accepted ends' remote port is the client's, not the listener's: not counted.
        let _accepted = (listener.accept().unwrap(), listener.accept().unwrap());
        let counted = connections_to(&[std::process::id()], &[port, unused]);
        assert_eq!(counted, BTreeMap::from([(port, 2), (unused, 0)]));
        assert_eq!(connections_to(&[u32::MAX], &[port])[&port], 0);
    }

    #[test]
    fn parses_labels_values_and_counts_requests() {
        let text = "# HELP x y\n# TYPE rest_client_requests_total counter\n\
            rest_client_requests_total{cluster=\"\",code=\"201\",method=\"POST\",host=\"127.0.0.1:1\"} 5\n\
            rest_client_requests_total{cluster=\"member1\",code=\"200\",method=\"GET\",host=\"a\\\"b,c\"} 2\n\
            rest_client_requests_total{cluster=\"member2\",code=\"200\",method=\"PUT\",host=\"h\"} 3\n\
            workqueue_depth{cluster=\"\",name=\"work\",controller=\"work\"} 0\n\
            process_cpu_seconds_total 1.5\n";
        let samples = parse_metrics(text);
        assert_eq!(samples.len(), 5);
        assert_eq!(samples[1].labels["host"], "a\"b,c");
        assert_eq!(samples[4].value, 1.5);
        let counts = request_counts(&samples);
        assert_eq!(counts["host"]["POST"], 5);
        assert_eq!(counts["members"]["GET"], 2);
        assert_eq!(writes(&counts, "members"), 3);
        assert_eq!(writes(&counts, "host"), 5);
        let mut later = counts.clone();
        *later.get_mut("host").unwrap().get_mut("POST").unwrap() += 4;
        assert_eq!(request_delta(&counts, &later)["host"]["POST"], 4);
        assert_eq!(total(&samples, "workqueue_depth"), 0.0);
    }

    #[test]
    fn reads_its_own_process() {
        let s = ProcessSample::read(std::process::id()).expect("own /proc entry");
        assert!(s.rss_mib > 0.0 && s.peak_rss_mib >= s.rss_mib);
    }
}
