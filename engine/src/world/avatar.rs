//! Avatars: a head and two hands per player, and the objects the hands hold.
//!
//! A held object travels in its holder's avatar state (object id, pose relative to the hand, sequences), not
//! as an object update; a peer receiving the avatar attaches the object to the hand and detaches it when the
//! avatar no longer lists it.

use nalgebra::Isometry3;
use physync_codec::{AvatarState, HandState, HeldObject, seq_newer};
use rapier3d::prelude::RigidBodyType;

use super::authority::{AuthorityView, DEFAULT_AUTHORITY, PlayerIndex};
use super::convert::{pose_from_quantized, pose_to_quantized};
use super::scene::ObjectId;
use super::{Holder, World};

/// Players a session holds (host included).
pub const MAX_PLAYERS: usize = 16;

/// One of an avatar's two hands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hand {
    /// Index 0 on the wire.
    Left,
    /// Index 1 on the wire.
    Right,
}

impl Hand {
    /// Both hands, in wire order.
    pub const BOTH: [Hand; 2] = [Hand::Left, Hand::Right];

    /// The hand's index in [`AvatarState::hands`].
    pub fn index(self) -> usize {
        match self {
            Hand::Left => 0,
            Hand::Right => 1,
        }
    }
}

/// Where an avatar's head and hands are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AvatarPose {
    /// The head.
    pub head: Isometry3<f32>,
    /// Left and right hands.
    pub hands: [Isometry3<f32>; 2],
}

/// An object held in a hand, and where it sits relative to the hand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grip {
    /// The held object.
    pub object: ObjectId,
    /// Its pose in the hand's frame now: what the avatar state sends and every peer plays.
    pub relative: Isometry3<f32>,
    /// Its pose in the hand's frame as grabbed: where the holder's grip returns to when it gave way (see
    /// [`super::grip`]). On a peer that does not hold it, the same as `relative`.
    pub aim: Isometry3<f32>,
}

/// One player's avatar inside a world.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct AvatarSlot {
    pub(crate) pose: AvatarPose,
    pub(crate) grips: [Option<Grip>; 2],
    /// The hands where the last physics step took what they hold: a grip gives way against the hand's motion
    /// since then, however many times the hand moved in between (a game moves it once a rendered frame).
    pub(crate) stepped_hands: [Isometry3<f32>; 2],
}

impl AvatarSlot {
    /// An avatar standing at `head`, hands half a metre ahead of it to either side.
    pub(crate) fn at(head: Isometry3<f32>) -> Self {
        let hand = |x: f32| head * Isometry3::translation(x, -0.5, 0.5);
        let hands = [hand(-0.3), hand(0.3)];
        Self {
            pose: AvatarPose { head, hands },
            grips: [None, None],
            stepped_hands: hands,
        }
    }
}

impl World {
    /// A player's head and hand poses. Panics if `player` is not below [`MAX_PLAYERS`].
    pub fn avatar_pose(&self, player: PlayerIndex) -> AvatarPose {
        self.avatars[usize::from(player)].pose
    }

    /// What a player's hand holds.
    pub fn grip(&self, player: PlayerIndex, hand: Hand) -> Option<Grip> {
        self.avatars[usize::from(player)].grips[hand.index()]
    }

    /// Moves a player's head.
    pub fn set_head_pose(&mut self, player: PlayerIndex, pose: Isometry3<f32>) {
        self.avatars[usize::from(player)].pose.head = pose;
    }

    /// The avatar state to send for `player`: quantized head and hands, and each held object with its pose
    /// relative to the hand and its sequences.
    pub fn avatar_state(&self, player: PlayerIndex) -> AvatarState {
        let slot = &self.avatars[usize::from(player)];
        let hands = Hand::BOTH.map(|hand| {
            let i = hand.index();
            HandState {
                pose: pose_to_quantized(&self.config.quant, &slot.pose.hands[i]),
                held: slot.grips[i].map(|grip| {
                    let view = self.authority(grip.object).view;
                    HeldObject {
                        object: grip.object,
                        relative: pose_to_quantized(&self.config.quant, &grip.relative),
                        authority_seq: view.authority_seq,
                        ownership_seq: view.ownership_seq,
                    }
                }),
            }
        });
        AvatarState {
            player,
            head: pose_to_quantized(&self.config.quant, &slot.pose.head),
            hands,
        }
    }

