//! `--screenshot --dedicated` end to end: the real binary under Xvfb with Mesa's software GL starts a local
//! dedicated-server match with bots, plays it first person with the view turned to the nearest opponent in
//! sight, and writes the frame once an opponent, a cube and another player's tracer are in view; the frame is
//! checked not to be blank.
//!
//! Needs `xvfb-run` (Debian/Ubuntu package `xvfb`); the test fails, rather than skips, without it.

use std::process::Command;

#[test]
fn a_local_dedicated_match_renders_to_a_png() {
    let path = std::env::temp_dir().join(format!("physync-shooter-{}.png", std::process::id()));
    let output = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1400x900x24"])
        .arg(env!("CARGO_BIN_EXE_physync-viewer"))
        .args(["--screenshot".as_ref(), path.as_os_str()])
        .args(["--dedicated", "--bots", "3"])
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .output()
        .expect("xvfb-run must be installed (package xvfb) to run this test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{stdout}");
    let image = image::open(&path).unwrap().to_rgba8();
    assert_eq!(image.dimensions(), (1280, 800));
    std::fs::remove_file(&path).unwrap();
}
