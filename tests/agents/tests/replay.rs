//! The built-in adapters against recordings of the real CLIs (tests/fixtures/agents/),
//! played by `terminull-fake-cli`: every adapter mapping is exercised by plain
//! `cargo test`, with no agent CLI installed and no network. The checks are the live
//! tests' own (`scenarios::run`).

#![allow(clippy::print_stdout)] // a test prints the blocks it checked; shown with --nocapture

use terminull_agent_tests::agent_tests;
use terminull_agent_tests::agents::Agent;
use terminull_agent_tests::rig::Mode;
use terminull_agent_tests::runner::block_on;
use terminull_agent_tests::scenarios::{self, Scenario};
use terminull_agent_tests::workspace;

fn replay(agent: Agent, scenario: Scenario, test_name: &str) {
    let recording = workspace::fixtures(agent.id()).join(format!("{}.jsonl", scenario.name()));
    assert!(recording.exists(), "{} is missing: record it with scripts/record-agent-fixtures.sh", recording.display());
    let outcome = block_on(test_name, scenarios::run(agent, scenario, Mode::Replay { recording }));
    println!("{} {} (replay):\n{}", agent.id(), scenario.name(), outcome.transcript);
}

agent_tests! { replay;
    claude_code_plain_answer_replayed: Agent::ClaudeCode, Scenario::Plain;
    claude_code_tool_round_trip_and_resumed_second_turn_replayed: Agent::ClaudeCode, Scenario::ToolRoundTrip;
    claude_code_write_is_denied_then_allowed_through_permission_requests_replayed: Agent::ClaudeCode, Scenario::Permission;
    claude_code_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::ClaudeCode, Scenario::Interrupt;
    claude_code_model_error_ends_the_turn_in_error_replayed: Agent::ClaudeCode, Scenario::ModelError;
    claude_code_long_answer_streams_whole_replayed: Agent::ClaudeCode, Scenario::Long;
    codex_plain_answer_replayed: Agent::Codex, Scenario::Plain;
    codex_tool_round_trip_and_resumed_second_turn_replayed: Agent::Codex, Scenario::ToolRoundTrip;
    codex_permission_mode_maps_to_the_sandbox_replayed: Agent::Codex, Scenario::Sandbox;
    codex_command_is_denied_then_allowed_and_a_patch_allowed_through_permission_requests_replayed: Agent::Codex, Scenario::Permission;
    codex_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Codex, Scenario::Interrupt;
    codex_model_error_ends_the_turn_in_error_replayed: Agent::Codex, Scenario::ModelError;
    codex_long_answer_arrives_whole_replayed: Agent::Codex, Scenario::Long;
    opencode_plain_answer_replayed: Agent::OpenCode, Scenario::Plain;
    opencode_tool_round_trip_and_resumed_second_turn_replayed: Agent::OpenCode, Scenario::ToolRoundTrip;
    opencode_edit_is_denied_then_allowed_through_permission_requests_replayed: Agent::OpenCode, Scenario::Permission;
    opencode_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::OpenCode, Scenario::Interrupt;
    opencode_long_answer_streams_whole_replayed: Agent::OpenCode, Scenario::Long;
    kilo_plain_answer_replayed: Agent::Kilo, Scenario::Plain;
    kilo_tool_round_trip_and_resumed_second_turn_replayed: Agent::Kilo, Scenario::ToolRoundTrip;
    kilo_edit_is_denied_then_allowed_through_permission_requests_replayed: Agent::Kilo, Scenario::Permission;
    kilo_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Kilo, Scenario::Interrupt;
    kilo_long_answer_streams_whole_replayed: Agent::Kilo, Scenario::Long;
    kilo_model_error_ends_the_turn_in_error_replayed: Agent::Kilo, Scenario::ModelError;
    gemini_plain_answer_replayed: Agent::Gemini, Scenario::Plain;
    gemini_tool_round_trip_and_resumed_second_turn_replayed: Agent::Gemini, Scenario::ToolRoundTrip;
    gemini_write_is_denied_then_allowed_through_permission_requests_replayed: Agent::Gemini, Scenario::Permission;
    gemini_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Gemini, Scenario::Interrupt;
    gemini_long_answer_streams_whole_replayed: Agent::Gemini, Scenario::Long;
    hermes_plain_answer_replayed: Agent::Hermes, Scenario::Plain;
    hermes_tool_round_trip_and_resumed_second_turn_replayed: Agent::Hermes, Scenario::ToolRoundTrip;
    hermes_write_is_denied_then_allowed_through_permission_requests_replayed: Agent::Hermes, Scenario::Permission;
    hermes_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Hermes, Scenario::Interrupt;
    hermes_long_answer_streams_whole_replayed: Agent::Hermes, Scenario::Long;
    gemini_model_error_ends_the_turn_in_error_replayed: Agent::Gemini, Scenario::ModelError;
    pi_plain_answer_replayed: Agent::Pi, Scenario::Plain;
    pi_tool_round_trip_and_resumed_second_turn_replayed: Agent::Pi, Scenario::ToolRoundTrip;
    pi_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Pi, Scenario::Interrupt;
    droid_plain_answer_replayed: Agent::Droid, Scenario::Plain;
    droid_tool_round_trip_and_resumed_second_turn_replayed: Agent::Droid, Scenario::ToolRoundTrip;
    droid_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Droid, Scenario::Interrupt;
    droid_long_answer_arrives_whole_replayed: Agent::Droid, Scenario::Long;
    pi_model_error_ends_the_turn_in_error_replayed: Agent::Pi, Scenario::ModelError;
    qwen_plain_answer_replayed: Agent::Qwen, Scenario::Plain;
    qwen_tool_round_trip_and_resumed_second_turn_replayed: Agent::Qwen, Scenario::ToolRoundTrip;
    qwen_write_is_denied_then_allowed_through_permission_requests_replayed: Agent::Qwen, Scenario::Permission;
    qwen_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Qwen, Scenario::Interrupt;
    qwen_model_error_ends_the_turn_in_error_replayed: Agent::Qwen, Scenario::ModelError;
    qwen_long_answer_streams_whole_replayed: Agent::Qwen, Scenario::Long;
    copilot_plain_answer_replayed: Agent::Copilot, Scenario::Plain;
    copilot_tool_round_trip_and_resumed_second_turn_replayed: Agent::Copilot, Scenario::ToolRoundTrip;
    copilot_write_is_denied_then_allowed_through_permission_requests_replayed: Agent::Copilot, Scenario::Permission;
    copilot_interrupt_mid_stream_ends_the_turn_interrupted_replayed: Agent::Copilot, Scenario::Interrupt;
    copilot_long_answer_streams_whole_replayed: Agent::Copilot, Scenario::Long;
}

#[test]
fn every_scenario_of_every_agent_has_a_replay_test() {
    let source = include_str!("replay.rs");
    for agent in Agent::ALL {
        for scenario in Scenario::ALL.into_iter().filter(|s| scenarios::is_replayed(agent, *s)) {
            let variant = format!("{agent:?}, Scenario::{scenario:?};");
            assert!(source.contains(&variant), "no replay test for {variant}");
        }
    }
}

#[test]
fn recordings_stay_small_enough_to_keep_in_git() {
    // A CLI that repeats its whole message in every event (pi) records quadratically;
    // such a scenario is kept live-only (see `scenarios::is_replayed`).
    const MAX_BYTES: u64 = 1024 * 1024;
    for agent in Agent::ALL {
        let Ok(entries) = std::fs::read_dir(workspace::fixtures(agent.id())) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            let size = std::fs::metadata(&path).unwrap().len();
            assert!(size <= MAX_BYTES, "{} is {size} bytes (over {MAX_BYTES})", path.display());
        }
    }
}
