//! The input side of a player, the same on the host and on a guest: what a local player (or a bot) may do.

use nalgebra::{Isometry3, Vector3};

use crate::world::World;
use crate::world::authority::PlayerIndex;
use crate::world::avatar::Hand;
use crate::world::interaction::InteractionError;
use crate::world::scene::ObjectId;

/// A peer that a local player drives: the host and every guest are players. Interactions apply to the local
/// world at once (zero latency); the session core sends their effects on its next packets.
///
/// Implementors provide [`PlayerControls::world`], [`PlayerControls::player`] and
/// [`PlayerControls::input_world`]; the interactions are provided on top of them, so bots and viewers drive the
/// host and a guest through one interface.
pub trait PlayerControls {
    /// The local simulation, for reading.
    fn world(&self) -> &World;

    /// The local player's index (0 on the host).
    fn player(&self) -> PlayerIndex;

    /// The local simulation, for the interactions below only: a session core hands it out so that local input
    /// lands on the frame it happens.
    fn input_world(&mut self) -> &mut World;

    /// Grabs an object with a hand (refused when another hand holds it or this hand is full).
    fn grab(&mut self, hand: Hand, id: ObjectId) -> Result<(), InteractionError> {
        let player = self.player();
        self.input_world().grab(player, hand, id)
    }

    /// Moves a hand; what it holds follows.
    fn set_hand_pose(&mut self, hand: Hand, pose: Isometry3<f32>) {
        let player = self.player();
        self.input_world().set_hand_pose(player, hand, pose);
    }

    /// Moves the head.
    fn set_head_pose(&mut self, pose: Isometry3<f32>) {
        let player = self.player();
        self.input_world().set_head_pose(player, pose);
    }

    /// Opens a hand; returns what it held.
    fn release(&mut self, hand: Hand) -> Option<ObjectId> {
        let player = self.player();
        self.input_world().release(player, hand)
    }

    /// Throws what a hand holds with the given linear and angular velocity; returns the object.
    fn throw(
        &mut self,
        hand: Hand,
        linear_velocity: Vector3<f32>,
        angular_velocity: Vector3<f32>,
    ) -> Option<ObjectId> {
        let player = self.player();
        self.input_world()
            .throw(player, hand, linear_velocity, angular_velocity)
    }
}
