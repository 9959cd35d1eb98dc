//! The built-in adapters against the real, pinned agent CLIs, offline: each test runs
//! in its own private network namespace with the scripted model server, a `terminull`
//! daemon, the adapter and the CLI, and checks the blocks an app sees.
//!
//! Needs the CLIs from scripts/install-agents.sh. Without them a test says it skipped,
//! unless TERMINULL_LIVE_AGENTS=1 (CI), where that is a failure.
//! TERMINULL_UPDATE_AGENT_FIXTURES=1 saves each run's recording as the agent's fixture
//! under tests/fixtures/agents/ (scripts/record-agent-fixtures.sh does both).

#![allow(clippy::print_stdout)] // a test prints the blocks it checked; shown with --nocapture

use terminull_agent_tests::agent_tests;
use terminull_agent_tests::agents::{self, Agent};
use terminull_agent_tests::netns;
use terminull_agent_tests::rig::Mode;
use terminull_agent_tests::runner::block_on;
use terminull_agent_tests::scenarios::{self, Scenario};

/// Where the body of a live test runs: returns the CLI directory when this process is
/// the one inside the private namespace; otherwise runs the test there (or skips it
/// when the CLI is missing and not required) and returns `None`.
fn isolated(agent: Agent, test_name: &str) -> Option<std::path::PathBuf> {
    let cli_dir = agents::installed_bin_dir();
    if !netns::inside() && !cli_dir.join(agent.cli()).exists() {
        assert!(
            !agents::live_required(),
            "{} is not installed in {} and {}=1: run scripts/install-agents.sh",
            agent.cli(),
            cli_dir.display(),
            agents::LIVE_ENV
        );
        println!("skipped: {} is not installed (scripts/install-agents.sh)", agent.cli());
        return None;
    }
    match netns::run_isolated(test_name) {
        Some(Ok(output)) => {
            println!("{output}");
            None
        }
        Some(Err(error)) => panic!("{error}"),
        None => Some(cli_dir),
    }
}

fn live(agent: Agent, scenario: Scenario, test_name: &str) {
    let Some(cli_dir) = isolated(agent, test_name) else { return };
    let outcome = block_on(test_name, scenarios::run(agent, scenario, Mode::Live { cli_dir }));
    println!(
        "{} {} (live, {} {}):\n{}",
        agent.id(),
        scenario.name(),
        agent.cli(),
        agents::pinned_version(agent),
        outcome.transcript
    );
    if agents::update_fixtures() && scenarios::is_replayed(agent, scenario) {
        let path = scenarios::save_fixture(agent, scenario, &outcome.recording).expect("saving the fixture");
        println!("recorded {}", path.display());
    }
}

/// `terminull adapter check` on the adapter, with the real CLI and the model server.
fn live_check(agent: Agent, test_name: &str) {
    let Some(cli_dir) = isolated(agent, test_name) else { return };
    println!("{}", block_on(test_name, scenarios::adapter_check(agent, &cli_dir)));
}

/// An image attachment reaches the model (terminull_agent_tests::attachments).
fn live_image(agent: Agent, test_name: &str) {
    let Some(cli_dir) = isolated(agent, test_name) else { return };
    let outcome = block_on(test_name, terminull_agent_tests::attachments::image_reaches_the_model(agent, cli_dir));
    println!("{} image attachment (live):\n{outcome}", agent.id());
}

agent_tests! { live_image;
    claude_code_image_attachment_reaches_the_model_live: Agent::ClaudeCode;
}

/// The terminal handoff with the real CLI (terminull_agent_tests::handoff).
fn live_handoff(agent: Agent, test_name: &str) {
    let Some(cli_dir) = isolated(agent, test_name) else { return };
    let outcome = block_on(test_name, terminull_agent_tests::handoff::run(agent, cli_dir));
    println!("{} handoff (live):\n{}", agent.id(), outcome.transcript.join("\n"));
}

agent_tests! { live_check;
    claude_code_adapter_passes_adapter_check_with_the_real_cli_live: Agent::ClaudeCode;
    codex_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Codex;
    opencode_adapter_passes_adapter_check_with_the_real_cli_live: Agent::OpenCode;
    kilo_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Kilo;
    gemini_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Gemini;
    hermes_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Hermes;
    pi_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Pi;
    droid_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Droid;
    qwen_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Qwen;
    copilot_adapter_passes_adapter_check_with_the_real_cli_live: Agent::Copilot;
}

agent_tests! { live_handoff;
    claude_code_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::ClaudeCode;
    codex_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::Codex;
    pi_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::Pi;
    gemini_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::Gemini;
    opencode_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::OpenCode;
    kilo_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::Kilo;
    hermes_terminal_session_is_parked_mirrored_then_continued_with_the_queued_message_live: Agent::Hermes;
    droid_terminal_session_is_parked_mirrored_then_continued_from_the_app_live: Agent::Droid;
}

