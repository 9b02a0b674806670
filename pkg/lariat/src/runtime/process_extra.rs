//! The process metrics Go's Prometheus client exports on Linux beyond those of the `prometheus`
//! crate's process collector: `process_network_receive_bytes_total`,
//! `process_network_transmit_bytes_total` (bytes over every interface of the process's network
//! namespace, from `/proc/self/net/dev`) and `process_virtual_memory_max_bytes` (the address-space
//! limit from `/proc/self/limits`; "unlimited" reads as 2^64 - 1, as Go's procfs reads it). A
//! dashboard built on Go components' process metrics finds the same series here.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, Opts};

/// Collects the three families from `/proc/self` at each scrape; a file that cannot be read leaves
/// its families out of that scrape.
pub struct ExtraProcessCollector {
    receive: Counter,
    transmit: Counter,
    max_vsize: Gauge,
    descs: Vec<Desc>,
}

impl ExtraProcessCollector {
    /// The collector, or an error if a definition is invalid.
    pub fn new() -> prometheus::Result<Self> {
        let receive = Counter::with_opts(Opts::new(
            "process_network_receive_bytes_total",
            "Number of bytes received by the process over the network.",
        ))?;
        let transmit = Counter::with_opts(Opts::new(
            "process_network_transmit_bytes_total",
            "Number of bytes sent by the process over the network.",
        ))?;
        let max_vsize = Gauge::with_opts(Opts::new(
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
        ))?;
        let descs = [receive.desc(), transmit.desc(), max_vsize.desc()]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        Ok(Self {
            receive,
            transmit,
            max_vsize,
            descs,
        })
    }
}

impl Collector for ExtraProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        if let Some((rx, tx)) = std::fs::read_to_string("/proc/self/net/dev")
            .ok()
            .and_then(|t| net_dev_totals(&t))
        {
            // Counters only go up: set them to the kernel's totals by adding the difference.
            let set = |c: &Counter, total: f64| {
                let delta = total - c.get();
                if delta > 0.0 {
                    c.inc_by(delta);
                }
            };
            set(&self.receive, rx);
            set(&self.transmit, tx);
            out.extend(self.receive.collect());
            out.extend(self.transmit.collect());
        }
        if let Some(max) = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| address_space_limit(&t))
        {
            self.max_vsize.set(max);
            out.extend(self.max_vsize.collect());
        }
        out
    }
}

/// Received and transmitted bytes summed over the interfaces of a `/proc/<pid>/net/dev` text.
fn net_dev_totals(text: &str) -> Option<(f64, f64)> {
    let mut rx = 0u64;
    let mut tx = 0u64;
    for line in text.lines().skip(2) {
        let (_, counters) = line.split_once(':')?;
        let fields: Vec<&str> = counters.split_whitespace().collect();
        rx = rx.saturating_add(fields.first()?.parse().ok()?);
        tx = tx.saturating_add(fields.get(8)?.parse().ok()?);
    }
    #[allow(clippy::cast_precision_loss, reason = "a Prometheus sample is an f64")]
    Some((rx as f64, tx as f64))
}

/// The soft "Max address space" limit of a `/proc/<pid>/limits` text, in bytes.
fn address_space_limit(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    let soft = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        #[allow(
            clippy::cast_precision_loss,
            reason = "Go's procfs reports unlimited so"
        )]
        return Some(u64::MAX as f64);
    }
    soft.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_sums_every_interface() {
        let text = "Inter-|   Receive | Transmit\n face |bytes packets|bytes\n\
                    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n\
                    eth0: 20 2 0 0 0 0 0 0 7 3 0 0 0 0 0 0\n";
        assert_eq!(net_dev_totals(text), Some((120.0, 107.0)));
        assert_eq!(net_dev_totals("a\nb\nlo: x"), None);
    }

    #[test]
    fn address_space_limit_reads_the_soft_limit() {
        let unlimited = "Limit Soft Hard Units\nMax address space unlimited unlimited bytes\n";
        #[allow(clippy::cast_precision_loss)]
        let max = u64::MAX as f64;
        assert_eq!(address_space_limit(unlimited), Some(max));
        let set = "Max address space         4096            unlimited            bytes\n";
        assert_eq!(address_space_limit(set), Some(4096.0));
    }

    #[test]
    fn collects_the_three_families_here() {
        let c = ExtraProcessCollector::new().unwrap();
        let names: Vec<String> = c.collect().iter().map(|f| f.name().to_owned()).collect();
        assert_eq!(
            names,
            [
                "process_network_receive_bytes_total",
                "process_network_transmit_bytes_total",
                "process_virtual_memory_max_bytes"
            ]
        );
    }
}
