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
    // Errors name the resolved path: the temporary directory may be a link (macOS's `/tmp`).
    std::fs::canonicalize(path).unwrap()
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
        let mut bytes = [0u8; 32];
        decode(secret, "a secret key", &mut bytes).unwrap();
        let made = CurvePublicKey::of(&bytes);
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
fn forty_characters_outside_z85_are_refused_naming_the_first_bad_position_not_the_text() {
    let err = CurvePublicKey::from_z85(&"~".repeat(40))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("character 1 of this text is outside its alphabet"),
        "{err}"
    );
    // A secret with its 17th character (and a later one) out of the alphabet.
    let bad = format!("{}\"{}\"{}", &SECRET[..16], &SECRET[17..30], &SECRET[31..]);
    assert_eq!(bad.len(), 40);
    let err = CurveKeyPair::from_z85(PUBLIC, &bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("character 17 of this text"), "{err}");
    assert!(!err.contains(&SECRET[..8]) && !err.contains('"'), "{err}");
}

#[test]
fn forty_z85_characters_that_are_not_32_bytes_are_refused() {
    // `#` pads a value shorter than a group of 4 bytes; a group of 5 may exceed 32 bits.
    for text in [format!("{}#####", &PUBLIC[..35]), "%".repeat(40)] {
        let err = CurvePublicKey::from_z85(&text).unwrap_err().to_string();
        assert!(err.contains("decode to 32 bytes"), "{text}: {err}");
    }
}

/// A directory of this test's own, `0755`, by its resolved path (errors name that one).
#[cfg(unix)]
fn scratch(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("curve-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::canonicalize(&dir).unwrap()
}

/// Writes `text` at `path` with `mode`.
#[cfg(unix)]
fn file(path: &std::path::Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
fn secret_text() -> String {
    format!("curve\n    public-key = \"{PUBLIC}\"\n    secret-key = \"{SECRET}\"\n")
}

#[cfg(unix)]
fn public_text(key: &str) -> String {
    format!("curve\n    public-key = \"{key}\"\n")
}

/// Whether this test may give files to another user: CI runs as root; elsewhere the owner
/// tests are skipped, and say so.
#[cfg(unix)]
fn as_root(test: &str) -> bool {
    let root = super::super::files::effective_uid() == 0;
    if !root {
        eprintln!("{test}: skipped, it needs root to give a file to user 65534");
    }
    root
}

#[cfg(unix)]
fn give_to_nobody(path: &std::path::Path) {
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
}

#[cfg(unix)]
#[test]
fn a_secret_certificate_another_user_owns_is_refused_with_the_chown_that_fixes_it() {
    if !as_root("a_secret_certificate_another_user_owns_is_refused") {
        return;
    }
    let dir = scratch("secret-owner");
    let path = dir.join("server.key_secret");
    file(&path, &secret_text(), 0o600);
    give_to_nobody(&path);
    let strict = CurveKeyPair::from_file(&path).map(|_| ());
    let readable = CurveKeyPair::from_file_allowing_readable(&path).map(|_| ());
    std::fs::remove_dir_all(&dir).unwrap();
    for refused in [strict, readable] {
        let err = refused.unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("owned by user 65534"), "{err}");
        assert!(
            err.contains(&format!("`chown 0 {}`", path.display())),
            "{err}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_secret_certificate_is_checked_where_its_link_leads_and_the_error_says_where() {
    let dir = scratch("secret-link");
    let target = dir.join("server.key_secret");
    let link = dir.join("link.key_secret");
    file(&target, &secret_text(), 0o644);
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let open = CurveKeyPair::from_file(&link).map(|_| ());
    std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let owner_only = CurveKeyPair::from_file(&link);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = open.unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "{} (resolved to {})",
            link.display(),
            target.display()
        )),
        "{err}"
    );
    assert!(err.contains("mode 0644"), "{err}");
    assert!(
        err.contains(&format!("`chmod 600 {}`", target.display())),
        "{err}"
    );
    assert_eq!(owner_only.unwrap().public().to_z85(), PUBLIC);
}

