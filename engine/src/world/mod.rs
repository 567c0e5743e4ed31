//! The peer-hosted world: a fixed-step rapier3d simulation with the sample's networking rules on top.
//!
//! Each [`World::step`] runs, in order: quantize-both-sides (every free object's state is written back through
//! the codec's quantization, so peers extrapolate from identical numbers), one rapier step, rolling resistance
//! (a touching object's speeds lose at least a quantization step a frame, see [`rolling`]), at-rest detection
//! (a 16-frame pose history decides rest, and so does a quantization fixed point, see [`at_rest`]; resting
//! objects are held perfectly still until something disturbs them), touch propagation of the local player's
//! authority through contacts, return of confirmed authority to default after 60 frames at rest, and the
//! priority and smoothing timers.
//!
//! The public API speaks nalgebra; rapier's glam types stay inside this module tree (see [`convert`]).

pub mod at_rest;
pub mod authority;
pub mod avatar;
pub mod convert;
pub mod drive;
pub mod events;
pub mod forces;
pub mod grip;
pub mod interaction;
pub mod priority;
pub mod resting_boxes;
pub mod rolling;
pub mod scene;
pub mod scene_file;
pub mod shape;
pub mod smoothing;
#[cfg(test)]
mod tests;

use nalgebra::{Isometry3, Translation3, Vector3};
use physync_codec::{BodyState, ObjectState, QuantConfig, Vec3Quantizer};
use rapier3d::math::{Pose, Vector};
use rapier3d::parry::bounding_volume::BoundingVolume;
use rapier3d::parry::query;
use rapier3d::prelude::{
    ActiveCollisionTypes, ColliderBuilder, ColliderHandle, ContactPair, PhysicsWorld, RigidBody,
    RigidBodyBuilder, RigidBodyHandle, RigidBodyType,
};

use at_rest::{RestDetector, Sample};
use authority::{Authority, AuthorityView, DEFAULT_AUTHORITY, Direction, PlayerIndex, Verdict};
use avatar::{AvatarSlot, Hand, MAX_PLAYERS};
use convert::{
    pose_from_rapier, pose_to_rapier, quat_from_array, quat_to_array, vec_from_array,
    vec_from_rapier, vec_to_array, vec_to_rapier,
};
use events::EventLog;
use priority::{HIGH_ENERGY_SPEED, PriorityTimers};
use resting_boxes::RestingBoxes;
use rolling::RollingLoss;
use scene::{ObjectId, SceneSpec};
use smoothing::{MAX_BLEND_STEP, MAX_WAIT_SECONDS, RenderError};

/// Linear speed (m/s) that a resting object must pick up in one step to be considered disturbed.
pub const WAKE_LINEAR_SPEED: f32 = 0.2;
/// Angular speed (rad/s) that a resting object must pick up in one step to be considered disturbed.
pub const WAKE_ANGULAR_SPEED: f32 = 0.5;
/// A resting object touching a held object, or a free object moving faster than this (m/s), wakes up: its
/// support may be leaving, which the resting object's own velocity would not show. A resting object that
/// touches nothing at all wakes up too.
pub const STIR_SPEED: f32 = 0.05;

/// A received update named an object the scene does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no object {0} in this scene")]
pub struct UnknownObject(pub ObjectId);

/// How a world is simulated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldConfig {
    /// Fixed steps per second (60 by default).
    pub step_hz: u32,
    /// The quantization shared with the codec; [`World::new`] replaces it with the scene's.
    pub quant: QuantConfig,
    /// The player this peer is (0 = host).
    pub local_player: PlayerIndex,
    /// Cap on the speed at which the solver pushes penetrating bodies apart (m/s; the sample used 1). Set
    /// as rapier's `IntegrationParameters::normalized_max_corrective_velocity` (length unit 1 m).
    pub max_depenetration_speed: f32,
    /// Write every free object's state back through the quantization before each step.
    pub quantize_both_sides: bool,
    /// Decide rest with the pose ring buffer (and disable rapier's sleep); when off, rapier's own sleep runs
    /// and no object is ever reported at rest.
    pub at_rest_detection: bool,
    /// rapier solver iterations per step.
    pub solver_iterations: usize,
}

impl Default for WorldConfig {
    fn default() -> Self {
        Self {
            step_hz: 60,
            quant: QuantConfig::default(),
            local_player: DEFAULT_AUTHORITY,
            max_depenetration_speed: 1.0,
            quantize_both_sides: true,
            at_rest_detection: true,
            solver_iterations: 4,
        }
    }
}

impl WorldConfig {
    /// Plain rapier: no quantization, no ring-buffer rest, rapier's sleep (the benchmark baseline).
    pub fn rapier_only() -> Self {
        Self {
            quantize_both_sides: false,
            at_rest_detection: false,
            ..Self::default()
        }
    }
}

/// Who holds an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// The holding player.
    pub player: PlayerIndex,
    /// Which hand.
    pub hand: Hand,
}

/// One networked object's bookkeeping beside its rapier body.
#[derive(Debug, Clone)]
struct Object {
    body: RigidBodyHandle,
    collider: ColliderHandle,
    half_extents: Vector3<f32>,
    rest: RestDetector,
    at_rest: bool,
    rest_pose: Isometry3<f32>,
    /// Woken from rest by a stir alone (see [`STIR_SPEED`]; a held object's touch is no mere stir) and not
    /// moved beyond the rest thresholds of `rest_pose` since ([`at_rest::poses_close`]): rapier runs it again,
    /// in case its support is leaving, but until it actually moves (or a held object touches it) the authority
    /// rules still count it as resting: it takes nothing by touch and keeps counting toward its return to
    /// default. Without this, two peers simulating one pile wake each other's resting bodies for ever with
    /// their settling noise, and neither's authority ever returns.
    still_since_stir: bool,
    /// What rolling resistance takes off its speeds each step while it touches something.
    rolling: RollingLoss,
    authority: Authority,
    priority: PriorityTimers,
    render_error: RenderError,
    /// How long (s) its shown position has waited for physics at a stretch (see [`RenderError::wait_for_physics`]).
    waited: f32,
    /// Its speed (m/s) when the last step ended: with the speed the next step ends at, what its rendered pose
    /// may follow physics at (not the speed written or led into it between the steps, which may be anything).
    stepped_speed: f32,
    holder: Option<Holder>,
    /// The ownership sequence of the grab by a remote player that ended here (its avatar stopped listing the
    /// object): a late or interpolated avatar naming that same grab does not put the object back in the hand.
    released_grab: Option<(PlayerIndex, u16)>,
    /// The last quantization of its body, reused while rapier's state of the body has not changed.
    quantized: Option<QuantizedBody>,
    /// The last received state written into its body.
    applied: Option<AppliedState>,
}

