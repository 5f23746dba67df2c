//! Redis commands sent per acquire/release pair in each curve, in one CSV and one plot of
//! four panels: independent of this machine's speed.

use super::*;

/// What the curves measured (a curve not run is `None`).
#[derive(Default)]
pub(crate) struct Commands {
    pub(crate) uncontended: Option<uncontended::Curve>,
    pub(crate) handoff: Option<handoff::Curve>,
    pub(crate) watchdog: Option<Vec<watchdog::Point>>,
    pub(crate) redlock: Option<Vec<redlock::Point>>,
}

pub(crate) fn write(all: &Commands, out: &Output) {
    let mut rows = Vec::new();
    let mut panels = Vec::new();
    if let Some(curve) = &all.uncontended {
        let mut series = Vec::new();
        for (line, name) in uncontended::LINES.iter().enumerate() {
            let points: Vec<(f64, f64)> = curve
                .points
                .iter()
                .map(|p| (p.tasks as f64, p.commands_per_pair[line]))
                .collect();
            for (x, y) in &points {
                rows.push(format!("uncontended,tasks,{x},{name},{y:.3}"));
            }
            series.push(plot::Series {
                name: (*name).to_string(),
                points,
                dashed: false,
                color: Some(line),
            });
            let raw: Vec<(f64, f64)> = curve
                .points
                .iter()
                .map(|p| (p.tasks as f64, p.calls_per_pair[line]))
                .collect();
            for (x, y) in &raw {
                rows.push(format!(
                    "uncontended,tasks,{x},{name} incl. calls inside scripts,{y:.3}"
                ));
            }
            series.push(plot::Series {
                name: String::new(),
                points: raw,
                dashed: true,
                color: Some(line),
            });
        }
        panels.push(panel(
            "Uncontended: solid = sent (all at 2), dashed = incl. calls inside scripts",
            "concurrent tasks",
            true,
            series,
        ));
    }
    if let Some(curve) = &all.handoff {
        let mut series = Vec::new();
        let mut spreads: Vec<usize> = curve.points.iter().map(|p| p.processes).collect();
        spreads.dedup();
        for spread in spreads {
            let name = format!("waiters in {spread} process(es)");
            let points: Vec<(f64, f64)> = curve
                .points
                .iter()
                .filter(|p| p.processes == spread)
                .map(|p| (p.waiters as f64, p.commands_per_handoff))
                .collect();
            for (x, y) in &points {
                rows.push(format!("handoff,waiters,{x},{name},{y:.3}"));
            }
            series.push(plot::Series {
                name,
                points,
                dashed: false,
                color: None,
            });
        }
        panels.push(panel(
            "Hand-off: commands sent per hand-off (unlock + grant)",
            "waiters on one lock",
            true,
            series,
        ));
    }
    if let Some(points) = &all.watchdog {
        let acquire: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.held as f64, p.commands_per_acquire))
            .collect();
        // Renewal's commands per held lock and interval, scaled to 1,000 locks.
        let renew: Vec<(f64, f64)> = points
            .iter()
            .map(|p| {
                (
                    p.held as f64,
                    p.renew_calls_per_interval / p.held as f64 * 1000.0,
                )
            })
            .collect();
        for (x, y) in &acquire {
            rows.push(format!("watchdog,held,{x},commands per acquire,{y:.3}"));
        }
        for (x, y) in &renew {
            rows.push(format!(
                "watchdog,held,{x},renew calls per interval per 1000 held,{y:.3}"
            ));
        }
        panels.push(panel(
            "Watchdog: commands per acquire; renew calls per interval per 1,000 held",
            "watchdog locks held",
            true,
            vec![
                plot::Series {
                    name: "commands sent per acquire".into(),
                    points: acquire,
                    dashed: false,
                    color: None,
                },
                plot::Series {
                    name: "renew calls per interval, per 1,000 held".into(),
                    points: renew,
                    dashed: false,
                    color: None,
                },
            ],
        ));
    }
    if let Some(points) = &all.redlock {
        let red: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.nodes as f64, p.commands_per_pair))
            .collect();
        for (x, y) in &red {
            rows.push(format!("redlock,nodes,{x},RedLock,{y:.3}"));
        }
        let two_per_node = points
            .iter()
            .map(|p| (p.nodes as f64, 2.0 * p.nodes as f64))
            .collect();
        panels.push(panel(
            "RedLock: commands sent per pair, all nodes",
            "nodes",
            false,
            vec![
                plot::Series {
                    name: "RedLock acquire + unlock".into(),
                    points: red,
                    dashed: false,
                    color: None,
                },
                plot::Series {
                    name: "2 per node (one acquire + one unlock script)".into(),
                    points: two_per_node,
                    dashed: true,
                    color: None,
                },
            ],
        ));
    }
    out.csv("commands", "curve,x_name,x,line,commands_per_pair", &rows);
    if !panels.is_empty() {
        plot::grid(
            &out.svg("commands"),
            "Redis commands sent per acquire/release pair (INFO commandstats, script-internal calls left out)",
            &panels,
        );
    }
}

/// A panel of commands per pair, with room above the lines for the legend.
fn panel(title: &str, x: &str, x_log: bool, series: Vec<plot::Series>) -> plot::Panel {
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    plot::Panel {
        title: title.to_string(),
        x_label: x.to_string(),
        y_label: "commands".into(),
        x_log,
        y_log: false,
        y_max: Some(top * 1.6),
        series,
    }
}
