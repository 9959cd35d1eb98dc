//! The token counts in the shape Anthropic's API reports them, which more than one
//! agent CLI passes through as it is (Claude Code's `result.usage`, Droid's
//! `completion.usage`), and their conversion to the protocol's [`Usage`].

use serde::Deserialize;
use terminull_protocol::blocks::Usage;

/// An Anthropic-style `usage` object. A count the CLI leaves out is `None`, never 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AnthropicUsage {
    /// Prompt tokens, without the cached ones.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Prompt tokens read from the cache.
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    /// Prompt tokens written to the cache.
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    /// The counts as a protocol [`Usage`], with the cost when the CLI reports one.
    pub fn to_usage(&self, cost_usd: Option<f64>) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_creation_input_tokens,
            cost_usd,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_counts_stay_unknown_and_cache_counts_keep_their_meaning() {
        let usage: AnthropicUsage =
            serde_json::from_str(r#"{"input_tokens":3,"cache_creation_input_tokens":7,"service_tier":"x"}"#).unwrap();
        let converted = usage.to_usage(Some(0.5));
        assert_eq!(converted.input_tokens, Some(3));
        assert_eq!(converted.output_tokens, None);
        assert_eq!(converted.cache_read_tokens, None);
        assert_eq!(converted.cache_write_tokens, Some(7));
        assert_eq!(converted.cost_usd, Some(0.5));
    }
}
