//! Bandwidth ladder on the katamari scene as published: what each compression step buys, measured on real frames
//! and through the packets a link really sends.
//!
//! The authority world runs `katamari` at 60 Hz under the katamari game script (`physync_examples::katamari`): the
//! player cube rolls through the grid under applied forces, attracts the cubes within 4 m into a ball and blows them
//! away on a timer, so about 8-12% of the 901 cubes change every frame. Every frame, the full state of every cube is
//! encoded once per rung and decoded by that rung's receiver, which checks the decoded states against the sent ones
//! and measures its error against the authority's float state. Every delta rung starts from the scene's initial
//! states as the acked frame (the host sends the scene at join; the published data set starts the same way).
//!
//! Id-less frame rungs (a 12-byte header and every cube in id order, as the published challenge coded frames):
//!
//! - `raw`: position (3 × f32), rotation (4 × f32), linear velocity (3 × f32) and the at-rest bit, serialized as
//!   floats through the codec's bit-packing stream (321 bits a cube);
//! - `quantized`: the codec's absolute quantized state, bit-packed, with velocities sent for every cube;
//! - `at_rest`: the same with the at-rest bit honoured (resting cubes omit their velocities);
//! - `delta`: each cube against its state in the frame acked 6 frames (100 ms) earlier: unchanged bit, residual
//!   against the baseline, or absolute, bit-packed, with prediction disabled;
//! - `prediction`: the codec's full delta paths (perfect prediction and prediction error too), bit-packed;
//! - `entropy`: the same paths through the range-coding back end.
//!
//! Real-packet rungs (`real_bitpack`, `real_entropy`): the same frames as the codec's datagrams of at most 1200
//! bytes (header, section, ids, baseline offsets, entries), every cube an entry against its state acked 6 frames
//! earlier; the headline `best_real_packet_kbps` and `bits_per_changed_cube` come from the better of the two, with a
//! per-field breakdown from the range coder's own probabilities.
//!
//! The pose-only rung (`real_entropy_pose_only`) is the anchors' terms: the published challenge coded position,
//! orientation and an interacting flag, no velocities, as a snapshot-interpolation receiver needs. The same
//! datagrams and range coder with the codec's pose-only state configuration (velocities off the wire, at-rest flag
//! kept); it is reported apart (`pose_only_real_packet_kbps`), never as the full-state headline.
//!
//! A second variant runs the real [`StateLink`]: per-object acked baselines and the priority accumulator filling
//! datagrams to a 256 kbps budget over a 100 ms round trip; the receiver keeps the newest state of each cube, and
//! its error is measured against the authority's float state at the frame the newest datagram was built (the
//! staleness the budget causes). A second decoder tallies what each field of its datagrams cost, ids included.

use std::collections::VecDeque;
use std::time::Duration;

use clap::Parser;
use physync_codec::arith::FieldCosts;
use physync_codec::arith::{ArithReadStream, ArithWriteStream};
use physync_codec::bitpack::{BitReadStream, BitWriteStream};
use physync_codec::delta::{plan, serialize_entry};
use physync_codec::header::{HEADER_BYTES, serialize_header};
use physync_codec::{
    AckTracker, AvatarState, Backend, CodecError, Ctx, DeltaPath, DeltaState, LinkConfig,
    ObjectState, PacketHeader, PacketReader, PacketWriter, QuantConfig, ReceiveHistory,
    StateConfig, StateRevisions, Stream,
};
use physync_engine::link::{LinkSettings, Outgoing, StateLink};
use physync_engine::transport::{Delivery, LinkConditioner, LinkConfig as Conditions};
use physync_engine::world::scene::SceneSpec;
use physync_engine::world::{World, WorldConfig};
use physync_examples::katamari::{KatamariScript, KatamariTuning};
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(
    about = "Measure each compression rung on the katamari scene, and the budgeted state link"
)]
struct Args {
    /// Simulated seconds (60 frames each).
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Seed of the state link's network (loss draws).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Player cube cruising speed (m/s).
    #[arg(long, default_value_t = 5.0)]
    speed: f32,
    /// Frames of the katamari's attract, blow and roll phases in one cycle (default: the script's tuning).
    #[arg(long, num_args = 3, value_names = ["ATTRACT", "BLOW", "ROLL"])]
    phases: Option<Vec<u32>>,
    /// Radius within which the player cube attracts cubes (m; default: the script's tuning).
    #[arg(long)]
    attract_radius: Option<f32>,
    /// Write the range coder's trained priors (see `physync_codec::arith`), learned from this run's range-coded
    /// datagrams, as Rust source to this path (the checked-in table is `codec/src/priors.rs`).
    #[arg(long)]
    write_priors: Option<std::path::PathBuf>,
    /// Write one recorded frame (pose-only states of every cube at frames F-12, F-6 and F) to this path, for the
    /// codec's trained-priors test (`codec/tests/data/katamari_frame.txt`).
    #[arg(long)]
    record_frame: Option<std::path::PathBuf>,
    /// The frame `--record-frame` records.
    #[arg(long, default_value_t = 330)]
    record_at: u64,
    /// Loss on the state link variant's network, both ways.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Frames between a frame and the acked frame it is coded against (100 ms at 60 Hz).
const BASELINE_AGE: usize = 6;
const HZ: u32 = 60;
/// One-way delay of the state link variant, in frames.
const ONE_WAY_FRAMES: u32 = 3;
const PROTOCOL: u16 = 0x4C44;
const RAW_FLOAT: Ctx = Ctx::user(1, "raw float");
const RAW_REST: Ctx = Ctx::user(2, "raw at rest");
const BASELINE_OFFSET: Ctx = Ctx::user(3, "baseline offset");

/// The authority's float state of one cube, as the raw rung sends it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct FloatCube {
    position: [f32; 3],
    rotation: [f32; 4],
    linear_velocity: [f32; 3],
    at_rest: bool,
}

