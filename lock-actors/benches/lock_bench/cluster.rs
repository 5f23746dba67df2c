//! The cluster scenario: the uncontended loop on 3 primaries of our own against one node.

use super::*;

pub(crate) const CLUSTER_PRIMARIES: usize = 3;

#[derive(Clone, Copy)]
pub(crate) struct ClusterRun {
    pub(crate) pairs: f64,
    pub(crate) single: f64,
}

pub(crate) async fn cluster(url: &str, round: Duration, rows: &mut Vec<Row>) -> ClusterRun {
    eprintln!("[cluster] starting a cluster of {CLUSTER_PRIMARIES} primaries");
    let nodes = tokio::task::block_in_place(|| {
        support::topology::RedisCluster::start(CLUSTER_PRIMARIES, 0)
    });
    let single = connect(ClientConfig::new(url)).await;
    let clustered = connect(ClientConfig::cluster(nodes.primary_urls())).await;
    let (mut on_cluster, mut on_single) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (c, s) = if r % 2 == 0 {
            let c = library_round(&clustered, round).await;
            (c, library_round(&single, round).await)
        } else {
            let s = library_round(&single, round).await;
            (library_round(&clustered, round).await, s)
        };
        eprintln!(
            "[cluster] round {}: {CLUSTER_PRIMARIES} primaries {c:.0} pairs/s, one node {s:.0} pairs/s ({:.2})",
            r + 1,
            c / s
        );
        on_cluster.push(c);
        on_single.push(s);
    }
    single.shutdown();
    clustered.shutdown();
    let run = ClusterRun {
        pairs: median(&mut on_cluster),
        single: median(&mut on_single),
    };
    rows.push(Row::new("cluster", "pairs/s, 3 primaries", Some(run.pairs)));
    rows.push(Row::new("cluster", "pairs/s, one node", Some(run.single)));
    rows.push(Row::new("cluster", "ratio", Some(run.pairs / run.single)));
    run
}
