//! The `--screenshot` path end to end: the real binary under Xvfb with Mesa's software GL renders the
//! offline preview of each scene, checks the frame itself (not blank, every authority colour visible) and
//! writes a PNG that decodes to the window's size.
//!
//! Needs `xvfb-run` (Debian/Ubuntu package `xvfb`); the test fails, rather than skips, without it.

use std::process::Command;

#[test]
fn every_scene_renders_to_a_png_with_its_authority_colours() {
    let dir = std::env::temp_dir().join(format!("physync-viewer-shot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for scene in ["table", "katamari", "tower"] {
        let path = dir.join(format!("{scene}.png"));
        let output = Command::new("xvfb-run")
            .args(["-a", "-s", "-screen 0 1400x900x24"])
            .arg(env!("CARGO_BIN_EXE_physync-viewer"))
            .args(["--screenshot".as_ref(), path.as_os_str()])
            .args(["--scene", scene])
            .env("LIBGL_ALWAYS_SOFTWARE", "1")
            .output()
            .expect("xvfb-run must be installed (package xvfb) to run this test");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{scene}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("Some(1)") && stdout.contains("None"),
            "{stdout}"
        );
        let image = image::open(&path).unwrap().to_rgba8();
        assert_eq!(image.dimensions(), (1280, 800), "{scene}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
