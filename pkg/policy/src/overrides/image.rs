//! Container image references split into registry, repository and tag/digest, with the grammar of
//! the Docker distribution `reference` package Karmada's `imageparser` relies on.

/// An image `[registry/]repository[:tag|@digest]` split into its components.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ImageComponents {
    /// Registry host, optionally with a port (`registry.k8s.io`, `localhost:5000`).
    pub(crate) hostname: String,
    /// Repository path without the registry (`karmada/karmada-controller-manager`).
    pub(crate) repository: String,
    /// Tag (`v1.0.0`).
    pub(crate) tag: String,
    /// Digest (`sha256:…`), only when there is no tag.
    pub(crate) digest: String,
}

impl ImageComponents {
    /// Parses an image reference. As in Karmada, a reference with both a tag and a digest keeps
    /// only the tag.
    pub(crate) fn parse(image: &str) -> Result<Self, String> {
        if image.is_empty() {
            return Err("repository name must have at least one component".to_owned());
        }
        let (before_digest, digest) = match image.split_once('@') {
            Some((before, digest)) => (before, Some(digest)),
            None => (image, None),
        };
        let last_slash = before_digest.rfind('/');
        let (name, tag) = match before_digest.rfind(':') {
            Some(colon) if last_slash.is_none_or(|slash| colon > slash) => {
                (&before_digest[..colon], Some(&before_digest[colon + 1..]))
            }
            _ => (before_digest, None),
        };
        let invalid = || "invalid reference format".to_owned();
        if !is_valid_name(name) {
            if is_valid_name(&name.to_lowercase()) {
                return Err(
                    "invalid reference format: repository name must be lowercase".to_owned(),
                );
            }
            return Err(invalid());
        }
        if name.len() > 255 {
            return Err("repository name must not be more than 255 characters".to_owned());
        }
        if tag.is_some_and(|tag| !is_valid_tag(tag)) {
            return Err(invalid());
        }
        if let Some(digest) = digest {
            validate_digest(digest)?;
        }
        let (hostname, repository) = split_hostname(name);
        let mut components = Self {
            hostname: hostname.to_owned(),
            repository: repository.to_owned(),
            ..Self::default()
        };
        if let Some(tag) = tag {
            components.tag = tag.to_owned();
        } else if let Some(digest) = digest {
            components.digest = digest.to_owned();
        }
        Ok(components)
    }

    /// The tag, or the digest when there is no tag.
    pub(crate) fn tag_or_digest(&self) -> &str {
        if self.tag.is_empty() {
            &self.digest
        } else {
            &self.tag
        }
    }

    /// Sets the tag if `input` is a valid tag, else the digest if it looks like one; otherwise
    /// leaves the image unchanged (Karmada's behaviour).
    pub(crate) fn set_tag_or_digest(&mut self, input: &str) {
        if is_valid_tag(input) {
            self.tag = input.to_owned();
            self.digest.clear();
        } else if looks_like_digest(input) {
            self.digest = input.to_owned();
            self.tag.clear();
        }
    }

    /// Removes the tag if there is one, else the digest.
    pub(crate) fn remove_tag_or_digest(&mut self) {
        if self.tag.is_empty() {
            self.digest.clear();
        } else {
            self.tag.clear();
        }
    }

    fn full_repository(&self) -> String {
        if self.hostname.is_empty() {
            self.repository.clone()
        } else {
            format!("{}/{}", self.hostname, self.repository)
        }
    }
}

impl std::fmt::Display for ImageComponents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let repository = self.full_repository();
        if !self.tag.is_empty() {
            write!(f, "{repository}:{}", self.tag)
        } else if !self.digest.is_empty() {
            write!(f, "{repository}@{}", self.digest)
        } else {
            f.write_str(&repository)
        }
    }
}

/// Karmada's `SplitHostname`: the first path segment is a registry only if it contains `.` or `:`
/// or is `localhost`.
fn split_hostname(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => ("", name),
    }
}

/// `[domain[:port]/]path-component(/path-component)*`.
fn is_valid_name(name: &str) -> bool {
    if is_remote_name(name) {
        return true;
    }
    match name.split_once('/') {
        Some((domain, rest)) => is_domain_and_port(domain) && is_remote_name(rest),
        None => false,
    }
}