agent_tests! { live;
    claude_code_plain_answer_live: Agent::ClaudeCode, Scenario::Plain;
    claude_code_tool_round_trip_and_resumed_second_turn_live: Agent::ClaudeCode, Scenario::ToolRoundTrip;
    claude_code_write_is_denied_then_allowed_through_permission_requests_live: Agent::ClaudeCode, Scenario::Permission;
    claude_code_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::ClaudeCode, Scenario::Interrupt;
    claude_code_model_error_ends_the_turn_in_error_live: Agent::ClaudeCode, Scenario::ModelError;
    claude_code_long_answer_streams_whole_live: Agent::ClaudeCode, Scenario::Long;
    codex_plain_answer_live: Agent::Codex, Scenario::Plain;
    codex_tool_round_trip_and_resumed_second_turn_live: Agent::Codex, Scenario::ToolRoundTrip;
    codex_permission_mode_maps_to_the_sandbox_live: Agent::Codex, Scenario::Sandbox;
    codex_command_is_denied_then_allowed_and_a_patch_allowed_through_permission_requests_live: Agent::Codex, Scenario::Permission;
    codex_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Codex, Scenario::Interrupt;
    codex_model_error_ends_the_turn_in_error_live: Agent::Codex, Scenario::ModelError;
    codex_long_answer_arrives_whole_live: Agent::Codex, Scenario::Long;
    opencode_plain_answer_live: Agent::OpenCode, Scenario::Plain;
    opencode_tool_round_trip_and_resumed_second_turn_live: Agent::OpenCode, Scenario::ToolRoundTrip;
    opencode_edit_is_denied_then_allowed_through_permission_requests_live: Agent::OpenCode, Scenario::Permission;
    opencode_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::OpenCode, Scenario::Interrupt;
    opencode_long_answer_streams_whole_live: Agent::OpenCode, Scenario::Long;
    kilo_plain_answer_live: Agent::Kilo, Scenario::Plain;
    kilo_tool_round_trip_and_resumed_second_turn_live: Agent::Kilo, Scenario::ToolRoundTrip;
    kilo_edit_is_denied_then_allowed_through_permission_requests_live: Agent::Kilo, Scenario::Permission;
    kilo_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Kilo, Scenario::Interrupt;
    kilo_long_answer_streams_whole_live: Agent::Kilo, Scenario::Long;
    kilo_model_error_ends_the_turn_in_error_live: Agent::Kilo, Scenario::ModelError;
    gemini_plain_answer_live: Agent::Gemini, Scenario::Plain;
    gemini_tool_round_trip_and_resumed_second_turn_live: Agent::Gemini, Scenario::ToolRoundTrip;
    gemini_write_is_denied_then_allowed_through_permission_requests_live: Agent::Gemini, Scenario::Permission;
    gemini_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Gemini, Scenario::Interrupt;
    gemini_long_answer_streams_whole_live: Agent::Gemini, Scenario::Long;
    hermes_plain_answer_live: Agent::Hermes, Scenario::Plain;
    hermes_tool_round_trip_and_resumed_second_turn_live: Agent::Hermes, Scenario::ToolRoundTrip;
    hermes_write_is_denied_then_allowed_through_permission_requests_live: Agent::Hermes, Scenario::Permission;
    hermes_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Hermes, Scenario::Interrupt;
    hermes_long_answer_streams_whole_live: Agent::Hermes, Scenario::Long;
    gemini_model_error_ends_the_turn_in_error_live: Agent::Gemini, Scenario::ModelError;
    pi_plain_answer_live: Agent::Pi, Scenario::Plain;
    pi_tool_round_trip_and_resumed_second_turn_live: Agent::Pi, Scenario::ToolRoundTrip;
    pi_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Pi, Scenario::Interrupt;
    pi_long_answer_arrives_whole_live: Agent::Pi, Scenario::Long;
    droid_plain_answer_live: Agent::Droid, Scenario::Plain;
    droid_tool_round_trip_and_resumed_second_turn_live: Agent::Droid, Scenario::ToolRoundTrip;
    droid_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Droid, Scenario::Interrupt;
    droid_long_answer_arrives_whole_live: Agent::Droid, Scenario::Long;
    pi_model_error_ends_the_turn_in_error_live: Agent::Pi, Scenario::ModelError;
    gemini_shell_output_with_a_fresh_home_and_no_settings_live: Agent::Gemini, Scenario::ShellDefaults;
    qwen_plain_answer_live: Agent::Qwen, Scenario::Plain;
    qwen_tool_round_trip_and_resumed_second_turn_live: Agent::Qwen, Scenario::ToolRoundTrip;
    qwen_write_is_denied_then_allowed_through_permission_requests_live: Agent::Qwen, Scenario::Permission;
    qwen_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Qwen, Scenario::Interrupt;
    qwen_model_error_ends_the_turn_in_error_live: Agent::Qwen, Scenario::ModelError;
    qwen_long_answer_streams_whole_live: Agent::Qwen, Scenario::Long;
    copilot_plain_answer_live: Agent::Copilot, Scenario::Plain;
    copilot_tool_round_trip_and_resumed_second_turn_live: Agent::Copilot, Scenario::ToolRoundTrip;
    copilot_write_is_denied_then_allowed_through_permission_requests_live: Agent::Copilot, Scenario::Permission;
    copilot_interrupt_mid_stream_ends_the_turn_interrupted_live: Agent::Copilot, Scenario::Interrupt;
    copilot_long_answer_streams_whole_live: Agent::Copilot, Scenario::Long;
    hermes_retries_of_a_failing_model_show_as_progress_then_the_answer_live: Agent::Hermes, Scenario::Retry;
    hermes_giving_up_on_the_model_ends_the_turn_in_error_live: Agent::Hermes, Scenario::RetryGiveUp;
    opencode_retries_of_a_failing_model_show_as_progress_then_the_answer_live: Agent::OpenCode, Scenario::Retry;
    opencode_giving_up_on_the_model_ends_the_turn_in_error_live: Agent::OpenCode, Scenario::RetryGiveUp;
    droid_retries_of_a_failing_model_show_as_progress_then_the_answer_live: Agent::Droid, Scenario::Retry;
    droid_giving_up_on_the_model_ends_the_turn_in_error_live: Agent::Droid, Scenario::RetryGiveUp;
    copilot_retries_of_a_failing_model_show_as_progress_then_the_answer_live: Agent::Copilot, Scenario::Retry;
    copilot_giving_up_on_the_model_ends_the_turn_in_error_live: Agent::Copilot, Scenario::RetryGiveUp;
}
