//! The network panel: per-link live plots of the last 30 seconds and the counts of cubes by authority.

use std::collections::BTreeMap;
use std::time::Duration;

use egui::Ui;
use egui_plot::{Legend, Line, Plot};

use crate::palette::{authority_color, player_color};
use crate::session::{BodyView, LinkStats, PlayerId};
use crate::time_series::TimeSeries;

/// How far back the plots reach.
pub const PLOT_WINDOW: Duration = Duration::from_secs(30);
/// How often a link's figures are sampled into the plots.
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(100);
/// Samples per series: the window at the sample rate, with slack.
const SERIES_CAPACITY: usize = 400;

/// The plotted history of one link.
#[derive(Debug, Clone)]
pub struct LinkHistory {
    /// Kilobits per second sent.
    pub kbps_up: TimeSeries,
    /// Kilobits per second received.
    pub kbps_down: TimeSeries,
    /// Round-trip time, milliseconds.
    pub rtt_ms: TimeSeries,
    /// Packet loss, percent.
    pub loss_percent: TimeSeries,
    /// The jitter buffer's play-out delay, milliseconds.
    pub playout_ms: TimeSeries,
    /// Authority conflicts per second.
    pub conflicts: TimeSeries,
    /// Corrections per second.
    pub corrections: TimeSeries,
}

impl LinkHistory {
    fn new() -> Self {
        let series = || TimeSeries::new(PLOT_WINDOW, SERIES_CAPACITY);
        Self {
            kbps_up: series(),
            kbps_down: series(),
            rtt_ms: series(),
            loss_percent: series(),
            playout_ms: series(),
            conflicts: series(),
            corrections: series(),
        }
    }

    /// One line with the newest figures, shown above the link's plots.
    pub fn headline(&self, peer: PlayerId) -> String {
        let latest = |s: &TimeSeries| s.latest().unwrap_or(0.0);
        format!(
            "Link to player {peer}: up {:.0} kbps, down {:.0} kbps, RTT {:.0} ms, loss {:.1} %, play-out {:.0} ms",
            latest(&self.kbps_up),
            latest(&self.kbps_down),
            latest(&self.rtt_ms),
            latest(&self.loss_percent),
            latest(&self.playout_ms)
        )
    }

    fn push(&mut self, now: Duration, stats: &LinkStats) {
        self.kbps_up.push(now, stats.kbps_up);
        self.kbps_down.push(now, stats.kbps_down);
        self.rtt_ms.push(now, stats.rtt_ms);
        self.loss_percent.push(now, stats.loss_percent);
        self.playout_ms.push(now, stats.playout_ms);
        self.conflicts.push(now, stats.conflicts_per_s);
        self.corrections.push(now, stats.corrections_per_s);
    }
}

/// Per-link histories, sampled at [`SAMPLE_PERIOD`].
#[derive(Debug, Clone, Default)]
pub struct NetworkHistory {
    links: BTreeMap<PlayerId, LinkHistory>,
    last_sample: Option<Duration>,
}

impl NetworkHistory {
    /// Record the session's link figures at `now` if a sample period has passed since the last sample.
    /// Links that no longer exist are forgotten.
    pub fn record(&mut self, now: Duration, stats: &[LinkStats]) {
        if self
            .last_sample
            .is_some_and(|t| now.saturating_sub(t) < SAMPLE_PERIOD)
        {
            return;
        }
        self.last_sample = Some(now);
        self.links
            .retain(|peer, _| stats.iter().any(|s| s.peer == *peer));
        for s in stats {
            self.links
                .entry(s.peer)
                .or_insert_with(LinkHistory::new)
                .push(now, s);
        }
    }

    /// The history of the link to `peer`.
    pub fn link(&self, peer: PlayerId) -> Option<&LinkHistory> {
        self.links.get(&peer)
    }

