//! Codec benchmark: the cost and size of moving objects through the full delta path, with each back end.
//!
//! The frames are recorded in this run from the rapier katamari scene (901 cubes; the player cube rolls under
//! forces, attracts cubes into a ball and blows them away), the same run the bandwidth ladder measures, so
//! predictions meet contacts, friction and the ball's jostling. Each measured frame encodes every object against
//! its state `--gap` frames earlier (an acked baseline, as after a 100 ms round trip at 60 Hz), through the packet
//! writer and reader.
//!
//! Reported per back end: nanoseconds per moving object to encode and to decode a section holding all objects,
//! bits per object in that section, and the time to encode and decode one datagram filled to 1200 bytes. Both
//! back ends code the same states, and every decode (timed section and datagram alike) is checked to give back
//! exactly the states that were encoded.
//!
//! The datagram is encoded as the engine's peer host and guest send it: with each object's revision (the step of
//! its last change, noted by `StateRevisions`; `PacketWriter::write_section_revised`), so that an object known
//! unchanged since its baseline is taken without a copy or a comparison (`packet_encode_us`), and checked to be
//! the same bytes as without (`packet_encode_without_revisions_us`, `PacketWriter::write_section`). Noting the
//! changes is the sender's work, done once per step for all of its links, not once per datagram: it is timed on
//! its own (`StateRevisions::note`, each object's state against the step before's) and reported once,
//! `change_tracking_us_per_frame`.
//!
//! For the range coder, `range_decisions` splits the coding itself from the modelling around it: the datagram's
//! modelled decisions (recorded by a writer that tallies them, checked to write the same bytes) replayed through
//! the bare range coder, encoded and decoded, the decode with each decision's model address known ahead, with a
//! value tree's inner nodes and mantissa models waiting on the decision before (as the reader must), and with every
//! one waiting. The second is the dependency no change to the code around the coder removes (its loop also takes a
//! branch the real reader does not, so it may sit a little above that floor); only a format with fewer decisions, or
//! fewer that wait, lowers it.

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use physync_codec::arith::model_waits_on_last_decision;
use physync_codec::baseline::HISTORY_PER_OBJECT;
use physync_codec::delta::plan;
use physync_codec::range::{RangeDecoder, RangeEncoder};
use physync_codec::{
    AckTracker, Backend, DeltaPath, DeltaState, LinkConfig, MeasureStream, ObjectState,
    PacketHeader, PacketReader, PacketWriter, ReceiveHistory, StateConfig, StateRevisions,
    decode_packet, encode_packet,
};
use physync_engine::world::scene::SceneSpec;
use physync_engine::world::{World, WorldConfig};
use physync_examples::katamari::{KatamariScript, KatamariTuning};
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Measure the physync codec on moving objects with each back end")]
struct Args {
    /// Age of the acked baseline, in frames.
    #[arg(long, default_value_t = 6)]
    gap: usize,
    /// Frames measured (each a different world state).
    #[arg(long, default_value_t = 16)]
    frames: usize,
    /// Timed repetitions per measured frame.
    #[arg(long, default_value_t = 20)]
    repeats: usize,
    /// Measure only this back end (`bitpack` or `arith`); both by default.
    #[arg(long)]
    only: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Frames the katamari runs before the first measured frame: the first ball has formed.
const WARMUP_FRAMES: u64 = 240;

/// Runs the rapier katamari scene (the player cube rolling under forces, attracting and blowing cubes) and
/// records every frame's quantized states from `WARMUP_FRAMES` on, `count` frames in all.
fn record_katamari(count: usize) -> Vec<Vec<ObjectState>> {
    let mut world = World::new(WorldConfig::default(), &SceneSpec::katamari());
    let mut script =
        KatamariScript::new(&world, KatamariTuning::default()).expect("katamari has a player cube");
    let mut frames = Vec::with_capacity(count);
    while frames.len() < count {
        script
            .apply(&mut world)
            .expect("the host pushes its own cubes");
        world.step();
        if world.frame() > WARMUP_FRAMES {
            frames.push(world.object_states());
        }
    }
    frames
}

/// One measured frame: the states now and the acked baseline states `gap` frames earlier, each with its
/// revisions (the world frame of each object's last change).
struct Sample {
    frame: u16,
    now: Vec<ObjectState>,
    base: Vec<ObjectState>,
    now_revisions: Vec<u64>,
    base_revisions: Vec<u64>,
}

/// Each recorded frame's revisions, as a sender notes them once per step for all its links
/// (`StateRevisions::note`, as the engine's peer host and guest do). Also returns the time this took per step, in
/// microseconds (median over every step after the first, which notes the whole scene once).
fn track_changes(recorded: &[Vec<ObjectState>]) -> (Vec<Vec<u64>>, f64) {
    let mut tracker = StateRevisions::new();
    let mut revisions = Vec::with_capacity(recorded.len());
    let mut step_us = Vec::new();
    for (k, states) in recorded.iter().enumerate() {
        let t = Instant::now();
        let noted = black_box(tracker.note(states));
        if k > 0 {
            step_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
        revisions.push(noted.to_vec());
    }
    (revisions, median(step_us))
}

const BASE_SEQUENCE: u16 = 1000;

fn sender(link: &LinkConfig, s: &Sample, gap: usize) -> AckTracker<ObjectState> {
    let mut t = AckTracker::new(link.max_objects);
    let base_frame = s.frame.wrapping_sub(gap as u16);
    t.record_sent_revised(
        BASE_SEQUENCE,
        base_frame,
        s.base
            .iter()
            .zip(&s.base_revisions)
            .enumerate()
            .map(|(i, (st, r))| (i as u16, *st, *r)),
    );
    t.process_acks(BASE_SEQUENCE, 0);
    t
}

/// The receiver's history as a link's is after a while: every slot of its window holds a state of every object
/// (one datagram a frame), the baseline in the newest. A history holding only the baseline would be a fraction
/// of a link's size, so the copy taken before each timed decode would leave it warmer in the caches than a
/// receiver's, which decodes each datagram after a frame of other work.
///
/// The copy is taken into the same history each time (`clone_from`, which reuses its blocks): a fresh clone freed
/// and allocated 7.9 MB around every decode, and glibc then served the decoder's output from pages never touched
/// (the top of a heap it had just trimmed), so about half the timed decodes also timed up to 15 page faults, about
/// 2 µs each on this machine, which a receiver's steady heap does not take.
fn receiver(link: &LinkConfig, s: &Sample, gap: usize) -> ReceiveHistory<ObjectState> {
    let mut h = ReceiveHistory::new(link.max_objects);
    let base_frame = s.frame.wrapping_sub(gap as u16);
    for back in (0..HISTORY_PER_OBJECT as u16).rev() {
        for (i, st) in s.base.iter().enumerate() {
            h.insert(
                i as u16,
                BASE_SEQUENCE - back,
                base_frame.wrapping_sub(back),
                *st,
            );
        }
    }
    h
}

fn header(gap: usize) -> PacketHeader {
    PacketHeader {
        packet_type: 1,
        sequence: BASE_SEQUENCE + gap as u16,
        ack: 77,
        ack_bits: 0xFFFF_FFFF,
    }
}

/// `encode_packet` through `PacketWriter::write_section_revised`: the datagram's bytes and the ids included. Kept
/// out of line so that a profiler can single it out (`callgrind --toggle-collect='*encode_packet_revised*'`).
#[inline(never)]
fn encode_packet_revised(
    link: &LinkConfig,
    config: &StateConfig,
    header: PacketHeader,
    (frame, order): (u16, &[u16]),
    state_of: impl FnMut(u16) -> Option<ObjectState>,
    revision_of: impl FnMut(u16) -> Option<u64>,
    tracker: &mut AckTracker<ObjectState>,
) -> (Vec<u8>, Vec<u16>) {
    let mut w = PacketWriter::new(link, header).expect("header");
    let included = w
        .write_section_revised(config, tracker, frame, order, state_of, revision_of)
        .expect("encode packet");
    (w.finish(), included)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The range coder's own share of one datagram: the modelled decisions a tallying writer recorded for it, replayed
/// through the bare range coder, each reading its model from a table and writing it back adapted as the coder's
/// models are (from each model's first recorded probability, with the coder's fixed-shift update rather than the
/// trained rates). Times in microseconds, one per repeat: encoding them, and decoding them three ways, the same loop
/// over the same bytes each time, apart from which decisions must wait for the one before to know their model's
/// address:
/// - `ahead`: none (every address known ahead): the coder's own register chain alone;
/// - `inner`: those the reader picks by the decision before (`model_waits_on_last_decision`: a value tree's inner
///   nodes and its mantissa models): the dependency this binarization cannot shed, whatever the code around it
///   (and the loop's branch on which decisions wait, one more to predict);
/// - `chained`: every one, as when each value's contexts also wait on the values before it.
///
/// The even-odds bits a value codes in one step are left out, so each figure leaves out work the real coder does;
/// only the `inner` loop's branch is work the real reader does not do.
#[derive(Default)]
struct DecisionFloor {
    decisions: usize,
    encode_us: Vec<f64>,
    decode_ahead_us: Vec<f64>,
    decode_inner_us: Vec<f64>,
    decode_chained_us: Vec<f64>,
}

/// Adds `decisions`, replayed `repeats` times, to `floor` (see [`DecisionFloor`]).
fn replay_decisions(floor: &mut DecisionFloor, decisions: &[(u32, bool, u16)], repeats: usize) {
    let size = decisions
        .iter()
        .map(|d| d.0 as usize + 1)
        .max()
        .unwrap_or(0);
    let mut start = vec![0u16; size];
    for &(model, _, p0) in decisions.iter().rev() {
        start[model as usize] = p0;
    }
    // Per decision, whether its model's address waits on the last bit decoded, in each way: an address plus that
    // bit times `zero` waits on it; one left alone does not (a branch, not a select, so that nothing waits on the
    // bit where it is not added).
    let waits = |wait: fn(u32) -> bool| -> Vec<bool> {
        decisions.iter().map(|&(model, _, _)| wait(model)).collect()
    };
    let ways = [
        waits(|_| false),
        waits(model_waits_on_last_decision),
        waits(|_| true),
    ];
    floor.decisions += decisions.len();
    // Zero, as far as the compiler knows anything.
    let zero = black_box(0usize);
    for _ in 0..repeats {
        let mut models = start.clone();
        let t = Instant::now();
        let mut e = RangeEncoder::new();
        for &(model, bit, _) in decisions {
            e.encode_bit(&mut models[model as usize], bit);
        }
        let bytes = e.finish();
        floor.encode_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
        let decodes = [
            &mut floor.decode_ahead_us,
            &mut floor.decode_inner_us,
            &mut floor.decode_chained_us,
        ];
        for (waits, times) in ways.iter().zip(decodes) {
            let mut models = start.clone();
            let mut d = RangeDecoder::new(&bytes).expect("the replay's own bytes");
            let mut wrong = 0usize;
            let t = Instant::now();
            let mut last = 0usize;
            for (&(model, bit, _), &wait) in decisions.iter().zip(waits) {
                let model = model as usize;
                // Two whole decodes, not one at a chosen address: a select would make every address wait.
                let b = if wait {
                    d.decode_bit(&mut models[model + last * zero])
                } else {
                    d.decode_bit(&mut models[model])
                }
                .expect("the replay's own bytes");
                wrong += usize::from(b != bit);
                last = usize::from(b);
            }
            times.push(t.elapsed().as_nanos() as f64 / 1000.0);
            assert_eq!(wrong, 0, "the replay decodes the decisions it coded");
        }
    }
}

fn measure_backend(
    backend: Backend,
    samples: &[Sample],
    args: &Args,
    config: &StateConfig,
) -> Value {
    let n = samples.first().map_or(0, |s| s.now.len());
    let order: Vec<u16> = (0..n as u16).collect();
    // A link whose budget holds every object, to time the per-object path without the budget cutting in.
    let wide = LinkConfig {
        backend,
        budget_bytes: 64 * n + 64,
        max_objects: n as u16,
        ..LinkConfig::default()
    };
    let full = LinkConfig {
        backend,
        max_objects: n as u16,
        ..LinkConfig::default()
    };
    let (mut enc_ns, mut dec_ns, mut pk_enc_us, mut pk_dec_us, mut pk_plain_us) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut section_bits, mut packet_bytes, mut packet_objects) = (0u64, 0usize, 0usize);
    let mut floor = DecisionFloor::default();
    for s in samples {
        let state_of = |id: u16| s.now.get(usize::from(id)).copied();
        let mut tracker = sender(&wide, s, args.gap);
        let history = receiver(&wide, s, args.gap);
        // Every object through the full path: plan, write, and read back against the history.
        let mut bytes = Vec::new();
        for _ in 0..args.repeats {
            let t = Instant::now();
            let mut w = PacketWriter::new(&wide, header(args.gap)).expect("header");
            let ids = w
                .write_section(config, &mut tracker, s.frame, &order, state_of)
                .expect("encode");
            bytes = w.finish();
            enc_ns.push(t.elapsed().as_nanos() as f64 / n as f64);
            assert_eq!(ids.len(), n, "the wide budget holds every object");
        }
        section_bits += (bytes.len() * 8) as u64;
        let mut h = history.clone();
        for _ in 0..args.repeats {
            h.clone_from(&history);
            let t = Instant::now();
            let mut r = PacketReader::new(&wide, &bytes).expect("header");
            let (_, entries) = r
                .read_section::<ObjectState>(config, &mut h)
                .expect("decode");
            dec_ns.push(t.elapsed().as_nanos() as f64 / n as f64);
            // Decoding must reproduce every encoded state exactly, in the order written.
            assert!(
                entries.iter().map(|e| e.0).eq(order.iter().copied()),
                "decoded ids differ from the ids written"
            );
            assert!(
                entries
                    .iter()
                    .all(|(id, st)| s.now[usize::from(*id)] == *st),
                "decode mismatch"
            );
            black_box(entries);
        }
        // One datagram filled to the 1200-byte budget, in the order a priority accumulator would give: the cubes
        // that changed first.
        let (mut priority, unchanged): (Vec<u16>, Vec<u16>) = order
            .iter()
            .partition(|&&id| s.now[usize::from(id)] != s.base[usize::from(id)]);
        priority.extend(unchanged);
        let mut tracker = sender(&full, s, args.gap);
        let mut plain_tracker = sender(&full, s, args.gap);
        let history = receiver(&full, s, args.gap);
        let revision_of = |id: u16| s.now_revisions.get(usize::from(id)).copied();
        let mut packet = None;
        for repeat in 0..args.repeats {
            // Each way goes first on every other repeat, so that neither always meets the caches the other left.
            let mut revised = || {
                let t = Instant::now();
                let p = encode_packet_revised(
                    &full,
                    config,
                    header(args.gap),
                    (s.frame, &priority),
                    state_of,
                    revision_of,
                    &mut tracker,
                );
                pk_enc_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
                p
            };
            let mut plain = || {
                let t = Instant::now();
                let p = encode_packet(
                    &full,
                    config,
                    header(args.gap),
                    s.frame,
                    &priority,
                    state_of,
                    &mut plain_tracker,
                )
                .expect("encode packet");
                pk_plain_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
                p
            };
            let ((bytes, included), plain) = if repeat % 2 == 0 {
                let r = revised();
                (r, plain())
            } else {
                let p = plain();
                (revised(), p)
            };
            // The revisions spare work, never bytes.
            assert!(
                plain.bytes == bytes && plain.included == included,
                "a datagram written with revisions differs from one written without"
            );
            packet = Some(plain);
        }
        let packet = packet.expect("at least one repeat");
        assert!(packet.bytes.len() <= full.budget_bytes);
        if backend == Backend::Arith {
            // The same datagram from a writer that tallies each decision it codes.
            let mut w = PacketWriter::new(&full, header(args.gap)).expect("header");
            w.track_costs();
            w.write_section(
                config,
                &mut sender(&full, s, args.gap),
                s.frame,
                &priority,
                state_of,
            )
            .expect("encode packet");
            let decisions = w
                .costs()
                .map(|c| c.decisions().to_vec())
                .unwrap_or_default();
            assert_eq!(w.finish(), packet.bytes, "a tally changes no byte");
            replay_decisions(&mut floor, &decisions, args.repeats);
        }
        packet_bytes += packet.bytes.len();
        packet_objects += packet.included.len();
        let mut h = history.clone();
        for _ in 0..args.repeats {
            h.clone_from(&history);
            let t = Instant::now();
            let d = decode_packet::<ObjectState>(&full, config, &packet.bytes, &mut h)
                .expect("decode packet");
            pk_dec_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
            // The datagram must decode to exactly the objects and states the writer put in.
            assert!(
                d.entries
                    .iter()
                    .map(|e| e.0)
                    .eq(packet.included.iter().copied()),
                "decoded ids differ from the ids written"
            );
            assert!(
                d.entries
                    .iter()
                    .all(|(id, st)| s.now[usize::from(*id)] == *st),
                "packet decode mismatch"
            );
            black_box(d);
        }
    }
    let frames = samples.len() as f64;
    let range_decisions = (floor.decisions > 0).then(|| {
        json!({
            "per_packet": floor.decisions as f64 / frames,
            "encode_us": median(floor.encode_us),
            "decode_addresses_ahead_us": median(floor.decode_ahead_us),
            "decode_inner_nodes_chained_us": median(floor.decode_inner_us),
            "decode_chained_us": median(floor.decode_chained_us),
        })
    });
    json!({
        "range_decisions": range_decisions,
        "encode_ns_per_object": median(enc_ns),
        "decode_ns_per_object": median(dec_ns),
        "bits_per_object": section_bits as f64 / frames / n as f64,
        "packet_encode_us": median(pk_enc_us),
        "packet_encode_without_revisions_us": median(pk_plain_us),
        "packet_decode_us": median(pk_dec_us),
        "packet_bytes": packet_bytes as f64 / frames,
        "objects_per_packet": packet_objects as f64 / frames,
    })
}

fn main() {
    let args = Args::parse();
    assert!(
        args.gap > 0 && args.frames > 0 && args.repeats > 0,
        "--gap, --frames and --repeats must be positive"
    );
    let config = StateConfig::default();
    // Measured frames are `spacing` frames apart, each against the frame `gap` before it.
    let spacing = 7;
    let recorded = record_katamari(args.gap + 1 + spacing * args.frames);
    let (revisions, change_tracking_us) = track_changes(&recorded);
    let samples: Vec<Sample> = (0..args.frames)
        .map(|i| {
            let at = args.gap + spacing * i;
            Sample {
                frame: (WARMUP_FRAMES as usize + 1 + at) as u16,
                now: recorded[at].clone(),
                base: recorded[at - args.gap].clone(),
                now_revisions: revisions[at].clone(),
                base_revisions: revisions[at - args.gap].clone(),
            }
        })
        .collect();
    let changed: usize = samples
        .iter()
        .map(|s| s.now.iter().zip(&s.base).filter(|(a, b)| a != b).count())
        .sum();

    let mut paths = [0usize; 5];
    // How much of a prediction-error residual is rotation: the residual measured as is, and with the rotation
    // replaced by the predicted one (which costs only the "same largest component" flag and a zero bucket).
    let (mut residuals, mut residual_bits, mut rotation_bits, mut largest_changed) =
        (0usize, 0u64, 0u64, 0usize);
    for s in &samples {
        for (now, base) in s.now.iter().zip(&s.base) {
            let prediction = ObjectState::predict(&config, base, args.gap as u16);
            let p = plan(&config, now, Some(base), prediction.as_ref()).expect("plan");
            paths[DeltaPath::ALL
                .iter()
                .position(|x| *x == p.path)
                .unwrap_or(4)] += 1;
            if let (DeltaPath::PredictionError, Some(pred)) = (p.path, prediction) {
                let measure = |value: &ObjectState| {
                    let mut m = MeasureStream::new();
                    let mut v = *value;
                    ObjectState::serialize_residual(&mut m, &config, &mut v, &pred)
                        .map(|_| m.bits_counted())
                };
                let mut without = *now;
                without.body.rotation = pred.body.rotation;
                if let (Ok(all), Ok(rest)) = (measure(now), measure(&without)) {
                    residuals += 1;
                    residual_bits += all;
                    rotation_bits += all.saturating_sub(rest);
                    largest_changed +=
                        usize::from(now.body.rotation.largest != pred.body.rotation.largest);
                }
            }
        }
    }
    let per_residual = |x: f64| x / residuals.max(1) as f64;
    let total = paths.iter().sum::<usize>().max(1) as f64;
    let share = |i: usize| paths[i] as f64 / total;

    let wanted = |name: &str| args.only.as_deref().is_none_or(|o| o == name);
    let bitpack = if wanted("bitpack") {
        measure_backend(Backend::Bitpack, &samples, &args, &config)
    } else {
        Value::Null
    };
    let arith = if wanted("arith") {
        measure_backend(Backend::Arith, &samples, &args, &config)
    } else {
        Value::Null
    };
    let ratio = arith["bits_per_object"].as_f64().unwrap_or(0.0)
        / bitpack["bits_per_object"].as_f64().unwrap_or(1.0);
    let out = json!({
        "scene": "katamari (rapier, recorded in this run)",
        "objects": samples.first().map_or(0, |s| s.now.len()),
        "changed_per_frame": changed as f64 / samples.len() as f64,
        "baseline_gap_frames": args.gap,
        "frames_measured": args.frames,
        "repeats": args.repeats,
        "change_tracking_us_per_frame": change_tracking_us,
        "path_share": {
            "unchanged": share(0),
            "predicted": share(1),
            "prediction_error": share(2),
            "delta": share(3),
            "absolute": share(4),
        },
        "prediction_error_residual": {
            "bitpack_bits": per_residual(residual_bits as f64),
            "rotation_bitpack_bits": per_residual(rotation_bits as f64),
            "largest_component_changed_share": per_residual(largest_changed as f64),
        },
        "bitpack": bitpack,
        "arith": arith,
        "arith_bits_vs_bitpack": ratio,
    });
    if args.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    }
}