fn is_remote_name(s: &str) -> bool {
    !s.is_empty() && s.split('/').all(is_path_component)
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`.
fn is_path_component(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    let mut expect_alnum = true;
    while i < bytes.len() {
        if expect_alnum {
            if !alnum(bytes[i]) {
                return false;
            }
            while i < bytes.len() && alnum(bytes[i]) {
                i += 1;
            }
            expect_alnum = false;
        } else {
            // A separator: '.', '_', '__' or one or more '-'.
            match bytes[i] {
                b'.' => i += 1,
                b'_' => {
                    i += 1;
                    if bytes.get(i) == Some(&b'_') {
                        i += 1;
                    }
                }
                b'-' => {
                    while bytes.get(i) == Some(&b'-') {
                        i += 1;
                    }
                }
                _ => return false,
            }
            expect_alnum = true;
        }
    }
    !bytes.is_empty() && !expect_alnum
}

/// `host(:port)?` where host is a domain name or a bracketed IPv6 address.
fn is_domain_and_port(s: &str) -> bool {
    let valid_port = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = s.strip_prefix('[') {
        let Some((addr, after)) = rest.split_once(']') else {
            return false;
        };
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return false;
        }
        return after.is_empty() || after.strip_prefix(':').is_some_and(valid_port);
    }
    let (host, port) = match s.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (s, None),
    };
    let valid_component = |c: &str| {
        let b = c.as_bytes();
        b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
    };
    host.split('.').all(valid_component) && port.is_none_or(valid_port)
}

/// `[\w][\w.-]{0,127}`.
fn is_valid_tag(s: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes.iter().all(|b| word(*b) || *b == b'.' || *b == b'-')
}

/// The digest grammar: `algorithm:hex` with an algorithm of `[A-Za-z][A-Za-z0-9]*` components
/// joined by `-_+.` and at least 32 hex digits.
fn looks_like_digest(s: &str) -> bool {
    let Some((algorithm, hex)) = s.split_once(':') else {
        return false;
    };
    let component = |c: &str| {
        let b = c.as_bytes();
        !b.is_empty() && b[0].is_ascii_alphabetic() && b.iter().all(u8::is_ascii_alphanumeric)
    };
    algorithm.split(['-', '_', '+', '.']).all(component)
        && hex.len() >= 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A digest must match the grammar and use a known algorithm with the right length of lowercase
/// hex (sha256: 64, sha384: 96, sha512: 128).
fn validate_digest(digest: &str) -> Result<(), String> {
    if !looks_like_digest(digest) {
        return Err("invalid reference format".to_owned());
    }
    let (algorithm, hex) = digest.split_once(':').unwrap_or_default();
    let expected = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(format!("unsupported digest algorithm {algorithm:?}")),
    };
    if hex.len() != expected
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("invalid checksum digest format {digest:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:50d858e0985ecc7f60418aaf0cc5ab587f42c2570a884095a9e8ccacd0f6545c";

    fn parts(image: &str) -> (String, String, String, String) {
        let c = ImageComponents::parse(image).unwrap();
        (c.hostname, c.repository, c.tag, c.digest)
    }

    #[test]
    fn parses_components() {
        assert_eq!(
            parts("nginx"),
            ("".into(), "nginx".into(), "".into(), "".into())
        );
        assert_eq!(
            parts("nginx:1.19"),
            ("".into(), "nginx".into(), "1.19".into(), "".into())
        );
        assert_eq!(
            parts("registry.k8s.io/kube-apiserver:v1.30.0"),
            (
                "registry.k8s.io".into(),
                "kube-apiserver".into(),
                "v1.30.0".into(),
                "".into()
            )
        );
        assert_eq!(
            parts("fictional.registry.example:10443/karmada/karmada-controller-manager:v1.0.0"),
            (
                "fictional.registry.example:10443".into(),
                "karmada/karmada-controller-manager".into(),
                "v1.0.0".into(),
                "".into()
            )
        );
        assert_eq!(
            parts("library/nginx"),
            ("".into(), "library/nginx".into(), "".into(), "".into())
        );
        assert_eq!(
            parts("localhost/nginx"),
            ("localhost".into(), "nginx".into(), "".into(), "".into())
        );
        assert_eq!(
            parts("localhost:5000/a"),
            ("localhost:5000".into(), "a".into(), "".into(), "".into())
        );
        assert_eq!(
            parts(&format!("nginx@{SHA}")),
            ("".into(), "nginx".into(), "".into(), SHA.into())
        );
        // Tag and digest: only the tag is kept.
        assert_eq!(
            parts(&format!("nginx:1.0@{SHA}")),
            ("".into(), "nginx".into(), "1.0".into(), "".into())
        );
        assert_eq!(
            parts("[::1]:5000/a:b"),
            ("[::1]:5000".into(), "a".into(), "b".into(), "".into())
        );
        assert_eq!(
            parts("a__b/c-----d"),
            ("".into(), "a__b/c-----d".into(), "".into(), "".into())
        );
    }

    #[test]
    fn rejects_invalid() {
        for bad in [
            "",
            "Nginx",
            "nginx:",
            "nginx:-tag",
            "a//b",
            "nginx@sha256:abc",
            "nginx@md5:50d858e0985ecc7f60418aaf0cc5ab58",
            ":tag",
            "a___b",
            "-a",
            "a-",
        ] {
            assert!(
                ImageComponents::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        let long = "a".repeat(256);
        assert!(ImageComponents::parse(&long).is_err());
    }

    #[test]
    fn tag_or_digest_updates() {
        let mut c = ImageComponents::parse("nginx:1.0").unwrap();
        c.set_tag_or_digest(SHA);
        assert_eq!(c.to_string(), format!("nginx@{SHA}"));
        c.set_tag_or_digest("not a tag!");
        assert_eq!(c.to_string(), format!("nginx@{SHA}"));
        c.set_tag_or_digest("2.0");
        assert_eq!(c.to_string(), "nginx:2.0");
        c.remove_tag_or_digest();
        assert_eq!(c.to_string(), "nginx");
        assert_eq!(c.tag_or_digest(), "");
    }
}