impl Object {
    /// Resting as far as the authority rules go: at rest, or only stirred and not moved since.
    fn resting(&self) -> bool {
        self.at_rest || self.still_since_stir
    }
}

/// A received state this peer wrote into an object's body: when, and how far it moved the body. What a frame-by-
/// frame meter reads to tell a correction from the simulation's own motion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppliedState {
    /// The world's frame count when it was applied (before that frame's step).
    pub frame: u64,
    /// How far it moved the physics position (m).
    pub jump_m: f32,
    /// The physics velocity it replaced (m/s).
    pub velocity_before: Vector3<f32>,
    /// The state written.
    pub state: BodyState,
}

/// A body's state exactly as rapier held it, and what it quantizes to: the rest detector quantizes every free
/// body after a step, and the write-back before the next step needs the same quantization of the same numbers.
#[derive(Debug, Clone, Copy)]
struct QuantizedBody {
    position: Pose,
    linvel: Vector,
    angvel: Vector,
    state: BodyState,
}

impl QuantizedBody {
    /// The quantized state of `body`, from `cache` when the body has not changed since it was filled.
    fn state(cache: &mut Option<Self>, quant: &QuantConfig, body: &RigidBody) -> BodyState {
        match cache {
            Some(c)
                if c.position == *body.position()
                    && c.linvel == body.linvel()
                    && c.angvel == body.angvel() =>
            {
                c.state
            }
            _ => {
                let state = quantize_body(quant, body, false);
                *cache = Some(Self {
                    position: *body.position(),
                    linvel: body.linvel(),
                    angvel: body.angvel(),
                    state,
                });
                state
            }
        }
    }
}

/// Buffers every step reuses, so that stepping allocates nothing once the world has run a step.
#[derive(Debug, Default)]
struct Scratch {
    /// Per object: its linear velocity going into the step.
    velocity_before: Vec<Vector3<f32>>,
    /// Object pairs with an active contact.
    touching: Vec<(ObjectId, ObjectId)>,
    /// Per object: it has an active contact with anything, the floor included.
    supported: Vec<bool>,
    /// Per object: it is held, or moving fast enough to stir what it touches.
    stirring: Vec<bool>,
    /// Per object: something stirring touches it.
    stirred: Vec<bool>,
    /// Per object: it touches a held object.
    touches_held: Vec<bool>,
    /// Objects hit hard this step.
    collided: Vec<ObjectId>,
    /// Per object: its rendered position going into the step (physics position plus the render error).
    shown_before: Vec<Vector3<f32>>,
    /// Objects whose contacts touch propagation still has to visit.
    frontier: Vec<ObjectId>,
    /// Resting objects a moving or held object may reach in the coming step, and whether a held one does.
    reached: Vec<(ObjectId, bool)>,
    /// The resting objects' boxes going into the step.
    resting_boxes: RestingBoxes,
}

/// Resets a scratch vector to `len` copies of `value`, keeping its allocation.
fn refill<T: Copy>(v: &mut Vec<T>, len: usize, value: T) {
    v.clear();
    v.resize(len, value);
}

/// The simulation of one peer.
pub struct World {
    physics: PhysicsWorld,
    objects: Vec<Object>,
    avatars: [AvatarSlot; MAX_PLAYERS],
    config: WorldConfig,
    frame: u64,
    player_object: Option<ObjectId>,
    scene: SceneSpec,
    events: EventLog,
    floor_half_extent: f32,
    scratch: Scratch,
}

/// Height of the floor's top face (m): the floor is a box whose top is the plane y = 0.
pub const FLOOR_TOP: f32 = 0.0;

