# The two commands of the README are `make demo` and `make test`; both run
# scripts/setup first, which installs what is missing and nothing else.
SHELL := /bin/bash
CARGO ?= cargo
# Benchmarks build with the stripped release profile; BENCH_PROFILE=profiling
# keeps line tables and symbols for perf (README "Build profiles").
BENCH_PROFILE ?= release

.PHONY: setup build bpf lint test demo bench-packet bench-drain bench-cores sim bench-sync

setup:
	@bash scripts/setup

build: setup
	$(CARGO) build --workspace

# The classifier object, for inspection with bpftool (DESIGN §4.1).
bpf: setup
	$(CARGO) build -p lachesis-datapath
	@test -f target/bpf/lachesis.bpf.o && echo "bpf: target/bpf/lachesis.bpf.o"

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# The compute node's build (scripts/build-deb): no simulator, no demo.
	$(CARGO) clippy -p lachesis-agent --no-default-features --bins -- -D warnings

# Kernel tests need root (BPF, namespaces, TC): they fail loudly without it.
# `make test` runs every tier at once, after checking that every test is in
# one; the tiers below run one each. A test's tier is the folder of its
# crate's tests/ it sits in (scripts/test-tier).
test: lint
	@bash scripts/test-tier check
	$(CARGO) test --workspace

.PHONY: test-unit test-kernel test-services
# No root, no services: planner, ledger, config, decoding, client vs simulator.
# Needs only cargo (no setup step, so it runs as any user).
test-unit:
	@bash scripts/test-tier unit

# Root: BPF program test-runs, attach, network namespaces.
test-kernel: setup
	@bash scripts/test-tier kernel

# Root: RabbitMQ, Kafka-protocol broker, real Keystone + Neutron on loopback.
test-services: setup
	@bash scripts/test-tier services

demo: setup
	$(CARGO) run --release --bin lachesis -- demo

bench-packet: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-datapath --example bench_packet

bench-drain: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-datapath --example bench_drain

# The `flows` variants side by side (decision record 0010): per packet,
# contention on one flow, drain at 1 % / 100 % active, capacity at 2/64/256
# CPUs from the kernel's accounting; last line is one JSON object. Root.
bench-cores: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-datapath --example bench_cores

# The verdict cache (DESIGN §4.2, decision record 0011): none, 1 slot and
# the agent's 256 on every path, repeated / alternating / 64 interleaved.
# Root.
.PHONY: bench-verdict
bench-verdict: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-datapath --example bench_verdict

# The agent binary for SOAK_MINUTES (default 10) against the simulator,
# RabbitMQ and namespaces under compressed churn: ports created, moved and
# deleted, routers re-gatewayed, short-lived VMs, a broker restart, SIGHUPs,
# one SIGKILL; samples RSS, FDs, map fills, state-file size every second,
# checks no billing series goes down and that the series equal the taps'
# counters at the end (docs/operations.md "Soak"). Root; not part of test.
SOAK_MINUTES ?= 10
.PHONY: soak
soak: setup
	$(CARGO) build --profile $(BENCH_PROFILE) -p lachesis-agent --bin lachesis
	SOAK_MINUTES=$(SOAK_MINUTES) $(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-agent --example soak

# Coverage-guided fuzzing (cargo-fuzz, libFuzzer, nightly): every target of
# fuzz/ for FUZZ_SECONDS (default 60) each, FUZZ_TARGETS to choose some;
# prints execs and coverage per target, merges what found new coverage into
# fuzz/corpus/, copies crashes to fuzz/regressions/ (replayed by make test).
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: setup
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz

# Plan build for 20 000 ports / 5 000 subnets / 2 000 routers, and the diff of
# two plans one router apart (DESIGN §16); last line is one JSON object.
.PHONY: bench-plan
bench-plan: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-sim --example bench_plan

# Ledger: drain apply, /metrics render and state flush at DESIGN §16 sizes.
.PHONY: bench-ledger
bench-ledger: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-ledger --example bench_ledger

# OpenStack API simulator serving the example topology (docs/openstack.md).
sim: setup
	$(CARGO) run --bin lachesis -- sim --topology examples/topology.yaml --listen 127.0.0.1:8780

bench-sync: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-openstack --example bench_sync

# The Debian package (docs/operations.md "Debian package"): release binary,
# systemd unit, example config as a conffile, rules and dashboards.
.PHONY: deb
deb: setup
	@bash scripts/build-deb

# Reconcile passes at 20 000 ports through the agent's real reconciler
# (docs/agent-reconcile.md "Benchmark"): cold, unchanged, one router
# changed; a counting writer and the real datapath. Root.
.PHONY: bench-reconcile
bench-reconcile: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-agent --example bench_reconcile

# What one relay-mode pass costs a node (docs/fleet.md "Running"): the
# 20 000-port cloud as relay records, planned after one and after 100
# ports changed, parsing what changed vs everything. No root.
.PHONY: bench-relay-pass
bench-relay-pass: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-agent --example bench_relay_pass

# Decision 0008's figures: 20 000 lean records published to a RabbitMQ
# stream queue and read back at several prefetch/ack paces. Root.
.PHONY: bench-stream
bench-stream: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-notify --example bench_stream

# What a fleet of agents in direct mode asks of OpenStack (docs/operations.md
# "OpenStack load of a fleet"): K agents' metadata paths against one
# simulator and one broker, per scenario; a table, then one JSON line. Root.
.PHONY: bench-fleet
bench-fleet: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-agent --example bench_fleet

# What one sync's port list costs a real Neutron (Debian's, from the
# real-cloud tier), whole and field-selected: ms per row and bytes. Root.
.PHONY: bench-neutron
bench-neutron: setup
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-agent --example bench_neutron

# The daemon's figures (docs/operations.md "Figures"): boot time, memory at
# 10 000 live flows, kick-to-kernel latency. Runs the built binary. Root.
.PHONY: bench-agent
bench-agent: setup
	$(CARGO) build --profile $(BENCH_PROFILE) -p lachesis-agent --bin lachesis
	$(CARGO) run --profile $(BENCH_PROFILE) -p lachesis-agent --example bench_agent
