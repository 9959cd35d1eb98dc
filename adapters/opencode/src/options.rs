//! The session's settings as OpenCode offers them over ACP, and the choices made from
//! them: pure functions, tested with captured answers.
//!
//! OpenCode (and Kilo) answer `session/new` and `session/resume` with no `modes` and no
//! `models`, only ACP's newer `configOptions`: three `select` options,
//!
//! | id | category | values |
//! |---|---|---|
//! | `model` | `model` | `provider/model` of every configured provider (`mock/mock-model`, `opencode/big-pickle`, …) |
//! | `effort` | `thought_level` | the current model's variants (`low`, `medium`, `high`, …); absent for a model without any |
//! | `mode` | `mode` | the primary agents: OpenCode `build`, `plan`; Kilo `code`, `ask`, `debug`, `orchestrator`, `plan`; plus any the user defined |
//!
//! and `session/set_config_option {sessionId, configId, value}` answers with the whole
//! updated array (the effort choices follow the model). An unknown value is refused by
//! the CLI with `-32602 … not found`; the adapter checks first, so the user is told the
//! choices instead.

use serde_json::Value;
use terminull_adapter_sdk::AdapterError;

/// The model id that means "the model the CLI's configuration chose": no change.
pub const DEFAULT_MODEL: &str = "default";

/// How many choices an error message lists before saying how many more there are.
const LISTED_CHOICES: usize = 25;

/// Most models `list_models` reports (Kilo's gateway alone lists several hundred).
pub const MAX_MODELS: usize = 2000;

/// One `select` config option.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    /// Its `id`, sent back as `configId`.
    pub id: String,
    /// Its `currentValue`.
    pub current: Option<String>,
    /// Its values with their names, in the agent's order.
    pub values: Vec<(String, String)>,
}

impl Select {
    /// True when `value` is one of the choices.
    pub fn offers(&self, value: &str) -> bool {
        self.values.iter().any(|(v, _)| v == value)
    }

    /// The name shown for `value`, or the value itself.
    pub fn name_of(&self, value: &str) -> String {
        self.values.iter().find(|(v, _)| v == value).map_or_else(|| value.to_owned(), |(_, n)| n.clone())
    }
}

/// The three settings a session offers (each absent when the agent does not offer it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// `model` (category `model`).
    pub model: Option<Select>,
    /// `effort` (category `thought_level`).
    pub effort: Option<Select>,
    /// `mode` (category `mode`): the agent the session runs as.
    pub mode: Option<Select>,
}

/// Which setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The `model` init param.
    Model,
    /// The `effort` init param.
    Effort,
    /// The `permission_mode` init param.
    Mode,
}

impl Setting {
    /// The ACP category of the option.
    fn category(self) -> &'static str {
        match self {
            Setting::Model => "model",
            Setting::Effort => "thought_level",
            Setting::Mode => "mode",
        }
    }

    /// The option's usual id (used when the category is missing).
    fn usual_id(self) -> &'static str {
        match self {
            Setting::Model => "model",
            Setting::Effort => "effort",
            Setting::Mode => "mode",
        }
    }

    /// How the setting is called in messages.
    pub fn what(self) -> &'static str {
        match self {
            Setting::Model => "model",
            Setting::Effort => "effort",
            Setting::Mode => "permission mode",
        }
    }
}

impl SessionOptions {
    /// Reads the `configOptions` of a `session/new`, `session/resume`, `session/load` or
    /// `session/set_config_option` result (or of a `config_option_update`). Anything
    /// that is not a well-formed `select` is skipped.
    pub fn from_result(result: &Value) -> SessionOptions {
        let options = result.get("configOptions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let find = |setting: Setting| {
            let by = |key: &str, want: &str| {
                options.iter().find(|o| o.get(key).and_then(Value::as_str) == Some(want)).and_then(select)
            };
            by("category", setting.category()).or_else(|| by("id", setting.usual_id()))
        };
        SessionOptions { model: find(Setting::Model), effort: find(Setting::Effort), mode: find(Setting::Mode) }
    }

    /// The option for `setting`.
    pub fn get(&self, setting: Setting) -> Option<&Select> {
        match setting {
            Setting::Model => self.model.as_ref(),
            Setting::Effort => self.effort.as_ref(),
            Setting::Mode => self.mode.as_ref(),
        }
    }

    /// The current model, as `provider/model`.
    pub fn current_model(&self) -> Option<String> {
        self.model.as_ref().and_then(|m| m.current.clone())
    }
}

