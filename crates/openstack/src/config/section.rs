//! `openstack.*`: the configuration section of every program that talks to
//! the cloud (the agent in direct mode, the relay), owned here with the
//! client it configures.

use std::path::PathBuf;

use lachesis_config::form;
use serde::{Deserialize, Serialize};
use serde_with::serde_as;

use super::Selection;

/// `openstack.*`
#[serde_as]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of openstack keys")]
pub struct OpenStackSettings {
    /// Entry of `clouds.yaml`; `None`: `OS_CLOUD` or the `OS_*` variables.
    #[serde_as(as = "Option<form::Text>")]
    pub cloud: Option<String>,
    /// Explicit `clouds.yaml`; `None`: the standard search path.
    #[serde_as(as = "Option<form::Path>")]
    pub clouds_file: Option<PathBuf>,
}

impl OpenStackSettings {
    /// How these settings choose the cloud.
    #[must_use]
    pub fn selection(&self) -> Selection {
        Selection {
            cloud: self.cloud.clone(),
            clouds_file: self.clouds_file.clone(),
        }
    }
}
