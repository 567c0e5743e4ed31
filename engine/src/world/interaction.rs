//! Interactions a session or a bot drives: grab with a hand, move the hand, release, throw.

use nalgebra::{Isometry3, Vector3};

use super::authority::PlayerIndex;
use super::avatar::{Hand, MAX_PLAYERS};
use super::convert::{pose_to_rapier, vec_to_rapier};
use super::scene::ObjectId;
use super::{Holder, World};

/// Why an interaction was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InteractionError {
    /// No object has this id.
    #[error("no object {0}")]
    NoSuchObject(ObjectId),
    /// No player has this index.
    #[error("no player {0}")]
    NoSuchPlayer(PlayerIndex),
    /// The object is in someone's hand: no snatching.
    #[error("object {object} is held by player {by}")]
    HeldByOther {
        /// The object.
        object: ObjectId,
        /// Its holder.
        by: PlayerIndex,
    },
    /// The hand already holds something.
    #[error("the hand already holds object {0}")]
    HandFull(ObjectId),
}

impl World {
    fn check_player(&self, player: PlayerIndex) -> Result<(), InteractionError> {
        if usize::from(player) < MAX_PLAYERS {
            Ok(())
        } else {
            Err(InteractionError::NoSuchPlayer(player))
        }
    }

    /// A player's hand grabs an object where it is: ownership sequence +1, authority sequence reset,
    /// authority to the player (unconfirmed on a guest until the host echoes it). Refused when another hand
    /// holds the object, or this hand holds something.
    pub fn grab(
        &mut self,
        player: PlayerIndex,
        hand: Hand,
        id: ObjectId,
    ) -> Result<(), InteractionError> {
        self.check_player(player)?;
        if usize::from(id) >= self.object_count() {
            return Err(InteractionError::NoSuchObject(id));
        }
        if let Some(holder) = self.holder(id) {
            return Err(InteractionError::HeldByOther {
                object: id,
                by: holder.player,
            });
        }
        if let Some(grip) = self.grip(player, hand) {
            return Err(InteractionError::HandFull(grip.object));
        }
        let relative =
            self.avatar_pose(player).hands[hand.index()].inverse() * self.physics_pose(id);
        self.attach(id, Holder { player, hand }, relative);
        self.objects[usize::from(id)].authority.grab(player);
        Ok(())
    }

    /// Moves a player's hand; an object it holds follows over the next step, stopping on what it presses too
    /// deep (the grip gives way, see [`super::grip`]). Panics if `player` is not below [`MAX_PLAYERS`] (local
    /// input; remote hands arrive through [`World::apply_avatar_state`], which checks).
    pub fn set_hand_pose(&mut self, player: PlayerIndex, hand: Hand, pose: Isometry3<f32>) {
        self.move_hand(player, hand, pose, true);
    }

    /// Moves a hand and puts what it holds where the grip says; the holder's own world (`holder_side`) first
    /// lets the grip give way.
    pub(crate) fn move_hand(
        &mut self,
        player: PlayerIndex,
        hand: Hand,
        pose: Isometry3<f32>,
        holder_side: bool,
    ) {
        let (slot, i) = (usize::from(player), hand.index());
        self.avatars[slot].pose.hands[i] = pose;
        let Some(mut grip) = self.avatars[slot].grips[i] else {
            return;
        };
        if holder_side {
            let stepped = self.avatars[slot].stepped_hands[i];
            grip.relative = self.give_way(&grip, &stepped, &pose);
            self.avatars[slot].grips[i] = Some(grip);
        }
        let target = pose * grip.relative;
        let handle = self.objects[usize::from(grip.object)].body;
        self.physics.bodies[handle].set_next_kinematic_position(pose_to_rapier(&target));
    }

    /// Opens a hand: the object falls with the velocity the hand's motion gave it. Returns the object.
    pub fn release(&mut self, player: PlayerIndex, hand: Hand) -> Option<ObjectId> {
        let grip = self.grip(player, hand)?;
        self.detach(grip.object, Holder { player, hand });
        Some(grip.object)
    }

    /// Throws what a hand holds with the given linear (m/s) and angular (rad/s) velocity; like any object
    /// leaving a hand, it gets the released priority for 60 frames. Returns the object.
    pub fn throw(
        &mut self,
        player: PlayerIndex,
        hand: Hand,
        linear_velocity: Vector3<f32>,
        angular_velocity: Vector3<f32>,
    ) -> Option<ObjectId> {
        let id = self.release(player, hand)?;
        let object = &self.objects[usize::from(id)];
        let body = &mut self.physics.bodies[object.body];
        body.set_linvel(vec_to_rapier(&linear_velocity), true);
        body.set_angvel(vec_to_rapier(&angular_velocity), true);
        Some(id)
    }
}