fn serialize_float_cube<S: Stream>(s: &mut S, c: &mut FloatCube) -> Result<(), CodecError> {
    for v in c
        .position
        .iter_mut()
        .chain(c.rotation.iter_mut())
        .chain(c.linear_velocity.iter_mut())
    {
        let mut bits = v.to_bits();
        s.bits(RAW_FLOAT, &mut bits, 32)?;
        *v = f32::from_bits(bits);
    }
    s.bool(RAW_REST, &mut c.at_rest)
}

/// An object state coded without the ballistic predictor: the `delta` rung.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Unpredicted(ObjectState);

impl DeltaState for Unpredicted {
    type Config = StateConfig;

    fn predict(_: &StateConfig, _: &Self, _: u16) -> Option<Self> {
        None
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        ObjectState::serialize_residual(s, config, &mut value.0, &reference.0)
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
    ) -> Result<(), CodecError> {
        ObjectState::serialize_absolute(s, config, &mut value.0)
    }
}

/// Bytes a frame's payload took, by the path each cube went.
#[derive(Debug, Clone, Copy, Default)]
struct PathTally {
    entries: [u64; 5],
    bits: [f64; 5],
}

fn path_index(p: DeltaPath) -> usize {
    DeltaPath::ALL.iter().position(|&q| q == p).unwrap_or(4)
}

/// Writes every cube of a frame against `baseline` (the frame `gap` frames earlier) or absolutely. `cost` reports
/// the stream's size in bits so far, to attribute each cube's bits to its path.
fn write_frame<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    states: &[T],
    baseline: Option<&[T]>,
    gap: u16,
    tally: &mut PathTally,
    cost: impl Fn(&S) -> f64,
) -> Result<(), CodecError> {
    let mut offset = if baseline.is_some() {
        u32::from(gap)
    } else {
        0
    };
    s.bits(BASELINE_OFFSET, &mut offset, 8)?;
    for (i, state) in states.iter().enumerate() {
        let base = baseline.map(|b| &b[i]);
        let prediction = base.and_then(|b| T::predict(config, b, gap));
        let mut path = plan(config, state, base, prediction.as_ref())?.path;
        let before = cost(s);
        let mut v = *state;
        serialize_entry(s, config, &mut v, &mut path, base, prediction.as_ref())?;
        let k = path_index(path);
        tally.entries[k] += 1;
        tally.bits[k] += cost(s) - before;
    }
    Ok(())
}

/// Reads a frame written by [`write_frame`]; `history` holds the receiver's earlier decoded frames, newest last.
fn read_frame<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    n: usize,
    history: &VecDeque<Vec<T>>,
) -> Result<Vec<T>, CodecError> {
    let mut offset = 0u32;
    s.bits(BASELINE_OFFSET, &mut offset, 8)?;
    let baseline = match offset as usize {
        0 => None,
        k => Some(history.len().checked_sub(k).map(|i| &history[i]).ok_or(
            CodecError::Invalid {
                field: BASELINE_OFFSET.name,
            },
        )?),
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let base = baseline.map(|b| &b[i]);
        let prediction = base.and_then(|b| T::predict(config, b, offset as u16));
        let mut v = T::default();
        let mut path = DeltaPath::Absolute;
        serialize_entry(s, config, &mut v, &mut path, base, prediction.as_ref())?;
        out.push(v);
    }
    Ok(out)
}

fn header_bytes(sequence: u16, backend: Backend) -> Vec<u8> {
    let mut w = BitWriteStream::new();
    let mut header = PacketHeader {
        packet_type: 2,
        sequence,
        ack: sequence.wrapping_sub(BASELINE_AGE as u16),
        ack_bits: u32::MAX,
    };
    let mut b = backend;
    serialize_header(&mut w, PROTOCOL, &mut header, &mut b).expect("header fits");
    w.finish()
}

/// Error of a decoded position against the float one, in millimetres.
fn error_mm(quant: &QuantConfig, decoded: &ObjectState, float: &FloatCube) -> f64 {
    let p = decoded.body.position_f32(quant);
    let d: f64 = (0..3)
        .map(|i| f64::from(p[i] - float.position[i]).powi(2))
        .sum();
    d.sqrt() * 1000.0
}

#[derive(Debug, Default)]
struct Errors {
    sum: f64,
    max: f64,
    count: u64,
}

impl Errors {
    fn add(&mut self, e: f64) {
        self.sum += e;
        self.max = self.max.max(e);
        self.count += 1;
    }

    fn mean(&self) -> f64 {
        self.sum / self.count.max(1) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Raw,
    Absolute { at_rest: bool },
    Delta { predict: bool, backend: Backend },
}

/// One rung: its coder settings, the sender's and receiver's frame histories, and what it measured.
struct Rung {
    name: &'static str,
    kind: Kind,
    sent: VecDeque<Vec<ObjectState>>,
    received: VecDeque<Vec<ObjectState>>,
    bytes: u64,
    errors: Errors,
    tally: PathTally,
}

impl Rung {
    /// Both ends start from the scene's initial states as the acked frame (the host sends the scene at join; the
    /// published data set starts the same way).
    fn prime(&mut self, initial: &[ObjectState]) {
        for _ in 0..BASELINE_AGE {
            self.sent.push_back(initial.to_vec());
            self.received.push_back(initial.to_vec());
        }
    }

    fn new(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            kind,
            sent: VecDeque::new(),
            received: VecDeque::new(),
            bytes: 0,
            errors: Errors::default(),
            tally: PathTally::default(),
        }
    }

