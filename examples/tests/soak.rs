//! A short soak: churn in both modes leaves nothing held for departed peers, and live heap bytes stay flat.
//!
//! The full run (`soak --json`, 30 simulated minutes a mode) is a benchmark; this one runs 90 s a mode with a
//! churn every 8 s. A short peer run's live bytes swing by about ±10% with the world (how many cubes move, how
//! many contacts rapier holds), so its bound is looser than the full run's goal of 1.05.

use std::process::Command;

#[test]
fn a_short_soak_holds_nothing_for_departed_peers_and_stays_flat() {
    let out = Command::new(env!("CARGO_BIN_EXE_soak"))
        .args([
            "--minutes",
            "1.5",
            "--churn-s",
            "8",
            "--warmup-s",
            "30",
            "--window-s",
            "20",
            "--json",
        ])
        .output()
        .expect("soak runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    for (run, bound) in [("peer", 1.15), ("dedicated", 1.05)] {
        let r = &v[run];
        assert!(r["churned"].as_u64().unwrap() >= 10, "{run}: {r}");
        assert_eq!(r["leaked"], 0, "{run}: {r}");
        let ratio = r["memory_growth_ratio"].as_f64().unwrap();
        assert!(ratio <= bound, "{run}: growth {ratio:.3} over {bound}: {r}");
    }
}