impl World {
    /// Builds a world from a scene; the quantization in `config` is replaced by the scene's. The scene should be
    /// valid ([`SceneSpec::validate`]; files, the builder and scene transfer check it): a shape that is not
    /// builds as a tiny placeholder or panics. Panics if the scene has more than [`scene::MAX_OBJECTS`] objects.
    pub fn new(mut config: WorldConfig, scene: &SceneSpec) -> Self {
        assert!(
            scene.objects.len() <= scene::MAX_OBJECTS,
            "too many objects for one scene"
        );
        config.quant = scene.quant();
        assert!(config.step_hz > 0, "step rate must be positive");
        let mut physics = PhysicsWorld::new();
        physics.integration_parameters.dt = 1.0 / config.step_hz as f32;
        physics
            .integration_parameters
            .normalized_max_corrective_velocity = config.max_depenetration_speed;
        physics.integration_parameters.num_solver_iterations = config.solver_iterations;
        let step_floor = |q: &Vec3Quantizer| {
            if config.quantize_both_sides {
                2.0 * q.axes.iter().map(|a| a.max_error()).fold(0.0, f32::max)
            } else {
                0.0
            }
        };
        let rolling_floor = [
            step_floor(&config.quant.linear_velocity),
            step_floor(&config.quant.angular_velocity),
        ];
        let gravity = physics.gravity.length();
        // A held object's body is kinematic, and its contacts with fixed bodies (the level, an object held at
        // rest) are listed too, so that its grip feels them and stops on them (see `grip`).
        // A resting object's body is fixed (see [`World::hold_at_rest`]): its contacts with other resting
        // objects and the level stay listed, so that a resting object still knows it is supported.
        let held_contacts = ActiveCollisionTypes::default() | ActiveCollisionTypes::KINEMATIC_FIXED;
        let resting_contacts = if config.at_rest_detection {
            held_contacts | ActiveCollisionTypes::FIXED_FIXED
        } else {
            held_contacts
        };
        for piece in &scene.level {
            physics.insert(
                RigidBodyBuilder::fixed().pose(pose_to_rapier(&piece.pose.isometry())),
                piece
                    .shape
                    .collider()
                    .friction(piece.friction)
                    .restitution(piece.restitution),
            );
        }
        let objects = scene
            .objects
            .iter()
            .enumerate()
            .map(|(id, spec)| {
                let pose = spec.pose.isometry();
                let (body, collider) = physics.insert(
                    RigidBodyBuilder::dynamic()
                        .pose(pose_to_rapier(&pose))
                        .user_data(id as u128)
                        .angular_damping(spec.material.angular_damping)
                        .can_sleep(!config.at_rest_detection),
                    ColliderBuilder::new(spec.shape.shared_shape())
                        .active_collision_types(resting_contacts)
                        .density(spec.material.density)
                        .friction(spec.material.friction)
                        .restitution(spec.material.restitution),
                );
                Object {
                    body,
                    collider,
                    half_extents: spec.shape.local_half_extents(),
                    rest: RestDetector::default(),
                    at_rest: false,
                    rest_pose: pose,
                    still_since_stir: false,
                    rolling: RollingLoss::new(
                        spec.material.rolling_resistance,
                        spec.shape.local_half_extents().min(),
                        gravity,
                        1.0 / config.step_hz as f32,
                        rolling_floor,
                    ),
                    authority: Authority::new(),
                    priority: PriorityTimers::default(),
                    render_error: RenderError::default(),
                    waited: 0.0,
                    stepped_speed: 0.0,
                    holder: None,
                    released_grab: None,
                    quantized: None,
                    applied: None,
                }
            })
            .collect();
        let avatars = std::array::from_fn(|p| AvatarSlot::at(scene.spawn(p)));
        Self {
            physics,
            objects,
            avatars,
            config,
            frame: 0,
            player_object: scene.player_object,
            scene: scene.clone(),
            events: EventLog::default(),
            floor_half_extent: scene.floor_half_extent(),
            scratch: Scratch::default(),
        }
    }

    /// The configuration this world runs with.
    pub fn config(&self) -> &WorldConfig {
        &self.config
    }

    /// The player this peer is.
    pub fn local_player(&self) -> PlayerIndex {
        self.config.local_player
    }

    /// Length of one step.
    pub fn dt(&self) -> f32 {
        self.physics.integration_parameters.dt
    }

    /// Steps taken since the world was built.
    pub fn frame(&self) -> u64 {
        self.frame
    }

    /// Number of networked objects; ids are `0..object_count()`.
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    /// The object scripted input drives, if the scene has one.
    pub fn player_object(&self) -> Option<ObjectId> {
        self.player_object
    }

    /// Advances the world by one fixed step.
    pub fn step(&mut self) {
        let mut shown_before = std::mem::take(&mut self.scratch.shown_before);
        shown_before.clear();
        shown_before.extend(self.objects.iter().map(|o| {
            vec_from_rapier(self.physics.bodies[o.body].translation()) + o.render_error.position
        }));
        if self.config.at_rest_detection {
            self.wake_what_movers_reach();
        }
        if self.config.quantize_both_sides || self.config.at_rest_detection {
            self.write_back_before_step();
        }
        let velocity_before = &mut self.scratch.velocity_before;
        velocity_before.clear();
        velocity_before.extend(
            self.objects
                .iter()
                .map(|o| vec_from_rapier(self.physics.bodies[o.body].linvel())),
        );
        self.physics.step();
        for slot in &mut self.avatars {
            slot.stepped_hands = slot.pose.hands;
        }
        for object in &mut self.objects {
            object.priority.tick();
        }
        self.glide_shown(&shown_before);
        self.scratch.shown_before = shown_before;
        self.scan_contacts();
        self.resist_rolling();
        if self.config.at_rest_detection {
            self.detect_rest();
        }
        self.propagate_touch();
        let local = self.config.local_player;
        for object in &mut self.objects {
            let resting = object.resting();
            object
                .authority
                .tick_rest(local, resting, object.holder.is_some());
        }
        self.observe_changes();
        self.frame += 1;
    }

    /// Advances rapier alone by one step, skipping every rule of this module: the baseline that benchmarks
    /// compare [`World::step`] against (pair it with [`WorldConfig::rapier_only`]).
    pub fn step_physics_only(&mut self) {
        self.physics.step();
        self.frame += 1;
    }

    /// Wakes, before the step, every resting object that something closes in on and may reach in it: a free
    /// object moving faster than [`STIR_SPEED`] that closes in faster than that and is within a step's travel at
    /// that speed plus rapier's contact prediction distance (the contacts the coming step solves), or a held
    /// object closing in at any speed that reaches it within its next pose. A resting body is fixed (see
    /// [`hold_at_rest`]), so one left resting would meet the mover as a wall for the step: a thrown cube would stop
    /// dead on it, and a pushed pile would not give way. Woken here, it takes its share of the impact in the same
    /// step, as a sleeping rapier body does. One woken by a held object is no mere stir (see
    /// [`Object::still_since_stir`]). Candidates are the resting objects whose boxes the box the mover sweeps
    /// touches ([`RestingBoxes`]): the mover's own contact pairs lag a step behind it, and a held body's pairs with
    /// fixed ones are no touch ([`World::held_against_fixed`]).
    fn wake_what_movers_reach(&mut self) {
        let mut boxes = std::mem::take(&mut self.scratch.resting_boxes);
        boxes.rebuild(
            self.objects
                .iter()
                .enumerate()
                .filter(|(_, o)| o.at_rest)
                .map(|(id, o)| {
                    (
                        self.physics.colliders[o.collider].compute_aabb(),
                        id as ObjectId,
                    )
                }),
        );
        if boxes.is_empty() {
            self.scratch.resting_boxes = boxes;
            return;
        }
        let dt = self.dt();
        let margin = self.physics.integration_parameters.prediction_distance();
        let mut reached = std::mem::take(&mut self.scratch.reached);
        reached.clear();
        for object in &self.objects {
            let body = &self.physics.bodies[object.body];
            let held = object.holder.is_some();
            let (next, least, slack) = if held {
                (*body.next_position(), 0.0, 0.0)
            } else if !object.at_rest && body.linvel().length() > STIR_SPEED {
                (body.predict_position_using_velocity(dt), STIR_SPEED, margin)
            } else {
                continue;
            };
            let mover = &self.physics.colliders[object.collider];
            let velocity = (next.translation - body.translation()) / dt;
            let sweep = mover.compute_swept_aabb(&next).loosened(margin);
            for id in boxes.touching(sweep) {
                let other = &self.physics.colliders[self.objects[usize::from(id)].collider];
                let closing = query::contact(
                    mover.position(),
                    mover.shape(),
                    other.position(),
                    other.shape(),
                    velocity.length() * dt + slack,
                )
                .ok()
                .flatten()
                .is_some_and(|c| {
                    let approach = velocity.dot(c.normal1);
                    approach > least && c.dist <= approach * dt + slack
                });
                if closing {
                    reached.push((id, held));
                }
            }
        }
        for &(id, by_hand) in &reached {
            let object = &mut self.objects[usize::from(id)];
            if object.at_rest {
                release_from_rest(&mut self.physics.bodies[object.body], object);
                object.still_since_stir = !by_hand;
            } else if by_hand {
                object.still_since_stir = false;
            }
        }
        self.scratch.reached = reached;
        self.scratch.resting_boxes = boxes;
    }

