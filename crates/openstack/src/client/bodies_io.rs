//! Saved response bodies: the `plan --from-dir` folder layout (DESIGN §14),
//! written by `plan --cloud --save-dir` and read back for offline replay.

use std::path::{Path, PathBuf};

use lachesis_planner::{ApiBodies, OptionalBody, Resource};
use serde_json::Value;

/// Errors writing saved bodies.
#[derive(Debug, thiserror::Error)]
#[error("{path}: cannot write: {source}")]
pub struct SaveError {
    pub path: std::path::PathBuf,
    pub source: std::io::Error,
}

/// Writes each body as `<collection>.json` (the `plan --from-dir` layout);
/// Nova/Octavia bodies that were not fetched are not written, so a replay
/// sees them as not deployed (a saved folder cannot express a failed fetch).
pub fn save_bodies(bodies: &ApiBodies, dir: &Path) -> Result<(), SaveError> {
    std::fs::create_dir_all(dir).map_err(|source| SaveError {
        path: dir.to_path_buf(),
        source,
    })?;
    for resource in Resource::ALL {
        let path = file_of(dir, resource);
        let Some(body) = bodies.body(resource) else {
            // A stale file from an earlier save would be replayed as current.
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(SaveError { path, source }),
            }
            continue;
        };
        let mut text = serde_json::to_string_pretty(body).unwrap_or_default();
        text.push('\n');
        std::fs::write(&path, text).map_err(|source| SaveError { path, source })?;
    }
    Ok(())
}

/// Errors reading saved bodies; each names the file and the expected form.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is missing: a saved folder needs networks.json, subnets.json, ports.json, routers.json, floatingips.json and projects.json")]
    Missing { path: PathBuf },
    #[error("{path} is empty: expected the API's response body (delete the file if the service is not deployed)")]
    Empty { path: PathBuf },
    #[error("{path} is not JSON (expected the API's response body): {message}")]
    NotJson { path: PathBuf, message: String },
    #[error("{path}: expected a JSON object with a `{collection}` array (the API's list body): {message}")]
    Shape {
        path: PathBuf,
        collection: String,
        message: String,
    },
}

/// `<dir>/<collection>.json`.
fn file_of(dir: &Path, resource: Resource) -> PathBuf {
    dir.join(format!("{}.json", resource.collection()))
}

fn load_one(dir: &Path, resource: Resource) -> Result<Option<Value>, LoadError> {
    let path = file_of(dir, resource);
    let (collection, required) = (resource.collection(), resource.is_required());
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::Missing { path })
        }
        Err(source) => return Err(LoadError::Read { path, source }),
    };
    if text.trim().is_empty() {
        return Err(LoadError::Empty { path });
    }
    let shape = |message: String| LoadError::Shape {
        path: path.clone(),
        collection: collection.to_owned(),
        message,
    };
    let body: Value = serde_json::from_str(&text).map_err(|e| LoadError::NotJson {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if !body.get(collection).is_some_and(Value::is_array) {
        return Err(shape(format!("no `{collection}` array at the top level")));
    }
    Ok(Some(body))
}

fn optional(body: Option<Value>) -> OptionalBody {
    body.map_or(OptionalBody::NotDeployed, OptionalBody::Fetched)
}

/// Reads a folder written by [`save_bodies`] (or by hand from API answers).
/// The six Neutron/Keystone files are required; a missing Nova/Octavia file
/// is a service not deployed, an empty or malformed one an error.
pub fn load_bodies(dir: &Path) -> Result<ApiBodies, LoadError> {
    let req = |r| load_one(dir, r).map(Option::unwrap_or_default);
    let opt = |r| load_one(dir, r).map(optional);
    Ok(ApiBodies {
        networks: req(Resource::Networks)?,
        subnets: req(Resource::Subnets)?,
        ports: req(Resource::Ports)?,
        routers: req(Resource::Routers)?,
        floatingips: req(Resource::FloatingIps)?,
        projects: req(Resource::Projects)?,
        servers: opt(Resource::Servers)?,
        loadbalancers: opt(Resource::LoadBalancers)?,
        amphorae: opt(Resource::Amphorae)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saving_drops_stale_best_effort_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("servers.json"), "{}").unwrap();
        let bodies = ApiBodies {
            networks: serde_json::json!({"networks": []}),
            ..ApiBodies::default()
        };
        save_bodies(&bodies, dir.path()).unwrap();
        assert!(!dir.path().join("servers.json").exists());
        let back: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("networks.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(back, serde_json::json!({"networks": []}));
    }

    #[test]
    fn loading_names_the_file_and_the_expected_form() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_bodies(dir.path()).unwrap_err();
        assert!(err.to_string().contains("networks.json"), "{err}");
        for c in [
            "networks",
            "subnets",
            "ports",
            "routers",
            "floatingips",
            "projects",
        ] {
            std::fs::write(
                dir.path().join(format!("{c}.json")),
                format!("{{\"{c}\": []}}"),
            )
            .unwrap();
        }
        let bodies = load_bodies(dir.path()).unwrap();
        assert_eq!(bodies.servers, OptionalBody::NotDeployed);
        std::fs::write(dir.path().join("servers.json"), "{\"server\": []}").unwrap();
        let err = load_bodies(dir.path()).unwrap_err();
        assert!(
            matches!(&err, LoadError::Shape { collection, .. } if collection == "servers"),
            "{err}"
        );
    }
}