/// One `select` option, its values flattened (ACP allows `options` to be groups, each
/// with its own `options`).
fn select(option: &Value) -> Option<Select> {
    if option.get("type").and_then(Value::as_str).is_some_and(|t| t != "select") {
        return None;
    }
    let id = option.get("id")?.as_str()?.to_owned();
    let current = option.get("currentValue").and_then(Value::as_str).map(str::to_owned);
    let mut values = Vec::new();
    fn collect(items: &[Value], values: &mut Vec<(String, String)>) {
        for item in items {
            if let Some(group) = item.get("options").and_then(Value::as_array) {
                collect(group, values);
            } else if let Some(value) = item.get("value").and_then(Value::as_str) {
                let name = item.get("name").and_then(Value::as_str).unwrap_or(value);
                values.push((value.to_owned(), name.to_owned()));
            }
        }
    }
    collect(option.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default(), &mut values);
    Some(Select { id, current, values })
}

/// What to send for one requested setting: `Ok(None)` when nothing needs to change
/// (nothing asked, the default asked, or already current), `Ok(Some((config id,
/// value)))` to send, or an `invalid_params` error naming the choices. `hint` says
/// where the choices come from.
pub fn choose(
    setting: Setting,
    wanted: Option<&str>,
    options: &SessionOptions,
    agent: &str,
    hint: &str,
) -> Result<Option<(String, String)>, AdapterError> {
    let Some(wanted) = wanted.map(str::trim).filter(|w| !w.is_empty()) else { return Ok(None) };
    if setting == Setting::Model && wanted == DEFAULT_MODEL {
        return Ok(None);
    }
    let what = setting.what();
    let Some(select) = options.get(setting) else {
        let detail = match setting {
            Setting::Effort => " for this model",
            _ => "",
        };
        return Err(AdapterError::invalid(format!(
            "{agent} offers no {what} choice{detail}, so `{wanted}` cannot be set"
        )));
    };
    if !select.offers(wanted) {
        return Err(AdapterError::invalid(format!(
            "unknown {what} `{wanted}` for {agent}; choose one of: {}{hint}",
            list_choices(select)
        )));
    }
    if select.current.as_deref() == Some(wanted) {
        return Ok(None);
    }
    Ok(Some((select.id.clone(), wanted.to_owned())))
}

/// The choices for an error message, at most [`LISTED_CHOICES`] of them.
fn list_choices(select: &Select) -> String {
    let shown: Vec<&str> = select.values.iter().take(LISTED_CHOICES).map(|(v, _)| v.as_str()).collect();
    let more = select.values.len().saturating_sub(LISTED_CHOICES);
    if select.values.is_empty() {
        "(none)".to_owned()
    } else if more == 0 {
        shown.join(", ")
    } else {
        format!("{} … and {more} more", shown.join(", "))
    }
}

/// The models `<cli> models` printed: one `provider/model` per line, in order, each
/// once, at most [`MAX_MODELS`]. Lines that are not a model id (banners, warnings) are
/// skipped.
pub fn parse_models(output: &str) -> Vec<String> {
    let mut models: Vec<String> = Vec::new();
    for line in output.lines().map(str::trim) {
        let looks_like_id = line.split_once('/').is_some_and(|(p, m)| !p.is_empty() && !m.is_empty())
            && !line.chars().any(char::is_whitespace);
        if looks_like_id && !models.iter().any(|m| m == line) {
            models.push(line.to_owned());
            if models.len() == MAX_MODELS {
                break;
            }
        }
    }
    models
}