    /// Quantize-both-sides: every free object starts the step from its quantized state (a resting object's
    /// fixed body already sits on its resting pose). A body already there is not touched at all: rapier takes
    /// any mutable access to a body for a user change.
    fn write_back_before_step(&mut self) {
        let quant = self.config.quant;
        let quantize = self.config.quantize_both_sides;
        for object in &mut self.objects {
            if object.holder.is_some() {
                continue;
            }
            if object.at_rest || !quantize {
                continue;
            }
            let body = &self.physics.bodies[object.body];
            let (pose, linvel, angvel) = rapier_state(
                &quant,
                &QuantizedBody::state(&mut object.quantized, &quant, body),
            );
            if *body.position() == pose && body.linvel() == linvel && body.angvel() == angvel {
                continue;
            }
            let body = &mut self.physics.bodies[object.body];
            body.set_position(pose, true);
            body.set_linvel(linvel, true);
            body.set_angvel(angvel, true);
        }
    }

    /// Shrinks every object's render error by a frame (see [`RenderError::decay`]), then keeps every free object's
    /// rendered position (before the floor lift of [`World::render_pose`]) within the reach of the faster of the
    /// speeds the last step and this one ended at, plus [`MAX_BLEND_STEP`], of where it was before the step (see
    /// [`RenderError::follow_at_most`]), never carried back against the step physics took while it waits for
    /// physics (see [`RenderError::wait_for_physics`]).
    fn glide_shown(&mut self, shown_before: &[Vector3<f32>]) {
        let dt = self.dt();
        for (object, shown) in self.objects.iter_mut().zip(shown_before) {
            let lead = object.render_error.position;
            object.render_error.decay();
            let body = &self.physics.bodies[object.body];
            let stepped_speed = body.linvel().length();
            let speed = object.stepped_speed.max(stepped_speed);
            object.stepped_speed = stepped_speed;
            if object.holder.is_some() || object.at_rest {
                continue;
            }
            let physics = vec_from_rapier(body.translation());
            let mut waiting = object.render_error;
            if !waiting.wait_for_physics(shown, &(shown - lead), &physics) {
                object.waited = 0.0;
            } else if object.waited < MAX_WAIT_SECONDS {
                object.render_error = waiting;
                object.waited += dt;
            }
            object
                .render_error
                .follow_at_most(shown, &physics, speed * dt + MAX_BLEND_STEP);
        }
    }

    /// The networked object a collider belongs to, if it is one (the floor is not).
    fn object_of(&self, collider: ColliderHandle) -> Option<ObjectId> {
        let body = self.physics.colliders.get(collider)?.parent()?;
        let id = self.physics.bodies.get(body)?.user_data as usize;
        (self.objects.get(id)?.body == body).then_some(id as ObjectId)
    }

    /// Whether a contact pair is a held object against a fixed body (the level, or an object held at rest):
    /// listed only so that the grip feels what it presses (see `grip`). Neither body moves for it, so it is no
    /// touch, support or collision: a resting object a hand reaches is woken first (see
    /// [`World::wake_what_movers_reach`]) and touched as a body that moves.
    fn held_against_fixed(&self, a: Option<ObjectId>, b: Option<ObjectId>) -> bool {
        let held = |id: Option<ObjectId>| {
            id.is_some_and(|id| self.objects[usize::from(id)].holder.is_some())
        };
        let fixed =
            |id: Option<ObjectId>| id.is_none_or(|id| self.objects[usize::from(id)].at_rest);
        (held(a) && fixed(b)) || (held(b) && fixed(a))
    }

    /// Reads this step's contacts into the scratch buffers: the object pairs in contact, which objects touch
    /// anything at all (the floor included), and the high-energy collisions: contacts whose bodies closed in
    /// along the contact normal faster than [`HIGH_ENERGY_SPEED`] going into the step. A resting or sliding
    /// contact closes in at no speed, so only the start of an impact counts.
    fn scan_contacts(&mut self) {
        let count = self.objects.len();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.touching.clear();
        scratch.collided.clear();
        refill(&mut scratch.supported, count, false);
        let holding = self
            .avatars
            .iter()
            .any(|a| a.grips.iter().any(Option::is_some));
        for pair in self.physics.contact_pairs() {
            if !pair.has_any_active_contact() {
                continue;
            }
            let (id1, id2) = (
                self.object_of(pair.collider1),
                self.object_of(pair.collider2),
            );
            if (id1.is_none() && id2.is_none()) || (holding && self.held_against_fixed(id1, id2)) {
                continue;
            }
            for id in id1.into_iter().chain(id2) {
                scratch.supported[usize::from(id)] = true;
            }
            let velocity = |id: Option<ObjectId>| {
                id.map_or(Vector3::zeros(), |id| {
                    scratch.velocity_before[usize::from(id)]
                })
            };
            let closing = velocity(id1) - velocity(id2);
            if closing_speed(pair, &closing) > HIGH_ENERGY_SPEED {
                scratch.collided.extend(id1.into_iter().chain(id2));
            }
            if let (Some(a), Some(b)) = (id1, id2) {
                scratch.touching.push((a, b));
            }
        }
        for &id in &scratch.collided {
            self.objects[usize::from(id)].priority.collided();
        }
        self.scratch = scratch;
    }