    /// Encodes frame `sequence`, decodes it as the receiver, checks it and records size and error.
    fn run(
        &mut self,
        sequence: u16,
        config: &StateConfig,
        states: &[ObjectState],
        floats: &[FloatCube],
    ) {
        let n = states.len();
        let states: Vec<ObjectState> = match self.kind {
            Kind::Absolute { at_rest: false } => states
                .iter()
                .map(|s| {
                    let mut s = *s;
                    s.body.at_rest = false;
                    s
                })
                .collect(),
            _ => states.to_vec(),
        };
        match self.kind {
            Kind::Raw => {
                let mut w = BitWriteStream::with_bytes(header_bytes(sequence, Backend::Bitpack));
                let mut sent = floats.to_vec();
                for c in &mut sent {
                    serialize_float_cube(&mut w, c).expect("floats serialize");
                }
                let bytes = w.finish();
                self.bytes += bytes.len() as u64;
                let mut r = BitReadStream::new(&bytes[HEADER_BYTES..]);
                for f in floats {
                    let mut c = FloatCube::default();
                    serialize_float_cube(&mut r, &mut c).expect("raw frame decodes");
                    assert_eq!(c, *f, "raw rung round trip");
                    self.errors.add(0.0);
                }
            }
            Kind::Absolute { .. } => {
                let mut w = BitWriteStream::with_bytes(header_bytes(sequence, Backend::Bitpack));
                let bits = |s: &BitWriteStream| s.bits_written() as f64;
                write_frame(&mut w, config, &states, None, 0, &mut self.tally, bits)
                    .expect("frame encodes");
                let bytes = w.finish();
                self.bytes += bytes.len() as u64;
                let mut r = BitReadStream::new(&bytes[HEADER_BYTES..]);
                let decoded = read_frame::<_, ObjectState>(&mut r, config, n, &self.received)
                    .expect("frame decodes");
                self.check(&states, &decoded, config, floats);
            }
            Kind::Delta { predict, backend } => {
                let baseline = (self.sent.len() >= BASELINE_AGE)
                    .then(|| self.sent[self.sent.len() - BASELINE_AGE].clone());
                let header = header_bytes(sequence, backend);
                let gap = BASELINE_AGE as u16;
                let payload = match (predict, backend) {
                    (true, Backend::Bitpack) => {
                        let mut w = BitWriteStream::with_bytes(header.clone());
                        let bits = |s: &BitWriteStream| s.bits_written() as f64;
                        write_frame(
                            &mut w,
                            config,
                            &states,
                            baseline.as_deref(),
                            gap,
                            &mut self.tally,
                            bits,
                        )
                        .expect("frame encodes");
                        w.finish()[HEADER_BYTES..].to_vec()
                    }
                    (true, Backend::Arith) => {
                        let mut w = ArithWriteStream::new();
                        let bits = |s: &ArithWriteStream| (s.finished_len() * 8) as f64;
                        write_frame(
                            &mut w,
                            config,
                            &states,
                            baseline.as_deref(),
                            gap,
                            &mut self.tally,
                            bits,
                        )
                        .expect("frame encodes");
                        w.finish()
                    }
                    (false, _) => {
                        let wrap = |v: &[ObjectState]| {
                            v.iter().map(|s| Unpredicted(*s)).collect::<Vec<_>>()
                        };
                        let unpredicted = wrap(&states);
                        let base = baseline.as_deref().map(wrap);
                        let mut w = BitWriteStream::with_bytes(header.clone());
                        let bits = |s: &BitWriteStream| s.bits_written() as f64;
                        write_frame(
                            &mut w,
                            config,
                            &unpredicted,
                            base.as_deref(),
                            gap,
                            &mut self.tally,
                            bits,
                        )
                        .expect("frame encodes");
                        w.finish()[HEADER_BYTES..].to_vec()
                    }
                };
                self.bytes += (header.len() + payload.len()) as u64;
                let decoded = match (predict, backend) {
                    (true, Backend::Bitpack) => read_frame::<_, ObjectState>(
                        &mut BitReadStream::new(&payload),
                        config,
                        n,
                        &self.received,
                    ),
                    (true, Backend::Arith) => {
                        let mut r = ArithReadStream::new(&payload).expect("range coder opens");
                        read_frame::<_, ObjectState>(&mut r, config, n, &self.received)
                    }
                    (false, _) => {
                        let history: VecDeque<Vec<Unpredicted>> = self
                            .received
                            .iter()
                            .map(|f| f.iter().map(|s| Unpredicted(*s)).collect())
                            .collect();
                        read_frame::<_, Unpredicted>(
                            &mut BitReadStream::new(&payload),
                            config,
                            n,
                            &history,
                        )
                        .map(|v| v.into_iter().map(|u| u.0).collect())
                    }
                }
                .expect("frame decodes");
                self.check(&states, &decoded, config, floats);
            }
        }
        self.sent.push_back(states);
        if self.sent.len() > BASELINE_AGE {
            self.sent.pop_front();
        }
    }

    fn check(
        &mut self,
        sent: &[ObjectState],
        decoded: &[ObjectState],
        config: &StateConfig,
        floats: &[FloatCube],
    ) {
        assert_eq!(
            decoded, sent,
            "{}: the receiver decodes what was sent",
            self.name
        );
        for (d, f) in decoded.iter().zip(floats) {
            self.errors.add(error_mm(&config.quant, d, f));
        }
        self.received.push_back(decoded.to_vec());
        if self.received.len() > BASELINE_AGE {
            self.received.pop_front();
        }
    }

    fn kbps(&self, seconds: f64) -> f64 {
        self.bytes as f64 * 8.0 / seconds / 1000.0
    }

