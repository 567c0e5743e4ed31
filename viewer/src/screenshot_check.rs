//! Checks on a captured frame, so a screenshot run can fail when the view came out blank or without the
//! cubes' authority colours.

use std::collections::BTreeMap;

use egui::{Color32, ColorImage};

use crate::render3d::{body_color, top_face_color};
use crate::session::{BodyView, PlayerId};

/// Per-channel tolerance when matching a rendered colour (rasterisers may round differently by a step or two).
const TOLERANCE: u8 = 3;
/// Pixels of a colour needed to count it as visible: a small cube's top face far away is larger than this.
pub const MIN_PIXELS: usize = 40;

/// What a captured frame shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameReport {
    /// Number of distinct colours in the frame (1 means blank).
    pub distinct_colors: usize,
    /// For each authority present among the bodies (`None` = default), the pixels showing its top-face colour
    /// (bodies under default authority show their tag colours, any of which counts).
    pub authority_pixels: BTreeMap<Option<PlayerId>, usize>,
}

impl FrameReport {
    /// Whether the frame has content and every authority present among the bodies is visible.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.distinct_colors < 16 {
            problems.push(format!(
                "the frame is blank ({} colours)",
                self.distinct_colors
            ));
        }
        for (authority, pixels) in &self.authority_pixels {
            if *pixels < MIN_PIXELS {
                problems.push(format!(
                    "authority {authority:?} shows in only {pixels} pixels"
                ));
            }
        }
        problems
    }
}

fn close(a: Color32, b: Color32) -> bool {
    a.r().abs_diff(b.r()) <= TOLERANCE
        && a.g().abs_diff(b.g()) <= TOLERANCE
        && a.b().abs_diff(b.b()) <= TOLERANCE
}

/// Measure `image` against the authorities of `bodies`.
pub fn inspect(image: &ColorImage, bodies: &[BodyView]) -> FrameReport {
    let mut distinct: Vec<Color32> = image.pixels.clone();
    distinct.sort_unstable_by_key(|c| c.to_array());
    distinct.dedup();
    let mut targets: BTreeMap<Option<PlayerId>, Vec<Color32>> = BTreeMap::new();
    for body in bodies {
        let colors = targets.entry(body.authority).or_default();
        let target = top_face_color(body_color(body));
        if !colors.contains(&target) {
            colors.push(target);
        }
    }
    let authority_pixels = targets
        .into_iter()
        .map(|(authority, colors)| {
            let count = image
                .pixels
                .iter()
                .filter(|p| colors.iter().any(|c| close(**p, *c)))
                .count();
            (authority, count)
        })
        .collect();
    FrameReport {
        distinct_colors: distinct.len(),
        authority_pixels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::palette::authority_color;
    use nalgebra::{Point3, UnitQuaternion, Vector3};

    fn body(authority: Option<PlayerId>) -> BodyView {
        BodyView {
            id: 0,
            position: Point3::origin(),
            rotation: UnitQuaternion::identity(),
            half_extents: Vector3::repeat(0.5),
            mesh: None,
            tag_color: None,
            authority,
            owner: None,
        }
    }

    #[test]
    fn a_blank_frame_is_reported() {
        let image = ColorImage::filled([64, 64], Color32::BLACK);
        let report = inspect(&image, &[body(None)]);
        assert_eq!(report.distinct_colors, 1);
        assert_eq!(report.problems().len(), 2);
    }

    #[test]
    fn authority_colours_are_counted_within_tolerance() {
        let mut image = ColorImage::filled([64, 64], Color32::BLACK);
        let red = top_face_color(authority_color(Some(1)));
        let near_red = Color32::from_rgb(red.r() - 2, red.g() + 1, red.b());
        for (i, p) in image.pixels.iter_mut().enumerate() {
            *p = match i % 4 {
                0 => near_red,
                1 => Color32::from_gray((i % 200) as u8),
                _ => Color32::BLACK,
            };
        }
        let report = inspect(&image, &[body(Some(1)), body(Some(2))]);
        assert_eq!(report.authority_pixels[&Some(1)], 64 * 64 / 4);
        assert_eq!(report.authority_pixels[&Some(2)], 0);
        assert_eq!(
            report.problems(),
            vec!["authority Some(2) shows in only 0 pixels".to_owned()]
        );
    }
}