/// The first version-looking word of `<cli> --version` (`1.18.33`, `v7.7.7`).
pub fn parse_version(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .map(|w| w.trim_start_matches('v'))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use terminull_protocol::jsonrpc::codes;

    use super::*;

    /// OpenCode 1.18.33's `session/new` answer (model list shortened).
    fn opencode_new() -> Value {
        json!({"sessionId": "ses_1", "configOptions": [
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "mock/mock-model",
             "options": [{"value": "opencode/big-pickle", "name": "OpenCode Zen/Big Pickle"},
                         {"value": "mock/mock-model", "name": "Mock/Mock Model"}]},
            {"id": "effort", "name": "Effort", "description": "Available effort levels for this model",
             "category": "thought_level", "type": "select", "currentValue": "low",
             "options": [{"value": "low", "name": "Low"}, {"value": "medium", "name": "Medium"},
                         {"value": "high", "name": "High"}, {"value": "default", "name": "Default"}]},
            {"id": "mode", "name": "Session Mode", "category": "mode", "type": "select", "currentValue": "build",
             "options": [{"value": "build", "name": "build", "description": "The default agent."},
                         {"value": "plan", "name": "plan", "description": "Plan mode."}]}
        ]})
    }

    #[test]
    fn config_options_are_read_by_category() {
        let o = SessionOptions::from_result(&opencode_new());
        assert_eq!(o.current_model().as_deref(), Some("mock/mock-model"));
        assert_eq!(o.model.as_ref().unwrap().name_of("opencode/big-pickle"), "OpenCode Zen/Big Pickle");
        let effort = o.effort.as_ref().unwrap();
        assert_eq!((effort.id.as_str(), effort.current.as_deref()), ("effort", Some("low")));
        assert_eq!(effort.values.len(), 4);
        let mode = o.mode.as_ref().unwrap();
        assert_eq!(mode.values.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(), ["build", "plan"]);
    }

    #[test]
    fn grouped_values_untyped_ids_and_junk_are_tolerated() {
        let result = json!({"configOptions": [
            {"id": "model", "type": "select", "currentValue": "a/x",
             "options": [{"group": "a", "name": "A", "options": [{"value": "a/x"}, {"value": "a/y", "name": "Y"}]}]},
            {"id": "mode", "type": "boolean", "currentValue": true},
            "not an option",
            {"category": "thought_level", "type": "select"}
        ]});
        let o = SessionOptions::from_result(&result);
        let model = o.model.unwrap();
        assert_eq!(model.values, vec![("a/x".into(), "a/x".into()), ("a/y".into(), "Y".into())]);
        assert_eq!(o.mode, None, "a boolean is not a mode choice");
        assert_eq!(o.effort, None, "an option without id is skipped");
        assert_eq!(SessionOptions::from_result(&json!({"sessionId": "s"})), SessionOptions::default());
    }

    #[test]
    fn choosing_sends_only_what_changes_and_refuses_the_unknown() {
        let o = SessionOptions::from_result(&opencode_new());
        let pick = |s, w: Option<&str>| choose(s, w, &o, "OpenCode", "");
        assert_eq!(pick(Setting::Mode, Some("plan")).unwrap(), Some(("mode".into(), "plan".into())));
        assert_eq!(pick(Setting::Mode, Some("build")).unwrap(), None, "already current");
        assert_eq!(pick(Setting::Mode, None).unwrap(), None);
        assert_eq!(pick(Setting::Model, Some(DEFAULT_MODEL)).unwrap(), None);
        assert_eq!(pick(Setting::Model, Some(" ")).unwrap(), None);
        assert_eq!(pick(Setting::Effort, Some("high")).unwrap(), Some(("effort".into(), "high".into())));
        let e = pick(Setting::Mode, Some("yolo")).unwrap_err();
        assert_eq!(e.code, codes::INVALID_PARAMS);
        assert_eq!(e.message, "unknown permission mode `yolo` for OpenCode; choose one of: build, plan");
        let e = choose(Setting::Model, Some("x/y"), &o, "OpenCode", " (see opencode.json)").unwrap_err();
        assert!(e.message.ends_with("opencode/big-pickle, mock/mock-model (see opencode.json)"), "{}", e.message);
    }

    #[test]
    fn a_missing_option_and_a_long_list_are_said_plainly() {
        let none = SessionOptions::default();
        let e = choose(Setting::Effort, Some("high"), &none, "Kilo", "").unwrap_err();
        assert_eq!(e.message, "Kilo offers no effort choice for this model, so `high` cannot be set");
        let many = Select {
            id: "model".into(),
            current: None,
            values: (0..30).map(|i| (format!("p/m{i}"), String::new())).collect(),
        };
        let o = SessionOptions { model: Some(many), ..SessionOptions::default() };
        let e = choose(Setting::Model, Some("q/z"), &o, "Kilo", "").unwrap_err();
        assert!(e.message.contains("p/m24 … and 5 more") && !e.message.contains("p/m25"), "{}", e.message);
    }

    #[test]
    fn models_are_the_id_lines_of_the_models_command() {
        let out = "opencode/big-pickle\nmock/mock-model\n\nWARN something happened\nmock/mock-model\n/half\nkilo/~anthropic/claude-fable-latest\n";
        assert_eq!(
            parse_models(out),
            ["opencode/big-pickle", "mock/mock-model", "kilo/~anthropic/claude-fable-latest"]
        );
        let many: String = (0..MAX_MODELS + 10).map(|i| format!("p/m{i}\n")).collect();
        assert_eq!(parse_models(&many).len(), MAX_MODELS);
    }

    #[test]
    fn versions_are_the_first_version_looking_word() {
        assert_eq!(parse_version("1.18.33\n").as_deref(), Some("1.18.33"));
        assert_eq!(parse_version("kilo v7.7.7").as_deref(), Some("7.7.7"));
        assert_eq!(parse_version("opencode"), None);
    }
}
