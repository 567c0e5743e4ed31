//! The quantized states that travel on the wire: rigid bodies with their authority and ownership, and avatars.
//!
//! These are integers only. The engine converts its floats through [`crate::QuantConfig`] into these types and
//! back; every encoder and decoder in the codec works on them.

use crate::quant::{QuantConfig, QuantizedRotation};

/// One rigid body's physical state after quantization. At rest, the velocities are zero and not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BodyState {
    /// Position indices (see [`QuantConfig::position`]).
    pub position: [i32; 3],
    /// Orientation, smallest-three.
    pub rotation: QuantizedRotation,
    /// Linear velocity indices; all zero when `at_rest`.
    pub linear_velocity: [i32; 3],
    /// Angular velocity indices; all zero when `at_rest`.
    pub angular_velocity: [i32; 3],
    /// The body has not moved over the at-rest window; velocities are omitted on the wire.
    pub at_rest: bool,
}

impl BodyState {
    /// Quantizes a float state (position, quaternion `[x, y, z, w]`, linear and angular velocity). An at-rest
    /// body has its velocities zeroed, so both sides agree it is still.
    pub fn quantize(
        config: &QuantConfig,
        position: [f32; 3],
        rotation: [f32; 4],
        linear_velocity: [f32; 3],
        angular_velocity: [f32; 3],
        at_rest: bool,
    ) -> Self {
        let (linear_velocity, angular_velocity) = if at_rest {
            ([0; 3], [0; 3])
        } else {
            (
                config.linear_velocity.quantize(linear_velocity),
                config.angular_velocity.quantize(angular_velocity),
            )
        };
        Self {
            position: config.position.quantize(position),
            rotation: config.rotation.quantize(rotation),
            linear_velocity,
            angular_velocity,
            at_rest,
        }
    }

    /// This state with its velocities zeroed: what a pose-only link ([`crate::StateConfig::pose_only`]) sends.
    pub fn without_velocities(self) -> Self {
        Self {
            linear_velocity: [0; 3],
            angular_velocity: [0; 3],
            ..self
        }
    }

    /// Both velocities are zero.
    pub fn has_no_velocity(&self) -> bool {
        self.linear_velocity == [0; 3] && self.angular_velocity == [0; 3]
    }

    /// The float position this state stands for.
    pub fn position_f32(&self, config: &QuantConfig) -> [f32; 3] {
        config.position.dequantize(self.position)
    }

    /// The float quaternion `[x, y, z, w]` this state stands for.
    pub fn rotation_f32(&self, config: &QuantConfig) -> [f32; 4] {
        config.rotation.dequantize(self.rotation)
    }

    /// The float linear velocity this state stands for.
    pub fn linear_velocity_f32(&self, config: &QuantConfig) -> [f32; 3] {
        config.linear_velocity.dequantize(self.linear_velocity)
    }

    /// The float angular velocity this state stands for.
    pub fn angular_velocity_f32(&self, config: &QuantConfig) -> [f32; 3] {
        config.angular_velocity.dequantize(self.angular_velocity)
    }
}

/// A networked object's full state: its body plus who may simulate it and who holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ObjectState {
    /// Physical state.
    pub body: BodyState,
    /// Player index with authority over the object; 0 is the default authority (the host).
    pub authority: u8,
    /// Bumped each time authority changes hands (touch) or returns to default; reset to 0 on a grab.
    pub authority_seq: u16,
    /// Bumped each time a player grabs the object.
    pub ownership_seq: u16,
}

/// A position and orientation, quantized (heads, hands, held objects relative to their hand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QuantizedPose {
    /// Position indices.
    pub position: [i32; 3],
    /// Orientation, smallest-three.
    pub rotation: QuantizedRotation,
}

impl QuantizedPose {
    /// Quantizes a float pose with the position and rotation quantizers of `config`.
    pub fn quantize(config: &QuantConfig, position: [f32; 3], rotation: [f32; 4]) -> Self {
        Self {
            position: config.position.quantize(position),
            rotation: config.rotation.quantize(rotation),
        }
    }
}

/// An object carried in a hand: it travels with the avatar, and its own update is never sent while held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HeldObject {
    /// The object's id in the scene.
    pub object: u16,
    /// Its pose relative to the hand.
    pub relative: QuantizedPose,
    /// The object's authority sequence when grabbed.
    pub authority_seq: u16,
    /// The object's ownership sequence when grabbed.
    pub ownership_seq: u16,
}

/// One hand of an avatar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HandState {
    /// The hand's pose in the world.
    pub pose: QuantizedPose,
    /// What the hand holds, if anything.
    pub held: Option<HeldObject>,
}

/// A player's avatar: a head and two hands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AvatarState {
    /// The player this avatar belongs to.
    pub player: u8,
    /// The head's pose.
    pub head: QuantizedPose,
    /// Left and right hands.
    pub hands: [HandState; 2],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_rest_drops_velocities() {
        let config = QuantConfig::default();
        let s = BodyState::quantize(
            &config,
            [1.0, 2.0, 3.0],
            [0.0, 0.0, 0.0, 1.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            true,
        );
        assert_eq!(s.linear_velocity, [0; 3]);
        assert_eq!(s.angular_velocity, [0; 3]);
        assert_eq!(s.position, [512, 1024, 1536]);
    }

    #[test]
    fn quantized_state_round_trips_through_floats() {
        let config = QuantConfig::default();
        let s = BodyState::quantize(
            &config,
            [1.2345, 0.5, -7.25],
            [0.1, 0.2, 0.3, 0.9],
            [3.3, -1.0, 0.25],
            [0.5, 0.5, -2.0],
            false,
        );
        let again = BodyState::quantize(
            &config,
            s.position_f32(&config),
            s.rotation_f32(&config),
            s.linear_velocity_f32(&config),
            s.angular_velocity_f32(&config),
            false,
        );
        assert_eq!(s, again);
    }
}
