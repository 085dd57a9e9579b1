//! Certificates made with the `openssl` command and HTTPS requests sent
//! with `curl`, for the listeners' TLS tests: the tools an operator uses,
//! so the listener is held to them rather than to this workspace's own
//! TLS stack. Every file lives in the directory given.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A password and its bcrypt hash as `htpasswd -B` writes it (`$2y$`),
/// made by libxcrypt (Python's `crypt`, which writes `$2b$`, the same
/// algorithm), not by this workspace's bcrypt:
/// cost 4, so a check is quick even in a debug build.
pub const PASSWORD: &str = "s3cret-Lachesis";
/// [`PASSWORD`]'s hash.
pub const PASSWORD_HASH: &str = "$2y$04$iRC8AdR2C78tp.SF6g8fYe3vYN3xNi90xHU8y9smWi.E0zMMoItRC";

/// A `basic_auth_users` section with `user` and [`PASSWORD_HASH`].
#[must_use]
pub fn basic_auth(user: &str) -> String {
    format!("basic_auth_users:\n  {user}: '{PASSWORD_HASH}'\n")
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A listener's certificate.
    Server,
    /// A scraper's certificate.
    Client,
}

/// Certificate authorities and the certificates they issue, in `dir`.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pki {
    /// Files go to `dir`.
    #[must_use]
    pub fn new(dir: &Path) -> Pki {
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    /// A self-signed CA `name` (`name.pem`, `name.key`).
    #[must_use]
    pub fn ca(&self, name: &str) -> PathBuf {
        let pem = format!("{name}.pem");
        self.request(
            name,
            &pem,
            &[
                "-x509",
                "-days",
                "2",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        self.dir.join(pem)
    }

    /// `openssl req` with a new P-256 key `name.key` and subject `CN=name`,
    /// writing `out`, with `extra` arguments.
    fn request(&self, name: &str, out: &str, extra: &[&str]) {
        let (key, subject) = (format!("{name}.key"), format!("/CN={name}"));
        let mut args = vec![
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            out,
            "-subj",
            &subject,
        ];
        args.extend_from_slice(extra);
        openssl(&args, &self.dir);
    }

    /// A certificate `name` for `usage`, naming `sans` (openssl's
    /// `subjectAltName` syntax: `IP:127.0.0.1,DNS:localhost`), issued by
    /// CA `ca` with serial `serial`: (`name.pem`, `name.key`).
    #[must_use]
    pub fn issue(
        &self,
        ca: &str,
        name: &str,
        sans: &str,
        usage: Usage,
        serial: u32,
    ) -> (PathBuf, PathBuf) {
        let (pem, key, csr, ext) = (
            format!("{name}.pem"),
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.ext"),
        );
        let eku = match usage {
            Usage::Server => "serverAuth",
            Usage::Client => "clientAuth",
        };
        std::fs::write(
            self.dir.join(&ext),
            format!("subjectAltName={sans}\nextendedKeyUsage={eku}\nbasicConstraints=CA:FALSE\n"),
        )
        .unwrap();
        self.request(name, &csr, &[]);
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &format!("{ca}.pem"),
                "-CAkey",
                &format!("{ca}.key"),
                "-set_serial",
                &serial.to_string(),
                "-days",
                "2",
                "-out",
                &pem,
                "-extfile",
                &ext,
            ],
            &self.dir,
        );
        (self.dir.join(pem), self.dir.join(key))
    }
}

/// The serial number (hex, as openssl prints it) of the certificate a TLS
/// server at `addr` presents now, or `None` when no handshake completes.
#[must_use]
pub fn served_serial(addr: std::net::SocketAddr) -> Option<String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} </dev/null 2>/dev/null | openssl x509 -noout -serial"
        ))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().strip_prefix("serial=").map(str::to_owned)
}

/// What `curl` got: the status code (0 when no HTTP answer came: a refused
/// handshake, a closed connection), the response headers and body, and
/// curl's exit code.
#[derive(Debug, Clone)]
pub struct Curled {
    /// HTTP status, 0 without an answer.
    pub status: u16,
    /// The head and the body as received.
    pub text: String,
    /// curl's exit status (35: TLS handshake failed, 56: receive failure,
    /// 60: the server's certificate not trusted).
    pub exit: i32,
}

/// `curl -sS -i` with `args` (URL included), 10 s at most.
#[must_use]
pub fn curl(args: &[&str]) -> Curled {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs (scripts/setup installs it)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (text, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Curled {
        status: code.trim().parse().unwrap_or(0),
        text: format!("{text}{}", String::from_utf8_lossy(&out.stderr)),
        exit: out.status.code().unwrap_or(-1),
    }
}
