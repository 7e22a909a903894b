//! The README's demo (`examples/payments_demo.rs`), run as a process on this module's backend:
//! it ends by itself with status 0 and tells each payment's fate as the README shows it.

use std::process::Command;

use super::BACKEND;
use crate::support::example_binary;

#[test]
fn the_readmes_demo_settles_every_payment_as_the_readme_says() {
    let out = Command::new(example_binary("payments_demo"))
        .args(["--backend", BACKEND.name()])
        .output()
        .expect("the demo starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the demo failed: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let fates: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix("payment "))
        .collect();
    let retried = "failed on attempt 1, a copy comes back in 200 ms";
    let expected = [
        "1 (250 cents): charged on attempt 1".to_owned(),
        "2 (0 cents): dropped: nothing to charge".to_owned(),
        format!("3 (1200 cents): {retried}; charged on attempt 2"),
        format!(
            "4 (80 cents): {retried}; failed on attempt 2, a copy comes back in 200 ms; \
             failed on attempt 3, the cap; dead-lettered after 3 attempts"
        ),
        "5 (40 cents): charged on attempt 1".to_owned(),
        "6 (0 cents): dropped: nothing to charge".to_owned(),
        format!(
            "7 (999 cents): {retried}; failed on attempt 2, a copy comes back in 200 ms; \
             charged on attempt 3"
        ),
        format!(
            "8 (310 cents): {retried}; failed on attempt 2, a copy comes back in 200 ms; \
             failed on attempt 3, the cap; dead-lettered after 3 attempts"
        ),
    ];
    assert_eq!(fates, expected, "{stdout}");
}
