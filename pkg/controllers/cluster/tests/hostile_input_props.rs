//! Hostile input to the cluster controllers' parsers:
//! - certificate signing requests: anyone who may create a CSR (a bootstrap token, an agent)
//!   chooses the PEM/DER bytes the agent CSR approving controller parses;
//! - the agent's kubeconfig Secret (`karmada-kubeconfig`) that certificate rotation reads, which
//!   an administrator of the member cluster can edit.
//!
//! Random, truncated and bit-flipped input must parse or be refused with an error; nothing may
//! panic or allocate without bound.

// Test harness: the fixture helper outside the #[test] functions generates a fixed, valid CSR.
#![allow(clippy::unwrap_used)]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use karmada_controllers_cluster::agent_csr_approving::{NotAgentCsr, parse_request};
use karmada_controllers_cluster::cert_rotation::kubeconfig::AgentKubeconfig;
use proptest::prelude::*;

const CASES: u32 = 256;

/// A well-formed agent CSR, PEM and DER, generated once.
fn valid_request() -> &'static (Vec<u8>, Vec<u8>) {
    static REQUEST: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    REQUEST.get_or_init(|| {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["example.com".to_owned()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:karmada:agent:m1");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:karmada:agents");
        let csr = params.serialize_request(&key).unwrap();
        (csr.pem().unwrap().into_bytes(), csr.der().to_vec())
    })
}

fn pem(label: &str, body: &[u8]) -> Vec<u8> {
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        STANDARD.encode(body)
    )
    .into_bytes()
}

fn check_csr(bytes: &[u8]) -> Result<(), TestCaseError> {
    match parse_request(bytes) {
        Ok(subject) => {
            prop_assert!(subject.organizations.len() <= bytes.len());
        }
        Err(e) => {
            prop_assert!(matches!(e, NotAgentCsr::Unparsable(_)), "{e:?}");
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

/// DER-looking bytes: a SEQUENCE header with a random (possibly huge) length and random content.
fn der_like() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            Just(vec![0x30, 0x84, 0xff, 0xff, 0xff, 0xff]),
            Just(vec![
                0x30, 0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
            ]),
            Just(vec![0x30, 0x80]),
            Just(vec![0x30, 0x82, 0x01, 0x00]),
            proptest::collection::vec(any::<u8>(), 0..4),
        ],
        proptest::collection::vec(any::<u8>(), 0..256),
    )
        .prop_map(|(mut head, tail)| {
            head.extend(tail);
            head
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn random_bytes_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_csr(&bytes)?;
        check_csr(&pem("CERTIFICATE REQUEST", &bytes))?;
    }

    #[test]
    fn der_like_bytes_are_refused(bytes in der_like()) {
        check_csr(&bytes)?;
        check_csr(&pem("CERTIFICATE REQUEST", &bytes))?;
    }

    #[test]
    fn damaged_requests_parse_or_are_refused(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        pem_form in any::<bool>(),
    ) {
        let (pem_bytes, der) = valid_request();
        let mut bytes = if pem_form { pem_bytes.clone() } else { der.clone() };
        for (at, byte) in flips {
            let at = at.index(bytes.len());
            bytes[at] ^= byte;
        }
        check_csr(&bytes)?;
        let cut = cut.index(bytes.len() + 1);
        check_csr(&bytes[..cut])?;
    }

    #[test]
    fn kubeconfig_text_parses_or_is_refused(text in "\\PC{0,200}") {
        if let Ok(kc) = AgentKubeconfig::parse(text.as_bytes()) {
            let _ = kc.validity();
        }
    }

    #[test]
    fn kubeconfig_bytes_parse_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(kc) = AgentKubeconfig::parse(&bytes) {
            let _ = kc.validity();
        }
    }

    #[test]
    fn kubeconfig_certificates_parse_or_are_refused(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        label in prop_oneof![Just("CERTIFICATE"), Just("CERTIFICATE REQUEST"), Just("X")],
    ) {
        let data = STANDARD.encode(pem(label, &bytes));
        let text = format!(
            "current-context: c\ncontexts:\n- name: c\n  context:\n    user: u\nusers:\n- name: u\n  user:\n    client-certificate-data: {data}\n"
        );
        let kc = AgentKubeconfig::parse(text.as_bytes());
        prop_assert!(kc.is_ok(), "{:?}", kc.err());
        if let Ok(kc) = kc {
            let validity = kc.validity();
            if let Err(e) = validity {
                prop_assert!(e.to_string().contains("\"u\""), "{e}");
            }
        }
    }
}

#[test]
fn the_valid_request_parses() {
    let (pem, der) = valid_request();
    for bytes in [pem, der] {
        let subject = parse_request(bytes).unwrap();
        assert_eq!(subject.common_name, "system:karmada:agent:m1");
        assert_eq!(subject.sans, [1, 0, 0, 0]);
    }
}

#[test]
fn a_pem_block_of_another_kind_is_named() {
    let err = parse_request(&pem("CERTIFICATE", b"x")).unwrap_err();
    assert!(err.to_string().contains("CERTIFICATE"), "{err}");
}

/// YAML bombs: aliases that expand exponentially, and deep nesting.
#[test]
fn kubeconfig_yaml_bombs_are_refused_or_bounded() {
    let mut bomb = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let mut previous = 'a';
    for name in 'b'..='k' {
        bomb.push_str(&format!(
            "{name}: &{name} [*{previous},*{previous},*{previous},*{previous},*{previous},*{previous},*{previous},*{previous},*{previous}]\n"
        ));
        previous = name;
    }
    bomb.push_str("current-context: *k\n");
    let started = std::time::Instant::now();
    let _ = AgentKubeconfig::parse(bomb.as_bytes());
    // Expanded, the bomb is 9^11 strings: hours and all memory. Refused, it takes about 0.5 s in a
    // debug build; the bound leaves room for a loaded machine (load 24 on 2 cores took over 5 s).
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    for deep in [
        format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("a: {}", "{a: ".repeat(100_000)),
        "- ".repeat(100_000),
    ] {
        assert!(AgentKubeconfig::parse(deep.as_bytes()).is_err());
    }
}