    /// Rolling resistance (see [`rolling`]): every free object that touches something and is not at rest
    /// loses its material's share of linear and angular speed.
    fn resist_rolling(&mut self) {
        for (object, &supported) in self.objects.iter().zip(&self.scratch.supported) {
            if !supported
                || object.at_rest
                || object.holder.is_some()
                || object.rolling.linear <= 0.0
            {
                continue;
            }
            let body = &self.physics.bodies[object.body];
            if !body.is_dynamic() {
                continue;
            }
            let linear = vec_to_rapier(&RollingLoss::slow(
                object.rolling.linear,
                vec_from_rapier(body.linvel()),
            ));
            let angular = vec_to_rapier(&RollingLoss::slow(
                object.rolling.angular,
                vec_from_rapier(body.angvel()),
            ));
            if body.linvel() == linear && body.angvel() == angular {
                continue;
            }
            let body = &mut self.physics.bodies[object.body];
            body.set_linvel(linear, false);
            body.set_angvel(angular, false);
        }
    }

    /// The ring buffer decides rest; resting objects stay put unless this step disturbed them.
    fn detect_rest(&mut self) {
        let quant = self.config.quant;
        let count = self.objects.len();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.stirring.clear();
        scratch.stirring.extend(self.objects.iter().map(|o| {
            o.holder.is_some()
                || (!o.at_rest && self.physics.bodies[o.body].linvel().length() > STIR_SPEED)
        }));
        refill(&mut scratch.stirred, count, false);
        refill(&mut scratch.touches_held, count, false);
        for &(a, b) in &scratch.touching {
            let (a, b) = (usize::from(a), usize::from(b));
            scratch.stirred[a] |= scratch.stirring[b];
            scratch.stirred[b] |= scratch.stirring[a];
            scratch.touches_held[a] |= self.objects[b].holder.is_some();
            scratch.touches_held[b] |= self.objects[a].holder.is_some();
        }
        for (i, object) in self.objects.iter_mut().enumerate() {
            let (stirred, touches_held, supported) = (
                scratch.stirred[i],
                scratch.touches_held[i],
                scratch.supported[i],
            );
            let body = &self.physics.bodies[object.body];
            if object.holder.is_some() {
                object.rest.clear();
                object.at_rest = false;
                object.still_since_stir = false;
                continue;
            }
            if object.at_rest {
                let moving = touches_held
                    || !supported
                    || body.linvel().length() > WAKE_LINEAR_SPEED
                    || body.angvel().length() > WAKE_ANGULAR_SPEED;
                if stirred || moving {
                    release_from_rest(&mut self.physics.bodies[object.body], object);
                    object.still_since_stir = !moving;
                }
                continue;
            }
            let state = QuantizedBody::state(&mut object.quantized, &quant, body);
            let pose = state_pose(&quant, &state);
            object.still_since_stir &=
                !touches_held && at_rest::poses_close(&object.rest_pose, &pose);
            let slow = vec_from_array(state.linear_velocity_f32(&quant)).norm()
                <= WAKE_LINEAR_SPEED
                && vec_from_array(state.angular_velocity_f32(&quant)).norm() <= WAKE_ANGULAR_SPEED;
            let ([lx, ly, lz], [ax, ay, az]) = (state.linear_velocity, state.angular_velocity);
            let sample = Sample {
                position: pose.translation.vector,
                rotation: pose.rotation,
                velocities: [lx, ly, lz, ax, ay, az],
                settling: supported && !touches_held && slow,
            };
            // Nothing comes to rest under a hand's press: its fixed body would lose the contact (a held body is
            // kinematic, and rapier pairs no kinematic body with a fixed one), and the grip would stop giving way.
            if object.rest.push(&sample) && !touches_held {
                object.still_since_stir = false;
                hold_at_rest(&mut self.physics.bodies[object.body], object, pose);
            }
        }
        self.scratch = scratch;
    }

    /// Touch: objects in contact with a moving object under the local player's authority take that
    /// authority, recursively through contacts (sequence +1 each). Only a guest does this; the host's
    /// authority is the default. Each object reached is expanded through its own contacts only. An object
    /// another player let go of within the released-priority window is not taken: here it left a hand played
    /// a jitter delay late, so its contacts are not the ones its releaser saw, and its releaser's peer is
    /// already sending it first. A body a stir woke that has not moved since is no source: it rests as far as
    /// authority goes, and would otherwise take back every neighbour that returned to default beside it.
    fn propagate_touch(&mut self) {
        let local = self.config.local_player;
        if local == DEFAULT_AUTHORITY || self.scratch.touching.is_empty() {
            return;
        }
        let mut frontier = std::mem::take(&mut self.scratch.frontier);
        frontier.clear();
        frontier.extend(
            self.objects
                .iter()
                .enumerate()
                .filter(|(_, o)| o.authority.view.authority == local && !o.resting())
                .map(|(i, _)| i as ObjectId),
        );
        while let Some(source) = frontier.pop() {
            let collider = self.objects[usize::from(source)].collider;
            for pair in self.physics.contact_pairs_with(collider) {
                if !pair.has_any_active_contact() {
                    continue;
                }
                let other = if pair.collider1 == collider {
                    pair.collider2
                } else {
                    pair.collider1
                };
                let Some(other) = self.object_of(other) else {
                    continue;
                };
                if self.held_against_fixed(Some(source), Some(other)) {
                    continue;
                }
                let o = &mut self.objects[usize::from(other)];
                let just_let_go_remotely = o.priority.thrown_frames > 0
                    && o.released_grab.is_some_and(|(player, seq)| {
                        player != local && seq == o.authority.view.ownership_seq
                    });
                if o.holder.is_none()
                    && o.authority.view.authority == DEFAULT_AUTHORITY
                    && !just_let_go_remotely
                {
                    o.authority.touch(local);
                    frontier.push(other);
                }
            }
        }
        self.scratch.frontier = frontier;
    }

