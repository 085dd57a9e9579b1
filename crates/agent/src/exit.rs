//! The `lachesis` process's exit status, the same for every subcommand
//! (README "Exit status"). The systemd unit restarts the agent on
//! [`FAILURE`] and not on [`CONFIG`] (its `RestartPreventExitStatus`, held
//! to this by the operator-kit test): a configuration error does not fix
//! itself, and restarting on one would only loop.

/// Something went wrong while running: a sync, a file, a task. Retrying
/// may help.
pub const FAILURE: u8 = 1;
/// The command line or the configuration cannot be acted on: a bad flag,
/// an invalid key, or a reference that does not resolve (the cloud entry,
/// a clouds or TLS file, the bpffs dir; `crate::preflight`). Nothing was
/// touched; the operator must fix it.
pub const CONFIG: u8 = 2;
/// `plan` printed a plan, but a best-effort list (Nova, Octavia) failed.
pub const PARTIAL: u8 = 3;
