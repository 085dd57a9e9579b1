//! Saved response bodies: the `plan --from-dir` folder layout (DESIGN §14),
//! written by `plan --cloud --save-dir` and read back for offline replay.
//!
//! Beside the bodies, `sources.json` records what became of each
//! best-effort list (`{"servers": "ok", "loadbalancers": "failed", …}`, the
//! plan's `sources` form), so a replay of a partial sync plans the failed
//! lists as failed rather than as not deployed.

use std::path::{Path, PathBuf};

use lachesis_planner::{ApiBodies, OptionalBody, Resource, SourceStatus, Sources};
use serde_json::Value;

/// The file naming each best-effort list's status in a saved folder.
const SOURCES_FILE: &str = "sources.json";

/// Errors writing saved bodies.
#[derive(Debug, thiserror::Error)]
#[error("{path}: cannot write: {error}")]
pub struct SaveError {
    /// The folder that could not be created, or the file that could not be
    /// written or (a stale best-effort body) removed.
    pub path: std::path::PathBuf,
    /// The operating system's error.
    pub error: std::io::Error,
}

/// Writes each body as `<collection>.json` (the `plan --from-dir` layout)
/// and `sources.json`; Nova/Octavia bodies that were not fetched are not
/// written, and `sources.json` says whether each failed or is not deployed.
pub fn save_bodies(bodies: &ApiBodies, dir: &Path) -> Result<(), SaveError> {
    std::fs::create_dir_all(dir).map_err(|error| SaveError {
        path: dir.to_path_buf(),
        error,
    })?;
    for resource in Resource::ALL {
        let path = file_of(dir, resource);
        let Some(body) = bodies.body(resource) else {
            // A stale file from an earlier save would be replayed as current.
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(SaveError { path, error }),
            }
            continue;
        };
        write_json(&path, body)?;
    }
    write_json(&dir.join(SOURCES_FILE), &Sources::of(bodies))
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), SaveError> {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    std::fs::write(path, text).map_err(|error| SaveError {
        path: path.to_path_buf(),
        error,
    })
}

