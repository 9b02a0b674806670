//! Listen addresses written the Go way: `:8080` (all interfaces), `127.0.0.1:8080`, `[::1]:8080`,
//! `localhost:8080`, or `0` to turn the server off (controller-runtime's convention).

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use tokio::net::TcpListener;

/// Where a server listens, or that it is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindAddress {
    /// `0`: do not serve.
    Disabled,
    /// `host:port`; an empty host means every interface.
    Listen {
        /// Host name or IP (without brackets); empty for all interfaces.
        host: String,
        /// TCP port; 0 picks a free one.
        port: u16,
    },
}

impl BindAddress {
    /// Parses `host:port`, `:port` or `0`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "0" {
            return Ok(BindAddress::Disabled);
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} is not of the form host:port (or 0 to disable)"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{s:?} has an invalid port {port:?}"))?;
        let host = if let Some(inner) = host.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| format!("{s:?} has an unbalanced '['"))?;
            inner
                .parse::<Ipv6Addr>()
                .map_err(|_| format!("{s:?} has an invalid IPv6 address"))?;
            inner.to_string()
        } else {
            if host.contains(':') {
                return Err(format!(
                    "{s:?}: IPv6 addresses must be written in brackets, as [::1]:8080"
                ));
            }
            if host.chars().any(|c| c.is_whitespace() || c == '/') {
                return Err(format!("{s:?} has an invalid host {host:?}"));
            }
            host.to_string()
        };
        Ok(BindAddress::Listen { host, port })
    }

    /// Binds a TCP listener. An empty host listens on every interface (IPv6 and IPv4 where the
    /// system allows dual-stack sockets, IPv4 only otherwise). `Ok(None)` when disabled.
    pub async fn bind(&self) -> io::Result<Option<TcpListener>> {
        match self {
            BindAddress::Disabled => Ok(None),
            BindAddress::Listen { host, port } if host.is_empty() => {
                let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, *port));
                match TcpListener::bind(v6).await {
                    Ok(l) => Ok(Some(l)),
                    Err(_) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, *port)))
                        .await
                        .map(Some),
                }
            }
            BindAddress::Listen { host, port } => {
                TcpListener::bind((host.as_str(), *port)).await.map(Some)
            }
        }
    }
}

impl FromStr for BindAddress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BindAddress::parse(s)
    }
}

impl fmt::Display for BindAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindAddress::Disabled => f.write_str("0"),
            BindAddress::Listen { host, port } if host.contains(':') => {
                write!(f, "[{host}]:{port}")
            }
            BindAddress::Listen { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        assert_eq!(BindAddress::parse("0").unwrap(), BindAddress::Disabled);
        assert_eq!(
            BindAddress::parse(":8080").unwrap(),
            BindAddress::Listen {
                host: String::new(),
                port: 8080
            }
        );
        assert_eq!(
            BindAddress::parse("[::1]:10357").unwrap().to_string(),
            "[::1]:10357"
        );
        assert_eq!(
            BindAddress::parse("127.0.0.1:1").unwrap().to_string(),
            "127.0.0.1:1"
        );
        for bad in ["8080", "host:port", ":99999", "::1:80", "[::1:80", ""] {
            assert!(BindAddress::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn binds_and_disables() {
        assert!(BindAddress::Disabled.bind().await.unwrap().is_none());
        let l = BindAddress::parse("127.0.0.1:0")
            .unwrap()
            .bind()
            .await
            .unwrap()
            .unwrap();
        assert!(l.local_addr().unwrap().port() > 0);
    }
}
