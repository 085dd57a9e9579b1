//! The delta a reconcile pass applies (DESIGN §7), on hand-made plans.

use lachesis_abi::Zone;
use lachesis_planner::{diff, AmphoraIp, Binding, Plan, RouterMac, Scope, TrieRow};

fn row(tenant: &str, prefix: &str, zone: Zone) -> TrieRow {
    let tenant = if tenant == "*" {
        Scope::Global
    } else {
        Scope::Tenant(tenant.to_owned())
    };
    TrieRow {
        tenant,
        prefix: prefix.parse().unwrap(),
        zone,
    }
}

fn binding(mac: &str, tenant: &str, ext: Option<&str>) -> Binding {
    Binding {
        mac: mac.parse().unwrap(),
        tenant: tenant.to_owned(),
        server: "srv".to_owned(),
        port: format!("port-{mac}"),
        external_network: ext.map(str::to_owned),
        amphora: false,
    }
}

fn old_plan() -> Plan {
    Plan {
        trie: vec![
            row("*", "0.0.0.0/0", Zone::External),
            row("*", "10.9.0.1/32", Zone::Infra),
            row("t1", "10.1.0.0/24", Zone::SameTenant),
            row("t1", "10.5.0.0/24", Zone::OtherTenant),
        ],
        bindings: vec![
            binding("fa:16:3e:00:00:01", "t1", Some("public")),
            binding("fa:16:3e:00:00:02", "t1", None),
        ],
        router_macs: vec![RouterMac {
            mac: "fa:16:3e:00:01:01".parse().unwrap(),
            router: "r1".into(),
            external_network: None,
        }],
        amphora_ips: vec![AmphoraIp {
            tenant: "t1".into(),
            address: "10.1.0.21".parse().unwrap(),
        }],
        ..Plan::default()
    }
}

#[test]
fn delta_lists_exactly_what_changed() {
    let old = old_plan();
    let mut new = old_plan();
    new.trie[3].zone = Zone::External; // zone change: upsert
    new.trie.remove(1); // gone: delete
    new.trie.push(row("t2", "10.2.0.0/24", Zone::SameTenant)); // new: upsert
    new.bindings[0].tenant = "t2".into(); // attribution change
    new.bindings.remove(1); // ghost
    new.bindings.push(binding("fa:16:3e:00:00:03", "t1", None)); // learn
    new.router_macs[0].external_network = Some("public".into());
    new.amphora_ips = vec![AmphoraIp {
        tenant: "t1".into(),
        address: "10.1.0.22".parse().unwrap(),
    }];

    let d = diff(&old, &new);
    let up: Vec<String> = d
        .trie_upsert
        .iter()
        .map(|r| format!("{} {} {}", r.tenant, r.prefix, r.zone))
        .collect();
    assert_eq!(
        up,
        ["t1 10.5.0.0/24 external", "t2 10.2.0.0/24 same_tenant"]
    );
    let del: Vec<String> = d
        .trie_delete
        .iter()
        .map(|r| format!("{} {}", r.tenant, r.prefix))
        .collect();
    assert_eq!(del, ["* 10.9.0.1/32"]);
    assert_eq!(d.bindings_changed.len(), 1);
    assert_eq!(
        (
            d.bindings_changed[0].old.tenant.as_str(),
            d.bindings_changed[0].new.tenant.as_str()
        ),
        ("t1", "t2")
    );
    assert_eq!(
        d.bindings_removed
            .iter()
            .map(|b| b.mac.to_string())
            .collect::<Vec<_>>(),
        ["fa:16:3e:00:00:02"]
    );
    assert_eq!(
        d.bindings_added
            .iter()
            .map(|b| b.mac.to_string())
            .collect::<Vec<_>>(),
        ["fa:16:3e:00:00:03"]
    );
    assert_eq!(d.router_macs_changed.len(), 1);
    assert!(d.router_macs_added.is_empty() && d.router_macs_removed.is_empty());
    assert_eq!(
        d.amphora_ips_added
            .iter()
            .map(|a| a.address.to_string())
            .collect::<Vec<_>>(),
        ["10.1.0.22"]
    );
    assert_eq!(
        d.amphora_ips_removed
            .iter()
            .map(|a| a.address.to_string())
            .collect::<Vec<_>>(),
        ["10.1.0.21"]
    );
    assert!(!d.is_empty());
}

#[test]
fn unsorted_plans_diff_like_sorted_ones() {
    let old = old_plan();
    let mut shuffled = old_plan();
    shuffled.trie.reverse();
    shuffled.bindings.reverse();
    assert!(diff(&old, &shuffled).is_empty());
    let mut new = old_plan();
    new.trie.remove(0);
    let mut new_shuffled = new.clone();
    new_shuffled.trie.reverse();
    assert_eq!(diff(&shuffled, &new_shuffled), diff(&old, &new));
    assert_eq!(
        diff(&old, &new).trie_delete,
        vec![row("*", "0.0.0.0/0", Zone::External)]
    );
}
