//! The boxes of the resting objects, sorted along x, for the pre-step wake ([`super::World`]'s
//! `wake_what_movers_reach`): which resting objects a mover's swept box may touch. A query of rapier's broad-phase
//! tree did the same for every mover every step and cost about 1 G instructions over `sim_bench`'s 600 steps; a
//! resting object does not move, so a sorted list rebuilt once a step and searched by x is much cheaper.

use rapier3d::parry::bounding_volume::{Aabb, BoundingVolume};

use super::scene::ObjectId;

/// The resting objects' boxes, sorted by their lowest x.
#[derive(Debug, Default)]
pub struct RestingBoxes {
    boxes: Vec<(Aabb, ObjectId)>,
    /// The widest box along x: a box starting this far left of a query may still reach into it.
    widest: f32,
}

impl RestingBoxes {
    /// Replaces the boxes with `resting` (keeping the allocation) and sorts them.
    pub fn rebuild(&mut self, resting: impl Iterator<Item = (Aabb, ObjectId)>) {
        self.boxes.clear();
        self.boxes.extend(resting);
        self.boxes
            .sort_unstable_by(|a, b| a.0.mins.x.total_cmp(&b.0.mins.x));
        self.widest = self
            .boxes
            .iter()
            .map(|(b, _)| b.maxs.x - b.mins.x)
            .fold(0.0, f32::max);
    }

    /// Whether no object rests.
    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }

    /// The resting objects whose boxes intersect `query`.
    pub fn touching(&self, query: Aabb) -> impl Iterator<Item = ObjectId> + '_ {
        let start = self
            .boxes
            .partition_point(|(b, _)| b.mins.x < query.mins.x - self.widest);
        self.boxes[start..]
            .iter()
            .take_while(move |(b, _)| b.mins.x <= query.maxs.x)
            .filter(move |(b, _)| b.intersects(&query))
            .map(|&(_, id)| id)
    }
}

#[cfg(test)]
mod tests {
    use rapier3d::math::Vector;

    use super::*;

    fn unit_box(x: f32, y: f32) -> Aabb {
        Aabb::new(Vector::new(x, y, 0.0), Vector::new(x + 1.0, y + 1.0, 1.0))
    }

    /// What the sorted search finds is what testing every box finds.
    #[test]
    fn finds_exactly_the_intersecting_boxes() {
        let boxes: Vec<(Aabb, ObjectId)> = (0..40u16)
            .map(|i| {
                let b = unit_box(f32::from(i % 8) * 0.7, f32::from(i / 8) * 1.3);
                let wide = if i == 17 {
                    Aabb::new(b.mins, b.maxs + Vector::new(3.0, 0.0, 0.0))
                } else {
                    b
                };
                (wide, i)
            })
            .collect();
        let mut resting = RestingBoxes::default();
        resting.rebuild(boxes.iter().copied().rev());
        for qx in 0..20 {
            for qy in 0..10 {
                let query = Aabb::new(
                    Vector::new(qx as f32 * 0.4 - 1.0, qy as f32 * 0.6 - 0.5, 0.2),
                    Vector::new(qx as f32 * 0.4 - 0.8, qy as f32 * 0.6 - 0.3, 0.4),
                );
                let mut found: Vec<ObjectId> = resting.touching(query).collect();
                found.sort_unstable();
                let expected: Vec<ObjectId> = boxes
                    .iter()
                    .filter(|(b, _)| b.intersects(&query))
                    .map(|&(_, id)| id)
                    .collect();
                assert_eq!(found, expected, "query {query:?}");
            }
        }
    }
}
