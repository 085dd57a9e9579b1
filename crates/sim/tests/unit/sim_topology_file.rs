//! Topology files at the benchmarks' size: the generated cloud (20 000
//! ports) dumped to YAML loads whole through the same loader as `lachesis
//! sim --topology` (the parser's default budget refused it at 250 001
//! nodes). That expansion through aliases stays bounded is `topology/`'s
//! unit test.

use lachesis_sim::generate::{self, EXTERNALS, PORTS, PROJECTS, ROUTERS, SUBNETS, VMS};
use lachesis_sim::{Store, Topology};

#[test]
fn the_benchmark_cloud_dumped_to_yaml_loads_whole() {
    let cloud = generate::large();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.yaml");
    std::fs::write(&path, serde_saphyr::to_string(&cloud).unwrap()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let loaded = Topology::from_yaml(&text).unwrap_or_else(|e| {
        panic!(
            "{} bytes of YAML: {}",
            text.len(),
            e.to_string().chars().take(300).collect::<String>()
        )
    });
    let store = Store::from_topology(&loaded).unwrap();
    assert_eq!(
        (
            store.projects.len(),
            store.subnets.len(),
            store.routers.len(),
            store.ports.len(),
            store.servers.len(),
        ),
        (PROJECTS, SUBNETS + EXTERNALS - 1, ROUTERS, PORTS, VMS)
    );
    // Not only the counts: the file is the cloud, field for field.
    assert_eq!(
        serde_json::to_value(&loaded).unwrap(),
        serde_json::to_value(&cloud).unwrap()
    );
}
