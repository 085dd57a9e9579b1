//! The kernel's program test-run facility (`BPF_PROG_TEST_RUN`), used by the
//! classifier tests and the per-packet benchmark.

use std::time::Duration;

use libbpf_rs::{Object, ObjectBuilder, ProgramMut};

use crate::error::{Error, Result};

/// Outcome of a test run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (as the kernel reports it, u32).
    pub retval: u32,
    /// Average time per repetition as measured by the kernel.
    pub duration: Duration,
}

pub(crate) fn run(prog: &ProgramMut<'_>, frame: &[u8], repeat: u32) -> Result<TestRun> {
    let input = libbpf_rs::ProgramInput {
        data_in: Some(frame),
        repeat,
        ..Default::default()
    };
    let out = prog
        .test_run(input)
        .map_err(Error::bpf(format!("test-run {}", prog.name().display())))?;
    Ok(TestRun {
        retval: out.return_value,
        duration: out.duration,
    })
}

static BASELINE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/baseline.bpf.o"));

/// The benchmark baseline (`bpf/baseline.bpf.c`): one per-CPU hash lookup +
/// update per packet, the floor any per-flow counter pays.
#[derive(Debug)]
pub struct Baseline {
    obj: Object,
}

/// Loads the baseline program.
pub fn baseline_object() -> Result<Baseline> {
    let open = ObjectBuilder::default()
        .open_memory(BASELINE)
        .map_err(Error::bpf("open baseline object"))?;
    let obj = open.load().map_err(Error::bpf("load baseline object"))?;
    Ok(Baseline { obj })
}

impl Baseline {
    /// Test-runs the baseline over `frame`.
    pub fn test_run(&self, frame: &[u8], repeat: u32) -> Result<TestRun> {
        let prog = self
            .obj
            .progs_mut()
            .next()
            .expect("baseline object has one program");
        run(&prog, frame, repeat)
    }
}