    /// Draw one block of plots per link.
    pub fn show(&self, ui: &mut Ui, now: Duration) {
        if self.links.is_empty() {
            ui.label("No network links.");
            return;
        }
        for (peer, history) in &self.links {
            ui.colored_label(player_color(*peer), history.headline(*peer));
            plot(
                ui,
                ("kbps", *peer),
                "kbps",
                now,
                &[("up", &history.kbps_up), ("down", &history.kbps_down)],
            );
            plot(
                ui,
                ("rtt", *peer),
                "RTT ms / loss %",
                now,
                &[
                    ("RTT ms", &history.rtt_ms),
                    ("play-out ms", &history.playout_ms),
                    ("loss %", &history.loss_percent),
                ],
            );
            plot(
                ui,
                ("sync", *peer),
                "per second",
                now,
                &[
                    ("conflicts", &history.conflicts),
                    ("corrections", &history.corrections),
                ],
            );
        }
    }
}

fn plot(
    ui: &mut Ui,
    id: (&str, PlayerId),
    y_label: &str,
    now: Duration,
    series: &[(&str, &TimeSeries)],
) {
    Plot::new(id)
        .height(90.0)
        .legend(Legend::default())
        .include_x(-PLOT_WINDOW.as_secs_f64())
        .include_x(0.0)
        .include_y(0.0)
        .y_axis_label(y_label)
        .allow_drag(false)
        .allow_zoom(false)
        .allow_scroll(false)
        .show(ui, |plot_ui| {
            for (name, s) in series {
                plot_ui.line(Line::new(*name, s.plot_points(now)));
            }
        });
}

/// How many bodies each authority holds: `None` is default authority. Sorted, default first.
pub fn authority_counts(bodies: &[BodyView]) -> Vec<(Option<PlayerId>, usize)> {
    let mut counts: BTreeMap<Option<PlayerId>, usize> = BTreeMap::new();
    for b in bodies {
        *counts.entry(b.authority).or_default() += 1;
    }
    counts.into_iter().collect()
}

/// Draw the authority counts as coloured labels.
pub fn show_authority_counts(ui: &mut Ui, bodies: &[BodyView]) {
    for (authority, count) in authority_counts(bodies) {
        let name = authority.map_or("default".to_owned(), |p| format!("player {p}"));
        ui.colored_label(authority_color(authority), format!("{name}: {count}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{Point3, UnitQuaternion, Vector3};

    fn stats(peer: PlayerId, rtt: f64) -> LinkStats {
        LinkStats {
            peer,
            kbps_up: 100.0,
            kbps_down: 50.0,
            rtt_ms: rtt,
            loss_percent: 1.0,
            playout_ms: 66.0,
            conflicts_per_s: 0.0,
            corrections_per_s: 2.0,
        }
    }

    #[test]
    fn sampling_is_rate_limited_and_drops_gone_links() {
        let mut h = NetworkHistory::default();
        h.record(Duration::ZERO, &[stats(1, 30.0), stats(2, 40.0)]);
        h.record(Duration::from_millis(50), &[stats(1, 31.0), stats(2, 41.0)]);
        h.record(Duration::from_millis(100), &[stats(1, 32.0)]);
        let link1 = h.link(1).unwrap();
        assert_eq!(link1.rtt_ms.len(), 2);
        assert_eq!(link1.rtt_ms.latest(), Some(32.0));
        assert!(h.link(2).is_none());
        assert_eq!(
            link1.headline(1),
            "Link to player 1: up 100 kbps, down 50 kbps, RTT 32 ms, loss 1.0 %, play-out 66 ms"
        );
    }

    #[test]
    fn authority_counts_group_bodies() {
        let body = |id, authority| BodyView {
            id,
            position: Point3::origin(),
            rotation: UnitQuaternion::identity(),
            half_extents: Vector3::repeat(0.5),
            mesh: None,
            tag_color: None,
            authority,
            owner: None,
        };
        let bodies = [
            body(0, None),
            body(1, Some(2)),
            body(2, None),
            body(3, Some(1)),
            body(4, Some(2)),
        ];
        assert_eq!(
            authority_counts(&bodies),
            vec![(None, 2), (Some(1), 1), (Some(2), 2)]
        );
    }
}
