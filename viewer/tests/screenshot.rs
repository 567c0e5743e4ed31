//! The `--screenshot` path end to end: the real binary under Xvfb with Mesa's software GL hosts a real session
//! of each scene (the playground's every collider shape from its scene file included) on a local port with three
//! bot guests, lets it run, renders the window, checks the frame
//! itself (not blank, every authority present visible in its colour) and writes a PNG of the window's size.
//! The start screen is taken the same way.
//!
//! Needs `xvfb-run` (Debian/Ubuntu package `xvfb`, see `scripts/install-system-packages.sh`); the test fails,
//! rather than skips, without it.

use std::path::Path;
use std::process::{Command, Output};

fn viewer_under_xvfb(path: &Path, args: &[&str]) -> Output {
    Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1400x900x24"])
        .arg(env!("CARGO_BIN_EXE_physync-viewer"))
        .args(["--screenshot".as_ref(), path.as_os_str()])
        .args(args)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .output()
        .expect("xvfb-run must be installed (package xvfb) to run this test")
}

/// The authorities the binary reported, from `pixels by authority {None: 48106, Some(1): 11813, ...}`.
fn reported_authorities(stdout: &str) -> Vec<(String, usize)> {
    let map = stdout
        .split_once("pixels by authority {")
        .and_then(|(_, rest)| rest.split_once('}'))
        .map_or("", |(map, _)| map);
    map.split(", ")
        .filter_map(|entry| {
            let (key, pixels) = entry.split_once(": ")?;
            Some((key.to_owned(), pixels.parse().ok()?))
        })
        .collect()
}

#[test]
fn hosted_sessions_render_to_pngs_with_several_authority_colours() {
    let dir = std::env::temp_dir().join(format!("physync-viewer-shot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let playground = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/scenes/playground.ron"
    );
    for scene in ["table", "katamari", "tower", "playground"] {
        let path = dir.join(format!("{scene}.png"));
        let args = match scene {
            "playground" => ["--scene-file", playground, "--settle", "2"],
            _ => ["--scene", scene, "--settle", "2"],
        };
        let output = viewer_under_xvfb(&path, &args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{scene}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let authorities = reported_authorities(&stdout);
        assert!(
            authorities.iter().any(|(a, px)| a == "None" && *px > 0),
            "{scene}: the default authority shows: {stdout}"
        );
        let players = authorities
            .iter()
            .filter(|(a, px)| a.starts_with("Some(") && *px > 0)
            .count();
        assert!(
            players >= 2,
            "{scene}: at least two bots' colours show: {stdout}"
        );
        let image = image::open(&path).unwrap().to_rgba8();
        assert_eq!(image.dimensions(), (1280, 800), "{scene}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_start_screen_renders_to_a_png() {
    let path =
        std::env::temp_dir().join(format!("physync-viewer-start-{}.png", std::process::id()));
    let output = viewer_under_xvfb(&path, &["--start-screen"]);
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let image = image::open(&path).unwrap().to_rgba8();
    assert_eq!(image.dimensions(), (1280, 800));
    let mut colours: Vec<[u8; 4]> = image.pixels().map(|p| p.0).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        colours.len() > 16,
        "text and buttons drawn: {} colours",
        colours.len()
    );
    std::fs::remove_file(&path).unwrap();
}