#[cfg(unix)]
#[test]
fn a_secret_others_may_read_is_refused_naming_the_opt_in_for_orchestrator_mounts() {
    let dir = scratch("secret-readable");
    let path = dir.join("server.key_secret");
    for mode in [0o644, 0o640, 0o440, 0o444] {
        file(&path, &secret_text(), mode);
        let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
        assert!(err.contains(&format!("mode 0{mode:o}")), "{err}");
        assert!(err.contains("from_file_allowing_readable"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A Kubernetes secret volume: `name -> ..data/name`, `..data -> ..<timestamp>`, the file
/// `0644` (the default) or `0440`/`0640` (`fsGroup`); a Docker secret, `0444`.
#[cfg(unix)]
#[test]
fn an_orchestrators_readable_secret_is_read_when_asked_through_its_links() {
    use std::os::unix::fs::symlink;
    let dir = scratch("secret-mounted");
    std::fs::create_dir(dir.join("..2026_12_05")).unwrap();
    symlink("..2026_12_05", dir.join("..data")).unwrap();
    symlink("..data/server.key_secret", dir.join("server.key_secret")).unwrap();
    let target = dir.join("..2026_12_05/server.key_secret");
    let mut read = Vec::new();
    for mode in [0o644, 0o640, 0o440, 0o444, 0o600, 0o400] {
        file(&target, &secret_text(), mode);
        read.push((
            mode,
            CurveKeyPair::from_file_allowing_readable(dir.join("server.key_secret")),
        ));
        std::fs::remove_file(&target).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    for (mode, pair) in read {
        assert_eq!(pair.unwrap().public().to_z85(), PUBLIC, "mode {mode:o}");
    }
}

#[cfg(unix)]
#[test]
fn a_secret_others_may_write_is_refused_even_when_readable_secrets_are_allowed() {
    let dir = scratch("secret-writable");
    let path = dir.join("server.key_secret");
    for mode in [0o666, 0o664, 0o646, 0o620, 0o602] {
        file(&path, &secret_text(), mode);
        let err = CurveKeyPair::from_file_allowing_readable(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("mode 0{mode:o}")), "{err}");
        assert!(err.contains("may write it"), "{err}");
        assert!(
            err.contains(&format!("`chmod go-w {}`", path.display())),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_public_certificate_others_may_write_is_refused_with_the_chmod_that_fixes_it() {
    let dir = scratch("public-writable");
    let path = dir.join("server.key");
    for mode in [0o666, 0o664, 0o646, 0o622] {
        file(&path, &public_text(PUBLIC), mode);
        let err = CurvePublicKey::from_file(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(&format!("mode 0{mode:o}")), "{err}");
        assert!(
            err.contains(&format!("`chmod go-w {}`", path.display())),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
    }
    for mode in [0o644, 0o444, 0o600] {
        file(&path, &public_text(PUBLIC), mode);
        let read = CurvePublicKey::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read.unwrap().to_z85(), PUBLIC, "mode {mode:o}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_public_certificate_or_allow_list_directory_another_user_owns_is_refused() {
    if !as_root("a_public_certificate_or_allow_list_directory_another_user_owns_is_refused") {
        return;
    }
    let dir = scratch("public-owner");
    let path = dir.join("server.key");
    file(&path, &public_text(PUBLIC), 0o644);
    give_to_nobody(&path);
    let file_err = CurvePublicKey::from_file(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    file(&path, &public_text(PUBLIC), 0o644);
    give_to_nobody(&dir);
    let dir_err = CurvePublicKey::from_dir(&dir).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    for (err, named) in [(file_err, &path), (dir_err, &dir)] {
        assert!(err.contains(&named.display().to_string()), "{err}");
        assert!(err.contains("owned by user 65534"), "{err}");
        assert!(
            err.contains(&format!("`chown 0 {}`", named.display())),
            "{err}"
        );
    }
}

/// In a directory others may write to (a shared `/tmp`, sticky or not), another local user
/// adds a key of their own: the directory is refused, whoever owns the files in it.
#[cfg(unix)]
#[test]
fn an_allow_list_directory_others_may_write_to_is_refused_even_when_sticky() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("allow-writable");
    file(&dir.join("worker.key"), &public_text(CLIENT_PUBLIC), 0o644);
    let mut refused = Vec::new();
    for mode in [0o1777, 0o777, 0o775, 0o757] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        refused.push((mode, CurvePublicKey::from_dir(&dir)));
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    for (mode, read) in refused {
        let err = read.unwrap_err().to_string();
        assert!(err.contains(&dir.display().to_string()), "{err}");
        assert!(err.contains(&format!("mode {mode:04o}")), "{err}");
        assert!(err.contains("add files to it"), "{err}");
        assert!(
            err.contains(&format!("`chmod go-w {}`", dir.display())),
            "{err}"
        );
    }
}

#[cfg(unix)]
#[test]
fn an_allow_list_directory_gives_its_public_certificates_and_refuses_one_others_may_write() {
    let dir = scratch("allow-files");
    file(
        &dir.join("b-worker.key"),
        &public_text(CLIENT_PUBLIC),
        0o644,
    );
    file(&dir.join("a-server.key"), &public_text(PUBLIC), 0o444);
    file(&dir.join("notes.txt"), "not a key", 0o666);
    let read = CurvePublicKey::from_dir(&dir);
    let written = dir.join("c-stranger.key");
    file(&written, &public_text(PUBLIC), 0o666);
    let with_writable = CurvePublicKey::from_dir(&dir).map(|_| ());
    let empty = scratch("allow-empty");
    let none = CurvePublicKey::from_dir(&empty).map(|_| ());
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&empty).unwrap();
    let keys: Vec<_> = read.unwrap().iter().map(CurvePublicKey::to_z85).collect();
    assert_eq!(keys, [PUBLIC, CLIENT_PUBLIC], "every `*.key`, by name");
    let err = with_writable.unwrap_err().to_string();
    assert!(err.contains(&written.display().to_string()), "{err}");
    assert!(err.contains("mode 0666"), "{err}");
    let err = none.unwrap_err().to_string();
    assert!(err.contains("holds no public certificate"), "{err}");
}

/// A FIFO (or any file that is not a regular one) is refused at once: opening it never waits
/// for a writer.
#[cfg(unix)]
#[test]
fn a_fifo_given_as_a_certificate_is_refused_without_waiting() {
    let dir = scratch("fifo");
    let fifo = dir.join("server.key_secret");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::set_permissions(&fifo, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(CurveKeyPair::from_file(&path).map(|_| ()));
    });
    let answer = rx.recv_timeout(std::time::Duration::from_secs(10));
    std::fs::remove_dir_all(&dir).unwrap();
    let err = answer
        .expect("an answer, not a wait for a writer")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file"), "{err}");
}

mod secret_material {
    use static_assertions::{assert_impl_all, assert_not_impl_any};
    use zeroize::ZeroizeOnDrop;

    use super::super::SecretKey;
    use super::*;

    // The secret's bytes are never copied by a clone, and are zeroed when dropped.
    assert_not_impl_any!(SecretKey: Clone, Copy);
    assert_impl_all!(SecretKey: ZeroizeOnDrop);

    #[test]
    #[expect(unsafe_code, reason = "reads the bytes a dropped secret leaves behind")]
    fn dropping_a_secret_key_writes_zeros_over_its_bytes() {
        let mut slot = std::mem::MaybeUninit::new(SecretKey([0xA5u8; 32].into()));
        // SAFETY: `slot` holds an initialised key, and this drops it once; nothing reads it as
        // a key afterwards.
        unsafe { slot.assume_init_drop() };
        // SAFETY: the slot's memory stays this frame's after the drop, and every byte of it is
        // an initialised `u8` (the zeros written over the key, or the key's own).
        let left = unsafe { std::ptr::read(slot.as_ptr().cast::<[u8; 32]>()) };
        assert_eq!(left, [0u8; 32]);
    }

    #[test]
    fn clones_of_a_key_pair_share_one_secret_not_copies() {
        let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
        let clone = pair.clone();
        assert!(std::sync::Arc::ptr_eq(&pair.secret, &clone.secret));
        assert!(std::ptr::eq(pair.secret(), clone.secret()));
    }
}

/// The owner and mode checked are those of the file read, not of whatever the path names a
/// moment later: with a readable secret of another pair swapped in and out under the path,
/// every read that passes gives the owner-only pair.
#[cfg(unix)]
#[test]
fn a_secret_swapped_under_its_path_is_never_read_with_another_files_mode() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = scratch("swapped");
    let (owner_only, readable) = (dir.join("owner-only"), dir.join("readable"));
    file(&owner_only, &secret_text(), 0o600);
    let other = format!(
        "curve\n    public-key = \"{CLIENT_PUBLIC}\"\n    secret-key = \"{CLIENT_SECRET}\"\n"
    );
    file(&readable, &other, 0o644);
    let path = dir.join("server.key_secret");
    std::fs::hard_link(&owner_only, &path).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, dir, path) = (stop.clone(), dir.clone(), path.clone());
        std::thread::spawn(move || {
            // Each swap is a rename over the path: it always names one whole file.
            while !stop.load(Ordering::Relaxed) {
                for source in [&readable, &owner_only] {
                    let staged = dir.join("staged");
                    std::fs::hard_link(source, &staged).unwrap();
                    std::fs::rename(&staged, &path).unwrap();
                }
            }
        })
    };
    let (mut passed, mut refused, mut other_pair) = (0, 0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while (passed < 3000 || refused < 3000) && std::time::Instant::now() < deadline {
        match CurveKeyPair::from_file(&path) {
            Ok(pair) if pair.public().to_z85() == PUBLIC => passed += 1,
            Ok(_) => other_pair += 1,
            Err(_) => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        other_pair, 0,
        "reads of the 0644 file: {passed} passed, {refused} refused"
    );
    assert!(
        passed > 0 && refused > 0,
        "{passed} passed, {refused} refused"
    );
}
