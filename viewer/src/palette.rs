//! Colours that carry meaning: who has authority over a cube, whose avatar is whose.

use egui::Color32;

use crate::session::PlayerId;

/// Colour of cubes under default authority.
pub const DEFAULT_AUTHORITY: Color32 = Color32::from_rgb(236, 236, 236);

/// One colour per player, chosen to stay distinct from each other and from the white default.
pub const PLAYER_COLORS: [Color32; 8] = [
    Color32::from_rgb(66, 133, 244),
    Color32::from_rgb(234, 67, 53),
    Color32::from_rgb(52, 168, 83),
    Color32::from_rgb(251, 160, 0),
    Color32::from_rgb(156, 39, 176),
    Color32::from_rgb(0, 172, 193),
    Color32::from_rgb(121, 85, 72),
    Color32::from_rgb(233, 30, 99),
];

/// The colour of a player (used for their avatar and the cubes under their authority).
pub fn player_color(player: PlayerId) -> Color32 {
    PLAYER_COLORS[usize::from(player) % PLAYER_COLORS.len()]
}

/// The colour of a cube given who has authority over it.
pub fn authority_color(authority: Option<PlayerId>) -> Color32 {
    authority.map_or(DEFAULT_AUTHORITY, player_color)
}

/// `color` with its RGB multiplied by `factor` (clamped to 0..=1), for shading.
pub fn shade(color: Color32, factor: f32) -> Color32 {
    let f = factor.clamp(0.0, 1.0);
    let scale = |c: u8| (f32::from(c) * f).round() as u8;
    Color32::from_rgb(scale(color.r()), scale(color.g()), scale(color.b()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_players_are_distinct() {
        let mut all: Vec<Color32> = PLAYER_COLORS.to_vec();
        all.push(DEFAULT_AUTHORITY);
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(authority_color(None), DEFAULT_AUTHORITY);
        assert_eq!(authority_color(Some(1)), PLAYER_COLORS[1]);
        assert_eq!(player_color(9), PLAYER_COLORS[1]);
    }

    #[test]
    fn shading_darkens_proportionally() {
        let c = Color32::from_rgb(200, 100, 50);
        assert_eq!(shade(c, 0.5), Color32::from_rgb(100, 50, 25));
        assert_eq!(shade(c, 2.0), c);
        assert_eq!(shade(c, -1.0), Color32::from_rgb(0, 0, 0));
    }
}
