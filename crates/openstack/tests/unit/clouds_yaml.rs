//! clouds.yaml / secure.yaml / OS_* resolution, as operators write them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use lachesis_openstack::config::{
    origin, resolve, AppCredRef, ConfigError, Credentials, DomainRef, ProjectRef, SearchPaths,
    Selection, TlsVerify, UserRef,
};

const TWO_CLOUDS: &str = r"
clouds:
  prod:
    auth:
      auth_url: https://keystone.prod.example:5000/v3
      username: lachesis
      password: from-clouds-yaml
      project_name: admin
      user_domain_name: Default
      project_domain_id: default
    region_name: RegionTwo
    interface: public
    cacert: /etc/ssl/prod-ca.pem
    api_timeout: 7
    # keys other tools use must not break us
    identity_api_version: 3
    volume_api_version: 3
  lab:
    auth_type: v3applicationcredential
    auth:
      auth_url: http://127.0.0.1:5000
      application_credential_id: 0123abcd
      application_credential_secret: lab-secret
    verify: false
";

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

struct Dirs {
    _tmp: tempfile::TempDir,
    cwd: PathBuf,
    home: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("cwd");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(home.join(".config/openstack")).unwrap();
    Dirs {
        _tmp: tmp,
        cwd,
        home,
    }
}

impl Dirs {
    fn paths(&self) -> SearchPaths {
        SearchPaths::standard(&self.cwd, Some(&self.home))
    }
    fn user_dir(&self) -> PathBuf {
        self.home.join(".config/openstack")
    }
}

fn pick(name: &str) -> Selection {
    Selection {
        cloud: Some(name.into()),
        clouds_file: None,
    }
}

#[test]
fn two_clouds_password_entry_with_every_option() {
    let d = dirs();
    std::fs::write(d.user_dir().join("clouds.yaml"), TWO_CLOUDS).unwrap();
    let cfg = resolve(&pick("prod"), &d.paths(), &env_of(&[])).unwrap();
    assert_eq!(cfg.auth_url, "https://keystone.prod.example:5000/v3");
    assert_eq!(
        cfg.credentials,
        Credentials::Password {
            user: UserRef::Name {
                name: "lachesis".into(),
                domain: DomainRef::Name("Default".into())
            },
            password: "from-clouds-yaml".into(),
            project: ProjectRef::Name {
                name: "admin".into(),
                domain: DomainRef::Id("default".into())
            },
        }
    );
    assert_eq!(cfg.region.as_deref(), Some("RegionTwo"));
    assert_eq!(cfg.interface, "public");
    assert_eq!(
        cfg.tls,
        TlsVerify::Verify {
            ca_file: Some("/etc/ssl/prod-ca.pem".into())
        }
    );
    assert_eq!(cfg.timeout, Duration::from_secs(7));
}

#[test]
fn application_credential_entry_and_default_interface() {
    let d = dirs();
    std::fs::write(d.user_dir().join("clouds.yaml"), TWO_CLOUDS).unwrap();
    let cfg = resolve(&pick("lab"), &d.paths(), &env_of(&[])).unwrap();
    assert_eq!(
        cfg.credentials,
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id("0123abcd".into()),
            secret: "lab-secret".into()
        }
    );
    assert_eq!(cfg.interface, "internal");
    assert_eq!(cfg.tls, TlsVerify::Insecure);
}

#[test]
fn os_cloud_selects_and_flag_wins_over_it() {
    let d = dirs();
    std::fs::write(d.user_dir().join("clouds.yaml"), TWO_CLOUDS).unwrap();
    let env = env_of(&[("OS_CLOUD", "lab")]);
    let from_env = resolve(&Selection::default(), &d.paths(), &env).unwrap();
    assert_eq!(from_env.auth_url, "http://127.0.0.1:5000");
    let from_flag = resolve(&pick("prod"), &d.paths(), &env).unwrap();
    assert_eq!(from_flag.auth_url, "https://keystone.prod.example:5000/v3");
}

#[test]
fn secure_yaml_overrides_secrets_key_by_key() {
    let d = dirs();
    std::fs::write(d.user_dir().join("clouds.yaml"), TWO_CLOUDS).unwrap();
    std::fs::write(
        d.user_dir().join("secure.yaml"),
        "clouds:\n  prod:\n    auth:\n      password: from-secure-yaml\n",
    )
    .unwrap();
    let cfg = resolve(&pick("prod"), &d.paths(), &env_of(&[])).unwrap();
    let Credentials::Password { password, user, .. } = cfg.credentials else {
        panic!("password")
    };
    assert_eq!(password, "from-secure-yaml");
    // Siblings of the overridden key survive the merge.
    assert_eq!(
        user,
        UserRef::Name {
            name: "lachesis".into(),
            domain: DomainRef::Name("Default".into())
        }
    );
    assert_eq!(cfg.region.as_deref(), Some("RegionTwo"));
}

