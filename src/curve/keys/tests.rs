use super::*;

const PUBLIC: &str = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
const SECRET: &str = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";
/// The client key pair of libzmq's documentation.
const CLIENT_PUBLIC: &str = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
const CLIENT_SECRET: &str = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs";

/// A secret certificate as pyzmq writes it, at a path of this test's own, with `mode`.
fn certificate(name: &str, public: &str, mode: u32) -> std::path::PathBuf {
    let text = format!(
        "#   ZeroMQ CURVE **Secret** Certificate\n\nmetadata\ncurve\n    public-key = \
         \"{public}\"\n    secret-key = \"{SECRET}\"\n"
    );
    let path = std::env::temp_dir().join(format!(
        "curve-test-{}-{name}.key_secret",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    path
}

#[test]
fn a_key_reads_back_as_the_text_it_was_read_from() {
    let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
    assert_eq!(pair.public().to_z85(), PUBLIC);
    assert_eq!(encode(pair.secret()), SECRET);
}

#[test]
fn a_public_key_is_the_one_libzmq_makes_of_its_secret() {
    for (public, secret) in [(PUBLIC, SECRET), (CLIENT_PUBLIC, CLIENT_SECRET)] {
        let made = CurvePublicKey::of(&decode(secret, "a secret key").unwrap());
        assert_eq!(made.to_z85(), public);
    }
    // libzmq's own generator, where this build has it.
    #[cfg(feature = "libzmq")]
    for _ in 0..20 {
        let pair = zmq::CurveKeyPair::new().unwrap();
        assert_eq!(CurvePublicKey::of(&pair.secret_key).0, pair.public_key);
    }
}

#[test]
fn halves_of_two_pairs_are_refused_naming_both_fingerprints_and_no_secret() {
    let err = CurveKeyPair::from_z85(CLIENT_PUBLIC, SECRET)
        .unwrap_err()
        .to_string();
    assert!(err.contains("do not belong together"), "{err}");
    assert!(
        err.contains(&CLIENT_PUBLIC[..8]) && err.contains(&PUBLIC[..8]),
        "{err}"
    );
    assert!(
        !err.contains(SECRET) && !err.contains(&SECRET[..8]),
        "{err}"
    );
}

#[test]
fn a_bad_key_is_refused_without_quoting_it() {
    let err = CurveKeyPair::from_z85(PUBLIC, "not-a-secret-key-at-all").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("40 characters"), "{text}");
    assert!(!text.contains("not-a-secret"), "{text}");
}

#[test]
fn a_certificate_file_as_pyzmq_writes_it_is_read() {
    let path = certificate("ok", PUBLIC, 0o600);
    let pair = CurveKeyPair::from_file(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(pair.public().to_z85(), PUBLIC);
    assert_eq!(
        pair.secret(),
        CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap().secret()
    );
}

#[test]
fn a_certificate_whose_keys_do_not_belong_together_is_refused_naming_it() {
    let path = certificate("mixed", CLIENT_PUBLIC, 0o600);
    let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("do not belong together"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_secret_certificate_others_may_read_is_refused_with_the_chmod_that_fixes_it() {
    for mode in [0o644, 0o640, 0o604, 0o620] {
        let path = certificate(&format!("{mode:o}"), PUBLIC, mode);
        let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(&format!("mode 0{mode:o}")), "{err}");
        assert!(
            err.contains(&format!("`chmod 600 {}`", path.display())),
            "{err}"
        );
    }
    for mode in [0o600, 0o400] {
        let path = certificate(&format!("{mode:o}"), PUBLIC, mode);
        let read = CurveKeyPair::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert!(read.is_ok(), "mode {mode:o}: {read:?}");
    }
}

#[cfg(unix)]
#[test]
fn certificates_are_written_with_the_secret_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("curve-test-{}-written", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
    let (public, secret) = pair.create_certificates(&dir, "server").unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let (public_mode, secret_mode) = (mode(&public), mode(&secret));
    let read_public = CurvePublicKey::from_file(&public).unwrap();
    let read_pair = CurveKeyPair::from_file(&secret).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(secret_mode, 0o600);
    assert_eq!(public_mode & 0o600, 0o600, "{public_mode:o}");
    assert_eq!(read_public.to_z85(), PUBLIC);
    assert_eq!(read_pair.secret(), pair.secret());
}

#[test]
fn a_public_certificate_is_not_taken_for_a_key_pair() {
    let path = std::env::temp_dir().join(format!("curve-test-{}.key", std::process::id()));
    std::fs::write(&path, format!("curve\n    public-key = \"{PUBLIC}\"\n")).unwrap();
    let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(err.contains("secret-key"), "{err}");
}

#[test]
fn forty_characters_outside_z85_are_refused_not_read_as_a_key() {
    let err = CurvePublicKey::from_z85(&"~".repeat(40))
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside its alphabet"), "{err}");
}
