//! Hostile input to karmadactl's parsers:
//! - bootstrap tokens (`--token` of `register`, a value someone hands the operator);
//! - the `cluster-info` ConfigMap that `register` reads from an API server it does not trust yet:
//!   the detached JWS, the CA bundle and its public-key pins;
//! - member kubeconfigs (`join --cluster-kubeconfig`, the Cluster API Secret the controller-manager
//!   joins from), parsed by kube's `Kubeconfig::from_yaml`.
//!
//! Random and adversarial input must parse or be refused with an error; nothing may panic or
//! allocate without bound.

use karmadactl::bootstrap::{
    Token, check_pins, detached_jws, detached_jws_valid, pem_certificates, public_key_pin,
};
use proptest::prelude::*;

const CASES: u32 = 256;

fn token() -> Token {
    Token {
        id: "abcdef".to_owned(),
        secret: "0123456789abcdef".to_owned(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn tokens_parse_only_in_their_form(text in prop_oneof![
        "[a-z0-9]{6}\\.[a-z0-9]{16}",
        "[a-zA-Z0-9.]{0,30}",
        "\\PC{0,30}",
        Just("abcdef.0123456789abcdeé".to_owned()),
        Just("abcdéf.0123456789abcde".to_owned()),
    ]) {
        match Token::parse(&text) {
            Ok(t) => {
                prop_assert_eq!(t.to_string(), text.clone());
                prop_assert!(!format!("{t:?}").contains(&t.secret), "Debug must not show the secret");
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.contains("[a-z0-9]{6}.[a-z0-9]{16}"), "{message}");
            }
        }
    }

    #[test]
    fn detached_signatures_are_checked_not_trusted(
        detached in prop_oneof!["[A-Za-z0-9_.=-]{0,80}", "\\PC{0,40}"],
        content in "\\PC{0,40}",
    ) {
        prop_assert!(!detached_jws_valid(&detached, &content, &token()));
        // The real signature over other content does not verify either.
        let signed = detached_jws(&content, &token());
        prop_assert!(detached_jws_valid(&signed, &content, &token()));
        let other = format!("{content}x");
        prop_assert!(!detached_jws_valid(&signed, &other, &token()));
    }

    #[test]
    fn ca_bundles_are_refused_when_malformed(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = pem_certificates(&bytes);
        let _ = public_key_pin(&bytes);
        let wrapped = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes)
        );
        let pin = format!("sha256:{}", "0".repeat(64));
        prop_assert!(check_pins(wrapped.as_bytes(), &[pin]).is_err());
    }

    #[test]
    fn pins_are_validated(pin in prop_oneof!["(sha256:|md5:|:)?[0-9a-fA-F]{0,70}", "\\PC{0,40}"]) {
        let err = check_pins(b"", std::slice::from_ref(&pin));
        prop_assert!(err.is_err());
    }

    #[test]
    fn kubeconfigs_parse_or_are_refused(text in "\\PC{0,200}") {
        let _ = kube::config::Kubeconfig::from_yaml(&text);
    }
}

/// Deep nesting and alias bombs in a kubeconfig are refused, not expanded.
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
    bomb.push_str("clusters: *k\n");
    let started = std::time::Instant::now();
    assert!(kube::config::Kubeconfig::from_yaml(&bomb).is_err());
    // Expanded, the bomb is 9^11 strings: hours and all memory. Refused, it takes about 0.5 s in a
    // debug build; the bound leaves room for a loaded machine (load 24 on 2 cores took over 5 s).
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    for deep in [
        format!("clusters: {}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("preferences: {}", "{a: ".repeat(100_000)),
        "- ".repeat(100_000),
    ] {
        assert!(kube::config::Kubeconfig::from_yaml(&deep).is_err());
    }
}
