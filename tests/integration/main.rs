//! The integration tests, one binary (faster to build and link than one per file): each module tests one stage or
//! command; `common` holds the shared helpers.

mod common;
mod verify_data;

mod audit_capture;
mod audit_versions;
mod calibrate;
mod calibrate_cli;
mod cloud_fixtures;
mod diff_runs;
mod diff_versions;
mod exec_beyond;
mod exec_cli;
mod exec_launch;
mod exec_nvrtc;
mod exec_plan;
mod exec_schedule;
mod explain_cli;
mod explain_sections;
mod model_capture;
mod model_env_syntax;
mod model_masks;
mod model_multinode;
mod model_symmetric;
mod model_tables;
mod model_ties;
mod model_tree_correction;
mod model_versions;
mod model_worked_example;
mod probe_detect;
mod probe_h200x2_result;
mod robust;
mod robust_gen;
mod robust_props;
mod search_bad_input;
mod search_capture;
mod search_connect;
mod search_fixtures;
mod topo_cli;
mod topo_fixtures;
mod tune;
mod verify_cli;
mod verify_rendezvous;
mod verify_results;
mod verify_score;
mod verify_tuned;
