//! Reading a configuration in layers (DESIGN §13), for any program of the
//! binary (`lachesis agent`, `lachesis relay`): defaults (each field's
//! own), the YAML file, `LACHESIS_*` environment variables, then flags
//! (`--set key.path=value`, `--log-level`). Every layer is applied to the
//! YAML tree, read into the program's typed sections (which refuse unknown
//! keys), and every problem is reported at once, each naming its key and
//! the variable or flag that set it. A program brings its [`Schema`]
//! (through a [`Layout`]) and its rules over several keys.
//!
//! [`Schema`]: crate::Schema

mod error;
mod file;
pub mod layers;
mod read;

pub use error::{ConfigError, Issue};
pub use file::{load, parse, ConfigFile, Flags, Layered};
pub use layers::{env_name, Layout, Override, ENV_PREFIX};
pub use read::{check_spans, in_file_order, read, Read, Span};
