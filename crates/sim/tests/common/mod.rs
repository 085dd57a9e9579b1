//! What the notification tests share: the example topology served with
//! notifications on, and a client for its control API.

use lachesis_sim::{self as sim, SimHandle, SimOptions, Store, Topology};

/// `examples/topology.yaml` served on a free loopback port with `opts`.
pub async fn example_sim(opts: SimOptions) -> SimHandle {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topology.yaml");
    let topology = Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    sim::start_with(
        Store::from_topology(&topology).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
        opts,
    )
    .await
    .unwrap()
}

/// The control API (`/sim/…`) of a running simulator.
pub struct Control {
    http: reqwest::Client,
    base: String,
}

impl Control {
    pub fn of(sim: &SimHandle) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: format!("{}/sim", sim.base_url()),
        }
    }

    /// Sends `body` (JSON) with `method` to `/sim/<path>`; the status code.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: &serde_json::Value) -> u16 {
        self.call(method, path, body).await.0
    }

    /// [`Control::send`], with the answer's JSON body (`null` when empty).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let mut req = self.http.request(method, format!("{}/{path}", self.base));
        if !body.is_null() {
            req = req.body(body.to_string());
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let json = if text.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
        };
        (status, json)
    }
}