#[test]
fn an_empty_secure_yaml_overrides_nothing_and_an_empty_clouds_yaml_is_named() {
    let d = dirs();
    std::fs::write(d.user_dir().join("clouds.yaml"), TWO_CLOUDS).unwrap();
    std::fs::write(d.user_dir().join("secure.yaml"), "# secrets go here\n").unwrap();
    let cfg = resolve(&pick("prod"), &d.paths(), &env_of(&[])).unwrap();
    assert_eq!(cfg.region.as_deref(), Some("RegionTwo"));

    let file = d.user_dir().join("clouds.yaml");
    std::fs::write(&file, "").unwrap();
    let err = resolve(&pick("prod"), &d.paths(), &env_of(&[])).unwrap_err();
    assert!(
        matches!(&err, ConfigError::EmptyFile { path } if *path == file),
        "{err}"
    );
}

#[test]
fn an_auth_url_that_is_not_an_http_url_is_refused_at_load() {
    let d = dirs();
    let file = d.user_dir().join("clouds.yaml");
    for bad in ["keystone:5000", "/v3", "ftp://k/v3", "http://"] {
        std::fs::write(
            &file,
            format!("clouds:\n  c:\n    auth: {{auth_url: '{bad}', username: u, password: p, project_id: x}}\n"),
        )
        .unwrap();
        let err = resolve(&pick("c"), &d.paths(), &env_of(&[])).unwrap_err();
        assert!(
            matches!(&err, ConfigError::BadKey { key, expected, .. }
                if key == "clouds.c.auth.auth_url" && expected.contains(&format!("(found {bad:?})"))),
            "{bad}: {err}"
        );
        let env = env_of(&[
            ("OS_AUTH_URL", bad),
            ("OS_USERNAME", "u"),
            ("OS_PASSWORD", "p"),
            ("OS_PROJECT_ID", "x"),
        ]);
        let err = resolve(&Selection::default(), &d.paths(), &env).unwrap_err();
        assert!(
            matches!(&err, ConfigError::BadKey { key, .. } if key == "OS_AUTH_URL"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn current_directory_wins_over_home() {
    let d = dirs();
    std::fs::write(d.user_dir().join("clouds.yaml"), TWO_CLOUDS).unwrap();
    std::fs::write(
        d.cwd.join("clouds.yaml"),
        "clouds:\n  prod:\n    auth: {auth_url: 'http://local', user_id: u1, password: p, project_id: p1}\n",
    )
    .unwrap();
    let cfg = resolve(&pick("prod"), &d.paths(), &env_of(&[])).unwrap();
    assert_eq!(cfg.auth_url, "http://local");
    assert_eq!(
        cfg.credentials,
        Credentials::Password {
            user: UserRef::Id("u1".into()),
            password: "p".into(),
            project: ProjectRef::Id("p1".into())
        }
    );
}

#[test]
fn env_only_password_and_application_credential() {
    let d = dirs();
    let env = env_of(&[
        ("OS_AUTH_URL", "http://k:5000/v3"),
        ("OS_USERNAME", "admin"),
        ("OS_PASSWORD", "pw"),
        ("OS_PROJECT_NAME", "admin"),
        ("OS_USER_DOMAIN_NAME", "Default"),
        ("OS_PROJECT_DOMAIN_NAME", "Default"),
        ("OS_REGION_NAME", "RegionOne"),
        ("OS_INTERFACE", "internalURL"),
    ]);
    let cfg = resolve(&Selection::default(), &d.paths(), &env).unwrap();
    assert_eq!(
        cfg.credentials,
        Credentials::Password {
            user: UserRef::Name {
                name: "admin".into(),
                domain: DomainRef::Name("Default".into())
            },
            password: "pw".into(),
            project: ProjectRef::Name {
                name: "admin".into(),
                domain: DomainRef::Name("Default".into())
            },
        }
    );
    assert_eq!(cfg.region.as_deref(), Some("RegionOne"));
    assert_eq!(cfg.interface, "internal");

    let env = env_of(&[
        ("OS_AUTH_URL", "http://k:5000/v3"),
        ("OS_AUTH_TYPE", "v3applicationcredential"),
        ("OS_APPLICATION_CREDENTIAL_NAME", "metering"),
        ("OS_USERNAME", "svc"),
        ("OS_APPLICATION_CREDENTIAL_SECRET", "s3"),
    ]);
    let cfg = resolve(&Selection::default(), &d.paths(), &env).unwrap();
    assert_eq!(
        cfg.credentials,
        Credentials::ApplicationCredential {
            credential: AppCredRef::Name {
                name: "metering".into(),
                user: UserRef::Name {
                    name: "svc".into(),
                    domain: DomainRef::Id("default".into())
                }
            },
            secret: "s3".into()
        }
    );
}

#[test]
fn errors_name_the_file_the_key_and_the_expected_form() {
    let d = dirs();
    let file = d.user_dir().join("clouds.yaml");
    std::fs::write(&file, "clouds:\n  bad:\n    auth: {auth_url: 'http://k', username: u, password: p}\n    interface: sideways\n").unwrap();
    let err = resolve(&pick("bad"), &d.paths(), &env_of(&[])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(&file.display().to_string()), "{msg}");
    assert!(msg.contains("clouds.bad.auth.project_name"), "{msg}");

    std::fs::write(&file, "clouds:\n  bad:\n    auth: {auth_url: 'http://k', username: u, password: p, project_id: x}\n    interface: sideways\n").unwrap();
    let msg = resolve(&pick("bad"), &d.paths(), &env_of(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("clouds.bad.interface") && msg.contains("public, internal, admin"),
        "{msg}"
    );

    let err = resolve(&pick("nope"), &d.paths(), &env_of(&[])).unwrap_err();
    assert!(
        matches!(err, ConfigError::UnknownCloud { ref known, .. } if known == &["bad".to_string()]),
        "{err}"
    );
    // Lists read as lists, not as Rust values.
    assert!(
        err.to_string()
            .ends_with(": cloud \"nope\" not found under `clouds` (it defines bad)"),
        "{err}"
    );

    std::fs::write(&file, "clouds: [unclosed\n").unwrap();
    assert!(matches!(
        resolve(&pick("bad"), &d.paths(), &env_of(&[])),
        Err(ConfigError::Yaml { .. })
    ));

    let empty = dirs();
    let err = resolve(&pick("x"), &empty.paths(), &env_of(&[])).unwrap_err();
    assert!(matches!(err, ConfigError::NoCloudsFile { .. }), "{err}");
    let paths = empty.paths();
    let searched: Vec<String> = paths
        .clouds
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert!(!searched.is_empty());
    assert_eq!(
        err.to_string(),
        format!(
            "no clouds.yaml found (searched {}); cloud \"x\" cannot be resolved: expected a clouds.yaml at one of those paths (docs/openstack.md)",
            searched.join(", ")
        )
    );
    assert!(matches!(
        resolve(&Selection::default(), &empty.paths(), &env_of(&[])),
        Err(ConfigError::NothingConfigured)
    ));
}

#[test]
fn debug_output_never_shows_secrets() {
    let creds = Credentials::Password {
        user: UserRef::Id("u".into()),
        password: "hunter2".into(),
        project: ProjectRef::Id("p".into()),
    };
    assert!(!format!("{creds:?}").contains("hunter2"));
}

#[test]
fn origin_names_the_file_and_entry_resolve_reads() {
    let d = dirs();
    let user_file = d.user_dir().join("clouds.yaml");
    std::fs::write(&user_file, TWO_CLOUDS).unwrap();
    // The first existing candidate, as resolve reads it.
    assert_eq!(
        origin(&pick("prod"), &d.paths(), &env_of(&[])),
        format!("cloud \"prod\" in {}", user_file.display())
    );
    let cwd_file = d.cwd.join("clouds.yaml");
    std::fs::write(&cwd_file, TWO_CLOUDS).unwrap();
    assert_eq!(
        origin(
            &Selection::default(),
            &d.paths(),
            &env_of(&[("OS_CLOUD", "lab")])
        ),
        format!("cloud \"lab\" in {}", cwd_file.display())
    );
    // An explicit file wins over the search, whether it exists or not.
    let explicit = Selection {
        cloud: Some("prod".into()),
        clouds_file: Some(d.home.join("absent.yaml")),
    };
    assert_eq!(
        origin(&explicit, &d.paths(), &env_of(&[])),
        "cloud \"prod\" (no clouds.yaml found)"
    );
    assert_eq!(
        origin(
            &Selection::default(),
            &d.paths(),
            &env_of(&[("OS_AUTH_URL", "http://k:5000/v3")])
        ),
        "the OS_* environment variables (OS_AUTH_URL http://k:5000/v3)"
    );
}