    /// Plays back a remote player's avatar state: moves head and hands, attaches the objects it holds and
    /// detaches those it no longer lists, and holds each as the holder's grip says (the holder alone decides
    /// where its grip gave way). A held object is taken over when its ownership sequence is newer
    /// than this peer's; on a tie only a guest takes it (the host's word: the other player won the race), and
    /// never for a grab that already ended here (a late sample of a hand that has let go). An object taken
    /// over jumps into the hand at once, its rendered pose staying where it was and blending in. States for the
    /// local player, for unknown players or naming unknown objects are ignored.
    pub fn apply_avatar_state(&mut self, state: &AvatarState) {
        let player = state.player;
        if usize::from(player) >= MAX_PLAYERS || player == self.config.local_player {
            return;
        }
        let head = pose_from_quantized(&self.config.quant, &state.head);
        self.set_head_pose(player, head);
        for hand in Hand::BOTH {
            let hand_state = &state.hands[hand.index()];
            let pose = pose_from_quantized(&self.config.quant, &hand_state.pose);
            let current = self.grip(player, hand);
            let listed = hand_state
                .held
                .filter(|held| usize::from(held.object) < self.object_count());
            if let Some(grip) = current
                && listed.is_none_or(|held| held.object != grip.object)
            {
                let object = &mut self.objects[usize::from(grip.object)];
                object.released_grab = Some((player, object.authority.view.ownership_seq));
                self.detach(grip.object, Holder { player, hand });
            }
            if let Some(held) = listed {
                let holder = Holder { player, hand };
                let already = self.holder(held.object) == Some(holder);
                if !already && self.takes_over(player, held) {
                    if let Some(other) = self.holder(held.object) {
                        self.detach(held.object, other);
                    }
                    let relative = pose_from_quantized(&self.config.quant, &held.relative);
                    self.attach(held.object, holder, relative);
                    self.jump_shown(held.object, &(pose * relative));
                    let object = &mut self.objects[usize::from(held.object)];
                    object.released_grab = None;
                    let authority = &mut object.authority;
                    authority.view = AuthorityView {
                        authority: player,
                        authority_seq: held.authority_seq,
                        ownership_seq: held.ownership_seq,
                    };
                    authority.confirmed = true;
                    authority.pending_commit = false;
                } else if already {
                    let relative = pose_from_quantized(&self.config.quant, &held.relative);
                    if let Some(grip) = &mut self.avatars[usize::from(player)].grips[hand.index()] {
                        grip.relative = relative;
                        grip.aim = relative;
                    }
                }
            }
            self.move_hand(player, hand, pose, false);
        }
    }

    fn takes_over(&self, player: PlayerIndex, held: HeldObject) -> bool {
        let object = &self.objects[usize::from(held.object)];
        let local = object.authority.view.ownership_seq;
        if object.released_grab == Some((player, held.ownership_seq)) {
            return false;
        }
        seq_newer(held.ownership_seq, local)
            || (held.ownership_seq == local && self.config.local_player != DEFAULT_AUTHORITY)
    }

    /// Puts an object in a hand: kinematic, following the hand.
    pub(crate) fn attach(&mut self, id: ObjectId, holder: Holder, relative: Isometry3<f32>) {
        self.avatars[usize::from(holder.player)].grips[holder.hand.index()] = Some(Grip {
            object: id,
            relative,
            aim: relative,
        });
        let object = &mut self.objects[usize::from(id)];
        object.holder = Some(holder);
        object.at_rest = false;
        object.still_since_stir = false;
        object.rest.clear();
        self.set_body_type(id, RigidBodyType::KinematicPositionBased);
    }

    /// Takes an object out of a hand: dynamic again, keeping the velocity the hand gave it, and sent first for
    /// the next 60 frames (whoever let go, by release or throw).
    pub(crate) fn detach(&mut self, id: ObjectId, holder: Holder) {
        let grips = &mut self.avatars[usize::from(holder.player)].grips[holder.hand.index()];
        if grips.is_some_and(|g| g.object == id) {
            *grips = None;
        }
        let object = &mut self.objects[usize::from(id)];
        if object.holder == Some(holder) {
            object.holder = None;
            object.priority.thrown();
            self.set_body_type(id, RigidBodyType::Dynamic);
            self.forget_contact_impulses(id);
        }
    }
}
