//! Where an ACP agent puts its token counts: the prompt result (ACP's unstable
//! `usage`, Gemini CLI's `_meta.quota.token_count`) or its message chunks (Qwen Code
//! sends one `agent_message_chunk` with an empty text and `_meta.usage` per model call).

use serde_json::Value;
use terminull_protocol::blocks::Usage;

use crate::schema::PromptResult;

/// The turn's usage: ACP's `usage` (unstable), else Gemini CLI's
/// `_meta.quota.token_count`.
pub fn prompt_usage(result: &PromptResult) -> Option<Usage> {
    if let Some(u) = &result.usage {
        return Some(Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cached_read_tokens,
            cache_write_tokens: u.cached_write_tokens,
            cost_usd: None,
        });
    }
    let count = result.meta.as_ref()?.pointer("/quota/token_count")?;
    let field = |k: &str| count.get(k).and_then(Value::as_u64);
    let usage =
        Usage { input_tokens: field("input_tokens"), output_tokens: field("output_tokens"), ..Usage::default() };
    (usage.input_tokens.is_some() || usage.output_tokens.is_some()).then_some(usage)
}

/// The token counts a message chunk carries in `_meta.usage` (Qwen Code 0.24:
/// `inputTokens`, `outputTokens`, `cachedReadTokens`, `cachedWriteTokens`; snake_case
/// spellings are read too), `None` when it carries none.
pub fn chunk_usage(meta: Option<&Value>) -> Option<Usage> {
    let usage = meta?.get("usage")?;
    let field = |camel: &str, snake: &str| usage.get(camel).or_else(|| usage.get(snake)).and_then(Value::as_u64);
    let found = Usage {
        input_tokens: field("inputTokens", "input_tokens"),
        output_tokens: field("outputTokens", "output_tokens"),
        cache_read_tokens: field("cachedReadTokens", "cache_read_tokens"),
        cache_write_tokens: field("cachedWriteTokens", "cache_write_tokens"),
        cost_usd: None,
    };
    (found.input_tokens.is_some() || found.output_tokens.is_some()).then_some(found)
}
