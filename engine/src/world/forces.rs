//! The force API game code drives bodies with: forces, impulses and velocities on objects this peer has
//! authority over.
//!
//! A game script (the katamari's roll, blow and attract) runs on the authority side before each [`World::step`]
//! and pushes bodies through these calls. Each takes effect in the next step only: a force is applied as the
//! impulse `force * dt`, so nothing lingers in rapier between steps and a script that stops calling stops
//! pushing. A resting body that is pushed wakes up first, so the rest holding of the next step does not undo the
//! push. Bodies held in a hand, and bodies under another player's authority, refuse with a typed error: the
//! holder or the authority is the one simulating them.

use nalgebra::Vector3;

use super::World;
use super::convert::vec_to_rapier;
use super::scene::ObjectId;

/// Why a push was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ForceError {
    /// The scene has no such object.
    #[error("no object {0} in this scene")]
    UnknownObject(ObjectId),
    /// Another player has authority over the object; only its authority may push it.
    #[error("object {0} is under another player's authority")]
    NotAuthority(ObjectId),
    /// The object is held in a hand and moves with it.
    #[error("object {0} is held")]
    Held(ObjectId),
}

impl World {
    /// Checks that this peer may push `id`, and wakes it if it rests.
    fn pushable(&mut self, id: ObjectId) -> Result<rapier3d::prelude::RigidBodyHandle, ForceError> {
        let local = self.config.local_player;
        let object = self
            .objects
            .get_mut(usize::from(id))
            .ok_or(ForceError::UnknownObject(id))?;
        if object.holder.is_some() {
            return Err(ForceError::Held(id));
        }
        if object.authority.view.authority != local {
            return Err(ForceError::NotAuthority(id));
        }
        super::release_from_rest(&mut self.physics.bodies[object.body], object);
        object.still_since_stir = false;
        Ok(object.body)
    }

    /// Whether this peer may push `id` with the calls below (it has authority and nobody holds it).
    pub fn can_push(&self, id: ObjectId) -> bool {
        self.objects.get(usize::from(id)).is_some_and(|o| {
            o.holder.is_none() && o.authority.view.authority == self.config.local_player
        })
    }

    /// The object's mass (kg), for scripts that think in accelerations.
    pub fn mass(&self, id: ObjectId) -> Option<f32> {
        let object = self.objects.get(usize::from(id))?;
        Some(self.physics.bodies[object.body].mass())
    }

    /// Applies `force` (N, world frame, at the centre of mass) for the next step.
    pub fn apply_force(&mut self, id: ObjectId, force: Vector3<f32>) -> Result<(), ForceError> {
        let dt = self.dt();
        self.apply_impulse(id, force * dt)
    }

    /// Applies `torque` (N·m, world frame) for the next step.
    pub fn apply_torque(&mut self, id: ObjectId, torque: Vector3<f32>) -> Result<(), ForceError> {
        let dt = self.dt();
        let body = self.pushable(id)?;
        self.physics.bodies[body].apply_torque_impulse(vec_to_rapier(&(torque * dt)), true);
        Ok(())
    }

    /// Applies a linear impulse (N·s, world frame, at the centre of mass) now.
    pub fn apply_impulse(&mut self, id: ObjectId, impulse: Vector3<f32>) -> Result<(), ForceError> {
        let body = self.pushable(id)?;
        self.physics.bodies[body].apply_impulse(vec_to_rapier(&impulse), true);
        Ok(())
    }

    /// Sets the object's linear and angular velocity (m/s, rad/s, world frame).
    pub fn set_velocity(
        &mut self,
        id: ObjectId,
        linear: Vector3<f32>,
        angular: Vector3<f32>,
    ) -> Result<(), ForceError> {
        let body = self.pushable(id)?;
        let body = &mut self.physics.bodies[body];
        body.set_linvel(vec_to_rapier(&linear), true);
        body.set_angvel(vec_to_rapier(&angular), true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nalgebra::Vector3;

    use super::ForceError;
    use crate::world::scene::SceneKind;
    use crate::world::{World, WorldConfig};

    fn settled_table() -> World {
        let mut world = World::new(WorldConfig::default(), &SceneKind::Table.spec());
        for _ in 0..40 {
            world.step();
        }
        assert!(world.is_at_rest(0), "the table settles within 40 steps");
        world
    }

    #[test]
    fn a_force_moves_a_resting_cube() {
        let mut world = settled_table();
        let mass = world.mass(0).expect("object 0");
        let start = world.physics_pose(0).translation.vector;
        for _ in 0..30 {
            // 3 g sideways plus gravity's worth upward: slides clear of friction.
            world
                .apply_force(0, Vector3::new(3.0 * 9.81 * mass, 9.81 * mass, 0.0))
                .unwrap();
            world.step();
        }
        let moved = world.physics_pose(0).translation.vector - start;
        assert!(moved.x > 1.0, "moved {moved:?}");
        assert!(!world.is_at_rest(0));
    }

    #[test]
    fn impulses_and_velocities_take_effect_in_the_next_step() {
        let mut world = settled_table();
        world
            .set_velocity(1, Vector3::new(0.0, 4.0, 0.0), Vector3::zeros())
            .unwrap();
        world.step();
        assert!(world.linear_velocity(1).y > 3.0);
        let mass = world.mass(2).unwrap();
        world
            .apply_impulse(2, Vector3::new(0.0, 5.0 * mass, 0.0))
            .unwrap();
        world.step();
        assert!(world.linear_velocity(2).y > 4.0);
    }

    #[test]
    fn only_the_authority_may_push() {
        let config = WorldConfig {
            local_player: 1,
            ..WorldConfig::default()
        };
        let mut world = World::new(config, &SceneKind::Table.spec());
        assert!(!world.can_push(0));
        assert_eq!(
            world.apply_force(0, Vector3::x()),
            Err(ForceError::NotAuthority(0))
        );
        assert_eq!(
            world.apply_impulse(64, Vector3::x()),
            Err(ForceError::UnknownObject(64))
        );
    }
}
