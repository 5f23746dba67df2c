//! A slow and lossy link for one client of a [`Lab`](super::netns::Lab): `tc netem` delay,
//! jitter and loss on both ends of the client's veth (the server side shapes what the
//! client receives, the client side what it sends).
//!
//! A kernel without `sch_netem` (`CONFIG_NET_SCH_NETEM` unset, no module to load) cannot
//! delay packets by a fixed time. There the link is made slow by a token bucket (`tc qdisc
//! tbf`: a low rate, so packets wait in its queue) and lossy by `iptables -m statistic
//! --mode random` drops; [`Impairment::how`] says which was applied, and [`netem_available`]
//! tells the two apart. Either way the qdiscs and rules are read back after they are set
//! (and after they are removed), so a run cannot believe in a fault that was not there.
#![allow(dead_code)]

use super::netns::{run, Lab};

/// What to do to the link.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub delay_ms: u32,
    pub jitter_ms: u32,
    pub loss_pct: u32,
    /// The token bucket's rate where netem is missing, in kbit/s.
    pub fallback_kbit: u32,
}

/// An impairment in force on client `slot`'s link.
#[derive(Debug)]
pub struct Impairment {
    pub slot: usize,
    /// `netem` or `tbf+statistic`.
    pub how: &'static str,
    /// `tc qdisc show` of both ends and the loss rules, read back after applying.
    pub shown: String,
}

/// Whether this kernel has `sch_netem` (tried on a throwaway veth in a throwaway namespace).
pub fn netem_available() -> bool {
    let ns = format!("nz{:x}nnetem", std::process::id());
    if run("ip", &["netns", "add", &ns]).is_err() {
        return false;
    }
    let ok = run(
        "ip",
        &[
            "-n", &ns, "link", "add", "nzq0", "type", "veth", "peer", "name", "nzq1",
        ],
    )
    .is_ok()
        && run(
            "ip",
            &[
                "netns", "exec", &ns, "tc", "qdisc", "add", "dev", "nzq0", "root", "netem",
                "delay", "1ms",
            ],
        )
        .is_ok();
    let _ = run("ip", &["netns", "del", &ns]);
    ok
}

fn tc(ns: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["netns", "exec", ns, "tc"];
    all.extend_from_slice(args);
    run("ip", &all)
}

fn loss_rules(lab: &Lab, slot: usize, op: &str, pct: u32) -> Result<(), String> {
    let probability = format!("{:.4}", f64::from(pct) / 100.0);
    for chain in ["INPUT", "OUTPUT"] {
        run(
            "ip",
            &[
                "netns",
                "exec",
                lab.client_ns(slot),
                "iptables",
                op,
                chain,
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                &probability,
                "-j",
                "DROP",
            ],
        )?;
    }
    Ok(())
}

/// What is in force on the link now: both ends' qdiscs and the client's iptables rules.
pub fn show(lab: &Lab, slot: usize) -> String {
    let (server_if, client_if) = lab.client_link(slot);
    let server = tc(lab.server_ns(), &["qdisc", "show", "dev", &server_if]).unwrap_or_default();
    let client = tc(lab.client_ns(slot), &["qdisc", "show", "dev", &client_if]).unwrap_or_default();
    let rules = run(
        "ip",
        &["netns", "exec", lab.client_ns(slot), "iptables", "-S"],
    )
    .unwrap_or_default();
    format!(
        "server side: {}\nclient side: {}\nrules: {}",
        server.trim(),
        client.trim(),
        rules.trim()
    )
}

/// Applies `spec` to client `slot`'s link, on both ends, and reads it back.
pub fn apply(lab: &Lab, slot: usize, spec: Spec) -> Result<Impairment, String> {
    let (server_if, client_if) = lab.client_link(slot);
    let ends = [
        (lab.server_ns(), server_if.as_str()),
        (lab.client_ns(slot), client_if.as_str()),
    ];
    let how = if netem_available() {
        let (delay, jitter, loss) = (
            format!("{}ms", spec.delay_ms),
            format!("{}ms", spec.jitter_ms),
            format!("{}%", spec.loss_pct),
        );
        for (ns, dev) in ends {
            tc(
                ns,
                &[
                    "qdisc", "add", "dev", dev, "root", "netem", "delay", &delay, &jitter, "loss",
                    &loss,
                ],
            )?;
        }
        "netem"
    } else {
        let rate = format!("{}kbit", spec.fallback_kbit);
        for (ns, dev) in ends {
            tc(
                ns,
                &[
                    "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst", "1600",
                    "latency", "2s",
                ],
            )?;
        }
        loss_rules(lab, slot, "-I", spec.loss_pct)?;
        "tbf+statistic"
    };
    let shown = show(lab, slot);
    let applied = match how {
        "netem" => shown.matches("qdisc netem").count() == 2,
        _ => shown.matches("qdisc tbf").count() == 2 && shown.matches("statistic").count() == 2,
    };
    if !applied {
        return Err(format!("{how} not in force after applying it:\n{shown}"));
    }
    Ok(Impairment { slot, how, shown })
}

/// Packets the random-loss rules of client `slot` dropped so far (the fallback's loss).
pub fn dropped_by_loss_rules(lab: &Lab, slot: usize) -> u64 {
    let listing = run(
        "ip",
        &[
            "netns",
            "exec",
            lab.client_ns(slot),
            "iptables",
            "-L",
            "-v",
            "-n",
            "-x",
        ],
    )
    .unwrap_or_default();
    listing
        .lines()
        .filter(|l| l.contains("statistic"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Removes the impairment and reads the link back: `Err` if anything of it is left.
/// `Ok` carries the packets the loss rules dropped (0 under netem, which counts its own).
pub fn remove(lab: &Lab, impairment: &Impairment, spec: Spec) -> Result<u64, String> {
    let slot = impairment.slot;
    let dropped = dropped_by_loss_rules(lab, slot);
    let (server_if, client_if) = lab.client_link(slot);
    tc(
        lab.server_ns(),
        &["qdisc", "del", "dev", &server_if, "root"],
    )?;
    tc(
        lab.client_ns(slot),
        &["qdisc", "del", "dev", &client_if, "root"],
    )?;
    if impairment.how != "netem" {
        loss_rules(lab, slot, "-D", spec.loss_pct)?;
    }
    let shown = show(lab, slot);
    if shown.contains("netem") || shown.contains("tbf") || shown.contains("statistic") {
        return Err(format!(
            "the impairment is still there after removing it:\n{shown}"
        ));
    }
    Ok(dropped)
}