    /// The object's state as it goes on the wire: quantized body, at-rest bit, authority and sequences.
    pub fn object_state(&self, id: ObjectId) -> ObjectState {
        let object = &self.objects[usize::from(id)];
        let body = &self.physics.bodies[object.body];
        let state = if object.at_rest {
            BodyState::quantize(
                &self.config.quant,
                vec_to_array(&object.rest_pose.translation.vector),
                quat_to_array(&object.rest_pose.rotation),
                [0.0; 3],
                [0.0; 3],
                true,
            )
        } else {
            quantize_body(&self.config.quant, body, false)
        };
        let view = object.authority.view;
        ObjectState {
            body: state,
            authority: view.authority,
            authority_seq: view.authority_seq,
            ownership_seq: view.ownership_seq,
        }
    }

    /// Every object's wire state, indexed by id.
    pub fn object_states(&self) -> Vec<ObjectState> {
        let mut out = Vec::with_capacity(self.objects.len());
        self.object_states_into(&mut out);
        out
    }

    /// Every object's wire state, indexed by id, into `out` (replacing what it held; a session calls this every
    /// frame with the same buffer, so it allocates nothing).
    pub fn object_states_into(&self, out: &mut Vec<ObjectState>) {
        out.clear();
        out.extend((0..self.objects.len()).map(|id| self.object_state(id as ObjectId)));
    }

    /// Applies a received body state to physics at once; the rendered pose keeps showing where the object
    /// was and blends the jump out over the following frames. A held object is left alone. Panics on an id
    /// outside the scene (as do the other per-object methods; [`World::receive_object_state`] checks).
    pub fn apply_body_state(&mut self, id: ObjectId, state: &BodyState) {
        let quant = self.config.quant;
        let object = &mut self.objects[usize::from(id)];
        if object.holder.is_some() {
            return;
        }
        let shown = self.render_pose(id);
        let frame = self.frame;
        let object = &mut self.objects[usize::from(id)];
        let body = &mut self.physics.bodies[object.body];
        let (before, velocity_before) = (pose_from_rapier(body.position()), body.linvel());
        let after = state_pose(&quant, state);
        if state.at_rest && self.config.at_rest_detection {
            hold_at_rest(body, object, after);
        } else {
            release_from_rest(body, object);
            object.rest.clear();
            write_body(body, &quant, state);
        }
        object.applied = Some(AppliedState {
            frame,
            jump_m: (after.translation.vector - before.translation.vector).norm(),
            velocity_before: vec_from_rapier(velocity_before),
            state: *state,
        });
        object.render_error = RenderError::between(&shown, &after);
        object.still_since_stir = false;
    }

    /// Moves a remote object the way its sender moved it: given the state the object will be written to `steps`
    /// steps from now (the next update queued in the jitter buffer), the body takes the velocities that carry it
    /// there in those steps (gravity counted), so each step shows the sender's path, off a contact this world
    /// does not have too, and bridges an update lost on the way instead of flying on past it and being turned
    /// back. A path faster than both the body and the next state by [`LEAD_SPEED_MARGIN`] is no path the
    /// sender's body took but a correction (this copy ran on its own physics, or was pushed here by something
    /// its sender does not see there): the body then only takes the next state's velocities, the write makes
    /// the correction and the rendered pose glides over it. Only an update from the object's authority here,
    /// another player, leads it; a held or resting object, or an unknown id, is left alone.
    pub fn lead_into(&mut self, id: ObjectId, next: &ObjectState, steps: u32) {
        let local = self.config.local_player;
        let Some(object) = self.objects.get(usize::from(id)) else {
            return;
        };
        let authority = object.authority.view.authority;
        if object.holder.is_some()
            || object.at_rest
            || authority == local
            || next.authority != authority
        {
            return;
        }
        let quant = &self.config.quant;
        let to = state_pose(quant, &next.body);
        let velocity = vec_from_array(next.body.linear_velocity_f32(quant));
        let gravity = vec_from_rapier(self.physics.gravity);
        let dt = self.dt();
        let n = steps.max(1) as f32;
        let substeps = self
            .physics
            .integration_parameters
            .num_solver_iterations
            .max(1) as f32;
        // Semi-implicit Euler over n steps of `substeps` substeps each: the body falls g·dt² ((n-1)/2 + (s+1)/2s)
        // further than its starting velocity carries it, per step taken.
        let fall = gravity * dt * ((n - 1.0) / 2.0 + (substeps + 1.0) / (2.0 * substeps));
        let body = &mut self.physics.bodies[object.body];
        let from = pose_from_rapier(body.position());
        let path = (to.translation.vector - from.translation.vector) / (n * dt) - fall;
        let speed = body.linvel().length().max(velocity.norm());
        if path.norm() > speed + LEAD_SPEED_MARGIN {
            let spin = vec_from_array(next.body.angular_velocity_f32(quant));
            body.set_linvel(vec_to_rapier(&(velocity - gravity * dt)), true);
            body.set_angvel(vec_to_rapier(&spin), true);
            return;
        }
        let turn = to.rotation * from.rotation.inverse();
        body.set_linvel(vec_to_rapier(&path), true);
        body.set_angvel(vec_to_rapier(&(turn.scaled_axis() / (n * dt))), true);
    }