    fn report(&self, seconds: f64, frames: u64) -> Value {
        let per_frame = |x: f64| x / frames.max(1) as f64;
        let names = [
            "unchanged",
            "predicted",
            "prediction_error",
            "delta",
            "absolute",
        ];
        let paths: serde_json::Map<String, Value> = names
            .iter()
            .enumerate()
            .map(|(k, name)| {
                (
                    (*name).to_string(),
                    json!({
                        "cubes_per_frame": per_frame(self.tally.entries[k] as f64),
                        "kbps": self.tally.bits[k] / seconds / 1000.0,
                    }),
                )
            })
            .collect();
        json!({
            "kbps": self.kbps(seconds),
            "bytes_per_frame": per_frame(self.bytes as f64),
            "mean_error_mm": self.errors.mean(),
            "max_error_mm": self.errors.max,
            "paths": if self.kind == Kind::Raw { Value::Null } else { Value::Object(paths) },
        })
    }
}

/// Groups of fields for the per-field breakdown, by the codec's context names (the first group whose key a name
/// contains).
const FIELD_GROUPS: [(&str, &[&str]); 8] = [
    ("ids", &["object id", "entry count"]),
    (
        "flags",
        &["flag", "path", "at rest", "same largest", "changed"],
    ),
    ("linear_velocity", &["linear velocity"]),
    ("angular_velocity", &["angular velocity"]),
    ("baseline", &["baseline"]),
    ("position", &["position"]),
    ("rotation", &["rotation"]),
    ("other", &[""]),
];

/// Bits by field group, from a range coder's tally.
fn add_field_costs(into: &mut [f64; FIELD_GROUPS.len()], costs: &FieldCosts) {
    for (name, bits) in costs.by_field() {
        let group = FIELD_GROUPS
            .iter()
            .position(|(_, keys)| keys.iter().any(|k| name.contains(k)))
            .unwrap_or(FIELD_GROUPS.len() - 1);
        into[group] += bits;
    }
}

