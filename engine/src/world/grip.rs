//! A grip that gives way: a held object stops on what it presses instead of crushing it.
//!
//! A held object is a kinematic body: it goes where the hand puts it, with infinite mass. Lowered onto a cube
//! that rests on the floor, it squeezes that cube into the floor until the solver shoots it out sideways. So
//! the holder's world lets the object lag behind the hand along a contact that has gone deep (the object, or
//! what it presses, sunk more than [`GIVE_WAY_DEPTH`] into something), and lets it catch up only as the hand
//! comes back or the way clears. The grip's pose relative to the hand travels in the holder's avatar state;
//! every other peer plays that grip as sent and never gives way on its own contacts, so all agree.

use nalgebra::Isometry3;
use rapier3d::parry::query;
use rapier3d::prelude::ColliderHandle;

use super::World;
use super::avatar::Grip;
use super::convert::vec_from_rapier;

/// How deep a contact of a held object, or of what it presses, may go before the grip gives way along it (m).
/// A resting contact sits about a millimetre deep; a body pinned under a lowered hand sinks a step's travel
/// further each step.
pub const GIVE_WAY_DEPTH: f32 = 0.004;

/// How fast a held object that lagged behind its hand catches up once nothing is in the way (m/s), on top of
/// the hand's own motion: it glides back into the hand instead of jumping there.
pub const CATCH_UP_SPEED: f32 = 1.0;

impl World {
    /// The grip's relative pose for the next step on the holder's world, the hand having moved from `before`
    /// (where the last step took it) to `after`: the aimed pose, held back along each contact the object presses
    /// into too deep. The same for any number of hand moves between two steps: it depends on the last only.
    pub(crate) fn give_way(
        &self,
        grip: &Grip,
        before: &Isometry3<f32>,
        after: &Isometry3<f32>,
    ) -> Isometry3<f32> {
        let aimed = after * grip.aim;
        let hand_motion = aimed.translation.vector - (before * grip.aim).translation.vector;
        let current = self.physics_pose(grip.object).translation.vector;
        let wanted = aimed.translation.vector - current;
        let mut step = wanted;
        let collider = self.objects[usize::from(grip.object)].collider;
        for pair in self.physics.contact_pairs_with(collider) {
            let (other, sign) = if pair.collider1 == collider {
                (pair.collider2, 1.0)
            } else {
                (pair.collider1, -1.0)
            };
            // Whether the other body is pressed too deep into something: looked up once, and only for a
            // contact this step pushes into.
            let mut pinned = None;
            let mut depth = None;
            for manifold in pair.solver_manifolds() {
                let contacts = &manifold.data.solver_contacts;
                let normal = vec_from_rapier(manifold.data.normal) * sign;
                let into = step.dot(&normal);
                if contacts.is_empty() || into <= 0.0 {
                    continue;
                }
                let blocked = *depth.get_or_insert_with(|| self.depth(collider, other))
                    > GIVE_WAY_DEPTH
                    || *pinned.get_or_insert_with(|| self.deepest_contact(other) > GIVE_WAY_DEPTH);
                let allowed = if blocked {
                    0.0
                } else {
                    hand_motion.dot(&normal).max(0.0)
                };
                if into > allowed {
                    step -= normal * (into - allowed);
                }
            }
        }
        let reach = hand_motion.norm() + CATCH_UP_SPEED * self.dt();
        if step.norm() > reach {
            step *= reach / step.norm();
        }
        if (step - wanted).norm() <= f32::EPSILON {
            return grip.aim;
        }
        let placed = Isometry3::from_parts((current + step).into(), aimed.rotation);
        after.inverse() * placed
    }

    /// How deep the deepest active contact of a collider goes (m; 0 when nothing overlaps it), measured
    /// afresh ([`World::depth`]).
    fn deepest_contact(&self, collider: ColliderHandle) -> f32 {
        self.physics
            .contact_pairs_with(collider)
            .filter(|pair| pair.has_any_active_contact())
            .map(|pair| {
                let other = if pair.collider1 == collider {
                    pair.collider2
                } else {
                    pair.collider1
                };
                self.depth(collider, other)
            })
            .fold(0.0, f32::max)
    }

    /// How deep two colliders overlap where they stand now (m; 0 when they do not). Not the depth of their
    /// solver contacts: rapier computes those at the start of a step, before it moves the bodies, and keeps them
    /// unchanged while a pair is recycled (up to the prediction distance of relative motion), so they can show a
    /// contact pressed a step or two deeper as still touching.
    /// A collider taken out of the world since the last step (everything a released object touched is put
    /// back under a new handle) is not there: rapier still lists its pairs until the next step.
    pub(super) fn depth(&self, a: ColliderHandle, b: ColliderHandle) -> f32 {
        let (Some(a), Some(b)) = (self.physics.colliders.get(a), self.physics.colliders.get(b))
        else {
            return 0.0;
        };
        query::contact(a.position(), a.shape(), b.position(), b.shape(), 0.0)
            .ok()
            .flatten()
            .map_or(0.0, |c| (-c.dist).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use crate::world::scene::SceneSpec;
    use crate::world::{World, WorldConfig};

    /// Contact pairs name colliders rapier may no longer hold: everything a released object touched is taken out
    /// of the world and put back under a new handle, and its old pairs stay listed until the next step. A hand
    /// pressing its cube into such a pair looked the old handle up and panicked (a bot pressing a cube while
    /// another player let go of one beside it).
    #[test]
    fn the_depth_of_a_pair_with_a_collider_put_back_is_none() {
        let mut world = World::new(WorldConfig::default(), &SceneSpec::table());
        world.step();
        let (old, other) = (world.objects[0].collider, world.objects[1].collider);
        world.forget_contact_impulses(0);
        assert_ne!(world.objects[0].collider, old);
        assert_eq!(world.depth(old, other), 0.0);
        assert_eq!(world.depth(other, old), 0.0);
    }
}