    /// Judges a received object update against this peer's view ([`authority::judge_update`]) and applies
    /// what wins: the authority bookkeeping, and on [`Verdict::Accept`] the body state. An accepted update for
    /// an object held by a local hand means the grab lost: the hand lets go. An id outside the scene (network
    /// input is hostile) is an error and changes nothing.
    pub fn receive_object_state(
        &mut self,
        id: ObjectId,
        direction: Direction,
        state: &ObjectState,
    ) -> Result<Verdict, UnknownObject> {
        if usize::from(id) >= self.objects.len() {
            return Err(UnknownObject(id));
        }
        let update = AuthorityView {
            authority: state.authority,
            authority_seq: state.authority_seq,
            ownership_seq: state.ownership_seq,
        };
        let object = &mut self.objects[usize::from(id)];
        if let Direction::GuestToHost { sender } = direction
            && object.holder.is_some_and(|h| h.player != sender)
        {
            // No snatching, whatever the sequences: a hand's object changes only through its avatar.
            return Ok(Verdict::Reject);
        }
        let verdict = authority::judge_update(direction, object.authority.view, update);
        object.authority.apply_verdict(verdict, update);
        if verdict == Verdict::Accept {
            if let Some(holder) = object.holder {
                self.detach(id, holder);
            }
            self.apply_body_state(id, &state.body);
        }
        Ok(verdict)
    }

    /// The physics pose of an object.
    pub fn physics_pose(&self, id: ObjectId) -> Isometry3<f32> {
        pose_from_rapier(self.physics.bodies[self.objects[usize::from(id)].body].position())
    }

    /// The pose to draw: physics pose plus the correction still being blended out, never lower than the
    /// floor's top over the floor (a fast landing may sink a body into the floor for a few steps while the
    /// capped depenetration pushes it out; nobody should see that).
    pub fn render_pose(&self, id: ObjectId) -> Isometry3<f32> {
        let object = &self.objects[usize::from(id)];
        let mut shown = object.render_error.apply(&self.physics_pose(id));
        let p = shown.translation.vector;
        let over_floor = p.x.abs() <= self.floor_half_extent && p.z.abs() <= self.floor_half_extent;
        let low = lowest_point(&shown, &object.half_extents);
        if over_floor && low < FLOOR_TOP {
            shown.translation.vector.y += FLOOR_TOP - low;
        }
        shown
    }

    /// Moves an object's body to `pose` at once (a remote hand took it), keeping its rendered pose where it was:
    /// the jump is blended out like a correction.
    pub(crate) fn jump_shown(&mut self, id: ObjectId, pose: &Isometry3<f32>) {
        let shown = self.render_pose(id);
        let object = &mut self.objects[usize::from(id)];
        let body = &mut self.physics.bodies[object.body];
        body.set_position(pose_to_rapier(pose), true);
        body.set_next_kinematic_position(pose_to_rapier(pose));
        object.render_error = RenderError::between(&shown, pose);
    }

    /// The last received state written into an object's body, if any.
    pub fn last_applied(&self, id: ObjectId) -> Option<AppliedState> {
        self.objects[usize::from(id)].applied
    }

    /// What an object touched in the last step: other objects by id, `None` for level geometry.
    pub fn contacts(&self, id: ObjectId) -> impl Iterator<Item = Option<ObjectId>> + '_ {
        let collider = self.objects[usize::from(id)].collider;
        self.physics
            .contact_pairs_with(collider)
            .filter(|pair| pair.has_any_active_contact())
            .map(move |pair| {
                let other = if pair.collider1 == collider {
                    pair.collider2
                } else {
                    pair.collider1
                };
                self.object_of(other)
            })
    }

    /// Whether an object touched anything (another object or the floor) in the last step.
    pub fn in_contact(&self, id: ObjectId) -> bool {
        self.scratch
            .supported
            .get(usize::from(id))
            .copied()
            .unwrap_or(false)
    }

    /// Linear velocity of an object (m/s).
    pub fn linear_velocity(&self, id: ObjectId) -> Vector3<f32> {
        vec_from_rapier(self.physics.bodies[self.objects[usize::from(id)].body].linvel())
    }

    /// Half extents of the box around an object's shape, in the object's frame.
    pub fn half_extents(&self, id: ObjectId) -> Vector3<f32> {
        self.objects[usize::from(id)].half_extents
    }

    /// The scene this world was built from (shapes, materials, tags, level geometry).
    pub fn scene(&self) -> &SceneSpec {
        &self.scene
    }

    /// An object's authority bookkeeping.
    pub fn authority(&self, id: ObjectId) -> &Authority {
        &self.objects[usize::from(id)].authority
    }

    /// Who holds an object, if anyone.
    pub fn holder(&self, id: ObjectId) -> Option<Holder> {
        self.objects[usize::from(id)].holder
    }

    /// How many bodies rapier simulated in the last step (its awake island), and how many collider pairs had an
    /// active contact: what a step costs rapier, beside the rules (the step benchmark reports both).
    pub fn simulated_load(&self) -> (usize, usize) {
        let contacts = self
            .physics
            .contact_pairs()
            .filter(|p| p.has_any_active_contact())
            .count();
        // rapier leaves a body turned fixed (an object at rest) in its awake set, where the solver skips it.
        let simulated = self
            .physics
            .islands
            .active_bodies()
            .filter(|&body| !self.physics.bodies[body].is_fixed())
            .count();
        (simulated, contacts)
    }

    /// Whether the object is at rest (ring-buffer decision).
    pub fn is_at_rest(&self, id: ObjectId) -> bool {
        self.objects[usize::from(id)].at_rest
    }

    /// This frame's send priority of every object, indexed by id, for the codec's priority accumulator:
    /// 1 by default, 10 for 15 frames after a high-energy collision, 1,000,000 for 60 frames after it left a
    /// hand (any player's, by release or throw),
    /// -1 for held objects and objects this peer has no business sending (on a guest: anything not under its
    /// authority and not awaiting the host's acknowledgement of a return to default).
    pub fn priorities(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.objects.len());
        self.priorities_into(&mut out);
        out
    }

    /// [`World::priorities`] into `out` (replacing what it held), without allocating once `out` is big enough.
    pub fn priorities_into(&self, out: &mut Vec<f32>) {
        let local = self.config.local_player;
        out.clear();
        out.extend(self.objects.iter().map(|o| {
            let ours = local == DEFAULT_AUTHORITY
                || o.authority.view.authority == local
                || o.authority.pending_commit;
            o.priority.priority(ours && o.holder.is_none())
        }));
    }

    /// Sets an object's horizontal velocity and a matching rolling spin, keeping its vertical velocity
    /// (scripted drive of the katamari's player cube).
    pub fn drive_object(&mut self, id: ObjectId, horizontal_velocity: Vector3<f32>) {
        let object = &self.objects[usize::from(id)];
        let radius = object.half_extents.y.max(1e-3);
        let body = &mut self.physics.bodies[object.body];
        let current = vec_from_rapier(body.linvel());
        let v = Vector3::new(horizontal_velocity.x, current.y, horizontal_velocity.z);
        let spin = Vector3::y().cross(&horizontal_velocity) / radius;
        body.set_linvel(vec_to_rapier(&v), true);
        body.set_angvel(vec_to_rapier(&spin), true);
    }

    /// Drops the contacts of an object and of the objects it touches, so that the next step builds them afresh.
    /// A kinematic body (a held object) pressed into a body that cannot give way piles up contact impulses
    /// rapier keeps to warm-start the next step: the first dynamic step of a released object, and of what it was
    /// pressed into, would start from them and launch both at metres per second, whatever the depenetration cap.
    /// rapier offers no way to clear them but to take the collider out of the world and put it back.
    /// An object held at rest has none to forget: its contacts with a held body are never solved
    /// ([`World::held_against_fixed`]), and putting it back would drop its support for a step and wake it.
    fn forget_contact_impulses(&mut self, id: ObjectId) {
        let mut touched: Vec<ObjectId> = self
            .contacts(id)
            .flatten()
            .filter(|&other| !self.objects[usize::from(other)].at_rest)
            .collect();
        touched.push(id);
        for id in touched {
            let object = &mut self.objects[usize::from(id)];
            if let Some(collider) = self.physics.remove_collider(object.collider) {
                object.collider = self.physics.insert_collider(collider, Some(object.body));
            }
        }
    }

    fn set_body_type(&mut self, id: ObjectId, kind: RigidBodyType) {
        let handle = self.objects[usize::from(id)].body;
        self.physics.bodies[handle].set_body_type(kind, true);
    }
}