/// Errors reading saved bodies; each names the file and the expected form.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The folder does not exist.
    #[error("no such folder: {path} (expected a folder written by `lachesis plan --save-dir`)")]
    NoFolder {
        /// The folder given.
        path: PathBuf,
    },
    /// The path exists but is a file (or another non-directory).
    #[error("{path} is not a folder (expected a folder written by `lachesis plan --save-dir`)")]
    NotAFolder {
        /// The path given.
        path: PathBuf,
    },
    /// The folder or a file in it exists but cannot be read (permissions,
    /// I/O error, a body that is not UTF-8).
    #[error("{path}: cannot read: {error}")]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// One of the six Neutron/Keystone bodies is absent: those lists are
    /// required, as they are in a live sync.
    #[error("{path} is missing: a saved folder needs networks.json, subnets.json, ports.json, routers.json, floatingips.json and projects.json")]
    Missing {
        /// The missing `<collection>.json`.
        path: PathBuf,
    },
    /// A body file holds nothing but whitespace. It is refused rather than
    /// guessed at: an empty list and a service not deployed plan
    /// differently.
    #[error("{path} is empty: expected the API's response body (delete the file if the service is not deployed)")]
    Empty {
        /// The empty file.
        path: PathBuf,
    },
    /// A body file is not JSON.
    #[error("{path} is not JSON (expected the API's response body): {message}")]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The JSON parser's message.
        message: String,
    },
    /// A body file is JSON but not a list body: no `<collection>` array at
    /// the top level (e.g. a single-resource `{"server": …}` answer).
    #[error("{path}: expected a JSON object with a `{collection}` array (the API's list body): {message}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// The key the list was expected under, e.g. `servers`.
        collection: String,
        /// What is wrong with it.
        message: String,
    },
    /// `sources.json` is not the map of the three best-effort lists to
    /// `ok`, `failed` or `absent`.
    #[error("{path}: expected {{\"servers\", \"loadbalancers\", \"amphorae\"}}, each \"ok\", \"failed\" or \"absent\": {message}")]
    Sources {
        /// The `sources.json` file.
        path: PathBuf,
        /// The JSON parser's message.
        message: String,
    },
    /// `sources.json` and the files disagree: a list recorded `ok` has no
    /// file, or one recorded `failed`/`absent` has one. The folder changed
    /// after (or during) a save, and which of the two is right is unknown.
    #[error("{sources} says {collection} is {status}, but {path} {problem}")]
    Inconsistent {
        /// The `sources.json` file.
        sources: PathBuf,
        /// The best-effort list, e.g. `loadbalancers`.
        collection: String,
        /// What `sources.json` records: `ok`, `failed` or `absent`.
        status: &'static str,
        /// The list's `<collection>.json`.
        path: PathBuf,
        /// `is missing` or `exists`.
        problem: &'static str,
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
        Err(error) => return Err(LoadError::Read { path, error }),
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

/// The recorded statuses, when the folder has a [`SOURCES_FILE`].
fn load_sources(dir: &Path) -> Result<Option<Sources>, LoadError> {
    let path = dir.join(SOURCES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(LoadError::Read { path, error }),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| LoadError::Sources {
            message: e.to_string(),
            path,
        })
}

/// A best-effort body: as `sources.json` records it, or (a folder without
/// one, e.g. written by hand) present = fetched, missing = not deployed.
fn best_effort(
    dir: &Path,
    resource: Resource,
    recorded: Option<SourceStatus>,
) -> Result<OptionalBody, LoadError> {
    let Some(status) = recorded else {
        return Ok(optional(load_one(dir, resource)?));
    };
    let body = load_one(dir, resource)?;
    match (status, body) {
        (SourceStatus::Ok, Some(body)) => Ok(OptionalBody::Fetched(body)),
        (SourceStatus::Failed, None) => Ok(OptionalBody::Failed),
        (SourceStatus::Absent, None) => Ok(OptionalBody::NotDeployed),
        (status, _) => Err(LoadError::Inconsistent {
            sources: dir.join(SOURCES_FILE),
            collection: resource.collection().to_owned(),
            status: status.label(),
            path: file_of(dir, resource),
            problem: if status == SourceStatus::Ok {
                "is missing"
            } else {
                "exists"
            },
        }),
    }
}

/// Reads a folder written by [`save_bodies`] (or by hand from API answers).
/// The six Neutron/Keystone files are required. The Nova/Octavia lists are
/// what `sources.json` records; without it, a missing file is a service not
/// deployed. An empty or malformed file is an error.
pub fn load_bodies(dir: &Path) -> Result<ApiBodies, LoadError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(LoadError::NotAFolder {
                path: dir.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::NoFolder {
                path: dir.to_path_buf(),
            })
        }
        Err(error) => {
            return Err(LoadError::Read {
                path: dir.to_path_buf(),
                error,
            })
        }
    }
    let req = |r| load_one(dir, r).map(Option::unwrap_or_default);
    let recorded = load_sources(dir)?;
    let opt = |r, status: fn(Sources) -> SourceStatus| best_effort(dir, r, recorded.map(status));
    Ok(ApiBodies {
        networks: req(Resource::Networks)?,
        subnets: req(Resource::Subnets)?,
        ports: req(Resource::Ports)?,
        routers: req(Resource::Routers)?,
        floatingips: req(Resource::FloatingIps)?,
        projects: req(Resource::Projects)?,
        servers: opt(Resource::Servers, |s| s.servers)?,
        loadbalancers: opt(Resource::LoadBalancers, |s| s.loadbalancers)?,
        amphorae: opt(Resource::Amphorae, |s| s.amphorae)?,
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

    fn required_only() -> ApiBodies {
        let list = |c: &str| serde_json::json!({ c: [] });
        ApiBodies {
            networks: list("networks"),
            subnets: list("subnets"),
            ports: list("ports"),
            routers: list("routers"),
            floatingips: list("floatingips"),
            projects: list("projects"),
            ..ApiBodies::default()
        }
    }

    #[test]
    fn a_failed_list_is_saved_and_read_back_as_failed() {
        let dir = tempfile::tempdir().unwrap();
        let bodies = ApiBodies {
            servers: OptionalBody::Fetched(serde_json::json!({"servers": []})),
            loadbalancers: OptionalBody::Failed,
            amphorae: OptionalBody::NotDeployed,
            ..required_only()
        };
        save_bodies(&bodies, dir.path()).unwrap();
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(SOURCES_FILE)).unwrap())
                .unwrap();
        assert_eq!(
            recorded,
            serde_json::json!({"servers": "ok", "loadbalancers": "failed", "amphorae": "absent"})
        );
        assert_eq!(load_bodies(dir.path()).unwrap(), bodies);
    }

    #[test]
    fn sources_json_and_the_files_must_agree() {
        let dir = tempfile::tempdir().unwrap();
        save_bodies(
            &ApiBodies {
                servers: OptionalBody::Failed,
                ..required_only()
            },
            dir.path(),
        )
        .unwrap();
        std::fs::write(dir.path().join("servers.json"), "{\"servers\": []}").unwrap();
        let err = load_bodies(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("says servers is failed, but") && err.ends_with("servers.json exists"),
            "{err}"
        );
        std::fs::remove_file(dir.path().join("servers.json")).unwrap();
        std::fs::write(
            dir.path().join(SOURCES_FILE),
            r#"{"servers": "ok", "loadbalancers": "absent", "amphorae": "absent"}"#,
        )
        .unwrap();
        let err = load_bodies(dir.path()).unwrap_err().to_string();
        assert!(err.ends_with("servers.json is missing"), "{err}");
        std::fs::write(dir.path().join(SOURCES_FILE), r#"{"servers": "gone"}"#).unwrap();
        assert!(matches!(
            load_bodies(dir.path()),
            Err(LoadError::Sources { .. })
        ));
    }

    #[test]
    fn a_missing_folder_is_not_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(matches!(
            load_bodies(&missing),
            Err(LoadError::NoFolder { path }) if path == missing
        ));
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