fn field_report(bits: &[f64; FIELD_GROUPS.len()], seconds: f64, changed: u64) -> Value {
    FIELD_GROUPS
        .iter()
        .zip(bits)
        .map(|((name, _), b)| {
            (
                (*name).to_string(),
                json!({
                    "kbps": b / seconds / 1000.0,
                    "bits_per_changed_cube": b / changed.max(1) as f64,
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A rung through the packet format a link really sends: every cube each frame as an entry of the codec's object
/// section (header, id, baseline offset, state), coded against its state acked 6 frames (100 ms) earlier, in as
/// many datagrams of at most 1200 bytes as the frame needs. The receiver decodes each datagram with the codec's
/// reader and must get exactly what was sent.
struct RealPackets {
    name: &'static str,
    link: LinkConfig,
    tracker: AckTracker<ObjectState>,
    history: ReceiveHistory<ObjectState>,
    order: Vec<u16>,
    sequence: u16,
    sequences_by_frame: VecDeque<Vec<u16>>,
    bytes: u64,
    datagrams: u64,
    fields: [f64; FIELD_GROUPS.len()],
    /// Every model's decisions, for `--write-priors`.
    uses: FieldCosts,
    errors: Errors,
}

impl RealPackets {
    fn new(name: &'static str, backend: Backend, n: usize) -> Self {
        let link = LinkConfig {
            backend,
            budget_bytes: physync_codec::packet::DEFAULT_BUDGET_BYTES,
            max_objects: 1024,
            protocol_id: PROTOCOL,
        };
        Self {
            name,
            link,
            tracker: AckTracker::new(link.max_objects),
            history: ReceiveHistory::new(link.max_objects),
            order: (0..n as u16).collect(),
            sequence: 0,
            sequences_by_frame: VecDeque::new(),
            bytes: 0,
            datagrams: 0,
            fields: [0.0; FIELD_GROUPS.len()],
            uses: FieldCosts::default(),
            errors: Errors::default(),
        }
    }

    /// Both ends start from the scene's initial states, acked as packet 0 of frame 0.
    fn prime(&mut self, initial: &[ObjectState]) {
        self.tracker.record_sent(
            0,
            0,
            initial.iter().enumerate().map(|(i, s)| (i as u16, *s)),
        );
        self.tracker.process_acks(0, 0);
        for (i, s) in initial.iter().enumerate() {
            self.history.insert(i as u16, 0, 0, *s);
        }
        self.sequence = 1;
    }

    fn run(
        &mut self,
        frame: u16,
        config: &StateConfig,
        states: &[ObjectState],
        floats: &[FloatCube],
    ) {
        // The frame 6 frames back was acked just now.
        if self.sequences_by_frame.len() == BASELINE_AGE {
            for s in self.sequences_by_frame.pop_front().unwrap_or_default() {
                self.tracker.process_acks(s, 0);
            }
        }
        let mut left: Vec<u16> = self.order.clone();
        let mut sequences = Vec::new();
        while !left.is_empty() {
            let header = PacketHeader {
                packet_type: 2,
                sequence: self.sequence,
                ack: self.sequence.wrapping_sub(1),
                ack_bits: u32::MAX,
            };
            sequences.push(self.sequence);
            self.sequence = self.sequence.wrapping_add(1);
            let mut w = PacketWriter::new(&self.link, header).expect("header");
            w.track_costs();
            let sent = w
                .write_section(config, &mut self.tracker, frame, &left, |id| {
                    states.get(usize::from(id)).copied()
                })
                .expect("section encodes");
            assert!(!sent.is_empty(), "{}: a datagram carries a cube", self.name);
            if let Some(costs) = w.costs() {
                add_field_costs(&mut self.fields, costs);
                self.uses.add(costs);
            }
            let bytes = w.finish();
            assert!(bytes.len() <= self.link.budget_bytes);
            self.bytes += bytes.len() as u64;
            self.datagrams += 1;
            left.retain(|id| sent.binary_search(id).is_err());
            let mut r = PacketReader::new(&self.link, &bytes).expect("header decodes");
            let (_, entries) = r
                .read_section::<ObjectState>(config, &mut self.history)
                .expect("section decodes");
            r.finish().expect("nothing trails the section");
            assert_eq!(entries.len(), sent.len());
            for (id, s) in entries {
                let i = usize::from(id);
                assert_eq!(
                    s, states[i],
                    "{}: the receiver decodes what was sent",
                    self.name
                );
                self.errors.add(error_mm(&config.quant, &s, &floats[i]));
            }
        }
        self.sequences_by_frame.push_back(sequences);
    }

    fn kbps(&self, seconds: f64) -> f64 {
        self.bytes as f64 * 8.0 / seconds / 1000.0
    }

    fn report(&self, seconds: f64, frames: u64, changed: u64) -> Value {
        let header_bits = (self.datagrams * HEADER_BYTES as u64 * 8) as f64;
        let coded: f64 = self.fields.iter().sum();
        let mut fields = field_report(&self.fields, seconds, changed);
        if self.link.backend == Backend::Arith
            && let Value::Object(map) = &mut fields
        {
            let flush = (self.bytes * 8) as f64 - header_bits - coded;
            for (name, bits) in [("header", header_bits), ("coder_flush", flush)] {
                map.insert(
                    name.to_string(),
                    json!({
                        "kbps": bits / seconds / 1000.0,
                        "bits_per_changed_cube": bits / changed.max(1) as f64,
                    }),
                );
            }
        }
        json!({
            "backend": format!("{:?}", self.link.backend),
            "kbps": self.kbps(seconds),
            "bytes_per_frame": self.bytes as f64 / frames.max(1) as f64,
            "datagrams_per_frame": self.datagrams as f64 / frames.max(1) as f64,
            "bits_per_changed_cube": (self.bytes * 8) as f64 / changed.max(1) as f64,
            "mean_error_mm": self.errors.mean(),
            "max_error_mm": self.errors.max,
            "fields": if self.link.backend == Backend::Arith { fields } else { Value::Null },
            "bits_per_changed_cube_by_context": self
                .uses
                .by_field()
                .map(|(name, bits)| (name.to_string(), json!(bits / changed.max(1) as f64)))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// The budgeted link variant: authority and receiver links over a conditioned network.
struct LinkVariant {
    sender: StateLink,
    receiver: StateLink,
    to_receiver: LinkConditioner,
    to_sender: LinkConditioner,
    in_flight: Vec<(Duration, Vec<u8>)>,
    acks_in_flight: Vec<(Duration, Vec<u8>)>,
    held: Vec<ObjectState>,
    floats_by_frame: VecDeque<(u16, Vec<FloatCube>)>,
    newest_frame: Option<u16>,
    errors: Errors,
    error_samples: Vec<f32>,
    objects_sent: u64,
    age_sum: f64,
    last_update: Vec<u64>,
    /// A second decoder of every delivered datagram, tallying where the bits go.
    mirror_objects: ReceiveHistory<ObjectState>,
    mirror_avatars: ReceiveHistory<AvatarState>,
    /// Which wire states changed, noted each step as the engine's peers do.
    revisions: StateRevisions<ObjectState>,
    fields: [f64; FIELD_GROUPS.len()],
    delivered_bytes: u64,
}

impl LinkVariant {
    fn new(initial: Vec<ObjectState>, seed: u64, loss: f64) -> Self {
        let settings = LinkSettings::default();
        // Three frames each way: 100 ms round trip at 60 Hz.
        let network = Conditions {
            latency: Duration::from_secs(1) / HZ * ONE_WAY_FRAMES,
            loss,
            ..Conditions::ideal()
        };
        let n = initial.len();
        Self {
            sender: StateLink::new(settings).expect("default link settings"),
            receiver: StateLink::new(settings).expect("default link settings"),
            to_receiver: LinkConditioner::new(network, seed).expect("valid network"),
            to_sender: LinkConditioner::new(network, seed ^ 0xACE).expect("valid network"),
            in_flight: Vec::new(),
            acks_in_flight: Vec::new(),
            held: initial,
            floats_by_frame: VecDeque::new(),
            newest_frame: None,
            errors: Errors::default(),
            error_samples: Vec::new(),
            objects_sent: 0,
            age_sum: 0.0,
            last_update: vec![0; n],
            mirror_objects: ReceiveHistory::new(settings.codec.max_objects),
            mirror_avatars: ReceiveHistory::new(16),
            revisions: StateRevisions::new(),
            fields: [0.0; FIELD_GROUPS.len()],
            delivered_bytes: 0,
        }
    }

    fn step(&mut self, now: Duration, frame: u64, world: &World, floats: &[FloatCube]) {
        let states = world.object_states();
        let priorities = world.priorities();
        self.floats_by_frame
            .push_back((frame as u16, floats.to_vec()));
        if self.floats_by_frame.len() > 64 {
            self.floats_by_frame.pop_front();
        }
        let out = Outgoing {
            frame,
            objects: &states,
            revisions: Some(self.revisions.note(&states)),
            priorities: &priorities,
            avatars: &[],
        };
        if let Some(p) = self.sender.build_packet(now, &out).expect("link builds") {
            self.objects_sent += p.objects.len() as u64;
            for &at in self
                .to_receiver
                .schedule(now, Delivery::Unreliable, p.bytes.len())
                .times()
            {
                self.in_flight.push((at, p.bytes.clone()));
            }
        }
        let empty = Outgoing::acks_only(frame);
        if let Some(p) = self
            .receiver
            .build_packet(now, &empty)
            .expect("link builds")
        {
            for &at in self
                .to_sender
                .schedule(now, Delivery::Unreliable, p.bytes.len())
                .times()
            {
                self.acks_in_flight.push((at, p.bytes.clone()));
            }
        }
        for bytes in take_due(&mut self.in_flight, now) {
            self.tally(&bytes);
            let update = self
                .receiver
                .receive(now, &bytes)
                .expect("receiver decodes");
            if self
                .newest_frame
                .is_none_or(|f| physync_codec::seq_newer(update.frame, f))
            {
                self.newest_frame = Some(update.frame);
            }
            for (id, s) in update.objects {
                self.held[usize::from(id)] = s;
                self.last_update[usize::from(id)] = u64::from(update.frame);
            }
        }
        for bytes in take_due(&mut self.acks_in_flight, now) {
            self.sender
                .receive(now, &bytes)
                .expect("sender decodes acks");
        }
        // The receiver's view against the authority at the frame of the newest datagram it holds: the error the
        // budget and the codec cause, without the transport's latency.
        let Some(newest) = self.newest_frame else {
            return;
        };
        let Some((_, reference)) = self.floats_by_frame.iter().find(|(f, _)| *f == newest) else {
            return;
        };
        let quant = QuantConfig::default();
        for (id, (held, float)) in self.held.iter().zip(reference).enumerate() {
            let e = error_mm(&quant, held, float);
            self.errors.add(e);
            self.error_samples.push(e as f32);
            self.age_sum += f64::from(newest.wrapping_sub(self.last_update[id] as u16));
        }
    }

    /// Decodes a delivered datagram a second time, tallying each field's bits.
    fn tally(&mut self, bytes: &[u8]) {
        let settings = *self.receiver.settings();
        let mut r = PacketReader::new(&settings.codec, bytes).expect("header decodes");
        r.track_costs();
        r.read_section::<AvatarState>(&settings.state, &mut self.mirror_avatars)
            .expect("avatar section decodes");
        r.read_section::<ObjectState>(&settings.state, &mut self.mirror_objects)
            .expect("object section decodes");
        if let Some(costs) = r.costs() {
            add_field_costs(&mut self.fields, costs);
        }
        self.delivered_bytes += bytes.len() as u64;
    }

    fn report(&mut self, seconds: f64, frames: u64) -> Value {
        self.error_samples.sort_by(f32::total_cmp);
        let p99 = self
            .error_samples
            .get(self.error_samples.len() * 99 / 100)
            .copied()
            .unwrap_or(0.0);
        let s = self.sender.stats();
        let settings = self.sender.settings();
        json!({
            "budget_kbps": f64::from(settings.bytes_per_second) * 8.0 / 1000.0,
            "network_round_trip_ms": (Duration::from_secs(1) / HZ * (2 * ONE_WAY_FRAMES)).as_secs_f64() * 1000.0,
            "backend": format!("{:?}", settings.codec.backend),
            "kbps": s.bytes_sent as f64 * 8.0 / seconds / 1000.0,
            "packets": s.packets_sent,
            "objects_per_packet": self.objects_sent as f64 / s.packets_sent.max(1) as f64,
            "objects_per_frame": self.objects_sent as f64 / frames.max(1) as f64,
            "mean_error_mm": self.errors.mean(),
            "max_error_mm": self.errors.max,
            "p99_staleness_error_mm": p99,
            "ids_share_of_bytes": self.fields[0] / (self.delivered_bytes * 8).max(1) as f64,
            "id_bits_per_object": self.fields[0] / self.objects_sent.max(1) as f64,
            "bits_per_object": (self.delivered_bytes * 8) as f64 / self.objects_sent.max(1) as f64,
            "fields_bits_per_object": FIELD_GROUPS.iter().zip(&self.fields).map(|((name, _), b)| ((*name).to_string(), json!(b / self.objects_sent.max(1) as f64))).collect::<serde_json::Map<_, _>>(),
            "mean_update_age_frames": self.age_sum / self.errors.count.max(1) as f64,
            "rtt_ms": s.rtt.map(|r| r.as_secs_f64() * 1000.0),
            "packets_lost": s.packets_lost,
            "receiver_decode_errors": self.receiver.stats().decode_errors,
        })
    }
}

fn take_due(queue: &mut Vec<(Duration, Vec<u8>)>, now: Duration) -> Vec<Vec<u8>> {
    queue.sort_by_key(|(at, _)| *at);
    let due = queue.iter().take_while(|(at, _)| *at <= now).count();
    queue.drain(..due).map(|(_, b)| b).collect()
}

/// The states a pose-only link sends: velocities zeroed, the at-rest flag kept.
fn strip_velocities(states: &[ObjectState]) -> Vec<ObjectState> {
    states
        .iter()
        .map(|s| ObjectState {
            body: s.body.without_velocities(),
            ..*s
        })
        .collect()
}

fn float_cubes(world: &World) -> Vec<FloatCube> {
    (0..world.object_count() as u16)
        .map(|id| {
            let pose = world.physics_pose(id);
            let q = pose.rotation.into_inner().coords;
            let v = world.linear_velocity(id);
            FloatCube {
                position: [pose.translation.x, pose.translation.y, pose.translation.z],
                rotation: [q.x, q.y, q.z, q.w],
                linear_velocity: [v.x, v.y, v.z],
                at_rest: world.is_at_rest(id),
            }
        })
        .collect()
}

/// Models that coded fewer decisions than this in the training run keep even odds.
const PRIOR_MIN_USES: u32 = 50;

/// The source of `codec/src/priors.rs`: the priors the range-coded rungs' decisions teach, one table from the
/// full-state rung and one from the pose-only rung.
fn priors_source(full: &FieldCosts, pose_only: &FieldCosts, args: &Args) -> String {
    let mut out = String::from(
        "//! The range coder's trained starting probabilities and rates of adaptation: generated, not written by hand.\n//!\n",
    );
    let lines = [
        format!(
            "Generated by `cargo run --release -p physync-examples --bin bandwidth_ladder -- --seconds {} --speed {}",
            args.seconds, args.speed
        ),
        "--write-priors codec/src/priors.rs`: the katamari scene at another speed than the measured run's (so the"
            .to_string(),
        "ladder does not score on its own training data), every decision of its range-coded real-packet rungs tallied"
            .to_string(),
        "per model, the full-state rung's for one table and the pose-only rung's for the other; models with at least"
            .to_string(),
        format!(
            "{PRIOR_MIN_USES} decisions get the rule of succession's probability and the rate their decisions, replayed from"
        ),
        "it, would have cost least at. Both ends of every link share the tables as constants; a context whose meaning"
            .to_string(),
        "changes should be retrained (a stale table costs compression, never correctness).".to_string(),
    ];
    for line in lines {
        out += &format!("//! {line}\n");
    }
    for (link, suffix, uses) in [
        ("full-state", "", full),
        ("pose-only", "_POSE_ONLY", pose_only),
    ] {
        let priors: Vec<String> = uses
            .trained_priors(PRIOR_MIN_USES)
            .iter()
            .map(|(i, p)| format!("({i}, {p})"))
            .collect();
        out += &table_source(
            &format!(
                "`(model index, probability of 0 out of 4096)` for every trained model of a {link} link; the rest start at even odds."
            ),
            &format!("TRAINED{suffix}: &[(u32, u16)]"),
            &priors,
        );
        let rates: Vec<String> = uses
            .trained_rates(PRIOR_MIN_USES)
            .iter()
            .map(|(i, r)| format!("({i}, {r})"))
            .collect();
        out += &table_source(
            &format!(
                "`(model index, rate)` for every model of a {link} link trained to adapt at another rate than the default."
            ),
            &format!("RATES{suffix}: &[(u32, u8)]"),
            &rates,
        );
    }
    out
}

/// One table of `codec/src/priors.rs`: its doc line, its name and type, and its rows eight to a line.
fn table_source(doc: &str, declaration: &str, rows: &[String]) -> String {
    let mut out = format!("\n/// {doc}\n#[rustfmt::skip]\npub(crate) const {declaration} = &[\n");
    for chunk in rows.chunks(8) {
        out += &format!("    {},\n", chunk.join(", "));
    }
    out + "];\n"
}

/// One cube's pose-only state as the recorded frame's text: position, largest component, the three others,
/// at rest.
fn pose_text(s: &ObjectState) -> String {
    let b = &s.body;
    let [x, y, z] = b.position;
    let [c0, c1, c2] = b.rotation.components;
    format!(
        "{x} {y} {z} {} {c0} {c1} {c2} {}",
        b.rotation.largest,
        u8::from(b.at_rest)
    )
}

/// The recorded frame for the codec's trained-priors test: per cube, its states at frames F-12, F-6 and F, or one
/// state after `=` when the cube is the same at F-6 and F (an unchanged entry).
fn recorded_frame_text(
    frame: u64,
    older: &[ObjectState],
    base: &[ObjectState],
    now: &[ObjectState],
) -> String {
    let mut out = format!(
        "# bandwidth_ladder --record-frame: katamari, pose only, frame {frame}; per cube: id, then its states at \
         frames {}, {} and {} (x y z largest c0 c1 c2 at_rest), or `=` and one state when unchanged since {}\n",
        frame - 12,
        frame - 6,
        frame,
        frame - 6
    );
    for (i, ((o, b), n)) in older.iter().zip(base).zip(now).enumerate() {
        if b == n {
            out += &format!("{i} = {}\n", pose_text(n));
        } else {
            out += &format!(
                "{i} {} | {} | {}\n",
                pose_text(o),
                pose_text(b),
                pose_text(n)
            );
        }
    }
    out
}

fn main() {
    let args = Args::parse();
    let config = WorldConfig::default();
    let mut world = World::new(config, &SceneSpec::katamari());
    let defaults = KatamariTuning::default();
    let tuning = KatamariTuning {
        speed: args.speed,
        frames: match args.phases.as_deref() {
            Some(&[a, b, r]) => [a, b, r],
            _ => defaults.frames,
        },
        attract_radius: args.attract_radius.unwrap_or(defaults.attract_radius),
        ..defaults
    };
    let mut script = KatamariScript::new(&world, tuning).expect("katamari has a player cube");
    let state_config = StateConfig::default();
    let frames = (args.seconds * f64::from(HZ)).round().max(1.0) as u64;
    let seconds = frames as f64 / f64::from(HZ);
    let mut rungs = vec![
        Rung::new("raw", Kind::Raw),
        Rung::new("quantized", Kind::Absolute { at_rest: false }),
        Rung::new("at_rest", Kind::Absolute { at_rest: true }),
        Rung::new(
            "delta",
            Kind::Delta {
                predict: false,
                backend: Backend::Bitpack,
            },
        ),
        Rung::new(
            "prediction",
            Kind::Delta {
                predict: true,
                backend: Backend::Bitpack,
            },
        ),
        Rung::new(
            "entropy",
            Kind::Delta {
                predict: true,
                backend: Backend::Arith,
            },
        ),
    ];
    let n = world.object_count();
    let mut real = [
        RealPackets::new("real_bitpack", Backend::Bitpack, n),
        RealPackets::new("real_entropy", Backend::Arith, n),
    ];
    let pose_config = StateConfig {
        pose_only: true,
        ..state_config
    };
    let mut pose_only = RealPackets::new("real_entropy_pose_only", Backend::Arith, n);
    let initial = world.object_states();
    pose_only.prime(&strip_velocities(&initial));
    for rung in &mut rungs {
        rung.prime(&initial);
    }
    for r in &mut real {
        r.prime(&initial);
    }
    let mut variant = LinkVariant::new(initial.clone(), args.seed, args.loss);
    let mut moving = 0u64;
    let mut changed = 0u64;
    let mut pose_changed = 0u64;
    let mut history: VecDeque<Vec<ObjectState>> = VecDeque::new();
    // The last 13 frames' pose-only states, for `--record-frame`.
    let mut poses: VecDeque<Vec<ObjectState>> = VecDeque::new();
    let mut phase_frames = [0u64; 3];
    let frame_time = Duration::from_secs(1) / HZ;
    for frame in 1..=frames {
        let phase = script
            .apply(&mut world)
            .expect("the host pushes its own cubes");
        phase_frames[phase as usize] += 1;
        world.step();
        let states = world.object_states();
        let floats = float_cubes(&world);
        moving += states.iter().filter(|s| !s.body.at_rest).count() as u64;
        // Changed: differs from the state the frame is coded against (6 frames back, the scene's initial state
        // at the start).
        let old = history.front().unwrap_or(&initial);
        changed += states.iter().zip(old).filter(|(a, b)| a != b).count() as u64;
        // What changed on the anchors' terms: the pose or the at-rest flag.
        pose_changed += states
            .iter()
            .zip(old)
            .filter(|(a, b)| {
                let (a, b) = (&a.body, &b.body);
                (a.position, a.rotation, a.at_rest) != (b.position, b.rotation, b.at_rest)
            })
            .count() as u64;
        poses.push_back(strip_velocities(&states));
        if poses.len() > 13 {
            poses.pop_front();
        }
        if let Some(path) = &args.record_frame
            && frame == args.record_at
            && poses.len() == 13
        {
            let text = recorded_frame_text(frame, &poses[0], &poses[6], &poses[12]);
            std::fs::write(path, text).expect("recorded frame written");
        }
        history.push_back(states.clone());
        if history.len() > BASELINE_AGE {
            history.pop_front();
        }
        for rung in &mut rungs {
            rung.run(frame as u16, &state_config, &states, &floats);
        }
        for r in &mut real {
            r.run(frame as u16, &state_config, &states, &floats);
        }
        pose_only.run(
            frame as u16,
            &pose_config,
            &strip_velocities(&states),
            &floats,
        );
        variant.step(frame_time * frame as u32, frame, &world, &floats);
    }
    if let Some(path) = &args.write_priors {
        let mut full = FieldCosts::default();
        for r in &real {
            full.add(&r.uses);
        }
        std::fs::write(path, priors_source(&full, &pose_only.uses, &args)).expect("priors written");
    }
    let kbps: serde_json::Map<String, Value> = rungs
        .iter()
        .map(|r| (r.name.to_string(), json!(r.kbps(seconds))))
        .chain(
            real.iter()
                .chain([&pose_only])
                .map(|r| (r.name.to_string(), json!(r.kbps(seconds)))),
        )
        .collect();
    // The best rung a real link can use, the pose-only one included, with the changed cubes on its own terms.
    let (best, best_changed) = real
        .iter()
        .map(|r| (r, changed))
        .chain([(&pose_only, pose_changed)])
        .min_by(|a, b| a.0.kbps(seconds).total_cmp(&b.0.kbps(seconds)))
        .expect("real rungs");
    let goal = 110.0;
    let changed_per_frame = changed as f64 / frames as f64;
    let report = json!({
        "scene": "katamari",
        "objects": n,
        "hz": HZ,
        "frames": frames,
        "seconds": seconds,
        "baseline_age_frames": BASELINE_AGE,
        "speed_m_s": args.speed,
        "phase_cycle_frames": { "attract": tuning.frames[0], "blow": tuning.frames[1], "roll": tuning.frames[2] },
        "attract_radius_m": tuning.attract_radius,
        "waypoints_reached": script.waypoints_reached(),
        "phase_frames": { "attract": phase_frames[0], "blow": phase_frames[1], "roll": phase_frames[2] },
        "changed_per_frame": changed_per_frame,
        "moving_share": moving as f64 / (frames * n as u64) as f64,
        "best_real_packet": best.name,
        "best_real_packet_kbps": best.kbps(seconds),
        "best_real_packet_changed_per_frame": best_changed as f64 / frames as f64,
        "bits_per_changed_cube": (best.bytes * 8) as f64 / best_changed.max(1) as f64,
        "best_real_packet_breakdown": best.report(seconds, frames, best_changed)["fields"],
        "mean_error_mm": best.errors.mean(),
        "max_error_mm": best.errors.max,
        "goal_kbps": goal,
        "goal_met": best.kbps(seconds) <= goal,
        "pose_only_real_packet_kbps": pose_only.kbps(seconds),
        "pose_only_changed_per_frame": pose_changed as f64 / frames as f64,
        "pose_only_bits_per_changed_cube": (pose_only.bytes * 8) as f64 / pose_changed.max(1) as f64,
        "pose_only_max_error_mm": pose_only.errors.max,
        "pose_only_goal_met": pose_only.kbps(seconds) <= goal,
        "anchors_bits_per_changed_cube": {
            "glenn_fiedler_bitpacked": 55.0,
            "fabian_giesen_arithmetic": 47.0,
            "richard_maxwell_135_kbps": 30.0,
        },
        "kbps": kbps,
        "real_packets": real
            .iter()
            .map(|r| (r, changed))
            .chain([(&pose_only, pose_changed)])
            .map(|(r, c)| (r.name.to_string(), r.report(seconds, frames, c)))
            .collect::<serde_json::Map<_, _>>(),
        "rungs": rungs.iter().map(|r| (r.name.to_string(), r.report(seconds, frames))).collect::<serde_json::Map<_, _>>(),
        "state_link": variant.report(seconds, frames),
    });
    if args.json {
        println!("{report}");
    } else {
        println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    }
}
