//! Integration tests: real processes the tests build, profiled through the real kernel
//! interface by the real `profile` binary. One test binary (modules below) so the
//! suite links once.

mod accounting;
mod agent;
mod agent_defer;
mod agent_labels;
mod agent_memory;
mod agent_tables;
mod all_cpus;
mod cli;
mod common;
mod counts;
mod debuginfod;
mod diff;
mod diff_sqlite;
mod dump;
mod errors;
mod faults;
#[path = "../fixture/mod.rs"]
mod fixture;
mod fuzz_regressions;
mod go;
mod go_frames;
mod hostile;
mod hostile_jvm;
mod hostile_node;
mod hostile_python;
mod hostile_ruby;
mod java;
mod java_attach;
mod java_deploy;
mod java_frames;
mod java_inlined;
mod java_replay;
mod names;
mod node;
mod node_builtins;
mod notes;
mod offcpu;
mod otlp;
mod perf_users;
mod perfdata;
mod pgbench;
mod push;
mod python;
mod python_replay;
mod record;
mod report;
mod ruby;
mod ruby_names;
mod runnable;
mod runtime_view;
mod servers;
mod top;
mod top_runtimes;
mod unwind;
