//! What is drawn over the first-person view: the crosshair, the hit marker, health and ammo, and the match
//! phase in words.

use egui::{Align2, Color32, FontId, Painter, Pos2, Rect, Stroke, Vec2};
use physync_engine::shooter_net::MatchPhase;

/// Seconds a hit marker stays on screen.
pub const HIT_MARKER_SECONDS: f32 = 0.35;

/// Paint the crosshair at the centre of `rect`, with the hit marker around it while `hit_marker` (seconds
/// left) is positive.
pub fn paint_crosshair(painter: &Painter, rect: Rect, hit_marker: f32) {
    let c = rect.center();
    let white = Stroke::new(2.0, Color32::from_rgb(235, 235, 235));
    for d in [Vec2::X, -Vec2::X, Vec2::Y, -Vec2::Y] {
        painter.line_segment([c + d * 4.0, c + d * 12.0], white);
    }
    if hit_marker > 0.0 {
        let alpha = (hit_marker / HIT_MARKER_SECONDS).clamp(0.0, 1.0);
        let red = Stroke::new(
            3.0,
            Color32::from_rgba_unmultiplied(255, 60, 40, (alpha * 255.0) as u8),
        );
        for d in [
            Vec2::new(1.0, 1.0),
            Vec2::new(-1.0, 1.0),
            Vec2::new(1.0, -1.0),
            Vec2::new(-1.0, -1.0),
        ] {
            painter.line_segment([c + d * 8.0, c + d * 18.0], red);
        }
    }
}

/// The local player's numbers as the HUD shows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vitals {
    /// Health left.
    pub health: u16,
    /// Health at spawn.
    pub max_health: u16,
    /// Rounds in the magazine.
    pub ammo: u16,
    /// Rounds in a full magazine.
    pub magazine: u16,
    /// A reload is running.
    pub reloading: bool,
    /// Seconds until respawn while dead.
    pub respawn_s: Option<f32>,
}

/// Health and ammo in one line (also shown as a label above the view).
pub fn vitals_text(v: &Vitals) -> String {
    let ammo = if v.reloading {
        format!("Ammo {}/{} (reloading)", v.ammo, v.magazine)
    } else {
        format!("Ammo {}/{}", v.ammo, v.magazine)
    };
    match v.respawn_s {
        Some(s) => format!("Dead, respawn in {s:.1} s · {ammo}"),
        None => format!("Health {}/{} · {ammo}", v.health, v.max_health),
    }
}

/// Paint health and ammo in the bottom-left corner of `rect`, big, with a health bar.
pub fn paint_vitals(painter: &Painter, rect: Rect, v: &Vitals) {
    let corner = rect.left_bottom() + Vec2::new(16.0, -16.0);
    let bar = Rect::from_min_size(corner - Vec2::new(0.0, 10.0), Vec2::new(200.0, 10.0));
    painter.rect_filled(bar, 2.0, Color32::from_black_alpha(160));
    let fraction = f32::from(v.health) / f32::from(v.max_health.max(1));
    let mut filled = bar;
    filled.set_width(bar.width() * fraction.clamp(0.0, 1.0));
    let health_color = if fraction > 0.35 {
        Color32::from_rgb(90, 200, 110)
    } else {
        Color32::from_rgb(230, 80, 60)
    };
    painter.rect_filled(filled, 2.0, health_color);
    painter.text(
        corner - Vec2::new(0.0, 16.0),
        Align2::LEFT_BOTTOM,
        vitals_text(v),
        FontId::proportional(20.0),
        Color32::WHITE,
    );
}

/// Paint a centred banner (match phase, results) near the top of `rect`.
pub fn paint_banner(painter: &Painter, rect: Rect, text: &str) {
    let pos = Pos2::new(rect.center().x, rect.top() + 24.0);
    painter.text(
        pos,
        Align2::CENTER_TOP,
        text,
        FontId::proportional(24.0),
        Color32::from_rgb(255, 220, 120),
    );
}

/// Paint the kill feed (`text`, colour per line, oldest first) in the top right corner of `rect`.
pub fn paint_kill_feed(painter: &Painter, rect: Rect, lines: &[(String, Color32)]) {
    for (i, (text, color)) in lines.iter().rev().enumerate() {
        let pos = Pos2::new(rect.right() - 12.0, rect.top() + 60.0 + 20.0 * i as f32);
        painter.text(
            pos,
            Align2::RIGHT_TOP,
            text,
            FontId::proportional(16.0),
            *color,
        );
    }
}

/// The match phase in words, with the time left where it counts down.
pub fn phase_text(phase: MatchPhase, ticks_left: u16, tick_rate_hz: u32) -> String {
    let seconds = u32::from(ticks_left) / tick_rate_hz.max(1);
    match phase {
        MatchPhase::Waiting => "Waiting for players".into(),
        MatchPhase::Countdown => format!("Starting in {seconds} s"),
        MatchPhase::Live => format!("Live · {}:{:02} left", seconds / 60, seconds % 60),
        MatchPhase::Ended => "Match over".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_read_as_words_with_time_left() {
        assert_eq!(
            phase_text(MatchPhase::Live, 30 * 125, 30),
            "Live · 2:05 left"
        );
        assert_eq!(phase_text(MatchPhase::Countdown, 61, 30), "Starting in 2 s");
        assert_eq!(
            phase_text(MatchPhase::Waiting, 0, 30),
            "Waiting for players"
        );
    }

    #[test]
    fn vitals_read_as_health_and_ammo() {
        let mut v = Vitals {
            health: 75,
            max_health: 100,
            ammo: 19,
            magazine: 20,
            reloading: false,
            respawn_s: None,
        };
        assert_eq!(vitals_text(&v), "Health 75/100 · Ammo 19/20");
        v.reloading = true;
        v.respawn_s = Some(2.0);
        assert_eq!(
            vitals_text(&v),
            "Dead, respawn in 2.0 s · Ammo 19/20 (reloading)"
        );
    }
}