/// Height of the lowest corner of a box with `half_extents` at `pose`.
pub fn lowest_point(pose: &Isometry3<f32>, half_extents: &Vector3<f32>) -> f32 {
    let r = pose.rotation.to_rotation_matrix();
    let reach: f32 = (0..3).map(|i| r[(1, i)].abs() * half_extents[i]).sum();
    pose.translation.vector.y - reach
}

/// How fast the two bodies of an active contact close in along its normal (m/s), for their relative velocity
/// `closing` (body 1's minus body 2's).
fn closing_speed(pair: &ContactPair, closing: &Vector3<f32>) -> f32 {
    pair.solver_manifolds()
        .iter()
        .filter(|m| !m.data.solver_contacts.is_empty())
        .map(|m| vec_from_rapier(m.data.normal).dot(closing).abs())
        .fold(0.0, f32::max)
}

/// Quantizes a rapier body's state with the codec.
fn quantize_body(quant: &QuantConfig, body: &RigidBody, at_rest: bool) -> BodyState {
    let pose = pose_from_rapier(body.position());
    BodyState::quantize(
        quant,
        vec_to_array(&pose.translation.vector),
        quat_to_array(&pose.rotation),
        vec_to_array(&vec_from_rapier(body.linvel())),
        vec_to_array(&vec_from_rapier(body.angvel())),
        at_rest,
    )
}

/// The float pose a quantized state stands for.
fn state_pose(quant: &QuantConfig, state: &BodyState) -> Isometry3<f32> {
    Isometry3::from_parts(
        Translation3::from(vec_from_array(state.position_f32(quant))),
        quat_from_array(state.rotation_f32(quant)),
    )
}

/// The rapier pose and velocities a quantized state stands for.
fn rapier_state(quant: &QuantConfig, state: &BodyState) -> (Pose, Vector, Vector) {
    (
        pose_to_rapier(&state_pose(quant, state)),
        vec_to_rapier(&vec_from_array(state.linear_velocity_f32(quant))),
        vec_to_rapier(&vec_from_array(state.angular_velocity_f32(quant))),
    )
}

/// How much faster (m/s) than both a remote body and its next state the path [`World::lead_into`] would give it
/// may be before it is taken for a correction: a body pushed out of a contact moves faster than its velocities
/// say (the push is not in them), by up to the depenetration cap (1 m/s) and the solver's bounce; faster paths
/// walk a copy back from wherever its own physics took it, and would jump it on screen or push it through
/// what is in the way.
const LEAD_SPEED_MARGIN: f32 = 3.0;

/// Holds an object at rest at `pose` (its quantized resting pose): its body turns fixed there, so rapier
/// neither moves it nor solves it, and it need not be written back before each step. A dynamic body that merely
/// sleeps is woken and moved by every write-back of a neighbour that moves (rapier wakes whatever touches a body
/// the user moved), so a pile held that way never sleeps.
fn hold_at_rest(body: &mut RigidBody, object: &mut Object, pose: Isometry3<f32>) {
    object.at_rest = true;
    object.rest_pose = pose;
    body.set_position(pose_to_rapier(&pose), false);
    body.set_body_type(RigidBodyType::Fixed, false);
}

/// Ends an object's rest: its body is dynamic again (still, where it rested), and it needs a full window of
/// still frames to rest again. A body that is not at rest is left as it is.
fn release_from_rest(body: &mut RigidBody, object: &mut Object) {
    if object.at_rest {
        object.at_rest = false;
        object.rest.clear();
        body.set_body_type(RigidBodyType::Dynamic, true);
    }
}

/// Writes a quantized state into a rapier body.
fn write_body(body: &mut RigidBody, quant: &QuantConfig, state: &BodyState) {
    let (pose, linvel, angvel) = rapier_state(quant, state);
    body.set_position(pose, true);
    body.set_linvel(linvel, true);
    body.set_angvel(angvel, true);
}
