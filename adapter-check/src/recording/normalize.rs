//! The normalisation rules that make two runs of a deterministic adapter give the same
//! recording (listed in the [module documentation](super)).

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{CWD_PLACEHOLDER, Entry};

/// Block types whose `id` is an adapter-minted id that the normaliser numbers.
const ID_BLOCK_TYPES: [&str; 5] = ["text", "thinking", "progress", "bg_task", "tool_call"];

/// Keys whose number values are timestamps.
const TIME_KEYS: [&str; 3] = ["ts", "server_ts", "updated_at"];

/// Keys whose string values are block-level ids (tool calls, permission requests).
const ID_REF_KEYS: [&str; 3] = ["tool_call_id", "parent_id", "request_id"];

/// Keys whose string values are the agent's own session ids.
const AGENT_SESSION_KEYS: [&str; 2] = ["agent_session_id", "resume_session_id"];

/// A numbering of run-specific values: value → `<prefix-N>` by first appearance.
#[derive(Debug, Clone, Default)]
struct Placeholders {
    prefix: &'static str,
    by_value: HashMap<String, String>,
    by_placeholder: HashMap<String, String>,
}

impl Placeholders {
    fn new(prefix: &'static str) -> Self {
        Self { prefix, ..Self::default() }
    }

    fn placeholder(&mut self, value: &str) -> String {
        if let Some(p) = self.by_value.get(value) {
            return p.clone();
        }
        let p = format!("<{}-{}>", self.prefix, self.by_value.len() + 1);
        self.by_value.insert(value.to_owned(), p.clone());
        self.by_placeholder.insert(p.clone(), value.to_owned());
        p
    }

    fn value(&self, placeholder: &str) -> Option<&str> {
        self.by_placeholder.get(placeholder).map(String::as_str)
    }
}

/// Applies the recording's normalisation rules (see the [module documentation](super))
/// to the messages of one run, in order. It is stateful: ids are numbered by first
/// appearance across the whole run, and the methods of requests seen going to the
/// adapter are remembered so that their responses can get method-specific rules.
#[derive(Debug, Clone)]
pub struct Normalizer {
    /// The forms of the session's cwd, longest first.
    cwd_forms: Vec<String>,
    /// The form written back by [`denormalize`](Self::denormalize).
    cwd: String,
    ids: Placeholders,
    agent_sessions: Placeholders,
    /// Outstanding requests: the id as compact JSON → the method.
    pending: HashMap<String, String>,
}

impl Normalizer {
    /// A normaliser for a run whose session's working directory is `cwd`. Both `cwd` as
    /// given and its canonical form (symlinks resolved) are replaced by `<cwd>`.
    pub fn new(cwd: &Path) -> Self {
        let given = cwd.to_string_lossy().into_owned();
        let mut cwd_forms = vec![given.clone()];
        if let Ok(canonical) = cwd.canonicalize() {
            let canonical = canonical.to_string_lossy().into_owned();
            if canonical != given {
                cwd_forms.push(canonical);
            }
        }
        cwd_forms.retain(|f| !f.is_empty());
        cwd_forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        Self {
            cwd_forms,
            cwd: given,
            ids: Placeholders::new("id"),
            agent_sessions: Placeholders::new("agent-session"),
            pending: HashMap::new(),
        }
    }

    /// Normalises a message written to the adapter and remembers the method of a request.
    pub fn to_adapter(&mut self, msg: &Value) -> Value {
        if let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str)) {
            self.pending.insert(id.to_string(), method.to_owned());
        }
        let mut out = msg.clone();
        self.walk(&mut out);
        out
    }

    /// Normalises a JSON line the adapter wrote.
    pub fn from_adapter(&mut self, msg: &Value) -> Value {
        let mut out = msg.clone();
        self.walk(&mut out);
        let is_response = msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some());
        let method = match msg.get("id") {
            Some(id) if is_response => self.pending.remove(&id.to_string()),
            _ => None,
        };
        if method.as_deref() == Some("detect")
            && let Some(result) = out.get_mut("result").and_then(Value::as_object_mut)
        {
            for (key, placeholder) in [("path", "<path>"), ("version", "<version>")] {
                if let Some(v) = result.get_mut(key)
                    && !v.is_null()
                {
                    *v = Value::String(placeholder.to_owned());
                }
            }
        }
        out
    }

    /// Normalises a stdout line that is not JSON (only `<cwd>` applies).
    pub fn raw(&self, line: &str) -> String {
        self.replace_cwd(line)
    }

    /// Normalises one entry of a raw (not yet normalised) run.
    pub fn entry(&mut self, entry: &Entry) -> Entry {
        match entry {
            Entry::ToAdapter(msg) => Entry::ToAdapter(self.to_adapter(msg)),
            Entry::FromAdapter(msg) => Entry::FromAdapter(self.from_adapter(msg)),
            Entry::FromAdapterRaw(raw) => Entry::FromAdapterRaw(self.raw(raw)),
        }
    }

    /// Turns a normalised message back into this run's values, for writing it to the
    /// adapter: `<cwd>` inside any string becomes this run's directory, and a string
    /// that is exactly an id or agent-session placeholder already numbered in this run
    /// becomes the value it stands for. Unknown placeholders stay as they are.
    pub fn denormalize(&self, msg: &Value) -> Value {
        let mut out = msg.clone();
        self.unwalk(&mut out);
        out
    }

    fn walk(&mut self, v: &mut Value) {
        match v {
            Value::Object(map) => self.walk_object(map),
            Value::Array(items) => items.iter_mut().for_each(|item| self.walk(item)),
            Value::String(s) => *s = self.replace_cwd(s),
            _ => {}
        }
    }

    fn walk_object(&mut self, map: &mut Map<String, Value>) {
        let is_id_block = map.get("type").and_then(Value::as_str).is_some_and(|t| ID_BLOCK_TYPES.contains(&t));
        for (key, child) in map.iter_mut() {
            let key = key.as_str();
            match child {
                Value::Number(_) if TIME_KEYS.contains(&key) => *child = json!(0),
                Value::String(s) if key == "id" && is_id_block => *s = self.ids.placeholder(s),
                Value::String(s) if ID_REF_KEYS.contains(&key) => *s = self.ids.placeholder(s),
                Value::String(s) if AGENT_SESSION_KEYS.contains(&key) => *s = self.agent_sessions.placeholder(s),
                _ => self.walk(child),
            }
        }
    }

    fn unwalk(&self, v: &mut Value) {
        match v {
            Value::Object(map) => map.values_mut().for_each(|child| self.unwalk(child)),
            Value::Array(items) => items.iter_mut().for_each(|item| self.unwalk(item)),
            Value::String(s) => {
                if let Some(real) = self.ids.value(s).or_else(|| self.agent_sessions.value(s)) {
                    *s = real.to_owned();
                } else if s.contains(CWD_PLACEHOLDER) {
                    *s = s.replace(CWD_PLACEHOLDER, &self.cwd);
                }
            }
            _ => {}
        }
    }

    fn replace_cwd(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for form in &self.cwd_forms {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), CWD_PLACEHOLDER);
            }
        }
        out
    }
}

/// Normalises the entries of one raw run whose session's working directory was `cwd`.
pub fn normalize(entries: &[Entry], cwd: &Path) -> Vec<Entry> {
    let mut normalizer = Normalizer::new(cwd);
    super::appends::join_appends(entries.iter().map(|e| normalizer.entry(e)).collect())
}
